//! One language server process spoken to over stdio, framed by `lsp-server`'s messages (the
//! same reader and writer as flemmad's own language server): a reader thread files the
//! server's answers and diagnostics, answers its requests, and a stderr thread copies its log
//! lines to ours. Blocking calls with a timeout; dropping the
//! client shuts the server down (`shutdown`, `exit`, then the process).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lsp_server::{Message, Notification, Request, RequestId, Response};
use serde_json::{Value, json};

use super::text::{self, Encoding};
use crate::context::Cancel;

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("cannot start `{command}`: {reason}")]
    Start { command: String, reason: String },
    #[error("{method} timed out after {}s", seconds.as_secs())]
    Timeout { method: String, seconds: Duration },
    #[error("cancelled")]
    Cancelled,
    #[error("the server exited{}; it is started again on the next call", if last_words.is_empty() { String::new() } else { format!(" saying: {last_words}") })]
    Exited { last_words: String },
    /// The server answered with an error (the action's name is added by the caller).
    #[error("{message}")]
    Server { method: String, message: String },
    #[error("cannot write to the server: {0}")]
    Write(String),
}

/// What the last `publishDiagnostics` for one file said.
#[derive(Debug, Clone)]
pub struct Published {
    /// The global publication counter when it arrived.
    pub sequence: u64,
    pub diagnostics: Vec<lsp_types::Diagnostic>,
}

#[derive(Debug, Default)]
struct Inbox {
    responses: HashMap<RequestId, Result<Value, String>>,
    diagnostics: HashMap<PathBuf, Published>,
    publications: u64,
    closed: bool,
    /// The server's first and last non-empty stderr lines (for the message when it exits).
    stderr_head: Vec<String>,
    stderr_tail: std::collections::VecDeque<String>,
}

/// How many stderr lines are kept at each end for the exit message.
const STDERR_KEPT: usize = 2;

