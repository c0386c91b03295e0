//! The session over an in-memory connection, with backends standing in for the engine.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use flemma_lsp::{Backend, Outbox, RequestDocument};
use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};
use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{Value, json};

/// An engine with a bug: every command panics.
struct Panicking;

impl Backend for Panicking {
    fn call(
        &mut self,
        _: RequestDocument<'_>,
        _: FlemmaRequest,
        _: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        panic!("engine bug");
    }
}

fn request(client: &Connection, id: i32, method: &str, params: Value) -> lsp_server::Response {
    client
        .sender
        .send(Message::Request(Request::new(
            RequestId::from(id),
            method.into(),
            params,
        )))
        .unwrap();
    loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
        {
            Message::Response(r) if r.id == RequestId::from(id) => return r,
            _ => continue,
        }
    }
}

#[test]
fn a_panicking_handler_answers_with_an_error_and_the_server_goes_on() {
    let (server, client) = Connection::memory();
    let thread = std::thread::spawn(move || flemma_lsp::run(server, Box::new(Panicking)));
    let init = request(
        &client,
        1,
        "initialize",
        json!({"processId": null, "capabilities": {}}),
    );
    assert_eq!(
        init.response_result.unwrap()["capabilities"]["positionEncoding"],
        "utf-16"
    );
    client
        .sender
        .send(Message::Notification(Notification::new(
            "textDocument/didOpen".into(),
            json!({"textDocument": {"uri": "file:///t.chat", "languageId": "chat", "version": 0,
                   "text": "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n"}}),
        )))
        .unwrap();
    let status = request(
        &client,
        2,
        "workspace/executeCommand",
        json!({"command": "flemma.status", "arguments": ["file:///t.chat"]}),
    );
    let error = status.response_result.unwrap_err();
    assert_eq!(error.code, -32603);
    assert!(
        error.message.contains("engine bug") && error.message.contains("keeps running"),
        "{}",
        error.message
    );
    let hover = request(
        &client,
        3,
        "textDocument/hover",
        json!({"textDocument": {"uri": "file:///t.chat"}, "position": {"line": 1, "character": 16}}),
    );
    let hover = hover.response_result.unwrap();
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("`bash`")
    );
    // The flemma/* request of the same command panics the same way, and is answered.
    let send = request(&client, 4, "flemma/send", json!({"uri": "file:///t.chat"}));
    let error = send.response_result.unwrap_err();
    assert_eq!(error.code, -32603);
    assert!(error.message.contains("flemma/send"), "{}", error.message);
    let bad = request(&client, 6, "flemma/send", json!({}));
    assert_eq!(bad.response_result.unwrap_err().code, -32602);
    request(&client, 5, "shutdown", Value::Null);
    client
        .sender
        .send(Message::Notification(Notification::new(
            "exit".into(),
            Value::Null,
        )))
        .unwrap();
    thread.join().unwrap().unwrap();
}

/// An engine whose request fails at once (a provider error).
struct FailingProvider;

impl Backend for FailingProvider {
    fn call(
        &mut self,
        document: RequestDocument<'_>,
        _: FlemmaRequest,
        outbox: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        outbox.send(flemma_lsp::Task::Failed {
            uri: document.uri.to_owned(),
            message: "anthropic answered 529 overloaded; send again later".into(),
        });
        Ok(FlemmaResponse::Accepted(Accepted {
            started: true,
            tool_ids: Vec::new(),
        }))
    }
}

#[test]
fn a_failed_request_is_shown_to_the_user() {
    let (client, thread) = session_with(
        FailingProvider,
        json!({"processId": null, "capabilities": {"window": {"workDoneProgress": true}}}),
    );
    client
        .sender
        .send(Message::Notification(Notification::new(
            "textDocument/didOpen".into(),
            json!({"textDocument": {"uri": "file:///t.chat", "languageId": "chat", "version": 0,
                   "text": "@You:\nhello\n"}}),
        )))
        .unwrap();
    let sent = request(&client, 2, "flemma/send", json!({"uri": "file:///t.chat"}));
    assert_eq!(sent.response_result.unwrap(), json!({"started": true}));
    let shown = next_notification(&client, "window/showMessage");
    assert_eq!(shown["type"], 1);
    assert_eq!(
        shown["message"],
        "flemma: anthropic answered 529 overloaded; send again later"
    );
    request(&client, 3, "shutdown", Value::Null);
    client
        .sender
        .send(Message::Notification(Notification::new(
            "exit".into(),
            Value::Null,
        )))
        .unwrap();
    thread.join().unwrap().unwrap();
}

