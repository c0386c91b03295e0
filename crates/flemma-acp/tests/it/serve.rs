//! `serve` over a socket pair with a scripted backend: the order of what the agent says (updates
//! before answers, a permission request before anything runs) as data, without an engine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flemma_acp::{Backend, McpServerSpec, TurnEvent};
use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};
use serde_json::{Value, json};

/// A backend whose chats live in memory and whose engine replays a script: each `send` or
/// decision plays the next list of events (and may rewrite the chat first).
#[derive(Default)]
struct Scripted {
    chats: Mutex<std::collections::HashMap<PathBuf, String>>,
    steps: Mutex<Vec<(Option<String>, Vec<TurnEvent>)>>,
    sender: Mutex<Option<tokio::sync::mpsc::UnboundedSender<TurnEvent>>>,
    calls: Mutex<Vec<String>>,
}

impl Scripted {
    fn play(&self, path: &Path) {
        let mut steps = self.steps.lock().unwrap();
        if steps.is_empty() {
            return;
        }
        let (text, events) = steps.remove(0);
        if let Some(text) = text {
            self.chats.lock().unwrap().insert(path.to_owned(), text);
        }
        let sender = self.sender.lock().unwrap();
        for event in events {
            let _ = sender.as_ref().unwrap().send(event);
        }
    }
}

impl Backend for Scripted {
    fn create_chat(&self, path: &Path, text: &str) -> Result<(), RequestError> {
        self.chats
            .lock()
            .unwrap()
            .insert(path.to_owned(), text.to_owned());
        Ok(())
    }
    fn read_chat(&self, path: &Path) -> Result<String, RequestError> {
        self.chats
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| RequestError::invalid_params(format!("no chat at {}", path.display())))
    }
    fn replace_chat(&self, path: &Path, _expected: &str, text: &str) -> Result<bool, RequestError> {
        self.chats
            .lock()
            .unwrap()
            .insert(path.to_owned(), text.to_owned());
        Ok(true)
    }
    fn events(&self, _path: &Path) -> tokio::sync::mpsc::UnboundedReceiver<TurnEvent> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        *self.sender.lock().unwrap() = Some(sender);
        receiver
    }
    fn call(&self, path: &Path, request: FlemmaRequest) -> Result<FlemmaResponse, RequestError> {
        let call = match &request {
            FlemmaRequest::Send(_) => "send".to_owned(),
            FlemmaRequest::Approve(call) => format!("approve {}", call.tool_id),
            FlemmaRequest::Reject(call) => format!("reject {}", call.tool_id),
            // Nothing runs to cancel.
            FlemmaRequest::Cancel(_) => return Err(RequestError::refused("nothing runs")),
            other => {
                return Err(RequestError::refused(format!(
                    "{} is not scripted",
                    other.method()
                )));
            }
        };
        self.calls.lock().unwrap().push(call);
        self.play(path);
        Ok(FlemmaResponse::Accepted(Accepted {
            started: true,
            tool_ids: Vec::new(),
        }))
    }
    fn mcp_servers(&self, _path: &Path, _servers: Vec<McpServerSpec>) -> Vec<String> {
        Vec::new()
    }
    fn chats_in(&self, _dir: &Path) -> Vec<flemma_acp::list::ChatEntry> {
        Vec::new()
    }
    fn remove_chat_if_unchanged(
        &self,
        _path: &Path,
        _expected: &str,
    ) -> Result<bool, RequestError> {
        Ok(false)
    }
    fn client_files(&self, _path: &Path, _files: flemma_acp::ClientFiles) {}
    fn client_gone(&self, _path: &Path, _files: &flemma_acp::ClientFiles) {}
    fn trash_chat(&self, _path: &Path) -> Result<std::path::PathBuf, RequestError> {
        Err(RequestError::refused("this test backend keeps no trash"))
    }
}

struct Peer {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Peer {
    fn send(&mut self, message: Value) {
        writeln!(self.writer, "{message}").unwrap();
    }
    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.reader.read_line(&mut line).unwrap() > 0,
            "the agent closed"
        );
        serde_json::from_str(&line).unwrap()
    }
}

