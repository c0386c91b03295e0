//! The process's MCP servers: one running server per distinct definition, shared by every
//! chat that defines it the same way (so a session can add its own servers at run time: they
//! are just more definitions). Servers start in parallel, each within its startup timeout; a
//! failed one is retried after a pause; a dead one is restarted by the next call; a changed
//! tool list (`notifications/tools/list_changed`) is listed again before the next use.
//!
//! Connections live on the tokio runtime of the caller of [`McpHub::ensure`]; tool runners
//! (synchronous, on tool threads) hand their calls to that runtime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::connection::{CallError, Connection, Launch, SandboxWrap, StderrTail};
use crate::convert::{self, ListedTool};
use crate::definition::ServerDef;
use crate::naming::full_name;

/// How the hub starts servers.
#[derive(Debug, Clone)]
pub struct HubOptions {
    pub launch: Launch,
    /// A server that failed to start is tried again only after this long.
    pub retry_after: Duration,
}

impl Default for HubOptions {
    fn default() -> Self {
        Self {
            launch: Launch::default(),
            retry_after: Duration::from_secs(60),
        }
    }
}

/// The process's set of MCP servers (cheap to clone: a handle).
#[derive(Debug, Clone, Default)]
pub struct McpHub {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    options: HubOptions,
    slots: Mutex<HashMap<ServerDef, Arc<Slot>>>,
}

/// One server of the hub.
#[derive(Debug)]
pub struct Slot {
    def: ServerDef,
    launch: Mutex<Launch>,
    retry_after: Duration,
    state: tokio::sync::Mutex<State>,
    /// The runtime its connection lives on.
    runtime: Mutex<Option<Handle>>,
}

#[derive(Debug)]
enum State {
    Idle,
    Ready {
        connection: Arc<Connection>,
        tools: Vec<ListedTool>,
    },
    Failed {
        reason: String,
        at: Instant,
    },
}

/// A tool of a running server.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// The server's tool-name form.
    pub server: String,
    /// `server.tool`.
    pub full_name: String,
    pub tool: ListedTool,
    slot: Arc<Slot>,
}

/// What a server is doing, for `tools`, `status` and `doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Ready { tools: usize, pid: Option<u32> },
    Failed { reason: String },
}

/// One server's state and tools after [`McpHub::ensure`].
#[derive(Debug, Clone)]
pub struct ServerStatus {
    pub name: String,
    /// What runs (`stdio: cmd args (in dir)`, `http: url`).
    pub describe: String,
    pub state: ServerState,
    pub tools: Vec<McpTool>,
}

impl McpHub {
    pub fn new(options: HubOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                slots: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn slot(&self, def: &ServerDef) -> Arc<Slot> {
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slots
            .entry(def.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    def: def.clone(),
                    launch: Mutex::new(self.inner.options.launch.clone()),
                    retry_after: self.inner.options.retry_after,
                    state: tokio::sync::Mutex::new(State::Idle),
                    runtime: Mutex::new(None),
                })
            })
            .clone()
    }

    /// Makes sure the servers `defs` run (starting those that do not, in parallel, each
    /// within `startup_timeout`) and returns each one's state and tools, in `defs` order.
    /// `sandbox` wraps the servers that ask for the sandbox (`sandbox = true`).
    pub async fn ensure(
        &self,
        defs: &[ServerDef],
        startup_timeout: Duration,
        sandbox: Option<SandboxWrap>,
    ) -> Vec<ServerStatus> {
        let slots: Vec<Arc<Slot>> = defs.iter().map(|def| self.slot(def)).collect();
        if let Some(sandbox) = sandbox {
            for slot in &slots {
                if let Ok(mut launch) = slot.launch.lock() {
                    launch.sandbox = Some(sandbox.clone());
                }
            }
        }
        let runs = slots.iter().map(|slot| slot.ensure(startup_timeout));
        futures_util::future::join_all(runs).await
    }

    /// The tools of the servers running now, as `(full name, description)`, without waiting
    /// (a server being started or called is left out) and without starting anything.
    pub fn known_tools(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for slot in self.all_slots() {
            if let Ok(state) = slot.state.try_lock()
                && let State::Ready { tools, .. } = &*state
            {
                for tool in tools {
                    out.push((
                        full_name(&slot.def.name, &tool.name),
                        tool.description.clone(),
                    ));
                }
            }
        }
        out.sort();
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }

    /// The process ids of the running stdio servers.
    pub fn pids(&self) -> Vec<u32> {
        let slots: Vec<Arc<Slot>> = self.all_slots();
        slots
            .iter()
            .filter_map(|slot| match slot.state.try_lock().as_deref() {
                Ok(State::Ready { connection, .. }) => connection.pid(),
                _ => None,
            })
            .collect()
    }

    fn all_slots(&self) -> Vec<Arc<Slot>> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Closes every server (stdin closed, then SIGTERM, then SIGKILL) and forgets them.
    pub async fn shutdown(&self) {
        let slots: Vec<Arc<Slot>> = {
            let mut map = self
                .inner
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            map.drain().map(|(_, slot)| slot).collect()
        };
        let closes = slots.into_iter().map(|slot| async move {
            let state = std::mem::replace(&mut *slot.state.lock().await, State::Idle);
            if let State::Ready { connection, .. } = state
                && let Ok(connection) = Arc::try_unwrap(connection)
            {
                connection.close().await;
            }
        });
        futures_util::future::join_all(closes).await;
    }
}