#[derive(Debug, Default)]
struct Shared {
    inbox: Mutex<Inbox>,
    arrived: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A document the server has open: its version and the text it was last told.
#[derive(Debug)]
struct OpenDocument {
    version: i32,
    text: String,
}

/// A started and initialized language server.
#[derive(Debug)]
pub struct Client {
    /// The program name (`rust-analyzer`), for messages.
    pub name: String,
    child: Mutex<Child>,
    stdin: Arc<Mutex<ChildStdin>>,
    shared: Arc<Shared>,
    next_id: AtomicI32,
    pub encoding: Encoding,
    pub capabilities: Value,
    open: Mutex<HashMap<PathBuf, OpenDocument>>,
    /// Whether `initialize` was answered (only then is `shutdown` worth asking for).
    initialized: bool,
}

fn write_message(stdin: &Mutex<ChildStdin>, message: Message) -> Result<(), ClientError> {
    let mut stdin = stdin.lock().unwrap_or_else(|p| p.into_inner());
    message
        .write(&mut *stdin)
        .map_err(|e| ClientError::Write(e.to_string()))
}

fn reader_loop(
    name: String,
    stdout: impl Read,
    stdin: Arc<Mutex<ChildStdin>>,
    shared: Arc<Shared>,
) {
    let mut reader = BufReader::new(stdout);
    // A frame that is not a JSON-RPC message ends the conversation as the end of the stream
    // does.
    while let Ok(Some(message)) = Message::read(&mut reader) {
        match message {
            Message::Response(response) => {
                let answer = response.response_result.map_err(|error| error.message);
                shared.lock().responses.insert(response.id, answer);
                shared.arrived.notify_all();
            }
            Message::Request(request) => {
                // The server asks: configuration gets one `null` per item, the rest `null`.
                let result = match request.method.as_str() {
                    "workspace/configuration" => {
                        let items = request.params["items"].as_array().map_or(0, Vec::len);
                        Value::Array(vec![Value::Null; items])
                    }
                    _ => Value::Null,
                };
                let answer = Response {
                    id: request.id,
                    response_result: Ok(result),
                };
                let _ = write_message(&stdin, Message::Response(answer));
            }
            Message::Notification(notification) => match notification.method.as_str() {
                "textDocument/publishDiagnostics" => {
                    let params = &notification.params;
                    let Some(path) = params["uri"].as_str().and_then(text::uri_to_path) else {
                        continue;
                    };
                    let diagnostics: Vec<lsp_types::Diagnostic> =
                        serde_json::from_value(params["diagnostics"].clone()).unwrap_or_default();
                    let mut inbox = shared.lock();
                    inbox.publications += 1;
                    let sequence = inbox.publications;
                    inbox.diagnostics.insert(
                        path,
                        Published {
                            sequence,
                            diagnostics,
                        },
                    );
                    drop(inbox);
                    shared.arrived.notify_all();
                }
                "window/logMessage" | "window/showMessage" => {
                    let text = notification.params["message"].as_str().unwrap_or("");
                    tracing::debug!(server = %name, "{text}");
                }
                _ => {}
            },
        }
    }
    shared.lock().closed = true;
    shared.arrived.notify_all();
}

impl Client {
    /// Starts `command`, initializes it with `root` as the workspace and waits for its answer
    /// (at most `timeout`). The process itself starts in [`crate::launch::NEUTRAL_DIR`], its
    /// program found on `PATH`'s absolute entries: the project is the server's workspace,
    /// never the place its code comes from.
    pub fn start(
        command: &[String],
        root: &Path,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<Self, ClientError> {
        let shown = command.join(" ");
        let (program, args) = command.split_first().ok_or_else(|| ClientError::Start {
            command: shown.clone(),
            reason: "the command line is empty".into(),
        })?;
        let name = Path::new(program)
            .file_name()
            .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
        let neutral = Path::new(crate::launch::NEUTRAL_DIR);
        let search_path = std::env::var_os("PATH").unwrap_or_default();
        let executable = crate::launch::find_program(program, Some(&search_path), neutral)
            .ok_or_else(|| ClientError::Start {
                command: shown.clone(),
                reason: crate::launch::not_found(program, neutral),
            })?;
        let mut child = Command::new(executable)
            .args(args)
            .current_dir(neutral)
            .env_clear()
            .envs(crate::process::tool_environment())
            .env("PATH", crate::launch::absolute_entries(&search_path))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ClientError::Start {
                command: shown.clone(),
                reason: e.to_string(),
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            return Err(ClientError::Start {
                command: shown,
                reason: "its standard streams could not be opened".into(),
            });
        };
        let stdin = Arc::new(Mutex::new(stdin));
        let shared = Arc::new(Shared::default());
        {
            let (name, stdin, shared) = (name.clone(), stdin.clone(), shared.clone());
            std::thread::spawn(move || reader_loop(name, stdout, stdin, shared));
        }
        {
            let (name, shared) = (name.clone(), shared.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    tracing::debug!(server = %name, "stderr: {line}");
                    let line = line.trim().to_owned();
                    if line.is_empty() {
                        continue;
                    }
                    let mut inbox = shared.lock();
                    if inbox.stderr_head.len() < STDERR_KEPT {
                        inbox.stderr_head.push(line);
                        continue;
                    }
                    if inbox.stderr_tail.len() == STDERR_KEPT {
                        inbox.stderr_tail.pop_front();
                    }
                    inbox.stderr_tail.push_back(line);
                }
            });
        }
        let mut client = Client {
            name,
            child: Mutex::new(child),
            stdin,
            shared,
            next_id: AtomicI32::new(1),
            encoding: Encoding::Utf16,
            capabilities: Value::Null,
            open: Mutex::new(HashMap::new()),
            initialized: false,
        };
        let root_uri = text::path_to_uri(root);
        let folder = root
            .file_name()
            .map_or_else(|| "root".to_owned(), |n| n.to_string_lossy().into_owned());
        let result = client.request(
            "initialize",
            json!({
                "processId": std::process::id(),
                "clientInfo": {"name": "flemmad", "version": env!("CARGO_PKG_VERSION")},
                "rootUri": root_uri,
                "rootPath": root.display().to_string(),
                "workspaceFolders": [{"uri": root_uri, "name": folder}],
                "capabilities": {
                    "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]},
                    "textDocument": {
                        "synchronization": {"didSave": false},
                        "hover": {"contentFormat": ["markdown", "plaintext"]},
                        "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                        "publishDiagnostics": {"relatedInformation": false},
                        "rename": {"prepareSupport": false},
                        "definition": {"linkSupport": true},
                    },
                    "workspace": {"workspaceEdit": {"documentChanges": true}, "configuration": true},
                },
            }),
            timeout,
            cancel,
        )?;
        client.initialized = true;
        client.capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
        client.encoding = Encoding::from_kind(client.capabilities["positionEncoding"].as_str());
        client.notify("initialized", json!({}))?;
        Ok(client)
    }