fn start(backend: Arc<Scripted>) -> Peer {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let input = BufReader::new(theirs.try_clone().unwrap());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let _ = runtime.block_on(flemma_acp::serve(
            backend,
            flemma_acp::AllowedAlways::default(),
            input,
            theirs,
        ));
    });
    Peer {
        reader: BufReader::new(ours.try_clone().unwrap()),
        writer: ours,
    }
}

const TOOL_CHAT: &str = "@You:\nrun it\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"label\": \"run it\", \"command\": \"true\"}\n```\n\n@You:\n**Tool Result:** `t1` (pending)\n```\n```\n";

#[test]
fn a_pending_call_is_asked_before_it_runs_and_the_turn_ends_after_it() {
    let backend = Arc::new(Scripted::default());
    let done = TOOL_CHAT.replace("(pending)\n```\n```", "\n```\nok\n```");
    *backend.steps.lock().unwrap() = vec![
        (
            Some(TOOL_CHAT.to_owned()),
            vec![
                TurnEvent::Text("Running.".into()),
                TurnEvent::ToolComposed {
                    tool_id: "t1".into(),
                    name: "bash".into(),
                    input: json!({"label": "run it", "command": "true"}),
                },
                TurnEvent::ApprovalRequired(vec![flemma_acp::PendingCall {
                    tool_id: "t1".into(),
                    name: "bash".into(),
                    input: json!({"label": "run it", "command": "true"}),
                }]),
                TurnEvent::Stopped {
                    reason: flemma_protocol::event::StopLabel::AwaitingApproval,
                    message: None,
                },
            ],
        ),
        (
            Some(done),
            vec![
                TurnEvent::ToolStarted {
                    tool_id: "t1".into(),
                    name: "bash".into(),
                    input: Some(json!({"label": "run it", "command": "true"})),
                },
                TurnEvent::ToolFinished {
                    tool_id: "t1".into(),
                    name: "bash".into(),
                    output: "ok\n".into(),
                    failed: false,
                },
                idle(),
            ],
        ),
    ];
    let (mut peer, dir) = initialized(backend.clone());
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}}));
    let answer = peer.next();
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    assert!(
        session.starts_with(&format!("{}/.flemma/sessions/", dir.display())),
        "{answer}"
    );
    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "run it"}]}}));
    let mut seen = Vec::new();
    loop {
        let message = peer.next();
        if message["method"] == "session/request_permission" {
            assert_eq!(
                *backend.calls.lock().unwrap(),
                ["send"],
                "nothing ran before the answer"
            );
            assert_eq!(message["params"]["toolCall"]["toolCallId"], "t1");
            seen.push("permission".to_owned());
            peer.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}));
            continue;
        }
        if message["id"] == 2 {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        let update = &message["params"]["update"];
        seen.push(format!(
            "{} {}",
            update["sessionUpdate"].as_str().unwrap(),
            update["status"].as_str().unwrap_or_default()
        ));
    }
    assert_eq!(
        seen,
        [
            "available_commands_update ",
            "session_info_update ",
            "agent_message_chunk ",
            "tool_call ",
            "permission",
            "tool_call_update in_progress",
            "tool_call_update completed"
        ]
    );
    assert_eq!(*backend.calls.lock().unwrap(), ["send", "approve t1"]);
}

/// The agent serving `backend`, initialized, and a folder for its sessions.
fn initialized(backend: Arc<Scripted>) -> (Peer, PathBuf) {
    let mut peer = start(backend);
    peer.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
    assert_eq!(peer.next()["result"]["protocolVersion"], 1);
    (peer, tempfile_dir())
}