impl Slot {
    async fn ensure(self: &Arc<Self>, startup_timeout: Duration) -> ServerStatus {
        if let Ok(mut runtime) = self.runtime.lock() {
            runtime.get_or_insert_with(Handle::current);
        }
        let mut state = self.state.lock().await;
        let refresh = match &*state {
            State::Ready { connection, .. } if !connection.is_closed() => {
                connection.tools_changed().then(|| connection.clone())
            }
            State::Failed { at, .. } if at.elapsed() < self.retry_after => None,
            _ => {
                *state = self.start(startup_timeout).await;
                None
            }
        };
        if let Some(connection) = refresh {
            match tokio::time::timeout(startup_timeout, connection.list_tools()).await {
                Ok(Ok(tools)) => {
                    *state = State::Ready { connection, tools };
                }
                Ok(Err(reason)) => {
                    tracing::warn!(server = %self.def.name, %reason, "listing the changed tools failed")
                }
                Err(_) => {
                    tracing::warn!(server = %self.def.name, "listing the changed tools timed out")
                }
            }
        }
        self.status(&state)
    }

    /// A connection, started (and listed) within `startup_timeout`.
    async fn start(&self, startup_timeout: Duration) -> State {
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let launch = self
            .launch
            .lock()
            .map(|launch| launch.clone())
            .unwrap_or_default();
        let started = tokio::time::timeout(startup_timeout, async {
            let connection = Connection::start(&self.def, &launch, stderr.clone()).await?;
            let tools = connection.list_tools().await?;
            Ok::<_, String>((connection, tools))
        })
        .await;
        let failed = |reason: String| {
            tracing::debug!(server = %self.def.name, %reason, "an MCP server did not start");
            State::Failed {
                reason,
                at: Instant::now(),
            }
        };
        match started {
            Ok(Ok((connection, tools))) => State::Ready {
                connection: Arc::new(connection),
                tools,
            },
            Ok(Err(reason)) => failed(reason),
            Err(_) => {
                let tail = stderr.lock().ok().and_then(|t| t.summary());
                failed(match tail {
                    Some(tail) => format!(
                        "it did not start within {} s (tools.mcp.startup_timeout); its stderr: {tail}",
                        startup_timeout.as_secs()
                    ),
                    None => format!(
                        "it did not start within {} s (tools.mcp.startup_timeout)",
                        startup_timeout.as_secs()
                    ),
                })
            }
        }
    }

    fn status(self: &Arc<Self>, state: &State) -> ServerStatus {
        let (state, tools) = match state {
            State::Ready { connection, tools } => (
                ServerState::Ready {
                    tools: tools.len(),
                    pid: connection.pid(),
                },
                tools
                    .iter()
                    .map(|tool| McpTool {
                        server: self.def.name.clone(),
                        full_name: full_name(&self.def.name, &tool.name),
                        tool: tool.clone(),
                        slot: self.clone(),
                    })
                    .collect(),
            ),
            State::Failed { reason, .. } => (
                ServerState::Failed {
                    reason: reason.clone(),
                },
                Vec::new(),
            ),
            State::Idle => (
                ServerState::Failed {
                    reason: "not started".into(),
                },
                Vec::new(),
            ),
        };
        ServerStatus {
            name: self.def.name.clone(),
            describe: self.def.describe(),
            state,
            tools,
        }
    }

