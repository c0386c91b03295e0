//! One running MCP server: started (a child process through the shim, or an HTTP session),
//! initialized, its tools listed, calls made with a timeout and cancellation (both send
//! `notifications/cancelled`), and closed (stdin closed, then SIGTERM, then SIGKILL to its
//! process group).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use crate::convert::ListedTool;
use crate::definition::{ServerDef, Transport};

/// How many of a server's last stderr lines are kept (for the reason it failed).
const STDERR_LINES: usize = 20;
/// How many of them a failure names.
const STDERR_SHOWN: usize = 5;

/// How a server process is started.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// flemmad's executable: stdio servers start through its shim (see [`crate::shim`]).
    pub shim: Option<PathBuf>,
    /// Wraps a sandboxed server's argument vector (`Bwrap::wrap`), in its working directory.
    pub sandbox: Option<SandboxWrap>,
}

/// Turns a server's argument vector into the sandboxed one (`Bwrap::wrap`), given its working
/// directory.
#[derive(Clone)]
pub struct SandboxWrap(pub Arc<WrapFn>);

/// `(argv, cwd) -> sandboxed argv`.
pub type WrapFn = dyn Fn(&[String], &std::path::Path) -> Vec<String> + Send + Sync;

impl std::fmt::Debug for SandboxWrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SandboxWrap")
    }
}

