//! The engine host: one per process (`flemmad lsp` in-process, `flemmad serve`), shared by
//! every LSP session and the RPC socket. It owns a [`Driver`] for every document being worked
//! on, keyed by absolute path, all running on one thread with a `LocalSet` on the process's
//! runtime; what it knows and decides ([`state::HostState`]) is owned by a thread of its own.
//!
//! Every front end (the language server, `rpc.sock`, the ACP agent) decodes its requests into
//! `flemma-protocol`'s [`FlemmaRequest`] and hands them to one method, [`EngineHost::call`],
//! with the document it resolved; the answer (or the refusal, a [`RequestError`]) is the same
//! whichever front end asked. Every call may be made from any thread and returns without
//! waiting for a driver (a request that evaluates templates or reads the checkpoints waits for
//! that work, done on a thread of its own): a command for a document whose driver runs is fed
//! to it; otherwise a driver is started (its
//! first input `Load`, for orphan recovery) and ends when nothing runs or is scheduled any
//! more. What happens is told through [`EngineHost::subscribe`] (every document's events, its
//! notices as `engine:notice`) and to the [`Editor`]s that have the document open: its events
//! (the language server sends them as `flemma/event` and turns them into `$/progress`), notices
//! (as messages, never as `engine:notice` too) and failures. The host knows no LSP: an editor
//! is whatever implements [`Editor`].
//!
//! **Who writes.** The most recently active editor that has the document open writes it
//! (through the store it gives, [`Editor::store`]); when none has it open, the file on disk is
//! written ([`FileStore`]). The writer changes while a driver runs: a reply streaming when the editor
//! closes goes on into the file, and background jobs survive the editor.

mod drivers;
mod editors;
mod follow;
mod requests;
mod state;
mod state_thread;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};

use flemma_engine::EngineEvent;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};
use flemma_template::TemplateCache;
use tokio::sync::mpsc;

use crate::chat_store::ChatStore;
use crate::process_context::ProcessContext;
pub use editors::{Editor, EditorHandle};
pub use follow::Followed;
use state::Command;
pub use state::Drivers;
use state_thread::StateThread;

/// An event of one document.
#[derive(Debug, Clone)]
pub struct HostEvent {
    pub path: PathBuf,
    pub event: EngineEvent,
}

/// The document a request is about, as its front end resolved it.
#[derive(Debug, Clone, Copy)]
pub struct DocumentRef<'a> {
    /// The document's absolute path (`.` and `..` removed).
    pub path: &'a Path,
    /// The document as the calling editor holds it, when the caller has it open: tool
    /// decisions are checked on it (otherwise on the file, when no editor has the document
    /// open and no driver runs for it).
    pub buffer: Option<&'a flemma_syntax::Document>,
}

impl<'a> DocumentRef<'a> {
    /// A document named by its path only (`rpc.sock`, the command line).
    pub fn path(path: &'a Path) -> Self {
        Self { path, buffer: None }
    }
}

/// How a driver that a call starts runs, for a caller in this process (the command line without
/// a daemon, `cli/local_host`): not part of the protocol's requests, which always run with the
/// chat's autopilot. A driver already running for the document is not changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// One step without autopilot: a `send` streams one reply or runs one round of tools
    /// (`flemmad send --no-autopilot`); an `approve`, `reject` or `approveAll` only marks the
    /// calls, and the next send runs them.
    pub no_autopilot: bool,
}

/// What [`EngineHost::call_later`] gives its answer to.
pub type Answer = Box<dyn FnOnce(Result<FlemmaResponse, RequestError>) + Send>;

fn answer_panicked() -> RequestError {
    RequestError::new(
        flemma_protocol::error::codes::INTERNAL_ERROR,
        "flemmad failed while answering this request (a bug: see the log)",
    )
}

fn shutting_down() -> RequestError {
    RequestError::shutting_down("flemmad is shutting down; the command was not run")
}

