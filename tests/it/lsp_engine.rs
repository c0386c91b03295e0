//! The engine behind `flemmad lsp` and `flemmad serve`, end to end: real `flemmad` processes
//! speaking LSP (scripted Helix- and VS Code-like clients) against `flemma-mock-provider` over
//! real HTTP, real tools in temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common::{self, Chat};
use crate::lsp::lsp_client::{Client, Flavor};

/// Anthropic through the mock; `bash` needs approval (no sandbox resolver).
const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {"auto_approve_sandboxed": false}}}
```
"#;

/// A mock provider on its own runtime (the LSP clients are synchronous).
pub(crate) struct Mock {
    runtime: tokio::runtime::Runtime,
    mock: Option<MockProvider>,
}

impl Mock {
    pub(crate) fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mock = runtime.block_on(MockProvider::start()).unwrap();
        Self {
            runtime,
            mock: Some(mock),
        }
    }
    pub(crate) fn provider(&self) -> &MockProvider {
        self.mock.as_ref().unwrap()
    }
    /// Every provider pointed at the mock, the chat's config home and state directory, a
    /// plain `PATH`.
    pub(crate) fn env(&self, chat: &Chat) -> Vec<(&'static str, String)> {
        let mut env = common::provider_env(&self.provider().base_url());
        env.push(("XDG_CONFIG_HOME", chat.config_home.display().to_string()));
        let state = chat.path.parent().map(|dir| dir.join("state"));
        env.push((
            "XDG_STATE_HOME",
            state.unwrap_or_default().display().to_string(),
        ));
        let cache = chat.path.parent().map(|dir| dir.join("cache"));
        env.push((
            "XDG_CACHE_HOME",
            cache.unwrap_or_default().display().to_string(),
        ));
        env.push(("PATH", "/usr/bin:/bin".into()));
        env
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(mock) = self.mock.take() {
            self.runtime.block_on(mock.shutdown());
        }
    }
}

fn uri_of(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A reply long enough to stream for a while: numbered lines with a unique marker each.
fn long_reply(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("line {i:03} of the streamed reply\n"))
        .collect::<String>()
        + "THE END"
}

fn start(flavor: Flavor, mock: &Mock, chat: &Chat) -> Client {
    let mut client = Client::start_with_env(flavor, &["--no-daemon"], &mock.env(chat));
    client.initialize(chat.path.parent().unwrap());
    client
}

/// Pumps until the engine reports that its driver for the document stopped; returns the
/// reason.
fn wait_stopped(client: &mut Client, timeout: Duration) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        while let Some(n) = client.notifications.pop_front() {
            if n["method"] == "flemma/event" && n["params"]["name"] == "engine:stopped" {
                return n["params"]["data"].clone();
            }
        }
        assert!(Instant::now() < deadline, "the engine did not stop in time");
        client.pump(Duration::from_millis(50));
    }
}

fn command(client: &mut Client, name: &str, arguments: Value) -> Result<Value, Value> {
    client.request(
        "workspace/executeCommand",
        json!({"command": name, "arguments": arguments}),
    )
}

/// Pumps until `condition` holds on the buffer.
fn pump_until(client: &mut Client, uri: &str, what: &str, condition: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition(client.text(uri)) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            client.text(uri)
        );
        client.pump(Duration::from_millis(20));
    }
}

fn wait_for_file(path: &Path, what: &str, condition: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if condition(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn helix_streams_a_reply_while_the_user_types_at_the_end() {
    let mock = Mock::start();
    let reply = long_reply(60);
    mock.provider()
        .push(Turn::text(reply.clone()).bytes_per_sec(3000));
    let original = format!("{FRONTMATTER}@You:\nplease stream\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    let accepted = command(&mut client, "flemma.send", json!([uri])).unwrap();
    assert_eq!(accepted, json!({"started": true}));
    pump_until(&mut client, &uri, "the reply to start", |t| {
        t.contains("line 005")
    });
    // The user types at the very end of the buffer, several times, while the reply streams.
    let mut typed = String::new();
    for word in ["and ", "then ", "more"] {
        let end = client.text(&uri).len();
        client.type_at(&uri, end, word);
        typed.push_str(word);
        client.pump(Duration::from_millis(60));
    }
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    client.pump(Duration::from_millis(300));
    let text = client.text(&uri).to_owned();
    assert!(text.contains(&reply), "the whole reply, in order:\n{text}");
    assert_eq!(text.matches("THE END").count(), 1, "{text}");
    assert!(text.contains(&typed), "the typed text, in order:\n{text}");
    assert!(text.starts_with(&original), "{text}");
    // The editor owns the document: the file on disk was never written.
    assert_eq!(common::read(&chat.path), original);
    assert!(!client.progress_tokens.is_empty(), "progress was shown");
    client.shutdown();
}

#[test]
fn vscode_refusing_a_stale_version_once_gets_every_byte_exactly_once() {
    let mock = Mock::start();
    let reply = long_reply(30);
    mock.provider()
        .push(Turn::text(reply.clone()).bytes_per_sec(4000));
    let original = format!("{FRONTMATTER}@You:\nüñíçødé 🙂 please\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::VsCode, &mock, &chat);
    client.open(&uri, &original);
    // The user types at the top (after the frontmatter) while the first edit travels: that
    // edit is refused as stale, rebuilt and sent again.
    let at = original.find("@You:").unwrap();
    client.type_before_next_apply = Some((uri.clone(), at, "typed 🎉 first\n".into()));
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    client.pump(Duration::from_millis(300));
    let text = client.text(&uri).to_owned();
    assert_eq!(client.apply_edits_refused, 1);
    assert!(text.contains(&reply), "{text}");
    for i in 0..30 {
        let line = format!("line {i:03} of");
        assert_eq!(text.matches(&line).count(), 1, "{line} once:\n{text}");
    }
    assert!(
        text.contains("typed 🎉 first\n@You:\nüñíçødé 🙂 please\n"),
        "{text}"
    );
    client.shutdown();
}

#[test]
fn a_tool_call_is_approved_through_execute_command_and_the_cycle_goes_on() {
    let mock = Mock::start();
    mock.provider().push(Turn::default().tool_call_with_id(
        "bash",
        "toolu_bash1",
        json!({"label": "say hi", "command": "echo hi-from-bash > made.txt; cat made.txt", "timeout": null}),
    ));
    mock.provider()
        .push(Turn::text("The command printed hi. All done."));
    let original = format!("{FRONTMATTER}@You:\nrun it\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "awaiting-approval", "{stopped}");
    client.pump(Duration::from_millis(200));
    assert!(
        client
            .text(&uri)
            .contains("**Tool Result:** `toolu_bash1` (pending)"),
        "{}",
        client.text(&uri)
    );
    let status = command(&mut client, "flemma.status", json!([uri])).unwrap();
    assert_eq!(status["state"], "awaiting-approval", "{status}");
    let approved = command(&mut client, "flemma.approve", json!([uri, "toolu_bash1"])).unwrap();
    // The driver had stopped (awaiting approval): a new one starts with the decision.
    assert_eq!(
        approved,
        json!({"started": true, "toolIds": ["toolu_bash1"]})
    );
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    client.pump(Duration::from_millis(300));
    let text = client.text(&uri).to_owned();
    assert!(text.contains("hi-from-bash"), "the result landed:\n{text}");
    assert!(
        text.contains("All done."),
        "the final reply landed:\n{text}"
    );
    // The tool ran in the chat's directory.
    let dir = chat.path.parent().unwrap();
    assert_eq!(common::read(&dir.join("made.txt")), "hi-from-bash\n");
    let requests = mock.provider().requests();
    assert_eq!(requests.len(), 2, "the result was sent back");
    assert!(
        requests[1].raw_body.contains("hi-from-bash"),
        "the second request carries the tool result"
    );
    let usage = command(&mut client, "flemma.usage", json!([uri])).unwrap();
    assert!(usage["outputTokens"].as_u64().unwrap() > 0, "{usage}");
    client.shutdown();
}

#[test]
fn closing_the_document_mid_stream_puts_the_rest_of_the_reply_in_the_file() {
    let mock = Mock::start();
    let reply = long_reply(60);
    mock.provider()
        .push(Turn::text(reply.clone()).bytes_per_sec(2500));
    let original = format!("{FRONTMATTER}@You:\nstream and I'll leave\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    pump_until(&mut client, &uri, "some of the reply", |t| {
        t.contains("line 003")
    });
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    let text = wait_for_file(&chat.path, "the whole reply on disk", |t| {
        t.contains("THE END")
    });
    assert!(text.contains(&reply), "{text}");
    assert!(text.starts_with(&original), "{text}");
    assert!(
        flemma_syntax::parse(&text)
            .diagnostics()
            .iter()
            .all(|d| d.severity != flemma_syntax::Severity::Error)
    );
    client.shutdown();
}

#[test]
fn a_document_never_opened_is_sent_and_written_on_disk() {
    let mock = Mock::start();
    mock.provider()
        .push(Turn::text("Written straight into the file."));
    let original = format!("{FRONTMATTER}@You:\nhello from disk\n");
    let chat = common::chat(&original);
    let mut client = start(Flavor::Helix, &mock, &chat);
    // A path relative to the workspace root, as Helix's `:lsp-workspace-command` sends it.
    command(&mut client, "flemma.send", json!(["talk.chat"])).unwrap();
    let text = wait_for_file(&chat.path, "the reply on disk", |t| {
        t.contains("Written straight into the file.")
    });
    assert!(text.starts_with(&original), "{text}");
    assert!(text.trim_end().ends_with("@You:"), "{text}");
    client.shutdown();
}

#[test]
fn cancel_mid_stream_writes_the_abort_marker() {
    let mock = Mock::start();
    mock.provider()
        .push(Turn::text(long_reply(200)).bytes_per_sec(1500));
    let original = format!("{FRONTMATTER}@You:\ntalk for a long time\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::VsCode, &mock, &chat);
    client.open(&uri, &original);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    pump_until(&mut client, &uri, "some of the reply", |t| {
        t.contains("line 002")
    });
    command(&mut client, "flemma.cancel", json!([uri])).unwrap();
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "cancelled", "{stopped}");
    client.pump(Duration::from_millis(300));
    let text = client.text(&uri).to_owned();
    assert!(text.contains(flemma_syntax::write::ABORT_MARKER), "{text}");
    assert!(!text.contains("THE END"), "{text}");
    client.shutdown();
}

// ----- the daemon -----

/// A minimal Helix-like LSP client over a Unix socket: UTF-8 positions, one open document
/// whose versioned edits it applies and echoes (`didChange` before the answer).
struct SocketLsp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: i64,
    uri: String,
    text: String,
    version: i64,
}

/// The byte offset of a UTF-8 LSP position.
fn offset(text: &str, position: &Value) -> usize {
    let line = position["line"].as_u64().unwrap() as usize;
    let character = position["character"].as_u64().unwrap() as usize;
    let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
    start + character
}

impl SocketLsp {
    fn connect(path: &Path) -> Self {
        let stream = UnixStream::connect(path).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Self {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            next_id: 1,
            uri: String::new(),
            text: String::new(),
            version: 0,
        }
    }
    fn send(&mut self, message: Value) {
        let body = serde_json::to_vec(&message).unwrap();
        write!(self.writer, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
        self.writer.write_all(&body).unwrap();
        self.writer.flush().unwrap();
    }
    fn read(&mut self) -> Value {
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                length = v.parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    }
    /// Answers a server request: applies a versioned edit of the open document (else refuses
    /// it), anything else gets `null`.
    fn serve_request(&mut self, message: &Value) {
        let id = message["id"].clone();
        if message["method"] != "workspace/applyEdit" {
            self.send(json!({"jsonrpc": "2.0", "id": id, "result": null}));
            return;
        }
        let change = &message["params"]["edit"]["documentChanges"][0];
        if change["textDocument"]["version"].as_i64() != Some(self.version) {
            self.send(json!({"jsonrpc": "2.0", "id": id, "result": {"applied": false}}));
            return;
        }
        let mut edits: Vec<(usize, usize, String)> = change["edits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    offset(&self.text, &e["range"]["start"]),
                    offset(&self.text, &e["range"]["end"]),
                    e["newText"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        edits.sort_by_key(|e| std::cmp::Reverse(e.0));
        let changes: Vec<Value> = change["edits"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .map(|e| json!({"range": e["range"], "text": e["newText"]}))
            .collect();
        for (start, end, text) in edits {
            self.text.replace_range(start..end, &text);
        }
        self.version += 1;
        let (uri, version) = (self.uri.clone(), self.version);
        self.send(json!({"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes}}));
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": {"applied": true}}));
    }
    /// Handles what arrives until `condition` holds on the buffer.
    fn pump_until(&mut self, what: &str, condition: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !condition(&self.text) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            let message = self.read();
            if message.get("method").is_some() && message.get("id").is_some() {
                self.serve_request(&message);
            }
        }
    }
    fn open(&mut self, uri: &str, text: &str) {
        self.uri = uri.to_owned();
        self.text = text.to_owned();
        self.send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "chat", "version": 0, "text": text}}}));
    }
    /// Sends a request and handles what arrives until its answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.read();
            match (message.get("method").is_some(), message.get("id").is_some()) {
                (true, true) => self.serve_request(&message),
                (false, true) if message["id"] == id => return message,
                _ => {}
            }
        }
    }
    fn initialize(&mut self) {
        let init = self.request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": {
                "general": {"positionEncodings": ["utf-8"]},
                "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true}}}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    }
}

struct Serve {
    child: Child,
    _home: tempfile::TempDir,
    runtime: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(mock: &Mock, chat: &Chat) -> Serve {
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .arg("serve")
        .envs(mock.env(chat))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .env("RUST_LOG", "flemmad=debug,info")
        .env_remove("FLEMMA_CONFIG")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = runtime.join("flemma/lsp.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Serve {
        child,
        _home: home,
        runtime,
    }
}

#[test]
fn daemon_a_reply_started_over_lsp_sock_completes_on_disk_after_the_editor_leaves() {
    let mock = Mock::start();
    let reply = long_reply(40);
    mock.provider()
        .push(Turn::text(reply.clone()).bytes_per_sec(5000));
    let original = format!("{FRONTMATTER}@You:\nkeep going without me\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let daemon = serve(&mock, &chat);
    // `flemmad events` sees the engine's events of every document.
    let events = UnixStream::connect(daemon.runtime.join("flemma/rpc.sock")).unwrap();
    events
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut events_writer = events.try_clone().unwrap();
    writeln!(
        events_writer,
        r#"{{"jsonrpc":"2.0","id":1,"method":"flemma/subscribe"}}"#
    )
    .unwrap();
    let mut events = BufReader::new(events);
    let mut lsp = SocketLsp::connect(&daemon.runtime.join("flemma/lsp.sock"));
    lsp.initialize();
    lsp.open(&uri, &original);
    let answer = lsp.request(
        "workspace/executeCommand",
        json!({"command": "flemma.send", "arguments": [uri]}),
    );
    assert_eq!(answer["result"], json!({"started": true}), "{answer}");
    // The reply streams into the editor's buffer, not the file.
    lsp.pump_until("the reply to start", |t| t.contains("line 002"));
    assert_eq!(common::read(&chat.path), original);
    // The editor goes away mid-stream, without saving or closing anything.
    drop(lsp);
    let text = wait_for_file(&chat.path, "the whole reply on disk", |t| {
        t.contains("THE END")
    });
    assert!(text.contains(&reply), "{text}");
    assert!(text.starts_with(&original), "{text}");
    assert_eq!(text.matches("THE END").count(), 1, "{text}");
    let mut names = Vec::new();
    loop {
        let mut line = String::new();
        events.read_line(&mut line).unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        let params = &event["params"];
        if params["uri"] == uri.as_str() {
            names.push(params["name"].as_str().unwrap().to_owned());
        }
        if params["name"] == "engine:stopped" {
            assert_eq!(params["data"]["reason"], "idle", "{event}");
            break;
        }
    }
    assert!(
        names.contains(&"request:sending".to_owned())
            && names.contains(&"request:finished".to_owned()),
        "{names:?}"
    );
}

#[test]
fn daemon_sigterm_mid_stream_writes_the_abort_marker() {
    let mock = Mock::start();
    mock.provider()
        .push(Turn::text(long_reply(300)).bytes_per_sec(2000));
    let original = format!("{FRONTMATTER}@You:\nthis will be interrupted\n");
    let chat = common::chat(&original);
    let mut daemon = serve(&mock, &chat);
    let mut lsp = SocketLsp::connect(&daemon.runtime.join("flemma/lsp.sock"));
    lsp.initialize();
    let answer = lsp.request(
        "workspace/executeCommand",
        json!({"command": "flemma.send", "arguments": [chat.path.display().to_string()]}),
    );
    assert_eq!(answer["result"], json!({"started": true}), "{answer}");
    wait_for_file(&chat.path, "the reply to start", |t| t.contains("line 002"));
    let status = Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    while daemon.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = common::read(&chat.path);
    assert!(text.contains(flemma_syntax::write::ABORT_MARKER), "{text}");
    assert!(!text.contains("THE END"), "{text}");
    assert!(text.starts_with(&original), "{text}");
}

#[test]
fn deleting_the_block_being_written_cancels_the_stream() {
    let mock = Mock::start();
    mock.provider()
        .push(Turn::text("word ".repeat(600)).bytes_per_sec(1500));
    let start_text = format!("{FRONTMATTER}@You:\nplease help\n");
    let chat = common::chat(&start_text);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &start_text);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    pump_until(&mut client, &uri, "some of the reply", |t| {
        t.contains("word word")
    });
    let len = client.text(&uri).len();
    client.replace(&uri, start_text.len(), len, "");
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert!(
        stopped["message"]
            .as_str()
            .is_some_and(|m| m.contains("deleted")),
        "{stopped}"
    );
    while client.pump(Duration::from_millis(300)) {}
    let text = client.text(&uri).to_owned();
    assert!(!text.contains("word"), "nothing more was written:\n{text}");
    assert!(text.starts_with(&start_text), "{text}");
    client.shutdown();
}

/// The code actions the client gets at `line` (their `command`s: `title`, `command`,
/// `arguments`).
fn actions_at(client: &mut Client, uri: &str, line: usize) -> Vec<Value> {
    let range =
        json!({"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}});
    let answer = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}),
        )
        .unwrap();
    answer
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.get("command").cloned())
        .collect()
}

/// Executes the command of the action titled `title` (as an editor does when the user picks
/// it), after checking it is offered.
fn pick(client: &mut Client, actions: &[Value], title: &str) -> Value {
    let Some(action) = actions.iter().find(|a| a["title"] == title) else {
        panic!("no action {title:?} in {actions:?}");
    };
    client
        .request(
            "workspace/executeCommand",
            json!({"command": action["command"], "arguments": action["arguments"]}),
        )
        .unwrap()
}

#[test]
fn a_whole_agentic_turn_is_driven_through_code_actions_only() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mock = Mock::start();
        mock.provider().push(Turn::default().tool_call_with_id(
            "bash",
            "toolu_ca1",
            json!({"label": "say hi", "command": "echo hi-from-action", "timeout": null}),
        ));
        mock.provider().push(Turn::text("It printed hi. Done."));
        let original = format!("{FRONTMATTER}@You:\nrun it\n");
        let chat = common::chat(&original);
        let uri = uri_of(&chat.path);
        let mut client = start(flavor, &mock, &chat);
        client.open(&uri, &original);

        // Send: an action anywhere in the document.
        let last = client.text(&uri).lines().count() - 1;
        let actions = actions_at(&mut client, &uri, last);
        let send = actions
            .iter()
            .find(|a| a["command"] == "flemma.send")
            .unwrap_or_else(|| panic!("{flavor:?}: no send action in {actions:?}"))["title"]
            .as_str()
            .unwrap()
            .to_owned();
        pick(&mut client, &actions, &send);
        let stopped = wait_stopped(&mut client, Duration::from_secs(30));
        assert_eq!(
            stopped["reason"], "awaiting-approval",
            "{flavor:?}: {stopped}"
        );
        pump_until(&mut client, &uri, "the pending placeholder", |t| {
            t.contains("**Tool Result:** `toolu_ca1` (pending)")
        });

        // Approve: the action on the pending placeholder.
        let text = client.text(&uri).to_owned();
        let line = text
            .lines()
            .position(|l| l.contains("`toolu_ca1` (pending)"))
            .unwrap();
        let actions = actions_at(&mut client, &uri, line);
        let approve = actions
            .iter()
            .find(|a| a["command"] == "flemma.approve")
            .unwrap_or_else(|| panic!("{flavor:?}: no approve action in {actions:?}"));
        assert_eq!(
            approve["arguments"],
            json!([uri, "toolu_ca1"]),
            "{flavor:?}"
        );
        assert!(
            actions.iter().any(|a| a["command"] == "flemma.reject"),
            "{flavor:?}: {actions:?}"
        );
        let title = approve["title"].as_str().unwrap().to_owned();
        pick(&mut client, &actions, &title);
        let stopped = wait_stopped(&mut client, Duration::from_secs(30));
        assert_eq!(stopped["reason"], "idle", "{flavor:?}: {stopped}");
        pump_until(&mut client, &uri, "the final reply", |t| {
            t.contains("It printed hi. Done.")
        });
        let text = client.text(&uri).to_owned();
        assert!(
            text.contains("hi-from-action"),
            "{flavor:?}: the result landed:\n{text}"
        );
        assert_eq!(mock.provider().requests().len(), 2, "{flavor:?}");
        // An editor had it open all along: the daemon never wrote the file.
        assert_eq!(common::read(&chat.path), original, "{flavor:?}");
        client.shutdown();
    }
}

/// While the model streams a tool call's arguments, the editor's progress says so (`Composing
/// a tool call`), then goes back to what runs.
#[test]
fn progress_says_composing_a_tool_call_while_its_arguments_stream() {
    let mock = Mock::start();
    let command_text: String = (0..40).map(|i| format!("echo line {i:03}; ")).collect();
    mock.provider().push(
        Turn::text("Running it.")
            .tool_call_with_id(
                "bash",
                "toolu_long1",
                json!({"label": "many lines", "command": command_text, "timeout": null}),
            )
            .bytes_per_sec(3000),
    );
    let original = format!("{FRONTMATTER}@You:\nrun it\n");
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    let composing = client.wait_notification("$/progress", |params| {
        let value = &params["value"];
        value["message"] == "Composing a tool call"
            || value["title"]
                .as_str()
                .is_some_and(|t| t.ends_with("Composing a tool call"))
    });
    assert_eq!(composing["value"]["kind"], "report", "{composing}");
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "awaiting-approval", "{stopped}");
    client.shutdown();
}

