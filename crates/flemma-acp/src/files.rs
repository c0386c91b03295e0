//! The client's files (`fs/read_text_file`, `fs/write_text_file`) for one session, when the
//! client advertised them at `initialize`: the backend hands them to the session's tools, so
//! `read`, `write` and `edit` see the editor's unsaved buffers and their edits show in the
//! editor at once. Calls block the calling thread (a tool's), never the connection.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ReadTextFileRequest, ReadTextFileResponse, SessionId, WriteTextFileRequest,
};
use agent_client_protocol::{Client, JsonRpcRequest};

/// How long the client may take to answer one file request.
pub const FILE_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a waiting call looks at its cancel flag.
const POLL: Duration = Duration::from_millis(50);

/// How long a call's file request waits at most for the call's `tool_call` to reach the
/// client (the session announces it once the chat shows the call, within about 100 ms).
pub const ANNOUNCE_WAIT: Duration = Duration::from_secs(3);

/// The calls a session's running prompt has told the client about (`tool_call`): a call's
/// own file request waits for its announcement, so the client never sees a tool read or
/// write a file before it knows the call (whatever the provider's pace).
#[derive(Debug, Default)]
pub struct Announced {
    /// Whether a prompt runs, and the calls told so far.
    state: Mutex<(bool, HashSet<String>)>,
    changed: Condvar,
}

impl Announced {
    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, HashSet<String>)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A prompt starts (`true`) or ended: without one, nothing tells the client about calls
    /// and nobody waits.
    pub(crate) fn prompt_runs(&self, runs: bool) {
        let mut state = self.lock();
        state.0 = runs;
        if !runs {
            state.1.clear();
        }
        self.changed.notify_all();
    }

    /// The client knows the call `tool_id`.
    pub(crate) fn add(&self, tool_id: &str) {
        self.lock().1.insert(tool_id.to_owned());
        self.changed.notify_all();
    }

    /// Waits until the client knows the call `tool_id`, while a prompt runs, at most
    /// [`ANNOUNCE_WAIT`] and until `cancelled`.
    fn wait_for(&self, tool_id: &str, cancelled: &dyn Fn() -> bool) {
        let deadline = Instant::now() + ANNOUNCE_WAIT;
        let mut state = self.lock();
        while state.0 && !state.1.contains(tool_id) && !cancelled() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::info!(tool_id, "a file request went out before its call was told");
                return;
            }
            state = self
                .changed
                .wait_timeout(state, left.min(POLL))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// One session's access to the client's files.
#[derive(Clone)]
pub struct ClientFiles {
    cx: ConnectionTo<Client>,
    session: SessionId,
    runtime: tokio::runtime::Handle,
    /// The client reads files (`fs.readTextFile`).
    reads: bool,
    /// The client writes files (`fs.writeTextFile`).
    writes: bool,
    /// Set when the client's side of the connection closed (the connection itself may live on
    /// while a prompt the engine still runs ends).
    closed: CancellationToken,
    /// Tells this session's access from another's (of another connection) on the same chat.
    id: u64,
    /// The calls the session's prompt told the client about.
    announced: Arc<Announced>,
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("session", &self.session.0)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ClientFiles {
    /// Access for `session` over `cx`; call from inside the connection's runtime.
    pub(crate) fn new(
        cx: ConnectionTo<Client>,
        session: SessionId,
        reads: bool,
        writes: bool,
        closed: CancellationToken,
        announced: Arc<Announced>,
    ) -> Option<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        (reads || writes).then(|| Self {
            cx,
            session,
            runtime,
            reads,
            writes,
            closed,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            announced,
        })
    }

    /// Whether the client reads files, and is still there.
    pub fn reads(&self) -> bool {
        self.reads && !self.closed.is_cancelled()
    }

    /// Whether the client writes files, and is still there.
    pub fn writes(&self) -> bool {
        self.writes && !self.closed.is_cancelled()
    }

    /// Waits until the client knows the call `tool_id` (its `tool_call` was sent) before that
    /// call's file request, while a prompt of the session runs (at most [`ANNOUNCE_WAIT`]).
    pub fn wait_for_call(&self, tool_id: &str, cancelled: &dyn Fn() -> bool) {
        self.announced.wait_for(tool_id, cancelled);
    }

    /// Whether `other` is this same access (not another connection's on the same chat).
    pub fn is(&self, other: &ClientFiles) -> bool {
        self.id == other.id
    }

    /// The text the client has for `path` (its buffer when open, unsaved changes included).
    pub fn read_text(&self, path: &Path, cancelled: &dyn Fn() -> bool) -> Result<String, String> {
        if !self.reads() {
            return Err("the editor does not read files (fs.readTextFile), or went away".into());
        }
        // Absolute and normalised: the editor finds its buffer by the path it knows.
        let path = flemma_protocol::document::normalize(path);
        let request = ReadTextFileRequest::new(self.session.clone(), path);
        self.call(request, cancelled)
            .map(|response: ReadTextFileResponse| response.content)
    }

    /// Writes `text` to `path` through the client.
    pub fn write_text(
        &self,
        path: &Path,
        text: &str,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        if !self.writes() {
            return Err("the editor does not write files (fs.writeTextFile), or went away".into());
        }
        let path = flemma_protocol::document::normalize(path);
        let request = WriteTextFileRequest::new(self.session.clone(), path, text);
        self.call(request, cancelled).map(drop)
    }

    /// Sends `request` and waits for its answer, `cancelled` or the time limit (either drops
    /// the request, which asks the client to cancel it).
    fn call<Req>(&self, request: Req, cancelled: &dyn Fn() -> bool) -> Result<Req::Response, String>
    where
        Req: JsonRpcRequest + Send + 'static,
        Req::Response: Send + 'static,
    {
        let method = request.method().to_owned();
        let (sender, receiver) = std::sync::mpsc::channel();
        let cx = self.cx.clone();
        let task = self.runtime.spawn(async move {
            let answer = cx.send_request(request).block_task().await;
            let _ = sender.send(answer);
        });
        let deadline = Instant::now() + FILE_REQUEST_TIMEOUT;
        loop {
            match receiver.recv_timeout(POLL) {
                Ok(answer) => {
                    return answer.map_err(|error| {
                        format!("the editor answered {method} with an error: {error}")
                    });
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "the editor's connection closed before it answered {method}"
                    ));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if cancelled() {
                task.abort();
                return Err(format!(
                    "cancelled while waiting for the editor to answer {method}"
                ));
            }
            if Instant::now() >= deadline {
                task.abort();
                return Err(format!(
                    "the editor did not answer {method} within {} s",
                    FILE_REQUEST_TIMEOUT.as_secs()
                ));
            }
        }
    }
}