/// The engine host. See the module documentation.
#[derive(Debug)]
pub struct EngineHost {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the host's threads and its callers share.
#[derive(Debug)]
struct Shared {
    /// The analysis of the documents the engine works on (one per document, for the drivers
    /// and `flemma/switch`), sharing its template cache with the language server's hosts.
    analyses: crate::analyses::Analyses,
    template_cache: TemplateCache,
    /// What the host knows and decides ([`state::HostState`]): the one source of truth of
    /// every document's phase, decided calls and runtime layers, owned by its own thread.
    state: StateThread,
    /// The handles of the editors that have each document open, by session (which of them
    /// writes it is `state`'s).
    editors: Mutex<HashMap<PathBuf, std::collections::BTreeMap<u64, EditorHandle>>>,
    subscribers: Mutex<Vec<std::sync::mpsc::Sender<HostEvent>>>,
    /// The followers in this process of one document each ([`EngineHost::follow`]).
    followers: Mutex<follow::Followers>,
    /// Cancelled when the process is interrupted ([`EngineHost::interrupt`]).
    interrupt: tokio_util::sync::CancellationToken,
    /// The host's MCP servers (the drivers' chats share them), closed when the host stops.
    mcp: flemma_mcp::McpHub,
    /// The host's file watcher and editors' sessions (the drivers' chats share them).
    services: crate::engine_driver::DriverServices,
}

impl EngineHost {
    /// The process's context the host works in: the user's folders, and the configuration
    /// file its chats use (`--config`, else the user's default).
    pub fn context(&self) -> &ProcessContext {
        &self.shared.services.context
    }