/// "Compact up to here" (issue 34): the code action runs `flemma.compact` with the line; the
/// summary reaches the editor's buffer as an edit, while what the user types meanwhile at the
/// end is kept; the notice says where the turns are, and the file on disk is not written. "Undo
/// this compaction" (`flemma.compactUndo`) puts the original bytes back the same way, and
/// refuses an archive changed since it was written.
#[test]
fn compact_up_to_here_and_its_undo_rewrite_the_buffer_and_keep_what_was_typed() {
    let mock = Mock::start();
    mock.provider()
        .push(Turn::text("The user asked one thing; the answer was first.").bytes_per_sec(400));
    let original = format!(
        "{FRONTMATTER}@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n@Assistant:\nsecond\n\n@You:\nthree\n"
    );
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    // On the first answer: it and what is before it are compacted.
    let line = original[..original.find("first").unwrap()].lines().count();
    let actions = actions_at(&mut client, &uri, line);
    let title = "Compact up to here (a summary replaces this message and those before it; the ones after stay)";
    let accepted = pick(&mut client, &actions, title);
    assert_eq!(accepted, json!({"started": true}));
    // Typed while the summary is written.
    let end = client.text(&uri).len();
    client.type_at(&uri, end, "and four");
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    pump_until(&mut client, &uri, "the summary in the buffer", |t| {
        t.contains("the answer was first.")
    });
    let text = client.text(&uri).to_owned();
    assert!(
        text.starts_with(&format!(
            "{FRONTMATTER}@You:\n<!-- flemma:compacted archive="
        )),
        "{text}"
    );
    assert!(
        text.ends_with("@You:\ntwo\n\n@Assistant:\nsecond\n\n@You:\nthree\nand four"),
        "{text}"
    );
    assert!(!text.contains("\nfirst\n"), "{text}");
    let summary_request = &mock.provider().requests()[0].raw_body;
    assert!(summary_request.contains("first") && !summary_request.contains("second"));
    assert_eq!(
        common::read(&chat.path),
        original,
        "the editor owns the document"
    );

    // "Undo this compaction" on the summary: the original bytes come back into the buffer as
    // an edit, with what was typed before and after the compaction.
    let typed = client.text(&uri).len();
    client.type_at(&uri, typed, " and five");
    let undo = "Undo this compaction (the turns it replaced come back, exactly as they were)";
    let marker_line = FRONTMATTER.lines().count() + 1;
    let actions = actions_at(&mut client, &uri, marker_line);
    assert_eq!(pick(&mut client, &actions, undo), json!({"started": true}));
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    pump_until(&mut client, &uri, "the turns in the buffer", |t| {
        t.contains("\nfirst\n")
    });
    assert_eq!(
        client.text(&uri),
        format!("{original}and four and five"),
        "the original bytes and what was typed"
    );
    assert_eq!(common::read(&chat.path), original);
    // The buffer may still be thrown away: the archive is kept until the file holds the turns.
    let archive = text
        .split("archive=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert!(Path::new(&archive).exists(), "{archive}");

    // No summary there now: refused at once, saying why, and nothing changes.
    let refused =
        command(&mut client, "flemma.compactUndo", json!([uri, marker_line])).unwrap_err();
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("is not in a compaction summary")),
        "{refused}"
    );
    // A summary whose archive changed since it was written is refused the same way.
    let end = client.text(&uri).len();
    client.replace(&uri, 0, end, &text);
    std::fs::write(&archive, "@You:\n(approved) tampered\n").unwrap();
    let refused = command(&mut client, "flemma.compactUndo", json!([uri])).unwrap_err();
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("changed since it was written; nothing was changed")),
        "{refused}"
    );
    assert_eq!(client.text(&uri), text);
    client.shutdown();
}