type SessionThread = std::thread::JoinHandle<Result<(), flemma_lsp::LspError>>;

/// A session with `backend`, initialized with `initialize` (its params).
fn session_with(backend: impl Backend + 'static, initialize: Value) -> (Connection, SessionThread) {
    let (server, client) = Connection::memory();
    let thread = std::thread::spawn(move || flemma_lsp::run(server, Box::new(backend)));
    request(&client, 1, "initialize", initialize);
    (client, thread)
}

/// The session with no engine, initialized (UTF-8 positions, as Helix asks).
fn start_session() -> (Connection, SessionThread) {
    session_with(
        flemma_lsp::NoEngine,
        json!({"processId": null, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}}),
    )
}

fn notify(client: &Connection, method: &str, params: Value) {
    client
        .sender
        .send(Message::Notification(Notification::new(
            method.into(),
            params,
        )))
        .unwrap();
}

/// The params of the next notification `method` (others are skipped).
fn next_notification(client: &Connection, method: &str) -> Value {
    loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
        {
            Message::Notification(n) if n.method == method => return n.params,
            _ => continue,
        }
    }
}

/// The next `publishDiagnostics` (params).
fn next_diagnostics(client: &Connection) -> Value {
    next_notification(client, "textDocument/publishDiagnostics")
}