    /// Starts the host's threads (the state's, the drivers') in the process's `context` (handed
    /// down from `main`).
    pub fn start(context: Arc<ProcessContext>) -> anyhow::Result<Arc<EngineHost>> {
        let (effects, receiver) = mpsc::unbounded_channel();
        let template_cache = TemplateCache::new();
        let shared = Arc::new(Shared {
            analyses: crate::analyses::analyses(context.file_host(), template_cache.clone()),
            template_cache,
            state: StateThread::start(effects)?,
            editors: Mutex::default(),
            subscribers: Mutex::default(),
            followers: Mutex::default(),
            interrupt: tokio_util::sync::CancellationToken::new(),
            mcp: crate::mcp_setup::new_hub(&context),
            services: crate::engine_driver::DriverServices::new(context),
        });
        let runtime = crate::runtime::get()?;
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("engine-host".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                let inner = drivers::Inner::new(thread_shared.clone());
                let run = std::panic::AssertUnwindSafe(|| {
                    local.block_on(runtime, drivers::run_host(Rc::new(inner), receiver));
                });
                let ended = std::panic::catch_unwind(run);
                // Whoever follows a document learns that nothing more comes (its receiver
                // ends), however the thread ended.
                lock(&thread_shared.followers).clear();
                if ended.is_err() {
                    tracing::error!("the engine host's drivers' thread panicked; its chats stop");
                }
            })?;
        Ok(Arc::new(EngineHost {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// The store that writes `path` now, the one the document session goes through: the
    /// buffer of the most recently active editor that has it open, else the file. For a
    /// front end that writes a chat without a driver (the ACP agent's prompt), so that an
    /// editor's unsaved text is read and its buffer receives the edit.
    pub fn writer(&self, path: &Path) -> Box<dyn ChatStore> {
        self.shared.writer(path)
    }

    /// The host's MCP servers (the tools they offer complete in an editor).
    pub fn mcp_hub(&self) -> &flemma_mcp::McpHub {
        &self.shared.mcp
    }

    /// What the editors' ACP sessions gave the host's chats (their drivers read it).
    pub fn editor_sessions(&self) -> &crate::editor_sessions::EditorSessions {
        &self.shared.services.editors
    }

    /// Hands `command` to the host's state, whose effects go to the drivers' thread.
    fn command(&self, command: Command) -> Result<(), RequestError> {
        self.shared.state.ask(move |owned| owned.command(command))
    }

    /// Answers one request about `document`, the one way every front end reaches the engine.
    /// The document must exist (open in an editor, or a regular file), whatever the request;
    /// `approve`, `reject` and `approveAll` are checked on its text first (a call that is not
    /// pending is refused at once, saying why) unless a driver runs for it, which then decides.
    pub fn call(
        &self,
        document: DocumentRef<'_>,
        request: FlemmaRequest,
    ) -> Result<FlemmaResponse, RequestError> {
        self.call_with(document, request, CallOptions::default())
    }

    /// [`EngineHost::call`], a driver it starts running as `options` say. A request whose
    /// answer needs an evaluation of templates or git work ([`state::answered_off_thread`]) is
    /// answered on a thread of its own, which the caller waits for; every other at once, here.
    pub fn call_with(
        &self,
        document: DocumentRef<'_>,
        request: FlemmaRequest,
        options: CallOptions,
    ) -> Result<FlemmaResponse, RequestError> {
        if !state::answered_off_thread(&request) {
            return self.answer(document, request, options);
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("engine-answer".into())
                .spawn_scoped(scope, || self.answer(document, request, options))
                .map_err(|error| {
                    RequestError::new(
                        flemma_protocol::error::codes::INTERNAL_ERROR,
                        format!("flemmad could not start a thread to answer this request ({error}); try again"),
                    )
                })?
                .join()
                .unwrap_or_else(|_| Err(answer_panicked()))
        })
    }

    /// [`EngineHost::call`] for a caller that must not wait (the language server's main loop):
    /// a request whose answer needs an evaluation of templates or git work
    /// ([`state::answered_off_thread`]) is answered on the process's blocking pool, every other
    /// at once, here. `answer` is given the answer once.
    pub fn call_later(
        self: &Arc<Self>,
        document: DocumentRef<'_>,
        request: FlemmaRequest,
        answer: Answer,
    ) {
        let runtime = match crate::runtime::get() {
            Ok(runtime) if state::answered_off_thread(&request) => runtime,
            _ => return answer(self.answer(document, request, CallOptions::default())),
        };
        let host = self.clone();
        let path = document.path.to_owned();
        let buffer = document.buffer.cloned();
        runtime.spawn_blocking(move || {
            let document = DocumentRef {
                path: &path,
                buffer: buffer.as_ref(),
            };
            // A panic answers too: the editor's request must not wait forever.
            let call = std::panic::AssertUnwindSafe(|| {
                host.answer(document, request, CallOptions::default())
            });
            answer(std::panic::catch_unwind(call).unwrap_or_else(|_| Err(answer_panicked())));
        });
    }

    /// The template cache of the process's analyses: the language server's hosts share it
    /// with the engine's (`AnalysisHost::with_template_cache`).
    pub fn template_cache(&self) -> TemplateCache {
        self.shared.template_cache.clone()
    }

    /// The drivers of the document at `path` once the host's state has decided every request
    /// made before this call: how many started and whether one runs.
    pub fn drivers(&self, path: &Path) -> Drivers {
        let path = path.to_owned();
        self.shared
            .state
            .ask(move |owned| owned.state.drivers(&path))
    }

    /// Every document's events from now on (the host's own `EngineEvent::EngineStopped` included). A
    /// receiver that is dropped is forgotten.
    pub fn subscribe(&self) -> std::sync::mpsc::Receiver<HostEvent> {
        let (sender, receiver) = std::sync::mpsc::channel();
        lock(&self.shared.subscribers).push(sender);
        receiver
    }

    /// Cancels every request and foreground tool (what ran is marked aborted, as the format
    /// says), waits for the writes (at most a few seconds), and stops the drivers' thread.
    /// Background jobs are not cancelled: they stay in the files as running, and the next
    /// start's orphan recovery marks them lost.
    pub fn shutdown(&self) {
        // The thread ends once the drivers have written (at most `drivers::SHUTDOWN_WAIT`) and
        // the shared services are closed.
        let _ = self.command(Command::Shutdown);
        let thread = lock(&self.thread).take();
        // Not joined from the drivers' thread itself (the host dropped there): it ends alone.
        if let Some(thread) = thread.filter(|t| t.thread().id() != std::thread::current().id()) {
            let _ = thread.join();
        }
    }
}

/// A host dropped without [`EngineHost::shutdown`] (an early return) shuts down all the same:
/// its threads hold each other's channels and would otherwise never end.
impl Drop for EngineHost {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