/// The client side of one connection: notes a changed tool list.
#[derive(Debug, Clone)]
struct Client {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Client {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("flemmad", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// The last lines a server wrote on stderr.
#[derive(Debug, Default)]
pub struct StderrTail(VecDeque<String>);

impl StderrTail {
    fn push(&mut self, line: String) {
        if self.0.len() == STDERR_LINES {
            self.0.pop_front();
        }
        self.0.push_back(line);
    }
    /// The last few lines, joined with ` | `, or `None` when there were none.
    pub fn summary(&self) -> Option<String> {
        let lines: Vec<&str> = self
            .0
            .iter()
            .map(|l| l.trim_end())
            .filter(|l| !l.is_empty())
            .collect();
        let shown = &lines[lines.len().saturating_sub(STDERR_SHOWN)..];
        (!shown.is_empty()).then(|| shown.join(" | "))
    }
}

/// Why a call did not give a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("no answer within {} s; the call was cancelled", .0.as_secs())]
    TimedOut(Duration),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("the server stopped during the call{}", .0.as_ref().map(|s| format!(" (its stderr: {s})")).unwrap_or_default())]
    ServerGone(Option<String>),
    #[error("{0}")]
    Protocol(String),
}

/// A started, initialized server.
pub struct Connection {
    service: RunningService<RoleClient, Client>,
    pid: Option<u32>,
    stderr: Arc<Mutex<StderrTail>>,
    tools_changed: Arc<AtomicBool>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts the server and runs `initialize`. The error is the reason, with the last
    /// lines of the server's stderr when it wrote any.
    /// `stderr` collects the server's stderr (so a caller that gives up waiting can still
    /// name it).
    pub async fn start(
        def: &ServerDef,
        launch: &Launch,
        stderr: Arc<Mutex<StderrTail>>,
    ) -> Result<Self, String> {
        let tools_changed = Arc::new(AtomicBool::new(false));
        let client = Client {
            tools_changed: tools_changed.clone(),
        };
        match &def.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
                sandbox,
            } => {
                if !cwd.is_dir() {
                    return Err(format!(
                        "its working directory {} does not exist",
                        cwd.display()
                    ));
                }
                // Found on the absolute entries of the PATH it gets (a relative one would
                // name a folder of the working directory's choosing): see flemma_tools::launch.
                let search_path = env
                    .iter()
                    .rev()
                    .find(|(key, _)| key == "PATH")
                    .map(|(_, value)| std::ffi::OsString::from(value.expose()))
                    .or_else(|| std::env::var_os("PATH"))
                    .unwrap_or_default();
                let program = flemma_tools::launch::find_program(command, Some(&search_path), cwd)
                    .ok_or_else(|| {
                        format!(
                            "cannot start `{command}`: {}",
                            flemma_tools::launch::not_found(command, cwd)
                        )
                    })?;
                let mut argv: Vec<String> = std::iter::once(program.display().to_string())
                    .chain(args.iter().cloned())
                    .collect();
                if *sandbox && program.starts_with("/tmp") {
                    return Err(format!(
                        "`sandbox = true` but its program {} lies under /tmp, which the sandbox replaces with a private folder of its own (install the server elsewhere, or set sandbox = false for this server)",
                        program.display()
                    ));
                }
                if *sandbox {
                    match &launch.sandbox {
                        Some(wrap) => argv = (wrap.0)(&argv, cwd),
                        None => {
                            return Err(
                                "`sandbox = true` but no sandbox backend is available (install bubblewrap, or set sandbox = false for this server)".into(),
                            );
                        }
                    }
                }
                let full: Vec<std::ffi::OsString> = match &launch.shim {
                    Some(flemmad) => crate::shim::wrap(flemmad, &argv),
                    None => argv.iter().map(Into::into).collect(),
                };
                let mut cmd = tokio::process::Command::new(&full[0]);
                cmd.args(&full[1..]).current_dir(cwd);
                for (key, value) in env {
                    cmd.env(key, value.expose());
                }
                cmd.env("PATH", flemma_tools::launch::absolute_entries(&search_path));
                let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
                wrapped
                    .wrap(process_wrap::tokio::ProcessGroup::leader())
                    .wrap(process_wrap::tokio::KillOnDrop);
                let (process, child_stderr) = TokioChildProcess::builder(wrapped)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|error| format!("cannot start `{command}`: {error}"))?;
                let pid = process.id();
                if let Some(child_stderr) = child_stderr {
                    let tail = stderr.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(child_stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            if let Ok(mut tail) = tail.lock() {
                                tail.push(line);
                            }
                        }
                    });
                }
                let service = client.serve(process).await.map_err(|error| {
                    let tail = stderr.lock().ok().and_then(|t| t.summary());
                    // Let the last lines arrive when the process just died.
                    match tail {
                        Some(tail) => {
                            format!("it did not answer `initialize` ({error}); its stderr: {tail}")
                        }
                        None => format!("it did not answer `initialize` ({error})"),
                    }
                })?;
                let connection = Self {
                    service,
                    pid,
                    stderr,
                    tools_changed,
                };
                connection.watch_tool_list();
                Ok(connection)
            }
            Transport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
                    let value =
                        reqwest::header::HeaderValue::from_str(value.expose()).map_err(|_| {
                            format!("the value of the header `{name}` is not valid in HTTP")
                        })?;
                    custom.insert(header, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let _ = rustls::crypto::ring::default_provider().install_default();
                let http = reqwest::Client::builder()
                    .user_agent(concat!("flemmad/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|error| format!("cannot set up HTTP: {error}"))?;
                let transport = StreamableHttpClientTransport::with_client(http, config);
                let service = client
                    .serve(transport)
                    .await
                    .map_err(|error| format!("{url} did not answer `initialize` ({error})"))?;
                let connection = Self {
                    service,
                    pid: None,
                    stderr,
                    tools_changed,
                };
                connection.watch_tool_list();
                Ok(connection)
            }
        }
    }

    /// Asks the server for `notifications/tools/list_changed` on a subscription (protocol
    /// 2026-07-28); older servers send it unasked (to [`Client::on_tool_list_changed`]).
    fn watch_tool_list(&self) {
        let peer = self.service.peer().clone();
        let changed = self.tools_changed.clone();
        tokio::spawn(async move {
            let filter = rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build();
            let Ok(mut subscription) = peer.listen(filter).await else {
                return;
            };
            while let Ok(Some(notification)) = subscription.next().await {
                if matches!(
                    notification,
                    rmcp::model::ServerNotification::ToolListChangedNotification(_)
                ) {
                    changed.store(true, Ordering::SeqCst);
                }
            }
        });
    }

    /// The server process's id (stdio servers; through the shim it is the server itself).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the connection ended (the process died, the session closed).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Whether the server said its tool list changed since the last [`Self::list_tools`].
    pub fn tools_changed(&self) -> bool {
        self.tools_changed.load(Ordering::SeqCst)
    }

    /// The last lines of the server's stderr.
    pub fn stderr_summary(&self) -> Option<String> {
        self.stderr.lock().ok().and_then(|t| t.summary())
    }

    /// Every tool the server lists (all pages).
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, String> {
        self.tools_changed.store(false, Ordering::SeqCst);
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|error| format!("`tools/list` failed: {error}"))?;
        Ok(tools
            .iter()
            .filter_map(|tool| serde_json::to_value(tool).ok())
            .filter_map(|tool| ListedTool::from_json(&tool))
            .collect())
    }

    /// Calls `tool` with `arguments`; the result as JSON (`content`, `isError`, …). A call
    /// that `cancel` stops or that outlives `timeout` is abandoned, which sends
    /// `notifications/cancelled` to the server.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let peer = self.service.peer().clone();
        let call = peer.call_tool(params);
        let result = tokio::select! {
            result = call => result,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
            () = tokio::time::sleep(timeout) => return Err(CallError::TimedOut(timeout)),
        };
        match result {
            Ok(result) => serde_json::to_value(&result)
                .map_err(|error| CallError::Protocol(format!("an unreadable result ({error})"))),
            Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)) => {
                // Give the stderr reader a moment to take the dying words.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(CallError::ServerGone(self.stderr_summary()))
            }
            Err(rmcp::ServiceError::McpError(error)) => Err(CallError::Protocol(format!(
                "the server refused the call: {}",
                error.message
            ))),
            Err(error) => Err(CallError::Protocol(error.to_string())),
        }
    }

    /// Closes the connection: stdin closed (a stdio server then exits), then SIGTERM and
    /// SIGKILL to its process group if it does not.
    pub async fn close(mut self) {
        let _ = self
            .service
            .close_with_timeout(Duration::from_secs(8))
            .await;
    }
}