    /// Calls `tool`: a server that died is started again first (within `startup_timeout`).
    async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        startup_timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        let name = &self.def.name;
        let connection = {
            let mut state = self.state.lock().await;
            let alive = match &*state {
                State::Ready { connection, .. } if !connection.is_closed() => {
                    Some(connection.clone())
                }
                _ => None,
            };
            match alive {
                Some(connection) => connection,
                None => {
                    *state = self.start(startup_timeout).await;
                    match &*state {
                        State::Ready { connection, .. } => connection.clone(),
                        State::Failed { reason, .. } => {
                            return Err(format!(
                                "the MCP server `{name}` is not running and did not restart: {reason}"
                            ));
                        }
                        State::Idle => {
                            return Err(format!("the MCP server `{name}` is not running"));
                        }
                    }
                }
            }
        };
        match connection.call(tool, arguments, timeout, cancel).await {
            Ok(result) => Ok(result),
            Err(error @ CallError::ServerGone(_)) => {
                let mut state = self.state.lock().await;
                if matches!(&*state, State::Ready { connection: c, .. } if Arc::ptr_eq(c, &connection))
                {
                    *state = State::Idle;
                }
                Err(format!(
                    "MCP server `{name}`: {error}; it is started again at the next call"
                ))
            }
            Err(error) => Err(format!("MCP server `{name}`, tool `{tool}`: {error}")),
        }
    }
}

/// How a tool call runs: its time limit, the servers' startup timeout, and where binary
/// content (images) is saved.
#[derive(Debug, Clone)]
pub struct CallOptions {
    pub timeout: Duration,
    pub startup_timeout: Duration,
}

impl McpTool {
    /// Runs a call from a synchronous tool thread: the call runs on the server's runtime,
    /// `cancel` is polled every 50 ms (cancelling sends `notifications/cancelled`). Returns
    /// the `tools/call` result as JSON, or why there is none.
    pub fn call_blocking(
        &self,
        input: &Value,
        options: &CallOptions,
        cancel: &flemma_tools::Cancel,
    ) -> Result<Value, String> {
        let arguments = match input {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            other => return Err(format!("the input must be a JSON object, got {other}")),
        };
        let runtime = self
            .slot
            .runtime
            .lock()
            .ok()
            .and_then(|runtime| runtime.clone())
            .or_else(|| Handle::try_current().ok())
            .ok_or_else(|| "the MCP servers are not running in this process".to_string())?;
        let (sender, receiver) = std::sync::mpsc::channel();
        let token = CancellationToken::new();
        let slot = self.slot.clone();
        let tool = self.tool.name.clone();
        let (timeout, startup) = (options.timeout, options.startup_timeout);
        let call_token = token.clone();
        runtime.spawn(async move {
            let result = slot
                .call(&tool, arguments, timeout, startup, &call_token)
                .await;
            let _ = sender.send(result);
        });
        loop {
            match receiver.recv_timeout(Duration::from_millis(50)) {
                Ok(result) => return result,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if cancel.is_cancelled() && !token.is_cancelled() {
                        token.cancel();
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the call ended without an answer (flemmad is stopping)".into());
                }
            }
        }
    }

    /// Runs a call and turns its result into a tool outcome: the text content exactly,
    /// `isError` as an error result, binary content saved under `store_dir` and named.
    pub fn run(
        &self,
        input: &Value,
        options: &CallOptions,
        cancel: &flemma_tools::Cancel,
        store_dir: Option<&std::path::Path>,
    ) -> flemma_tools::Outcome {
        match self.call_blocking(input, options, cancel) {
            Ok(result) => {
                let result = convert::call_result(&result);
                let mut save = |binary: &convert::Binary| save_binary(store_dir, self, binary);
                let text = convert::render(&result.pieces, &mut save);
                if result.is_error {
                    flemma_tools::Outcome::error(text)
                } else {
                    flemma_tools::Outcome::ok(text)
                }
            }
            Err(message) => flemma_tools::Outcome::error(message),
        }
    }
}

/// Saves binary content as `<store>/mcp-<server>-<tool>-<n>.<ext>` (mode 0600).
fn save_binary(
    store_dir: Option<&std::path::Path>,
    tool: &McpTool,
    binary: &convert::Binary,
) -> Result<String, String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = store_dir.ok_or_else(|| "no result store for this call".to_string())?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let safe: String = tool
        .full_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    for n in 1..10_000 {
        let path = dir.join(format!("mcp-{safe}-{n}.{}", binary.extension()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(&binary.data)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                return Ok(path.display().to_string());
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(format!("cannot write {}: {error}", path.display())),
        }
    }
    Err(format!("too many files in {}", dir.display()))
}