#[test]
fn a_burst_of_changes_is_analysed_once_at_its_end_with_positions_of_the_edited_text() {
    let (client, thread) = start_session();
    // A chat of ~1 MB (an analysis takes a while) ending with a tool use nobody answered.
    let mut text = String::new();
    while text.len() < 1 << 20 {
        text.push_str("@You:\nA question with some words in it.\n\n@Assistant:\nAn answer.\n\n");
    }
    text.push_str("@Assistant:\n**Tool Use:** `no_such_tool` (`t1`)\n```json\n{}\n```\n");
    let lines = text.matches('\n').count();
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///big.chat", "languageId": "chat", "version": 0,
               "text": text}}),
    );
    let opened = next_diagnostics(&client);
    assert_eq!(opened["version"], 0);
    let line_of_tool = |diagnostics: &Value| -> Vec<u64> {
        diagnostics["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["message"].as_str().unwrap_or("").contains("`t1`"))
            .map(|d| d["range"]["start"]["line"].as_u64().unwrap())
            .collect()
    };
    let before = line_of_tool(&opened);
    assert!(!before.is_empty(), "{opened}");
    assert!(
        before.iter().all(|&l| l as usize >= lines - 4),
        "{before:?}"
    );

    // 40 changes sent at once (a paste as many edits): lines added and joined at the top, a
    // line split in the middle and joined again.
    let mut version = 0;
    let mut added = 0;
    for i in 0..40 {
        version += 1;
        let change = if i % 4 == 3 {
            // Join the first two lines again (deleting a line break).
            added -= 1;
            json!({"range": {"start": {"line": 0, "character": 1}, "end": {"line": 1, "character": 0}}, "text": ""})
        } else {
            added += 1;
            json!({"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x\n"})
        };
        notify(
            &client,
            "textDocument/didChange",
            json!({"textDocument": {"uri": "file:///big.chat", "version": version},
                   "contentChanges": [change]}),
        );
    }
    let mut publishes = 0;
    let last = loop {
        let diagnostics = next_diagnostics(&client);
        publishes += 1;
        if diagnostics["version"] == version {
            break diagnostics;
        }
    };
    assert!(
        publishes < 10,
        "{publishes} analyses for one burst of 40 changes"
    );
    let after = line_of_tool(&last);
    let expected: Vec<u64> = before.iter().map(|l| l + added as u64).collect();
    assert_eq!(after, expected, "the diagnostics moved with the text");

    request(&client, 2, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

#[test]
fn a_full_text_change_then_an_edit_keeps_positions_exact() {
    let (client, thread) = start_session();
    let tool = "@Assistant:\n**Tool Use:** `no_such_tool` (`t1`)\n```json\n{}\n```\n";
    let edited = format!("@You:\nA question\nover lines.\n\n{tool}");
    let lines_of_tool = |diagnostics: &Value| -> Vec<u64> {
        diagnostics["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["message"].as_str().unwrap_or("").contains("`t1`"))
            .map(|d| d["range"]["start"]["line"].as_u64().unwrap())
            .collect()
    };
    // The truth: the edited text opened as it is.
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///truth.chat", "languageId": "chat", "version": 0,
               "text": edited}}),
    );
    let truth = lines_of_tool(&next_diagnostics(&client));
    assert!(!truth.is_empty());
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///full.chat", "languageId": "chat", "version": 0,
               "text": tool}}),
    );
    next_diagnostics(&client);
    // One notification: the whole text replaced, then a line added at the top.
    notify(
        &client,
        "textDocument/didChange",
        json!({"textDocument": {"uri": "file:///full.chat", "version": 1},
        "contentChanges": [
            {"text": edited},
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x\n"},
        ]}),
    );
    let changed = loop {
        let diagnostics = next_diagnostics(&client);
        if diagnostics["uri"] == "file:///full.chat" && diagnostics["version"] == 1 {
            break diagnostics;
        }
    };
    let expected: Vec<u64> = truth.iter().map(|l| l + 1).collect();
    assert_eq!(lines_of_tool(&changed), expected, "{changed}");

    request(&client, 2, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

#[test]
fn diagnostics_are_published_only_when_they_change() {
    let (client, thread) = start_session();
    let uri = "file:///typing.chat";
    let tool = "@Assistant:\n**Tool Use:** `no_such_tool` (`t1`)\n```json\n{}\n```\n";
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "chat", "version": 0,
               "text": format!("{tool}@You:\n")}}),
    );
    let opened = next_diagnostics(&client);
    assert_eq!(opened["version"], 0);
    assert!(!opened["diagnostics"].as_array().unwrap().is_empty());
    let mut version = 0;
    let mut change = |start: (u32, u32), end: (u32, u32), text: &str| {
        version += 1;
        notify(
            &client,
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version},
                   "contentChanges": [{"range": {
                       "start": {"line": start.0, "character": start.1},
                       "end": {"line": end.0, "character": end.1}}, "text": text}]}),
        );
        // Each key analysed on its own, as typed.
        std::thread::sleep(Duration::from_millis(30));
        version
    };
    // Keys typed below the diagnostics leave them as they are: nothing is published.
    for (i, key) in "hello".chars().enumerate() {
        change((6, i as u32), (6, i as u32), &key.to_string());
    }
    // A line added above them moves their ranges: published.
    let moved = change((0, 0), (0, 0), "\n");
    let published = next_diagnostics(&client);
    assert_eq!(published["version"], moved, "{published}");
    assert_eq!(
        published["diagnostics"][0]["range"]["start"]["line"],
        opened["diagnostics"][0]["range"]["start"]["line"]
            .as_u64()
            .unwrap()
            + 1
    );
    // The tool use deleted: an empty list, once.
    let cleared = change((1, 0), (6, 0), "");
    let published = next_diagnostics(&client);
    assert_eq!(published["version"], cleared, "{published}");
    assert_eq!(published["diagnostics"], json!([]));
    for (i, key) in " there".chars().enumerate() {
        change((2, 5 + i as u32), (2, 5 + i as u32), &key.to_string());
    }
    // The next publish is the one with a problem again, not an empty list after the empty one.
    let broken = change((2, 0), (2, 0), "```\n");
    let published = next_diagnostics(&client);
    assert_eq!(published["version"], broken, "{published}");
    assert!(!published["diagnostics"].as_array().unwrap().is_empty());

    request(&client, 2, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

/// What reached the engine: the document as resolved (its URI, whether the session's buffer
/// came along) and the request.
type Call = (String, bool, FlemmaRequest);

/// An engine that records every call and refuses it with the error a real host would give.
struct Recording(std::sync::mpsc::Sender<Call>);

impl Backend for Recording {
    fn call(
        &mut self,
        document: RequestDocument<'_>,
        request: FlemmaRequest,
        _: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        let method = request.method();
        let _ = self
            .0
            .send((document.uri.to_owned(), document.buffer.is_some(), request));
        Err(RequestError::refused(format!("{method}: nothing runs")))
    }
}

#[test]
fn commands_and_requests_reach_the_engine_as_the_same_typed_request() {
    let (calls_tx, calls) = std::sync::mpsc::channel();
    let (client, thread) = session_with(
        Recording(calls_tx),
        json!({"processId": null, "rootUri": "file:///work", "capabilities": {}}),
    );
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///work/t.chat", "languageId": "chat", "version": 0,
               "text": "@You:\nhi\n"}}),
    );
    // The command (positional, a path relative to the root) and the request (named params,
    // the URI): the same request, the same open document with its buffer, the same answer.
    let by_command = request(
        &client,
        2,
        "workspace/executeCommand",
        json!({"command": "flemma.reject", "arguments": ["t.chat", "t1", "too slow"]}),
    );
    let by_request = request(
        &client,
        3,
        "flemma/reject",
        json!({"uri": "file:///work/t.chat", "toolId": "t1", "reason": "too slow"}),
    );
    let (uri, buffer, first) = calls.recv_timeout(Duration::from_secs(10)).unwrap();
    let second = calls.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((uri.as_str(), buffer), ("file:///work/t.chat", true));
    assert_eq!((second.0.as_str(), second.1), ("file:///work/t.chat", true));
    assert_eq!(first.method(), "flemma/reject");
    assert_eq!(second.2.method(), "flemma/reject");
    let (first, second) = (
        by_command.response_result.unwrap_err(),
        by_request.response_result.unwrap_err(),
    );
    assert_eq!((first.code, &first.message), (second.code, &second.message));
    assert_eq!(first.code, -32001);
    assert_eq!(first.message, "flemma/reject: nothing runs");
    // A document not open here is named by its file URI, without a buffer.
    request(
        &client,
        4,
        "flemma/status",
        json!({"uri": "/elsewhere/x.chat"}),
    );
    let (uri, buffer, _) = calls.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((uri.as_str(), buffer), ("file:///elsewhere/x.chat", false));
    // Bad requests never reach the engine.
    let bad = request(&client, 5, "flemma/approve", json!({"uri": "t.chat"}));
    assert_eq!(bad.response_result.unwrap_err().code, -32602);
    let unknown = request(&client, 6, "flemma/explode", json!({}));
    assert_eq!(unknown.response_result.unwrap_err().code, -32601);
    let bad = request(
        &client,
        7,
        "workspace/executeCommand",
        json!({"command": "flemma.switch", "arguments": ["t.chat"]}),
    );
    assert!(
        bad.response_result
            .unwrap_err()
            .message
            .contains("`flemma.switch` takes [uri, model]")
    );
    assert!(calls.try_recv().is_err());
    request(&client, 8, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

#[test]
fn a_failed_command_also_says_why_in_a_message() {
    let (client, thread) = start_session();
    let answer = request(
        &client,
        2,
        "workspace/executeCommand",
        json!({"command": "flemma.approve", "arguments": ["nowhere/talk.chat", "toolu_1"]}),
    );
    let error = answer.response_result.unwrap_err();
    assert!(!error.message.is_empty());
    // Helix 25.07 only logs the error answer: the same reason comes as a message.
    let shown = next_notification(&client, "window/showMessage");
    assert_eq!(shown["type"], 1, "{shown}");
    assert_eq!(
        shown["message"],
        format!("flemma: `flemma.approve` failed: {}", error.message)
    );
    request(&client, 3, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

/// An engine that, on `flemma/send`, tells the session what a cycle does: a reply streams, a
/// tool runs, the cycle stops.
struct Cycle;

impl Backend for Cycle {
    fn call(
        &mut self,
        document: RequestDocument<'_>,
        _: FlemmaRequest,
        outbox: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        use flemma_protocol::event as ev;
        let event = |event: ev::EngineEvent| {
            outbox.send(flemma_lsp::Task::Event {
                uri: document.uri.to_owned(),
                event,
            });
        };
        let sending = |request_id| {
            ev::EngineEvent::RequestSending(ev::RequestSending {
                request_id,
                provider: None,
                model: None,
            })
        };
        let tool = |tool_id: &str, tool_name: &str| ev::ToolRef {
            tool_id: tool_id.into(),
            tool_name: tool_name.into(),
            input: None,
        };
        event(sending(1));
        event(ev::EngineEvent::RequestFinished(ev::RequestFinished {
            request_id: 1,
            status: ev::RequestStatus::Completed,
            accounted: None,
            reason: None,
        }));
        event(ev::EngineEvent::ToolExecuting(tool("t1", "bash")));
        event(ev::EngineEvent::ToolExecuting(tool("t2", "grep")));
        event(ev::EngineEvent::ToolCompleted(ev::ToolCompleted {
            tool_id: "t1".into(),
            tool_name: "bash".into(),
            status: ev::ToolStatus::Success,
            written: ev::Written::Result,
            output: None,
        }));
        event(ev::EngineEvent::JobSubmitted(ev::JobSubmitted {
            job_id: "job_1".into(),
            tool_id: "t2".into(),
            tool_name: "grep".into(),
            active_count: 1,
        }));
        event(sending(2));
        event(ev::EngineEvent::EngineStopped(ev::EngineStopped {
            reason: ev::StopLabel::AwaitingApproval,
            message: None,
        }));
        Ok(FlemmaResponse::Accepted(Accepted {
            started: true,
            tool_ids: Vec::new(),
        }))
    }
}

#[test]
fn the_engines_events_become_work_done_progress() {
    let (client, thread) = session_with(
        Cycle,
        json!({"processId": null, "capabilities": {"window": {"workDoneProgress": true}}}),
    );
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///w/talk.chat", "languageId": "chat", "version": 0,
               "text": "@You:\nhello\n"}}),
    );
    request(
        &client,
        2,
        "flemma/send",
        json!({"uri": "file:///w/talk.chat"}),
    );
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|last: &String| !last.starts_with("end awaiting"))
    {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
        {
            Message::Notification(n) if n.method == "$/progress" => {
                let value = &n.params["value"];
                let text = value["title"].as_str().or(value["message"].as_str());
                seen.push(format!(
                    "{} {}",
                    value["kind"].as_str().unwrap(),
                    text.unwrap()
                ));
            }
            _ => continue,
        }
    }
    assert_eq!(
        seen,
        [
            "begin talk.chat: streaming the reply",
            "end done",
            "begin talk.chat: running bash",
            "report running bash, grep",
            "report running grep",
            "end done",
            "begin talk.chat: streaming the reply",
            "end awaiting-approval",
        ]
    );
    request(&client, 3, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

/// A disk that exists only in the test: `/virtual/notes.md`, `/virtual/sub/`, and a home.
#[derive(Debug)]
struct VirtualDisk;

impl flemma_template::Host for VirtualDisk {
    fn read_file(&self, path: &std::path::Path, _limit: u64) -> std::io::Result<Vec<u8>> {
        match path.to_str() {
            Some("/virtual/notes.md" | "/home/virtual/todo.md") => Ok(b"notes".to_vec()),
            _ => Err(std::io::ErrorKind::NotFound.into()),
        }
    }
    fn home_dir(&self) -> Option<std::path::PathBuf> {
        Some("/home/virtual".into())
    }
    fn now(&self) -> std::time::SystemTime {
        std::time::SystemTime::UNIX_EPOCH
    }
    fn environment(&self) -> flemma_template::PersonalityContext {
        flemma_template::PersonalityContext::default()
    }
    fn file_kind(&self, path: &std::path::Path) -> flemma_template::FileKind {
        match path.to_str() {
            Some("/virtual/sub") => flemma_template::FileKind::Directory,
            _ if self.read_file(path, u64::MAX).is_ok() => flemma_template::FileKind::File,
            _ => flemma_template::FileKind::Missing,
        }
    }
    fn list_dir(&self, dir: &std::path::Path) -> Vec<(String, bool)> {
        // Compared as paths: `/virtual/./` is `/virtual`.
        if dir == std::path::Path::new("/virtual") {
            vec![("notes.md".into(), false), ("sub".into(), true)]
        } else {
            Vec::new()
        }
    }
    fn run_filter(&self, _: &[String], _: &[u8], _: Duration) -> std::io::Result<Vec<u8>> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

#[test]
fn hover_definition_and_completion_see_the_disk_through_the_hosts_io() {
    let (server, client) = Connection::memory();
    let host = flemma_ide::AnalysisHost::new(
        std::sync::Arc::new(VirtualDisk),
        flemma_ide::ConfigInput::default(),
    );
    let thread = std::thread::spawn(move || {
        flemma_lsp::run_with(server, Box::new(flemma_lsp::NoEngine), host)
    });
    request(
        &client,
        1,
        "initialize",
        json!({"processId": null, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}}),
    );
    let text = "@You:\nread @./notes.md and @~/todo.md and @./sub\nsee @./\n";
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///virtual/talk.chat", "languageId": "chat",
               "version": 0, "text": text}}),
    );
    let hover = |id: i32, character: u32| {
        request(
            &client,
            id,
            "textDocument/hover",
            json!({"textDocument": {"uri": "file:///virtual/talk.chat"},
                   "position": {"line": 1, "character": character}}),
        )
        .response_result
        .unwrap()["contents"]["value"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // Neither exists on this machine's disk: the host's io says what they are.
    assert!(
        hover(2, 10).contains("`/virtual/notes.md` (file)"),
        "{}",
        hover(2, 10)
    );
    assert!(hover(3, 26).contains("`/home/virtual/todo.md` (file)"));
    assert!(hover(4, 40).contains("`/virtual/sub` (directory)"));
    // `~/` is the host's home.
    let definition = request(
        &client,
        7,
        "textDocument/definition",
        json!({"textDocument": {"uri": "file:///virtual/talk.chat"},
               "position": {"line": 1, "character": 26}}),
    );
    assert_eq!(
        definition.response_result.unwrap()["uri"],
        "file:///home/virtual/todo.md"
    );
    let completion = request(
        &client,
        5,
        "textDocument/completion",
        json!({"textDocument": {"uri": "file:///virtual/talk.chat"},
               "position": {"line": 2, "character": 7}}),
    );
    let labels = completion.response_result.unwrap().to_string();
    assert!(
        labels.contains("notes.md") && labels.contains("sub/"),
        "{labels}"
    );
    request(&client, 6, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

/// A backend whose process knows the tools `(name, description)` of a running MCP server.
struct WithMcpTools(Vec<(&'static str, &'static str)>);

impl Backend for WithMcpTools {
    fn call(
        &mut self,
        _: RequestDocument<'_>,
        request: FlemmaRequest,
        _: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        Err(RequestError::refused(format!(
            "{} is not for this test",
            request.method()
        )))
    }
    fn discovered_tools(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|(name, description)| (name.to_string(), description.to_string()))
            .collect()
    }
}

/// The labels of the completion at `line`, `character` of `/tmp/t.chat`.
fn completion_labels(client: &Connection, id: i32, line: u32, character: u32) -> Vec<String> {
    let completion = request(
        client,
        id,
        "textDocument/completion",
        json!({"textDocument": {"uri": "file:///tmp/t.chat"}, "position": {"line": line, "character": character}}),
    );
    let items = completion.response_result.unwrap();
    items
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["label"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn discovered_mcp_tools_are_completed_and_hovered() {
    let (client, thread) = session_with(
        WithMcpTools(vec![(
            "github.search_issues",
            "Search the issues of a repository.",
        )]),
        json!({"processId": null, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}}),
    );
    let text = "@Assistant:\n**Tool Use:** `gi` (`t1`)\n```json\n{}\n```\n\n@Assistant:\n**Tool Use:** `github.search_issues` (`t2`)\n```json\n{}\n```\n";
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///tmp/t.chat", "languageId": "chat", "version": 0, "text": text}}),
    );
    let labels = completion_labels(&client, 2, 1, 16);
    assert!(
        labels.iter().any(|l| l == "github.search_issues"),
        "{labels:?}"
    );
    let hover = request(
        &client,
        3,
        "textDocument/hover",
        json!({"textDocument": {"uri": "file:///tmp/t.chat"}, "position": {"line": 7, "character": 18}}),
    );
    let value = hover.response_result.unwrap()["contents"]["value"].clone();
    assert!(
        value
            .as_str()
            .unwrap()
            .contains("Search the issues of a repository."),
        "{value}"
    );
    request(&client, 4, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}

#[test]
fn an_mcp_tool_the_chat_excludes_is_not_completed() {
    let (client, thread) = session_with(
        WithMcpTools(vec![
            ("github.delete_repo", "Delete a repository."),
            ("github.search_issues", "Search issues."),
        ]),
        json!({"processId": null, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}}),
    );
    let text = "```json\n{\"flemma\": {\"tools\": {\"mcp\": {\"exclude\": [\"github.delete_*\"]}}}}\n```\n@Assistant:\n**Tool Use:** `gi` (`t1`)\n```json\n{}\n```\n";
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": "file:///tmp/t.chat", "languageId": "chat", "version": 0, "text": text}}),
    );
    // Completion answers from the last finished analysis (the frontmatter's exclusion in it).
    next_diagnostics(&client);
    let labels = completion_labels(&client, 2, 4, 16);
    assert!(
        labels.iter().any(|l| l == "github.search_issues"),
        "{labels:?}"
    );
    assert!(
        !labels.iter().any(|l| l == "github.delete_repo"),
        "excluded: {labels:?}"
    );
    request(&client, 3, "shutdown", Value::Null);
    notify(&client, "exit", Value::Null);
    thread.join().unwrap().unwrap();
}
