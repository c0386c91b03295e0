//! `flemmad serve`: the long-running daemon.
//!
//! Three Unix sockets in the runtime directory ([`socket`]): `lsp.sock` serves one LSP session
//! per connection (a thread each, all in this process), `rpc.sock` speaks line-delimited
//! JSON-RPC 2.0 ([`rpc`]: each line decoded once into the typed requests, documented in
//! `docs/rpc.md`), `acp.sock` serves one Agent Client Protocol connection per connection
//! (`flemmad acp` pipes an editor's stdio to it). Every connection's peer uid is checked. All
//! reach the engine through the one `EngineHost::call`, so they answer the same requests the
//! same way.
//! The main thread waits for SIGTERM/SIGINT or `flemma/shutdown`, then stops accepting, closes
//! the sessions and removes its sockets (unless systemd owns them) and pid file.

mod events;
mod rpc;
pub mod socket;

use std::collections::{HashMap, HashSet};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::runtime_dir::RuntimePaths;
pub use events::{Event, EventHub, Filter};
use flemma_protocol::event::{DaemonEvent, SessionClosed, SessionOpened};
pub use socket::SocketError;

/// What `serve` needs to know.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub paths: RuntimePaths,
    /// The process's context (from `main`): the user's folders, and the configuration file
    /// (`--config`, else the user's default) for the engine and the LSP sessions'
    /// diagnostics alike.
    pub context: Arc<crate::process_context::ProcessContext>,
}

/// Why the daemon stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot wait for signals: {0}")]
    Signals(std::io::Error),
    #[error("{0:#}")]
    Runtime(anyhow::Error),
}

/// The state every connection shares.
#[derive(Debug)]
pub struct Daemon {
    started: Instant,
    next_session: AtomicU64,
    /// Open connections (LSP sessions and RPC clients), to close them at shutdown.
    connections: Mutex<HashMap<u64, UnixStream>>,
    /// The ids of the open LSP sessions (a subset of `connections`).
    lsp_sessions: Mutex<HashSet<u64>>,
    sessions_changed: Condvar,
    stopping: AtomicBool,
    shutdown_requested: tokio::sync::Notify,
    pub events: EventHub,
    /// The engine every LSP session shares (set once `serve` starts it).
    engine: std::sync::OnceLock<Arc<crate::engine_host::EngineHost>>,
    /// The process's context ([`ServeOptions::context`]).
    context: Arc<crate::process_context::ProcessContext>,
    /// The tools ACP users allowed always, by session, across the ACP connections (an editor
    /// that reconnects and loads its session again keeps them).
    allowed_always: flemma_acp::AllowedAlways,
}