/// Typing in the turns being compacted while the summary is written (issue 34): the document
/// session's rule holds — nothing typed is lost — so the compaction is refused with a notice
/// saying why, and the buffer keeps what was typed. (Before `Input::Sync` the driver checked
/// the turns against an engine text that had not read the buffer since: the summary was
/// written over the typing.)
#[test]
fn typing_in_the_turns_being_compacted_refuses_the_compaction_and_keeps_the_typing() {
    let mock = Mock::start();
    // The summary pauses on its way: the user types meanwhile.
    mock.provider().push(Turn::text("A summary.").stall(1500));
    let original = format!(
        "{FRONTMATTER}@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n@Assistant:\nsecond\n\n@You:\nthree\n"
    );
    let chat = common::chat(&original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    let line = original[..original.find("first").unwrap()].lines().count();
    let actions = actions_at(&mut client, &uri, line);
    let title = "Compact up to here (a summary replaces this message and those before it; the ones after stay)";
    assert_eq!(pick(&mut client, &actions, title), json!({"started": true}));
    // Typed into the answer the summary replaces, once the summary is asked for (the turns it
    // reads are the ones without the typing).
    let asked = Instant::now() + Duration::from_secs(20);
    while mock.provider().requests().is_empty() {
        assert!(Instant::now() < asked, "the summary was never asked for");
        client.pump(Duration::from_millis(20));
    }
    let at = client.text(&uri).find("first").unwrap() + "first".len();
    client.type_at(&uri, at, ", then more");
    let notice = client.wait_notification("window/showMessage", |params| {
        params["message"]
            .as_str()
            .is_some_and(|m| m.contains("compaction"))
    });
    assert_eq!(
        notice["message"],
        "flemma: compaction: the chat changed while its summary was written; the chat is unchanged",
        "{notice}"
    );
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    assert_eq!(
        client.text(&uri),
        original.replace("first", "first, then more"),
        "what was typed stays and nothing was compacted"
    );
    assert_eq!(
        mock.provider().requests().len(),
        1,
        "the summary was asked for"
    );
    client.shutdown();
}

/// Review before approval in an editor (issue 35): a pending `write` has a "Review changes"
/// code action whose command answers the proposal (the file now and after, its hunks); the
/// proposal edited and saved back (`flemma.reviseProposal`) rewrites the call's input in the
/// buffer, nothing else; `flemma.approveHunks` applies one hunk of it, and the result the model
/// reads names the other and the reason.
#[test]
fn a_proposal_is_reviewed_revised_and_approved_in_part_through_the_editor() {
    const BEFORE: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
    let mock = Mock::start();
    let after = BEFORE
        .replace("1\n2\n", "one\n2\n")
        .replace("12\n", "twelve\n");
    mock.provider().push(Turn::default().tool_call_with_id(
        "write",
        "toolu_w1",
        json!({"label": "words", "path": "notes.md", "content": after}),
    ));
    mock.provider().push(Turn::text("Understood."));
    let original = format!("{FRONTMATTER}@You:\nnumber them in words\n");
    let chat = common::chat(&original);
    // `write` waits for approval.
    common::write_user_config(&chat, "[tools]\nauto_approve = [\"read\"]\n");
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("notes.md"), BEFORE).unwrap();
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, &original);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    let stopped = wait_stopped(&mut client, Duration::from_secs(30));
    assert_eq!(stopped["reason"], "awaiting-approval", "{stopped}");
    pump_until(&mut client, &uri, "the placeholder", |t| {
        t.contains("`toolu_w1` (pending)")
    });
    // The code action, on the placeholder.
    let line = client
        .text(&uri)
        .lines()
        .position(|l| l.contains("`toolu_w1` (pending)"))
        .unwrap();
    let actions = actions_at(&mut client, &uri, line);
    let review = actions
        .iter()
        .find(|c| c["command"] == "flemma.proposal")
        .unwrap_or_else(|| panic!("no review action in {actions:?}"))
        .clone();
    assert_eq!(review["arguments"], json!([uri, "toolu_w1"]));
    let proposal = command(&mut client, "flemma.proposal", review["arguments"].clone()).unwrap();
    assert_eq!(proposal["tool"], "write", "{proposal}");
    assert_eq!(proposal["before"], BEFORE, "{proposal}");
    assert_eq!(proposal["after"], after.as_str(), "{proposal}");
    assert_eq!(proposal["hunks"].as_array().unwrap().len(), 2, "{proposal}");
    assert_eq!(
        proposal["hunks"][1]["header"], "@@ -9,4 +9,4 @@",
        "{proposal}"
    );
    // Edited as a document and saved back: the call's input in the buffer changes.
    let revised = BEFORE
        .replace("1\n2\n", "ONE\n2\n")
        .replace("12\n", "TWELVE\n");
    let answer = command(
        &mut client,
        "flemma.reviseProposal",
        json!([uri, "toolu_w1", revised]),
    )
    .unwrap();
    assert_eq!(answer["toolIds"], json!(["toolu_w1"]), "{answer}");
    pump_until(&mut client, &uri, "the revised input", |t| {
        t.contains(r#""content": "ONE\n2\n3"#)
    });
    wait_stopped(&mut client, Duration::from_secs(30));
    assert!(
        client.text(&uri).contains("`toolu_w1` (pending)"),
        "{}",
        client.text(&uri)
    );
    assert_eq!(common::read(&dir.join("notes.md")), BEFORE);
    // A hunk that does not exist is refused, and nothing is decided.
    let error = command(
        &mut client,
        "flemma.approveHunks",
        json!([uri, "toolu_w1", [3]]),
    )
    .unwrap_err();
    assert!(
        error["message"].as_str().unwrap().contains("no hunk 3"),
        "{error}"
    );
    let approved = command(
        &mut client,
        "flemma.approveHunks",
        json!([uri, "toolu_w1", [2], "keep the digit"]),
    )
    .unwrap();
    assert_eq!(approved["toolIds"], json!(["toolu_w1"]), "{approved}");
    pump_until(&mut client, &uri, "the final reply", |t| {
        t.contains("Understood.")
    });
    assert_eq!(
        common::read(&dir.join("notes.md")),
        BEFORE.replace("12\n", "TWELVE\n")
    );
    let note = "hunk 2 of 2 applied; hunk 1 rejected and not applied (the file does not have them). User feedback: keep the digit";
    assert!(client.text(&uri).contains(note), "{}", client.text(&uri));
    let requests = mock.provider().requests();
    assert!(
        requests
            .last()
            .unwrap()
            .raw_body
            .contains("User feedback: keep the digit"),
        "the model was told"
    );
    client.shutdown();
}