/// The engine stopped with nothing more to do.
fn idle() -> TurnEvent {
    TurnEvent::Stopped {
        reason: flemma_protocol::event::StopLabel::Idle,
        message: None,
    }
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flemma-acp-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A backend's refusal reaches the client with its own JSON-RPC code and message: a trash
/// that cannot be used is a refusal (`-32001`), not bad params; a chat that cannot be read is
/// bad params (`-32602`), its message the backend's.
#[test]
fn a_backends_error_keeps_its_code_and_message() {
    let backend = Arc::new(Scripted::default());
    let mut peer = start(backend);
    let dir = tempfile_dir();
    peer.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
    assert_eq!(peer.next()["result"]["protocolVersion"], 1);
    let missing = dir.join("missing.chat");
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": missing, "cwd": dir, "mcpServers": []}}));
    let answer = peer.next();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        format!("no chat at {}", missing.display()),
        "{answer}"
    );
    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}}));
    let mut answer = peer.next();
    while answer["id"] != 2 {
        answer = peer.next();
    }
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    peer.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/delete", "params": {"sessionId": session}}));
    let mut answer = peer.next();
    while answer["id"] != 3 {
        answer = peer.next();
    }
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    assert_eq!(
        answer["error"]["message"], "this test backend keeps no trash",
        "{answer}"
    );
}

/// Reads until the answer to request `id`, returning it and the updates before it.
fn answer_to(peer: &mut Peer, id: u64) -> (Value, Vec<Value>) {
    let mut updates = Vec::new();
    loop {
        let message = peer.next();
        if message["id"] == id && message.get("method").is_none() {
            return (message, updates);
        }
        updates.push(message);
    }
}

/// A turn another front end sent (its events arrive with no prompt of this client's) is
/// streamed to the client; a prompt meanwhile is refused and writes nothing; once that turn
/// has stopped, a prompt runs and its events are its own.
#[test]
fn a_prompt_while_another_front_ends_turn_runs_is_refused_and_writes_nothing() {
    let backend = Arc::new(Scripted::default());
    *backend.steps.lock().unwrap() = vec![(None, vec![TurnEvent::Text("Mine.".into()), idle()])];
    let (mut peer, dir) = initialized(backend.clone());
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}}));
    let (answer, _) = answer_to(&mut peer, 1);
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    let chat = PathBuf::from(&session);

    // Another editor sends a turn on the chat: its question is in the chat, its reply streams.
    let theirs = "@You:\nfrom the editor\n\n@Assistant:\n";
    backend
        .chats
        .lock()
        .unwrap()
        .insert(chat.clone(), theirs.to_owned());
    let sender = backend.sender.lock().unwrap().clone().unwrap();
    sender.send(TurnEvent::Text("Theirs.".into())).unwrap();
    loop {
        let message = peer.next();
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            assert_eq!(update["content"]["text"], "Theirs.", "{message}");
            break;
        }
    }

    let prompt = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "mine"}]}});
    peer.send(prompt(2));
    let (answer, _) = answer_to(&mut peer, 2);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("another editor") && message.contains("not written"),
        "{answer}"
    );
    assert_eq!(
        backend.chats.lock().unwrap()[&chat],
        theirs,
        "nothing written"
    );
    assert!(backend.calls.lock().unwrap().is_empty(), "nothing sent");

    // Their turn stops; the follower takes that in its own time, so the prompt is tried until
    // it is taken (each refusal writes nothing).
    sender.send(idle()).unwrap();
    let mut id = 3;
    let updates = loop {
        peer.send(prompt(id));
        let (answer, updates) = answer_to(&mut peer, id);
        if answer.get("error").is_none() {
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
            break updates;
        }
        assert!(
            id < 100,
            "the prompt was refused after their turn stopped: {answer}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        id += 1;
    };
    assert_eq!(*backend.calls.lock().unwrap(), ["send"]);
    let chunks: Vec<&Value> = updates
        .iter()
        .map(|message| &message["params"]["update"])
        .filter(|update| update["sessionUpdate"] == "agent_message_chunk")
        .map(|update| &update["content"]["text"])
        .collect();
    assert_eq!(chunks, ["Mine."], "its own reply, once");
    assert!(
        backend.chats.lock().unwrap()[&chat].contains("mine"),
        "the prompt was written"
    );
}