impl Daemon {
    fn new(context: Arc<crate::process_context::ProcessContext>) -> Self {
        Self {
            started: Instant::now(),
            next_session: AtomicU64::new(1),
            connections: Mutex::new(HashMap::new()),
            lsp_sessions: Mutex::new(HashSet::new()),
            sessions_changed: Condvar::new(),
            stopping: AtomicBool::new(false),
            allowed_always: flemma_acp::AllowedAlways::default(),
            shutdown_requested: tokio::sync::Notify::new(),
            events: EventHub::default(),
            engine: std::sync::OnceLock::new(),
            context,
        }
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn open_lsp_sessions(&self) -> usize {
        self.lsp_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The engine every session shares (`None` only before `serve` started it). `rpc.sock`
    /// methods reach documents through it.
    pub fn engine(&self) -> Option<&Arc<crate::engine_host::EngineHost>> {
        self.engine.get()
    }

    /// Asks the main loop to shut down (the `flemma/shutdown` request).
    pub fn request_shutdown(&self) {
        self.shutdown_requested.notify_one();
    }

    fn register(&self, stream: &UnixStream) -> u64 {
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        if let Ok(clone) = stream.try_clone() {
            self.connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id, clone);
        }
        id
    }

    fn unregister(&self, id: u64) {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    fn close_lsp_sessions(&self) {
        for id in self
            .lsp_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            if let Some(stream) = self
                .connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
            {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    fn close_all_connections(&self) {
        for stream in self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn wait_for_sessions(&self, timeout: Duration) -> usize {
        let open = self
            .lsp_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (open, _) = self
            .sessions_changed
            .wait_timeout_while(open, timeout, |open| !open.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        open.len()
    }
}

/// Runs the daemon until SIGTERM, SIGINT or `flemma/shutdown`.
pub fn serve(options: &ServeOptions) -> Result<(), DaemonError> {
    let paths = &options.paths;
    // Before any thread starts: taking the activation fds edits the environment.
    let activated = socket::activated_listeners()?;
    crate::runtime_dir::ensure_dir(&paths.dir).map_err(SocketError::from)?;
    let mut pid_lock = socket::PidLock::acquire(&paths.pid_file)?;
    // The sockets this process bound (and removes at the end); systemd owns the ones it
    // passed.
    let mut owned = Vec::new();
    let bound = |path: &std::path::Path, owned: &mut Vec<std::path::PathBuf>| {
        let listener = socket::bind(path, &paths.pid_file);
        if listener.is_ok() {
            owned.push(path.to_path_buf());
        }
        listener
    };
    let listeners = match activated {
        Some(activated) => {
            tracing::info!("socket-activated: serving the sockets systemd passed");
            let acp = match activated.acp {
                Some(acp) => Ok(acp),
                None => bound(&paths.acp_socket, &mut owned),
            };
            acp.map(|acp| (activated.lsp, activated.rpc, acp))
        }
        None => bound(&paths.lsp_socket, &mut owned).and_then(|lsp| {
            let rpc = bound(&paths.rpc_socket, &mut owned)?;
            let acp = bound(&paths.acp_socket, &mut owned)?;
            Ok((lsp, rpc, acp))
        }),
    };
    let remove_owned = |owned: &[std::path::PathBuf]| {
        for path in owned {
            if let Err(error) = std::fs::remove_file(path) {
                tracing::warn!(path = %path.display(), %error, "cannot remove the socket");
            }
        }
    };
    let (lsp, rpc, acp) = match listeners {
        Ok(listeners) => listeners,
        Err(error) => {
            remove_owned(&owned);
            return Err(error.into());
        }
    };
    if let Err(error) = pid_lock.write_pid() {
        remove_owned(&owned);
        return Err(error.into());
    }
    let daemon = Arc::new(Daemon::new(options.context.clone()));
    let engine = crate::engine_host::EngineHost::start(options.context.clone())
        .map_err(|error| DaemonError::Thread(std::io::Error::other(error.to_string())))?;
    forward_engine_events(&daemon, &engine)?;
    let _ = daemon.engine.set(engine.clone());
    spawn_accept_loop("lsp-accept", lsp, Arc::clone(&daemon), serve_lsp)?;
    spawn_accept_loop(
        "rpc-accept",
        rpc,
        Arc::clone(&daemon),
        rpc::serve_connection,
    )?;
    spawn_accept_loop("acp-accept", acp, Arc::clone(&daemon), serve_acp)?;
    tracing::info!(
        pid = std::process::id(),
        dir = %paths.dir.display(),
        version = env!("CARGO_PKG_VERSION"),
        "daemon ready"
    );
    socket::notify_ready();

    let reason = wait_for_stop(&daemon)?;
    tracing::info!(reason, "shutting down");
    daemon.stopping.store(true, Ordering::SeqCst);
    remove_owned(&owned);
    // Sessions first (their `session:closed` events join the queues), then the event
    // subscribers get what is queued, then their connections close too.
    daemon.close_lsp_sessions();
    let left = daemon.wait_for_sessions(Duration::from_secs(2));
    if left > 0 {
        tracing::warn!(left, "LSP sessions still open after 2 s; exiting anyway");
    }
    // Then the engine: running requests are cancelled with the abort marker, documents
    // written (on disk: no editor holds them any more).
    engine.shutdown();
    daemon.events.drain(Duration::from_secs(1));
    daemon.close_all_connections();
    pid_lock.remove();
    tracing::info!("stopped");
    Ok(())
}

/// Blocks until a signal or a shutdown request; returns which.
fn wait_for_stop(daemon: &Daemon) -> Result<&'static str, DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = crate::runtime::get().map_err(DaemonError::Runtime)?;
    runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;
        Ok(tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            () = daemon.shutdown_requested.notified() => flemma_protocol::methods::SHUTDOWN,
        })
    })
}

type Handler = fn(&Arc<Daemon>, UnixStream, u64, i32);

fn spawn_accept_loop(
    name: &'static str,
    listener: UnixListener,
    daemon: Arc<Daemon>,
    handler: Handler,
) -> Result<(), DaemonError> {
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for stream in listener.incoming() {
                if daemon.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let stream = match stream {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::warn!(%error, listener = name, "accept failed");
                        thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                let peer_pid = match socket::check_peer(&stream) {
                    Ok(pid) => pid,
                    Err(refused) => {
                        tracing::warn!(listener = name, "{refused}");
                        let _ = stream.shutdown(Shutdown::Both);
                        continue;
                    }
                };
                let id = daemon.register(&stream);
                let daemon = Arc::clone(&daemon);
                let spawned =
                    thread::Builder::new()
                        .name(format!("{name}-{id}"))
                        .spawn(move || {
                            let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                handler(&daemon, stream, id, peer_pid);
                            }));
                            if served.is_err() {
                                tracing::error!(
                                    connection = id,
                                    "a connection handler panicked; the daemon goes on"
                                );
                            }
                            daemon.unregister(id);
                        });
                if let Err(error) = spawned {
                    tracing::error!(%error, "cannot start a connection thread");
                }
            }
        })
        .map(drop)
        .map_err(DaemonError::Thread)
}