/// The main loop waits for no evaluation (issue 28, item 2): `flemma/switch` resolves the
/// chat's configuration, evaluating its templates (here each message runs to its time budget),
/// which once ran on the language server's main loop, so that a `flemma/status` sent after it
/// was answered only once the switch was. Now the switch is answered off the main loop.
#[test]
fn a_switch_evaluating_slow_templates_holds_up_no_other_request() {
    let mock = Mock::start();
    let slow: String = (0..12)
        .map(|i| {
            format!(
                "@You:\nturn {i} {{% let n = 0; while true {{ n += 1; }} %}}\n\n@Assistant:\nok\n\n"
            )
        })
        .collect();
    let chat = common::chat(&format!("{FRONTMATTER}{slow}@You:\nhi\n"));
    let mut client = start(Flavor::Helix, &mock, &chat);
    let uri = uri_of(&chat.path);
    let started = Instant::now();
    let switch = client.request_later(
        "flemma/switch",
        json!({"uri": uri, "model": "anthropic/claude-opus-4-1"}),
    );
    let status = client.request("flemma/status", json!({"uri": uri}));
    let status_took = started.elapsed();
    assert_eq!(status.unwrap()["state"], "idle");
    assert!(
        !client.answered(switch),
        "flemma/status ({status_took:?}) was answered after the switch it was sent behind"
    );
    let switched = client.answer(switch, "flemma/switch").unwrap();
    let switch_took = started.elapsed();
    assert_eq!(
        switched["switched"]["model"], "claude-opus-4-1",
        "{switched}"
    );
    assert!(
        switch_took > status_took,
        "the switch ({switch_took:?}) took longer than the status ({status_took:?})"
    );
}

