//! A scripted LSP client driving `flemmad lsp` over stdio, with the capabilities and habits of
//! Helix or VS Code (`/work/shared/reference/editors.md`):
//!
//! * Helix: offers utf-8 (and utf-16), `failureHandling: abort`, no code lens; applies a
//!   versioned edit only at the current version and sends `didChange` **before** answering
//!   `{applied: true}`; a stale edit gets `{applied: false, failureReason: "document has
//!   changed"}`.
//! * VS Code: utf-16 only; refuses a stale version with a bare `{applied: false}`; answers the
//!   edit before its `didChange`.
//!
//! The client keeps its own buffer and converts positions itself (not with flemma-syntax), so
//! a conversion bug in the server shows as a corrupted buffer.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Helix,
    VsCode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    Utf8,
    Utf16,
}

#[derive(Debug, Clone)]
pub struct Buffer {
    pub text: String,
    pub version: i32,
}

pub struct Client {
    pub flavor: Flavor,
    pub units: Units,
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
    pub buffers: HashMap<String, Buffer>,
    /// Notifications received and not yet taken.
    pub notifications: VecDeque<Value>,
    /// Answers to our requests, by id.
    responses: HashMap<i64, Value>,
    /// Edits the server asked for (kept for assertions).
    pub apply_edits_seen: usize,
    pub apply_edits_refused: usize,
    /// The progress tokens the server created (`window/workDoneProgress/create`).
    pub progress_tokens: Vec<Value>,
    /// Typed into the buffer just before the next applyEdit is checked (the user was faster):
    /// `(uri, byte offset — clamped to a char boundary then, text)`.
    pub type_before_next_apply: Option<(String, usize, String)>,
    /// `textDocument` capabilities added to the flavor's before `initialize` (what another
    /// client would offer, e.g. Neovim's `foldingRange.collapsedText`).
    pub extra_text_document_capabilities: Value,
    /// The `window/showMessageRequest`s the server sent, and the action the client answers
    /// them with (by title; `None`: dismissed).
    pub messages_asked: Vec<Value>,
    pub message_answer: Option<String>,
    _state: tempfile::TempDir,
}

pub fn binary() -> String {
    env!("CARGO_BIN_EXE_flemmad").to_owned()
}

impl Client {
    pub fn start(flavor: Flavor, extra_args: &[&str]) -> Self {
        Self::start_with_env(flavor, extra_args, &[])
    }