/// Publishes the engine's events on the daemon's event hub (`flemmad events`).
fn forward_engine_events(
    daemon: &Arc<Daemon>,
    engine: &crate::engine_host::EngineHost,
) -> Result<(), DaemonError> {
    let events = engine.subscribe();
    let daemon = Arc::clone(daemon);
    thread::Builder::new()
        .name("engine-events".into())
        .spawn(move || {
            for event in events {
                let uri = flemma_protocol::document::path_to_uri(&event.path);
                daemon.events.publish(Event::Document {
                    uri,
                    event: Box::new(event.event),
                });
            }
        })
        .map(drop)
        .map_err(DaemonError::Thread)
}

/// One LSP session over one connection, backed by the daemon's engine.
fn serve_lsp(daemon: &Arc<Daemon>, stream: UnixStream, id: u64, peer_pid: i32) {
    let reader = match stream.try_clone() {
        Ok(reader) => reader,
        Err(error) => {
            tracing::error!(session = id, %error, "cannot clone the connection");
            return;
        }
    };
    let _open = OpenSession::new(daemon, id);
    tracing::info!(session = id, peer_pid, "LSP session opened");
    daemon
        .events
        .publish(Event::Daemon(DaemonEvent::SessionOpened(SessionOpened {
            session: id,
            peer_pid,
        })));
    match flemma_lsp::transport::streams(reader, stream) {
        Ok((connection, io_threads)) => {
            let backend: Box<dyn flemma_lsp::Backend> = match daemon.engine.get() {
                Some(engine) => Box::new(crate::lsp_backend::LspBackend::new(engine.clone())),
                None => Box::new(flemma_lsp::NoEngine),
            };
            let host = flemma_ide::AnalysisHost::with_template_cache(
                Arc::new(daemon.context.file_host()),
                crate::chat::config_input(&daemon.context),
                daemon
                    .engine
                    .get()
                    .map(|engine| engine.template_cache())
                    .unwrap_or_default(),
            );
            if let Err(error) = flemma_lsp::run_with(connection, backend, host) {
                tracing::warn!(session = id, %error, "LSP session ended with an error");
            }
            if let Err(error) = io_threads.join() {
                tracing::debug!(session = id, %error, "LSP session transport ended");
            }
        }
        Err(error) => tracing::error!(session = id, %error, "cannot start the LSP transport"),
    }
    tracing::info!(session = id, "LSP session closed");
}

/// One ACP connection (an editor's `flemmad acp`, piped), backed by the daemon's engine: its
/// prompts, the editor's MCP servers and its files (`fs/*`) are this process's, so background
/// jobs outlive the editor.
fn serve_acp(daemon: &Arc<Daemon>, stream: UnixStream, id: u64, peer_pid: i32) {
    let reader = match stream.try_clone() {
        Ok(reader) => std::io::BufReader::new(reader),
        Err(error) => {
            tracing::error!(connection = id, %error, "cannot clone the connection");
            return;
        }
    };
    let Some(engine) = daemon.engine.get() else {
        return;
    };
    let runtime = match crate::runtime::get() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(connection = id, "{error:#}");
            return;
        }
    };
    tracing::info!(connection = id, peer_pid, "ACP connection opened");
    let backend = Arc::new(crate::acp_backend::AcpBackend::new(engine.clone()));
    if let Err(error) = runtime.block_on(flemma_acp::serve(
        backend,
        daemon.allowed_always.clone(),
        reader,
        stream,
    )) {
        tracing::warn!(connection = id, %error, "ACP connection ended with an error");
    }
    tracing::info!(connection = id, "ACP connection closed");
}

/// Counts an LSP session as open for its lifetime, and publishes `session:closed` at its end
/// (even when the session panics).
struct OpenSession<'a> {
    daemon: &'a Daemon,
    id: u64,
}

impl<'a> OpenSession<'a> {
    fn new(daemon: &'a Daemon, id: u64) -> Self {
        daemon
            .lsp_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
        Self { daemon, id }
    }
}

impl Drop for OpenSession<'_> {
    fn drop(&mut self) {
        self.daemon
            .events
            .publish(Event::Daemon(DaemonEvent::SessionClosed(SessionClosed {
                session: self.id,
            })));
        self.daemon
            .lsp_sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        self.daemon.sessions_changed.notify_all();
    }
}