/// Issue 28: a driver's notice (here a request's warning: the thinking budget lowered below
/// `max_tokens`) reaches an editor once, as a message — not also as a `flemma/event` (the
/// `engine:notice` the daemon's subscribers and `flemmad send` get).
#[test]
fn a_drivers_notice_is_shown_once_in_an_editor() {
    let mock = Mock::start();
    mock.provider().push(Turn::text("Thought."));
    let original = "```json\n{\"flemma\": {\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\", \"thinking\": \"high\", \"max_tokens\": 4096}}\n```\n@You:\nThink.\n";
    let chat = common::chat(original);
    let uri = uri_of(&chat.path);
    let mut client = start(Flavor::Helix, &mock, &chat);
    client.open(&uri, original);
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let stopped = |seen: &[Value]| {
        seen.iter().any(|n: &Value| {
            n["method"] == "flemma/event" && n["params"]["name"] == "engine:stopped"
        })
    };
    while !stopped(&seen) {
        assert!(Instant::now() < deadline, "the engine did not stop in time");
        client.pump(Duration::from_millis(50));
        seen.extend(client.notifications.drain(..));
    }
    // What may still come after the stop.
    client.pump(Duration::from_millis(300));
    seen.extend(client.notifications.drain(..));
    let shown: Vec<&Value> = seen
        .iter()
        .filter(|n| n["method"] == "window/showMessage")
        .filter(|n| {
            n["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("thinking budget"))
        })
        .collect();
    assert_eq!(
        shown.len(),
        1,
        "the notice, once: {:?}",
        seen.iter()
            .filter(|n| n["method"] == "window/showMessage")
            .collect::<Vec<_>>()
    );
    assert_eq!(
        shown[0]["params"]["message"],
        "flemma: warning: thinking budget 8192 lowered to 4095 to stay below max_tokens 4096"
    );
    let names: Vec<&Value> = seen
        .iter()
        .filter(|n| n["method"] == "flemma/event")
        .map(|n| &n["params"]["name"])
        .collect();
    assert!(
        !names.iter().any(|name| *name == "engine:notice"),
        "{names:?}"
    );
    client.shutdown();
}