    /// Like [`Client::start`], with more environment (providers pointed at a mock, a config
    /// home).
    pub fn start_with_env(flavor: Flavor, extra_args: &[&str], env: &[(&str, String)]) -> Self {
        let state = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary())
            .arg("lsp")
            .arg("--stdio")
            .args(extra_args)
            .env("XDG_STATE_HOME", state.path())
            .env("XDG_CACHE_HOME", state.path().join("cache"))
            // A daemon running on this machine must not answer for the server under test
            // (unless `env` names the runtime directory of one the test started).
            .env("XDG_RUNTIME_DIR", state.path())
            .env("RUST_LOG", "debug")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length: ") {
                        length = v.parse::<usize>().ok();
                    }
                }
                let mut body = vec![0; length.unwrap()];
                reader.read_exact(&mut body).unwrap();
                if tx.send(serde_json::from_slice(&body).unwrap()).is_err() {
                    return;
                }
            }
        });
        let units = match flavor {
            Flavor::Helix => Units::Utf8,
            Flavor::VsCode => Units::Utf16,
        };
        Self {
            flavor,
            units,
            child,
            stdin,
            incoming: rx,
            next_id: 1,
            buffers: HashMap::new(),
            notifications: VecDeque::new(),
            responses: HashMap::new(),
            apply_edits_seen: 0,
            apply_edits_refused: 0,
            progress_tokens: Vec::new(),
            type_before_next_apply: None,
            extra_text_document_capabilities: Value::Null,
            messages_asked: Vec::new(),
            message_answer: None,
            _state: state,
        }
    }

    pub fn capabilities(&self) -> Value {
        let mut capabilities = self.flavor_capabilities();
        if let (Some(extra), Some(text)) = (
            self.extra_text_document_capabilities.as_object(),
            capabilities["textDocument"].as_object_mut(),
        ) {
            text.extend(extra.clone());
        }
        capabilities
    }

    fn flavor_capabilities(&self) -> Value {
        match self.flavor {
            Flavor::Helix => json!({
                "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]},
                "workspace": {
                    "applyEdit": true,
                    "executeCommand": {"dynamicRegistration": false},
                    "workspaceEdit": {
                        "documentChanges": true, "failureHandling": "abort",
                        "normalizesLineEndings": false,
                        "resourceOperations": ["create", "rename", "delete"]
                    }
                },
                "textDocument": {
                    "hover": {"contentFormat": ["markdown"]},
                    "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}},
                    "publishDiagnostics": {"versionSupport": true}
                },
                "window": {"workDoneProgress": true}
            }),
            Flavor::VsCode => json!({
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {
                    "applyEdit": true,
                    "workspaceEdit": {
                        "documentChanges": true, "failureHandling": "textOnlyTransactional",
                        "normalizesLineEndings": true, "changeAnnotationSupport": {}
                    }
                },
                "textDocument": {
                    "hover": {"contentFormat": ["markdown", "plaintext"]},
                    "codeLens": {},
                    "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}}
                }
            }),
        }
    }

    /// `initialize` + `initialized`; returns the result and how long the answer took.
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn initialize(&mut self, root: &std::path::Path) -> (Value, Duration) {
        self.initialize_with_options(root, Value::Null)
    }

    /// `initialize` with `initializationOptions` (the editor's flemmad settings), then
    /// `initialized`.
    pub fn initialize_with_options(
        &mut self,
        root: &std::path::Path,
        options: Value,
    ) -> (Value, Duration) {
        let started = Instant::now();
        let client_info = match self.flavor {
            Flavor::Helix => json!({"name": "helix", "version": "25.07.1"}),
            Flavor::VsCode => json!({"name": "Visual Studio Code", "version": "1.100.0"}),
        };
        let result = self.request(
            "initialize",
            json!({
                "processId": null,
                "clientInfo": client_info,
                "rootUri": null,
                "rootPath": root.to_str().unwrap(),
                "workspaceFolders": [],
                "capabilities": self.capabilities(),
                "initializationOptions": options,
            }),
        );
        let elapsed = started.elapsed();
        self.notify("initialized", json!({}));
        (result.unwrap(), elapsed)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        let body = serde_json::to_vec(&message).unwrap();
        let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        framed.extend(body);
        self.send_raw(&framed);
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and pumps until its answer: `Ok(result)` or `Err(error)`.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.request_later(method, params);
        self.answer(id, method)
    }

    /// Sends a request without waiting for its answer: its id, for [`Client::answer`].
    pub fn request_later(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Whether request `id` has been answered (by what was handled so far).
    pub fn answered(&self, id: i64) -> bool {
        self.responses.contains_key(&id)
    }

    /// Pumps until request `id` (of `method`) is answered: `Ok(result)` or `Err(error)`.
    pub fn answer(&mut self, id: i64, method: &str) -> Result<Value, Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(response) = self.responses.remove(&id) {
                return match response.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(response.get("result").cloned().unwrap_or(Value::Null)),
                };
            }
            assert!(Instant::now() < deadline, "no answer to {method}");
            self.pump(Duration::from_millis(100));
        }
    }

    /// Handles whatever arrives within `wait`; returns whether something arrived.
    pub fn pump(&mut self, wait: Duration) -> bool {
        let message = match self.incoming.recv_timeout(wait) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => return false,
            Err(RecvTimeoutError::Disconnected) => panic!("flemmad closed its stdout"),
        };
        self.handle(message);
        while let Ok(message) = self.incoming.try_recv() {
            self.handle(message);
        }
        true
    }

    /// The next message as received (no handling), for transport-level tests.
    pub fn next_raw(&mut self, wait: Duration) -> Option<Value> {
        self.incoming.recv_timeout(wait).ok()
    }

    fn handle(&mut self, message: Value) {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (method, message.get("id")) {
            (Some(method), Some(id)) => {
                self.on_server_request(&method, id.clone(), &message["params"])
            }
            (Some(_), None) => self.notifications.push_back(message),
            (None, Some(id)) => {
                let id = id.as_i64().unwrap_or(-1);
                self.responses.insert(id, message);
            }
            (None, None) => panic!("a message with neither method nor id: {message}"),
        }
    }

    fn on_server_request(&mut self, method: &str, id: Value, params: &Value) {
        match method {
            "workspace/applyEdit" => self.on_apply_edit(id, params),
            "window/workDoneProgress/create" => {
                self.progress_tokens.push(params["token"].clone());
                self.send(json!({"jsonrpc": "2.0", "id": id, "result": null}))
            }
            "window/showMessageRequest" => {
                self.messages_asked.push(params.clone());
                let answer = match &self.message_answer {
                    Some(title) => json!({"title": title}),
                    None => Value::Null,
                };
                self.send(json!({"jsonrpc": "2.0", "id": id, "result": answer}))
            }
            _ => self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method {method} not found")}})),
        }
    }

    fn on_apply_edit(&mut self, id: Value, params: &Value) {
        self.apply_edits_seen += 1;
        if let Some((uri, offset, text)) = self.type_before_next_apply.take() {
            let buffer = &self.buffers[&uri].text;
            let mut offset = offset.min(buffer.len());
            while !buffer.is_char_boundary(offset) {
                offset -= 1;
            }
            self.type_at(&uri, offset, &text);
        }
        let change = &params["edit"]["documentChanges"][0];
        let uri = change["textDocument"]["uri"].as_str().unwrap().to_owned();
        let version = change["textDocument"]["version"].as_i64();
        let buffer = self
            .buffers
            .get(&uri)
            .expect("an edit for a document we have not opened")
            .clone();
        if version != Some(buffer.version as i64) {
            self.apply_edits_refused += 1;
            let answer = match self.flavor {
                Flavor::Helix => {
                    json!({"applied": false, "failedChange": 0, "failureReason": "document has changed"})
                }
                Flavor::VsCode => json!({"applied": false}),
            };
            self.send(json!({"jsonrpc": "2.0", "id": id, "result": answer}));
            return;
        }
        // LSP: every edit of one TextDocumentEdit refers to the text before any of them.
        let mut edits: Vec<(usize, usize, String)> = change["edits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let start = offset_of(&buffer.text, &e["range"]["start"], self.units);
                let end = offset_of(&buffer.text, &e["range"]["end"], self.units);
                (start, end, e["newText"].as_str().unwrap().to_owned())
            })
            .collect();
        edits.sort_by_key(|e| std::cmp::Reverse(e.0));
        let mut text = buffer.text.clone();
        let mut changes = Vec::new();
        for (start, end, new_text) in &edits {
            // Reported as separate changes, last first, so each range holds in sequence.
            changes.push(
                json!({"range": range_json(&text, *start, *end, self.units), "text": new_text}),
            );
            text.replace_range(*start..*end, new_text);
        }
        let version = buffer.version + 1;
        self.buffers.insert(uri.clone(), Buffer { text, version });
        let did_change =
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": changes});
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"applied": true}});
        match self.flavor {
            Flavor::Helix => {
                self.notify("textDocument/didChange", did_change);
                self.send(answer);
            }
            Flavor::VsCode => {
                self.send(answer);
                self.notify("textDocument/didChange", did_change);
            }
        }
    }

    pub fn open(&mut self, uri: &str, text: &str) {
        self.buffers.insert(
            uri.to_owned(),
            Buffer {
                text: text.to_owned(),
                version: 0,
            },
        );
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "chat", "version": 0, "text": text}}),
        );
    }

    /// The user replaces `start..end` (bytes) with `text`; sends an incremental didChange.
    pub fn replace(&mut self, uri: &str, start: usize, end: usize, text: &str) {
        let buffer = self.buffers.get_mut(uri).unwrap();
        let range = range_json(&buffer.text, start, end, self.units);
        buffer.text.replace_range(start..end, text);
        buffer.version += 1;
        let version = buffer.version;
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"range": range, "text": text}]}),
        );
    }

    pub fn type_at(&mut self, uri: &str, offset: usize, text: &str) {
        self.replace(uri, offset, offset, text);
    }

    pub fn text(&self, uri: &str) -> &str {
        &self.buffers[uri].text
    }

    /// A position (in the client's units) of a byte offset in the buffer.
    pub fn position(&self, uri: &str, offset: usize) -> Value {
        position_json(&self.buffers[uri].text, offset, self.units)
    }

    /// Waits for a notification with this method (and matching `pred`), consuming earlier ones.
    pub fn wait_notification(&mut self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            while let Some(n) = self.notifications.pop_front() {
                if n["method"] == method && pred(&n["params"]) {
                    return n["params"].clone();
                }
            }
            assert!(Instant::now() < deadline, "no {method} notification");
            self.pump(Duration::from_millis(100));
        }
    }

    /// `shutdown` + `exit`; returns the exit status.
    pub fn shutdown(mut self) -> std::process::ExitStatus {
        self.request("shutdown", Value::Null).unwrap();
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "flemmad did not exit after `exit`"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn units_of(c: char, units: Units) -> usize {
    match units {
        Units::Utf8 => c.len_utf8(),
        Units::Utf16 => c.len_utf16(),
    }
}

pub fn position_json(text: &str, offset: usize, units: Units) -> Value {
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character: usize = text[line_start..offset]
        .chars()
        .map(|c| units_of(c, units))
        .sum();
    json!({"line": line, "character": character})
}

fn range_json(text: &str, start: usize, end: usize, units: Units) -> Value {
    json!({"start": position_json(text, start, units), "end": position_json(text, end, units)})
}

pub fn offset_of(text: &str, position: &Value, units: Units) -> usize {
    let line = position["line"].as_u64().unwrap() as usize;
    let character = position["character"].as_u64().unwrap() as usize;
    let mut start = 0;
    for _ in 0..line {
        start += text[start..]
            .find('\n')
            .map_or(text.len() - start, |i| i + 1);
    }
    let mut count = 0;
    for (i, c) in text[start..].char_indices() {
        if count >= character || c == '\n' {
            return start + i;
        }
        count += units_of(c, units);
    }
    text.len()
}