    /// Whether the server process is gone (it is started again on the next call).
    pub fn exited(&self) -> bool {
        if self.shared.lock().closed {
            return true;
        }
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        !matches!(child.try_wait(), Ok(None))
    }

    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        let notification = Notification {
            method: method.to_owned(),
            params,
        };
        write_message(&self.stdin, Message::Notification(notification))
            .map_err(|error| self.explain_write(error))
    }

    /// A failed write is the server's exit when its output has closed (waiting briefly).
    fn explain_write(&self, error: ClientError) -> ClientError {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if self.shared.lock().closed {
                return self.exited_error();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        error
    }

    /// "The server exited", with the first and last lines it wrote to stderr.
    fn exited_error(&self) -> ClientError {
        // Its stderr may still be draining.
        std::thread::sleep(Duration::from_millis(50));
        let inbox = self.shared.lock();
        let mut last_words = inbox.stderr_head.join(" / ");
        if !inbox.stderr_tail.is_empty() {
            let tail: Vec<&str> = inbox.stderr_tail.iter().map(String::as_str).collect();
            last_words = format!("{last_words} / … / {}", tail.join(" / "));
        }
        ClientError::Exited { last_words }
    }

    /// Sends a request and waits for its answer.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<Value, ClientError> {
        let id = RequestId::from(self.next_id.fetch_add(1, Ordering::SeqCst));
        let request = Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        };
        write_message(&self.stdin, Message::Request(request))
            .map_err(|error| self.explain_write(error))?;
        let deadline = Instant::now() + timeout;
        let mut inbox = self.shared.lock();
        loop {
            if let Some(answer) = inbox.responses.remove(&id) {
                return answer.map_err(|message| ClientError::Server {
                    method: method.to_owned(),
                    message,
                });
            }
            if inbox.closed {
                drop(inbox);
                return Err(self.exited_error());
            }
            let now = Instant::now();
            if now >= deadline || cancel.is_cancelled() {
                drop(inbox);
                let _ = self.notify("$/cancelRequest", json!({"id": id}));
                return Err(if cancel.is_cancelled() {
                    ClientError::Cancelled
                } else {
                    ClientError::Timeout {
                        method: method.to_owned(),
                        seconds: timeout,
                    }
                });
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            inbox = self
                .shared
                .arrived
                .wait_timeout(inbox, wait)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Tells the server the current `text` of `path`: `didOpen` the first time, a whole
    /// `didChange` when it moved. Returns whether anything was sent.
    pub fn sync(&self, path: &Path, text: &str, language: &str) -> Result<bool, ClientError> {
        let uri = text::path_to_uri(path);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        match open.get_mut(path) {
            Some(document) if document.text == text => Ok(false),
            Some(document) => {
                document.version += 1;
                document.text = text.to_owned();
                self.notify(
                    "textDocument/didChange",
                    json!({
                        "textDocument": {"uri": uri, "version": document.version},
                        "contentChanges": [{"text": text}],
                    }),
                )?;
                Ok(true)
            }
            None => {
                self.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}}),
                )?;
                open.insert(
                    path.to_path_buf(),
                    OpenDocument {
                        version: 1,
                        text: text.to_owned(),
                    },
                );
                Ok(true)
            }
        }
    }

    /// The publication counter now (to wait for one newer).
    pub fn publications(&self) -> u64 {
        self.shared.lock().publications
    }

    /// The last publication for `path`.
    pub fn published(&self, path: &Path) -> Option<Published> {
        self.shared.lock().diagnostics.get(path).cloned()
    }

    /// Waits up to `timeout` for a publication for `path` newer than `after`.
    pub fn wait_for_diagnostics(
        &self,
        path: &Path,
        after: u64,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Option<Published> {
        let deadline = Instant::now() + timeout;
        let mut inbox = self.shared.lock();
        loop {
            if let Some(published) = inbox.diagnostics.get(path)
                && published.sequence > after
            {
                return Some(published.clone());
            }
            let now = Instant::now();
            if inbox.closed || now >= deadline || cancel.is_cancelled() {
                return None;
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            inbox = self
                .shared
                .arrived
                .wait_timeout(inbox, wait)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let cancel = Cancel::new();
        if self.initialized && !self.shared.lock().closed {
            let _ = self.request("shutdown", Value::Null, Duration::from_secs(2), &cancel);
            let _ = self.notify("exit", Value::Null);
        }
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let grace = if self.initialized { 2000 } else { 0 };
        let deadline = Instant::now() + Duration::from_millis(grace);
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.initialized {
            tracing::warn!(server = %self.name, "the language server did not exit after `exit`; killing it");
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
