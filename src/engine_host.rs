//! The engine host: one per process (`flemmad lsp` in-process, `flemmad serve`), shared by
//! every LSP session and the RPC socket. It owns a [`Driver`] for every document being worked
//! on, keyed by absolute path, all running on one thread with a `LocalSet` on the process's
//! runtime.
//!
//! Every front end (the language server, `rpc.sock`, the ACP agent) decodes its requests into
//! `flemma-protocol`'s [`FlemmaRequest`] and hands them to one method, [`EngineHost::call`],
//! with the document it resolved; the answer (or the refusal, a [`RequestError`]) is the same
//! whichever front end asked. Every call returns at once and may be made from any thread: a
//! command for a document whose driver runs is fed to it; otherwise a driver is started (its
//! first input `Load`, for orphan recovery) and ends when nothing runs or is scheduled any
//! more. What happens is told through [`EngineHost::subscribe`] (every document's events) and
//! to the [`Editor`]s that have the document open: its events (the language server sends them
//! as `flemma/event` and turns them into `$/progress`), notices and failures. The host knows no
//! LSP: an editor is whatever implements [`Editor`].
//!
//! **Who writes.** The most recently active editor that has the document open writes it
//! (through the store it gives, [`Editor::store`]); when none has it open, the file on disk is
//! written ([`FileStore`]). The writer changes while a driver runs: a reply streaming when the editor
//! closes goes on into the file, and background jobs survive the editor.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flemma_config::{ConfigLayer, LayerKind, ResolvedConfig};
use flemma_engine::{CancelScope, EngineEvent, Input, StopReason};
use flemma_ide::{ConfigInput, DocumentId};
use flemma_protocol::engine::{
    Accepted, EngineJob, EngineStatus, JobState, JobsResult, ModeResult, ModelSwitch, SwitchResult,
    UsageTotals,
};
use flemma_protocol::error::RequestError;
use flemma_protocol::event::{ConfigUpdated, EngineStopped, ModelRef, StopLabel, StreamedText};
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};
use flemma_template::TemplateCache;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::chat_store::{ChatStore, FileStore, SharedText};
use crate::engine_driver::{Driver, DriverHandle, DriverState, Report};
use crate::engine_setup::{self, SetupError, SetupOptions};

/// An editor that has a document open, as the host sees it: it is told what happens to the
/// document and, as the document's writer, gives the store that writes its buffer. An LSP
/// session implements it for each document it opens (`lsp_backend`).
pub trait Editor: Send + Sync + std::fmt::Debug {
    /// A lifecycle event of the document (the editor shows it; the language server sends it
    /// as `flemma/event` and derives its `$/progress` from it).
    fn event(&self, event: &EngineEvent);
    /// A message for the user that is not an error (a retry, a refused input, a warning).
    fn notice(&self, message: &str);
    /// The engine's work on the document stopped on an error.
    fn failed(&self, message: &str);
    /// The store that writes the document through this editor.
    fn store(&self) -> Box<dyn ChatStore>;
}

/// The client settings of an editor session, as a configuration layer or what is wrong with
/// them.
pub type ClientSettings = Result<ConfigLayer, flemma_config::ConfigErrors>;

/// An editor session's hold on one open document.
#[derive(Debug, Clone)]
pub struct EditorHandle {
    /// The session (unique in the process).
    pub session: u64,
    pub editor: Arc<dyn Editor>,
    /// What the editor and the engine last agreed on (the merge base when it becomes the
    /// writer).
    pub shared: SharedText,
    /// The session's client settings (its `initializationOptions`): used by the sends the
    /// editor starts (it is the writer then).
    pub client_config: Option<ClientSettings>,
}

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

/// `approve` or `reject` of a permission an asked agent waits for (its id is no tool call's:
/// [`crate::agent_permissions`]); `None` for every other request.
fn agent_permission(
    path: &Path,
    request: &FlemmaRequest,
) -> Option<Result<FlemmaResponse, RequestError>> {
    let (id, allow) = match request {
        FlemmaRequest::Approve(p) => (&p.tool_id, true),
        FlemmaRequest::Reject(p) => (&p.tool_id, false),
        _ => return None,
    };
    if !crate::agent_permissions::is_permission_id(id) {
        return None;
    }
    Some(match crate::agent_permissions::answer(path, id, allow) {
        Some(()) => Ok(FlemmaResponse::Accepted(Accepted {
            started: false,
            tool_ids: vec![id.clone()],
        })),
        None => Err(RequestError::refused(format!(
            "`{id}` is not waiting for an answer: it was answered already, or the asked agent's run it belonged to ended"
        ))),
    })
}

fn shutting_down() -> RequestError {
    RequestError::shutting_down("flemmad is shutting down; the command was not run")
}

fn invalid_switch(message: String) -> RequestError {
    RequestError::invalid_params(message)
}

/// How long [`EngineHost::shutdown`] waits for the drivers to write their abort markers.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The engine host. See the module documentation.
#[derive(Debug)]
pub struct EngineHost {
    commands: mpsc::UnboundedSender<HostCommand>,
    shared: Arc<Shared>,
    /// The configuration file (`--config`), else the user's default.
    config_path: Option<PathBuf>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the host's thread and its callers share.
#[derive(Debug)]
struct Shared {
    /// The analysis of the documents the engine works on (one per document, for the drivers
    /// and `flemma/switch`), sharing its template cache with the language server's hosts.
    analyses: crate::analyses::Analyses,
    template_cache: TemplateCache,
    /// The last known state of every document a driver ran for.
    states: Mutex<HashMap<PathBuf, DocumentState>>,
    /// Editors by document, the most recently active last.
    editors: Mutex<HashMap<PathBuf, Vec<EditorHandle>>>,
    subscribers: Mutex<Vec<std::sync::mpsc::Sender<HostEvent>>>,
    /// The runtime layer of every document `flemma/switch` switched, with what it set.
    switches: Mutex<HashMap<PathBuf, (ConfigLayer, ModelSwitch)>>,
    /// The runtime layer of every document `flemma/mode` set a mode for, with that mode.
    modes: Mutex<HashMap<PathBuf, (ConfigLayer, flemma_config::Mode)>>,
    /// The host's MCP servers (the drivers' chats share them), closed when the host stops.
    mcp: flemma_mcp::McpHub,
    /// The host's file watcher and editors' sessions (the drivers' chats share them).
    services: crate::engine_driver::DriverServices,
}

#[derive(Debug, Clone, Default)]
struct DocumentState {
    running: bool,
    driver: Option<DriverState>,
    last_stop: Option<EngineStopped>,
    /// How many drivers started for the document.
    epoch: u64,
    /// The last driver ended with an error (it may have dropped decisions it had not applied).
    last_failed: bool,
    /// The calls decided (approved or rejected) and how, with the driver that handles the
    /// decision (`epoch`): the first decision on a call is the one that counts, whichever front
    /// end sends it, even before a driver has seen it. Forgotten when that driver ends (its
    /// text says it then).
    decided: HashMap<String, (&'static str, u64)>,
}

#[derive(Debug)]
enum HostCommand {
    /// Feed `input` to the document's driver, or start one with `Load` and `input`.
    Input {
        path: PathBuf,
        input: Input,
        /// `Advance` refuses to start a driver when there is nothing to send.
        send: bool,
    },
    /// Feed `input` only to a running driver.
    IfRunning {
        path: PathBuf,
        input: Input,
    },
    /// Compact the document (`flemma/compact`) or undo a compaction (`flemma/compactUndo`):
    /// a driver starts for it (none runs).
    Compact {
        path: PathBuf,
        order: crate::compaction::ByHand,
    },
    /// Rewrite the input of the pending call `tool_id` (`flemma/reviseProposal`): fed to the
    /// running driver, or a driver starts for it.
    Revise {
        path: PathBuf,
        tool_id: String,
        input: serde_json::Value,
    },
    /// The writer of `path` may have changed (an editor attached or detached).
    Writer {
        path: PathBuf,
    },
    Shutdown {
        done: std::sync::mpsc::Sender<()>,
    },
}

impl EngineHost {
    /// The configuration file the host's chats use (`--config`), else the user's default.
    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// Starts the host's thread. `config_path` is the configuration file (`--config`), else
    /// the user's default.
    pub fn start(config_path: Option<PathBuf>) -> anyhow::Result<Arc<EngineHost>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let template_cache = TemplateCache::new();
        let shared = Arc::new(Shared {
            analyses: crate::analyses::analyses(template_cache.clone()),
            template_cache,
            states: Mutex::default(),
            editors: Mutex::default(),
            subscribers: Mutex::default(),
            switches: Mutex::default(),
            modes: Mutex::default(),
            mcp: crate::mcp_setup::new_hub(),
            services: crate::engine_driver::DriverServices::default(),
        });
        let runtime = crate::runtime::get()?;
        let thread_shared = shared.clone();
        let thread_config_path = config_path.clone();
        let thread = std::thread::Builder::new()
            .name("engine-host".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                let inner = Inner {
                    shared: thread_shared,
                    config_path: thread_config_path,
                    slots: RefCell::new(HashMap::new()),
                    tasks: RefCell::new(Vec::new()),
                    stopping: std::cell::Cell::new(false),
                };
                local.block_on(runtime, run_host(Rc::new(inner), receiver));
            })?;
        Ok(Arc::new(EngineHost {
            commands: sender,
            shared,
            config_path,
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

    fn command(&self, command: HostCommand) -> Result<(), RequestError> {
        self.commands.send(command).map_err(|_| shutting_down())
    }

    fn is_running(&self, path: &Path) -> bool {
        lock(&self.shared.states)
            .get(path)
            .is_some_and(|state| state.running)
    }

    fn accepted(&self, path: &Path) -> Accepted {
        Accepted {
            started: !self.is_running(path),
            tool_ids: Vec::new(),
        }
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
        use FlemmaRequest as R;
        let method = request.method();
        let path = document.path;
        self.check_exists(method, document)?;
        if let Some(answered) = agent_permission(path, &request) {
            return answered;
        }
        if matches!(
            request,
            R::Send(_)
                | R::Approve(_)
                | R::Reject(_)
                | R::ApproveAll(_)
                | R::Execute(_)
                | R::ReviseProposal(_)
                | R::ApproveHunks(_)
        ) {
            self.check_driver(path)?;
        }
        Ok(match request {
            R::Send(_) => FlemmaResponse::Accepted(self.send(path)?),
            R::Cancel(_) => FlemmaResponse::Accepted(self.cancel(path)?),
            R::Approve(p) => {
                let input = Input::Approve {
                    tool_id: p.tool_id.clone(),
                };
                FlemmaResponse::Accepted(self.decide(
                    document,
                    Some(&p.tool_id),
                    "approved",
                    input,
                )?)
            }
            R::Reject(p) => {
                let input = Input::Reject {
                    tool_id: p.tool_id.clone(),
                    reason: p.reason.filter(|reason| !reason.trim().is_empty()),
                };
                FlemmaResponse::Accepted(self.decide(
                    document,
                    Some(&p.tool_id),
                    "rejected",
                    input,
                )?)
            }
            R::ApproveAll(_) => FlemmaResponse::Accepted(self.decide(
                document,
                None,
                "approved",
                Input::ApproveAll,
            )?),
            R::Background(p) => FlemmaResponse::Accepted(self.background(path, &p.tool_id)?),
            R::Execute(p) => FlemmaResponse::Accepted(self.execute(path, &p.tool_id)?),
            R::Status(_) => FlemmaResponse::Status(self.status(path)),
            R::Jobs(_) => FlemmaResponse::Jobs(self.jobs(path)),
            R::Usage(_) => FlemmaResponse::Usage(self.usage(path)),
            R::Switch(p) => FlemmaResponse::Switch(self.switch(path, &p.model)?),
            R::Mode(p) => FlemmaResponse::Mode(self.set_mode(path, &p.mode)?),
            R::Compact(p) => FlemmaResponse::Accepted(self.compact(path, p)?),
            R::Proposal(p) => FlemmaResponse::Proposal(crate::proposals::result(
                &self.pending(document, &p.tool_id)?,
            )),
            R::ReviseProposal(p) => FlemmaResponse::Accepted(self.revise(document, p)?),
            R::ApproveHunks(p) => FlemmaResponse::Accepted(self.approve_hunks(document, p)?),
            R::CompactUndo(p) => FlemmaResponse::Accepted(self.compact_undo(document, &p)?),
            R::Changes(p) => FlemmaResponse::Changes(
                crate::checkpoints::changes_result(path, p.tool_id.as_deref())
                    .map_err(checkpoint_refusal)?,
            ),
            R::Rewind(p) => FlemmaResponse::Rewind(self.rewind(document, &p)?),
        })
    }

    /// The pending `write` or `edit` call `tool_id` of `document` (as the caller's buffer, else
    /// the writer's text, says) and its change against the file now.
    fn pending(
        &self,
        document: DocumentRef<'_>,
        tool_id: &str,
    ) -> Result<crate::proposals::Pending, RequestError> {
        let text = match document.buffer {
            Some(buffer) => buffer.text().to_owned(),
            None => self
                .shared
                .text_of(document.path)
                .map_err(RequestError::invalid_params)?,
        };
        crate::proposals::pending(document.path, text, tool_id, self.config_path())
            .map_err(RequestError::refused)
    }

    /// `flemma/reviseProposal`: the call's input rewritten in the chat so that it leaves its
    /// file as `content`, through the document's writer (a driver of its own, or the running
    /// one), so that what an editor types meanwhile is merged, not lost.
    fn revise(
        &self,
        document: DocumentRef<'_>,
        params: flemma_protocol::methods::ReviseParams,
    ) -> Result<Accepted, RequestError> {
        let pending = self.pending(document, &params.tool_id)?;
        let input = crate::proposals::revised_input(&pending, &params.content)
            .map_err(RequestError::refused)?;
        let accepted = Accepted {
            started: !self.is_running(document.path),
            tool_ids: vec![params.tool_id.clone()],
        };
        self.command(HostCommand::Revise {
            path: document.path.to_owned(),
            tool_id: params.tool_id,
            input,
        })?;
        Ok(accepted)
    }

    /// `flemma/approveHunks`: the call is recorded as approved in part (it will run the
    /// narrowed input, its result naming the hunks rejected and why), then approved as
    /// `flemma/approve` does; a refused approval forgets the record.
    fn approve_hunks(
        &self,
        document: DocumentRef<'_>,
        params: flemma_protocol::methods::ApproveHunksParams,
    ) -> Result<Accepted, RequestError> {
        let pending = self.pending(document, &params.tool_id)?;
        crate::proposals::record_in_part(
            document.path,
            &params.tool_id,
            &pending,
            &params.hunks,
            params.reason.as_deref(),
        )
        .map_err(RequestError::refused)?;
        let input = Input::Approve {
            tool_id: params.tool_id.clone(),
        };
        self.decide(document, Some(&params.tool_id), "approved", input)
            .inspect_err(|_| crate::reviewed::forget_partial(document.path, &params.tool_id))
    }

    /// Refuses a document that is neither open in an editor (the caller's or another) nor a
    /// regular file, nor being worked on.
    fn check_exists(&self, method: &str, document: DocumentRef<'_>) -> Result<(), RequestError> {
        let path = document.path;
        if document.buffer.is_some() || self.has_editor(path) || self.is_running(path) {
            return Ok(());
        }
        let problem = match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => return Ok(()),
            Ok(meta) if meta.is_dir() => "is a directory, not a chat file".to_owned(),
            Ok(_) => "is not a regular file".to_owned(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                "does not exist and no editor has it open".to_owned()
            }
            Err(error) => format!("cannot be read ({error})"),
        };
        Err(RequestError::invalid_params(format!(
            "{method}: {} {problem}; name an existing .chat file or a document open in an editor",
            path.display()
        )))
    }

    /// Refuses a command that would start a driver for a chat another process drives (one
    /// driver per chat, across processes: `crate::driver_lock`).
    fn check_driver(&self, path: &Path) -> Result<(), RequestError> {
        if self.is_running(path) {
            return Ok(());
        }
        match crate::driver_lock::DriverLock::owner(path) {
            Some(owner) if owner.pid != std::process::id() => Err(RequestError::refused(format!(
                "{} is being driven by {owner}: nothing was done here; wait for it to finish, or stop it where it runs",
                path.display()
            ))),
            _ => Ok(()),
        }
    }

    /// Decides `tool_id` (or, with `None`, every pending call) as `how` (`approved`,
    /// `rejected`): **the first decision on a call is the one that counts**, whichever front end
    /// sends it and however close together. Under the documents' lock, each call is checked on
    /// what knows it best — a running driver's pending calls, else the caller's buffer, else the
    /// file (read under the lock, so a driver that ended has written it) — and against the
    /// decisions already taken; the decision is recorded with the driver that will handle it.
    /// The decision goes to the host before the lock is released, and the host hands it to the
    /// running driver (which applies everything it got before it ends) or to the next one, so a
    /// recorded decision is in flight until the text shows it — however slow the host is to
    /// route it (found with 8 clients and tools of 50 ms: a decision recorded but not yet
    /// routed looked lost when the driver ended, and a second one was taken). Only a driver
    /// that failed may have dropped decisions: then a new one may be taken. Returns what was
    /// accepted (the ids decided).
    fn decide(
        &self,
        document: DocumentRef<'_>,
        tool_id: Option<&String>,
        how: &'static str,
        input: Input,
    ) -> Result<Accepted, RequestError> {
        use flemma_ide::actions::{ActionError, check_pending, pending_ids};
        let path = document.path;
        let another_editor = document.buffer.is_none() && self.has_editor(path);
        let mut states = lock(&self.shared.states);
        let state = states.entry(path.to_owned()).or_default();
        let handler = state.epoch + u64::from(!state.running);
        // What the text says: the running driver's pending calls, or a document to check.
        let waiting: Option<Vec<String>> = state
            .driver
            .as_ref()
            .filter(|_| state.running)
            .map(|driver| driver.pending.clone());
        let parsed;
        let text: Option<&flemma_syntax::Document> = match (document.buffer, &waiting) {
            (Some(buffer), None) => Some(buffer),
            (None, None) if !state.running && !another_editor => {
                let read = crate::fsutil::read_chat(path)
                    .map_err(|error| RequestError::invalid_params(format!("{error:#}")))?;
                parsed = flemma_syntax::Document::parse(read);
                Some(&parsed)
            }
            _ => None,
        };
        let refused = |error: ActionError| RequestError::invalid_params(error.to_string());
        let pending_now = |id: &str| -> Result<bool, RequestError> {
            match (&waiting, text) {
                (Some(waiting), _) => Ok(waiting.iter().any(|w| w == id)),
                (None, Some(doc)) => Ok(check_pending(doc, id).is_ok()),
                (None, None) => Ok(true),
            }
        };
        let ids: Vec<String> = match tool_id {
            Some(id) => vec![id.clone()],
            None => match (&waiting, text) {
                (Some(waiting), _) => waiting.clone(),
                (None, Some(doc)) => pending_ids(doc),
                (None, None) => Vec::new(),
            },
        };
        if tool_id.is_none() && ids.is_empty() && (waiting.is_some() || text.is_some()) {
            return Err(refused(ActionError::NothingPending));
        }
        let mut decided = Vec::new();
        let mut first_refusal = None;
        for id in &ids {
            let already = |was: &str| {
                RequestError::refused(format!(
                    "`{id}` was already {was}: the first decision on a call (approve, reject or cancel) is the one that counts; edit the chat yourself to change it"
                ))
            };
            let refusal = match (state.decided.get(id.as_str()), pending_now(id)?) {
                // The text says it is decided: say what it says.
                (before, false) => Some(match (text, &waiting, before) {
                    (Some(doc), None, _) => match check_pending(doc, id) {
                        Err(error) => refused(error),
                        Ok(()) => already(before.map_or("decided", |b| b.0)),
                    },
                    (_, _, Some((was, _))) => already(was),
                    _ => RequestError::refused(format!(
                        "`{id}` is not waiting for approval (it was decided already, or it is not in the chat); pending: {}",
                        waiting
                            .as_ref()
                            .filter(|w| !w.is_empty())
                            .map_or_else(|| "none".to_owned(), |w| w.join(", "))
                    )),
                }),
                // Still pending, decided before: in flight (the host hands every decision to the
                // running driver, which applies what it got before it ends, or to the next
                // one), unless the driver failed before applying it.
                (Some((was, by)), true) => {
                    let lost = !state.running && state.last_failed && *by <= state.epoch;
                    (!lost).then(|| already(was))
                }
                (None, true) => None,
            };
            match refusal {
                Some(refusal) => {
                    first_refusal.get_or_insert(refusal);
                }
                None => decided.push(id.clone()),
            }
        }
        if let (true, Some(refusal)) = (decided.is_empty(), first_refusal) {
            return Err(refusal);
        }
        for id in &decided {
            state.decided.insert(id.clone(), (how, handler));
        }
        // The oldest decisions are long in the text: a document keeps the last thousand.
        if state.decided.len() > 1024 {
            let oldest = state
                .decided
                .iter()
                .min_by_key(|(_, (_, by))| *by)
                .map(|(id, _)| id.clone());
            if let Some(id) = oldest {
                state.decided.remove(&id);
            }
        }
        // Handed to the host while the decision's record is held (decisions reach the host in
        // the order they were taken).
        let accepted = Accepted {
            started: !state.running,
            tool_ids: decided,
        };
        self.command(HostCommand::Input {
            path: path.to_owned(),
            input,
            send: false,
        })?;
        drop(states);
        Ok(accepted)
    }

    fn has_editor(&self, path: &Path) -> bool {
        lock(&self.shared.editors).contains_key(path)
    }

    /// `flemma/send`: advance the cycle (stream a reply, run approved tools) with autopilot.
    fn send(&self, path: &Path) -> Result<Accepted, RequestError> {
        let accepted = self.accepted(path);
        self.command(HostCommand::Input {
            path: path.to_owned(),
            input: Input::Advance,
            send: true,
        })?;
        Ok(accepted)
    }

    /// `flemma/cancel`: the request, the foreground tools and the resume timer (background
    /// jobs keep running); what ran is marked aborted as the format says.
    fn cancel(&self, path: &Path) -> Result<Accepted, RequestError> {
        self.running_only(
            path,
            Input::Cancel {
                scope: CancelScope::All,
            },
            "request",
            "cancel",
        )
    }

    /// `flemma/background`: a running foreground tool becomes a background job.
    fn background(&self, path: &Path, tool_id: &str) -> Result<Accepted, RequestError> {
        self.running_only(
            path,
            Input::Background {
                tool_id: tool_id.to_owned(),
            },
            "running tool",
            "move to the background",
        )
    }

    /// `flemma/execute`: run or resolve one tool call now.
    fn execute(&self, path: &Path, tool_id: &str) -> Result<Accepted, RequestError> {
        self.input(
            path,
            Input::Execute {
                tool_id: tool_id.to_owned(),
            },
        )
    }

    /// `flemma/compact`: compacted through a driver of its own, so that the new text is written
    /// by the document's writer like every other write (an editor typing meanwhile loses
    /// nothing); refused while a driver works on the chat (automatic compaction runs there).
    fn compact(
        &self,
        path: &Path,
        params: flemma_protocol::methods::CompactParams,
    ) -> Result<Accepted, RequestError> {
        self.by_hand(
            path,
            crate::compaction::ByHand::Compact(crate::compaction::Order {
                line: params.line.map(|line| line as usize),
                focus: params.focus.filter(|focus| !focus.trim().is_empty()),
                keep: params.keep.map(|keep| (keep as usize).max(1)),
            }),
        )
    }

    /// `flemma/compactUndo`: the turns a compaction replaced put back exactly, through a driver
    /// of its own as `flemma/compact` is. What can be known before is refused at once (no
    /// summary there, an archive that is not this chat's or changed since it was written) on
    /// the caller's buffer, else the file when no editor has it open; the driver checks again
    /// on the text it writes.
    fn compact_undo(
        &self,
        document: DocumentRef<'_>,
        params: &flemma_protocol::methods::CompactUndoParams,
    ) -> Result<Accepted, RequestError> {
        let path = document.path;
        let line = params.line.map(|line| line as usize);
        let text = match document.buffer {
            Some(buffer) => Some(buffer.text().to_owned()),
            // Another editor's buffer is not known here: the driver's text says.
            None if self.has_editor(path) => None,
            None => Some(
                crate::fsutil::read_chat(path)
                    .map_err(|error| RequestError::invalid_params(format!("{error:#}")))?,
            ),
        };
        if let Some(text) = text {
            crate::compaction::plan_undo(path, &text, line)
                .map_err(|refused| RequestError::refused(refused.to_string()))?;
        }
        self.by_hand(path, crate::compaction::ByHand::Undo { line })
    }

    /// `flemma/rewind`: the files put back here (refused while a driver works on the chat),
    /// then the chat cut through a driver of its own as a compaction is, so that an editor
    /// with the chat open gets the cut as an edit. The cut is checked on the caller's buffer
    /// (else the writer's text) first, so that `chat` with `files` changes nothing when the
    /// call is not in the chat.
    fn rewind(
        &self,
        document: DocumentRef<'_>,
        params: &flemma_protocol::methods::RewindParams,
    ) -> Result<flemma_protocol::engine::RewindResult, RequestError> {
        let path = document.path;
        let tool_id = &params.tool_id;
        let dry_run = params.dry_run == Some(true);
        if self.is_running(path) {
            return Err(RequestError::refused(format!(
                "flemmad works on {} (a send, tools or jobs): rewind once it stops (cancel it first)",
                path.display()
            )));
        }
        self.check_driver(path)?;
        let cut = if params.cuts_chat() {
            let text = match document.buffer {
                Some(buffer) => buffer.text().to_owned(),
                None => self
                    .shared
                    .text_of(path)
                    .map_err(RequestError::invalid_params)?,
            };
            let cut =
                crate::rewind_chat::cut_point(&text, tool_id).map_err(RequestError::refused)?;
            Some(flemma_protocol::engine::ChatCut {
                line: cut.line as u64,
                messages: cut.messages as u64,
            })
        } else {
            None
        };
        let mut result = flemma_protocol::engine::RewindResult {
            dry_run,
            restored: Vec::new(),
            removed: Vec::new(),
            changed_since: Vec::new(),
            refused: false,
            chat: None,
            message: String::new(),
        };
        if params.rewinds_files() {
            let plan = crate::checkpoints::of_chat(path, self.config_path())
                .and_then(|checkpoints| {
                    checkpoints.rewind(tool_id, params.force == Some(true), dry_run)
                })
                .map_err(checkpoint_refusal)?;
            result.refused = params.force != Some(true) && !plan.changed_since.is_empty();
            result.restored = plan.restored;
            result.removed = plan.removed;
            result.changed_since = plan.changed_since;
        }
        result.message = crate::rewind_chat::summary(tool_id, &result, cut.as_ref());
        if result.refused {
            return Ok(result);
        }
        result.chat = cut;
        if result.chat.is_some() && !dry_run {
            self.by_hand(
                path,
                crate::compaction::ByHand::Rewind {
                    tool_id: tool_id.clone(),
                },
            )?;
        }
        Ok(result)
    }

    fn by_hand(
        &self,
        path: &Path,
        order: crate::compaction::ByHand,
    ) -> Result<Accepted, RequestError> {
        if self.is_running(path) {
            return Err(RequestError::refused(format!(
                "flemmad works on {} (a send, tools or jobs): {} once it stops (during a send, `context.compact_at` compacts on its own)",
                path.display(),
                match order {
                    crate::compaction::ByHand::Compact(_) => "compact",
                    crate::compaction::ByHand::Undo { .. } => "undo the compaction",
                    crate::compaction::ByHand::Rewind { .. } => "cut the chat back",
                }
            )));
        }
        let accepted = self.accepted(path);
        self.command(HostCommand::Compact {
            path: path.to_owned(),
            order,
        })?;
        Ok(accepted)
    }

    fn input(&self, path: &Path, input: Input) -> Result<Accepted, RequestError> {
        let accepted = self.accepted(path);
        self.command(HostCommand::Input {
            path: path.to_owned(),
            input,
            send: false,
        })?;
        Ok(accepted)
    }

    fn running_only(
        &self,
        path: &Path,
        input: Input,
        what: &'static str,
        action: &'static str,
    ) -> Result<Accepted, RequestError> {
        if !self.is_running(path) {
            return Err(RequestError::refused(format!(
                "nothing runs for {}: there is no {what} to {action}",
                path.display()
            )));
        }
        self.command(HostCommand::IfRunning {
            path: path.to_owned(),
            input,
        })?;
        Ok(Accepted::default())
    }

    /// `flemma/status`.
    fn status(&self, path: &Path) -> EngineStatus {
        let state = lock(&self.shared.states)
            .get(path)
            .cloned()
            .unwrap_or_default();
        let driver = state.driver.as_ref();
        let mut pending = driver.map(|d| d.pending.clone()).unwrap_or_default();
        // The questions asked agents wait for are answered as pending calls are.
        pending.extend(
            crate::agent_permissions::pending(path)
                .into_iter()
                .map(|question| question.id),
        );
        let label = match driver {
            _ if !state.running => {
                if state
                    .last_stop
                    .as_ref()
                    .is_some_and(|stop| stop.reason == StopLabel::AwaitingApproval)
                {
                    StopLabel::AwaitingApproval.as_str()
                } else {
                    "idle"
                }
            }
            Some(d) if d.streaming => "streaming",
            Some(d)
                if !d.running_tools.is_empty()
                    || d.jobs.iter().any(|j| j.state == JobState::Running) =>
            {
                "tools"
            }
            _ => "working",
        };
        EngineStatus {
            path: path.display().to_string(),
            state: label.to_owned(),
            running_tools: driver.map(|d| d.running_tools.clone()).unwrap_or_default(),
            pending,
            jobs: jobs_of(driver),
            usage: usage_of(driver),
            last_stop: state.last_stop.as_ref().map(|stop| match &stop.message {
                Some(message) => format!("{}: {message}", stop.reason),
                None => stop.reason.to_string(),
            }),
            switched: lock(&self.shared.switches)
                .get(path)
                .map(|(_, switched)| switched.clone()),
            mode: lock(&self.shared.modes)
                .get(path)
                .map(|(_, mode)| mode.as_str().to_owned()),
            context: driver.and_then(|d| d.context.clone()).map(Box::new),
        }
    }

    /// `flemma/switch`: the provider and model of the document's next requests, as its
    /// runtime layer (above the user file and the client settings, below the frontmatter).
    /// `model` is `provider/model`, or a model name for the document's current provider.
    fn switch(&self, path: &Path, model: &str) -> Result<SwitchResult, RequestError> {
        let (provider, model) = parse_model_spec(model)?;
        let text = self.shared.text_of(path).map_err(invalid_switch)?;
        // The current provider: the document's, under its layers as they are now.
        let mut input = self.shared.config_input(path, self.config_path.as_deref());
        let frontmatter = self.shared.frontmatter_layers(path, &text)?;
        let before = resolved_config(path, &input, &frontmatter)?;
        let provider = provider.unwrap_or_else(|| before.config.provider.as_str().to_owned());
        let mut layer = ConfigLayer::new(LayerKind::Runtime);
        // A model string with parameters or a `$preset` says its provider itself: the runtime
        // layer holds it as written and the configuration resolves it.
        let model_string = model
            .as_deref()
            .filter(|m| m.starts_with('$') || m.contains(';'))
            .map(|m| match m.starts_with('$') {
                true => m.to_owned(),
                false => format!("{provider}/{m}"),
            });
        let pairs = match &model_string {
            Some(string) => [("provider", None), ("model", Some(string))],
            None => [("provider", Some(&provider)), ("model", model.as_ref())],
        };
        for (key, value) in pairs {
            let Some(value) = value else { continue };
            layer
                .set(key, serde_json::Value::String(value.clone()))
                .map_err(|error| {
                    invalid_switch(format!(
                        "cannot switch to `{provider}/{}`: {error}; name a model as `provider/model` (`flemmad models` lists them), a model of the current provider, or a provider alone",
                        model.as_deref().unwrap_or_default()
                    ))
                })?;
        }
        input.layers.retain(|l| l.kind() != LayerKind::Runtime);
        input.layers.push(layer.clone());
        let after = resolved_config(path, &input, &frontmatter)?;
        let next = ModelSwitch {
            provider: after.config.provider.as_str().to_owned(),
            model: after.config.model.clone(),
        };
        // A provider alone switches to its default model (the config's rule).
        let switched = match (model, provider.parse::<flemma_config::Provider>()) {
            _ if model_string.is_some() => next.clone(),
            (Some(model), _) => ModelSwitch { provider, model },
            (None, Ok(kind)) => ModelSwitch {
                model: flemma_config::default_model(kind).to_owned(),
                provider,
            },
            (None, Err(_)) => ModelSwitch {
                model: after.config.model.clone(),
                provider,
            },
        };
        let frontmatter_wins = [after.source_of("provider"), after.source_of("model")]
            .contains(&Some(LayerKind::Frontmatter));
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let message = if frontmatter_wins {
            format!(
                "switched {name} to {}/{}, but its frontmatter sets the {}, which wins: the next request uses {}/{}; remove `provider`/`model` from the frontmatter for the switch to take effect",
                switched.provider,
                switched.model,
                if after.source_of("model") == Some(LayerKind::Frontmatter) {
                    "model"
                } else {
                    "provider"
                },
                next.provider,
                next.model
            )
        } else {
            format!(
                "the next request of {name} uses {}/{}",
                next.provider, next.model
            )
        };
        lock(&self.shared.switches).insert(path.to_owned(), (layer, switched.clone()));
        self.shared.publish(
            path,
            EngineEvent::ConfigUpdated(ConfigUpdated {
                layer: LayerKind::Runtime.as_str().to_owned(),
                provider: switched.provider.clone(),
                model: switched.model.clone(),
                next: ModelRef {
                    provider: next.provider.clone(),
                    model: next.model.clone(),
                },
                frontmatter_wins,
            }),
        );
        Ok(SwitchResult {
            switched,
            next,
            frontmatter_wins,
            message,
        })
    }

    /// `flemma/mode`: what the document's tools may change from its next send on, as a
    /// runtime layer of its own (the frontmatter may make it stricter, docs/modes.md).
    fn set_mode(&self, path: &Path, name: &str) -> Result<ModeResult, RequestError> {
        let Some(mode) = flemma_config::Mode::parse(name) else {
            return Err(RequestError::invalid_params(format!(
                "unknown mode `{name}`; the modes are {} (docs/modes.md)",
                flemma_config::MODES.join(", ")
            )));
        };
        let mut layer = ConfigLayer::new(LayerKind::Runtime);
        layer
            .set("mode", serde_json::Value::String(name.to_owned()))
            .map_err(|error| RequestError::invalid_params(error.to_string()))?;
        let effective = self.resolved_mode(path, Some(layer.clone()))?;
        lock(&self.shared.modes).insert(path.to_owned(), (layer, mode));
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let message = if effective == mode {
            format!(
                "{name} is in {} mode from its next send: {}",
                mode.as_str(),
                mode.description()
            )
        } else {
            format!(
                "set {name} to {} mode, but its frontmatter sets the stricter {} mode, which wins: {}",
                mode.as_str(),
                effective.as_str(),
                effective.description()
            )
        };
        Ok(ModeResult {
            mode: mode.as_str().to_owned(),
            effective: effective.as_str().to_owned(),
            message,
        })
    }

    /// The mode the document's tools run in at its next send (docs/modes.md): its
    /// configuration's, with `flemma/mode`'s layer (or `instead`, a new one) and its
    /// frontmatter.
    pub fn resolved_mode(
        &self,
        path: &Path,
        instead: Option<ConfigLayer>,
    ) -> Result<flemma_config::Mode, RequestError> {
        let text = self.shared.text_of(path).map_err(invalid_switch)?;
        let mut input = self.shared.config_input(path, self.config_path.as_deref());
        if let Some(layer) = instead {
            let set_before = lock(&self.shared.modes).get(path).map(|(l, _)| l.clone());
            input.layers.retain(|l| Some(l) != set_before.as_ref());
            input.layers.push(layer);
        }
        let frontmatter = self.shared.frontmatter_layers(path, &text)?;
        Ok(resolved_config(path, &input, &frontmatter)?.config.mode)
    }

    /// The document's configuration as its next request resolves it (its layers, its
    /// `flemma/switch` and `flemma/mode` layers, its frontmatter).
    pub fn resolved_config(&self, path: &Path) -> Result<ResolvedConfig, RequestError> {
        let text = self.shared.text_of(path).map_err(invalid_switch)?;
        let input = self.shared.config_input(path, self.config_path.as_deref());
        let frontmatter = self.shared.frontmatter_layers(path, &text)?;
        resolved_config(path, &input, &frontmatter)
    }

    /// The model the document's `flemma/switch` layer holds, as written (a `$preset` stays
    /// one, a model string keeps its parameters); `None` before any switch.
    pub fn switched_model(&self, path: &Path) -> Option<String> {
        lock(&self.shared.switches)
            .get(path)
            .and_then(|(layer, _)| layer.get("model"))
            .and_then(|value| value.as_str().map(str::to_owned))
    }

    /// `flemma/jobs`.
    fn jobs(&self, path: &Path) -> JobsResult {
        let states = lock(&self.shared.states);
        JobsResult {
            jobs: jobs_of(states.get(path).and_then(|s| s.driver.as_ref())),
        }
    }

    /// `flemma/usage`.
    fn usage(&self, path: &Path) -> UsageTotals {
        let states = lock(&self.shared.states);
        usage_of(states.get(path).and_then(|s| s.driver.as_ref()))
    }

    /// The template cache of the process's analyses: the language server's hosts share it
    /// with the engine's (`AnalysisHost::with_template_cache`).
    pub fn template_cache(&self) -> TemplateCache {
        self.shared.template_cache.clone()
    }

    /// Every document's events from now on (the host's own `EngineEvent::EngineStopped` included). A
    /// receiver that is dropped is forgotten.
    pub fn subscribe(&self) -> std::sync::mpsc::Receiver<HostEvent> {
        let (sender, receiver) = std::sync::mpsc::channel();
        lock(&self.shared.subscribers).push(sender);
        receiver
    }

    /// `editor` has `path` open (or was just active on it): it becomes the document's writer.
    pub fn attach_editor(&self, path: &Path, editor: EditorHandle) {
        {
            let mut editors = lock(&self.shared.editors);
            let list = editors.entry(path.to_owned()).or_default();
            let changed = list
                .last()
                .is_none_or(|last| last.session != editor.session);
            list.retain(|e| e.session != editor.session);
            list.push(editor);
            if !changed {
                return;
            }
        }
        let _ = self.command(HostCommand::Writer {
            path: path.to_owned(),
        });
    }

    /// `session`'s client settings changed: its editors carry the new ones (the writer stays).
    pub fn set_client_config(&self, session: u64, config: Option<ClientSettings>) {
        for list in lock(&self.shared.editors).values_mut() {
            for editor in list.iter_mut().filter(|e| e.session == session) {
                editor.client_config = config.clone();
            }
        }
    }

    /// `session` closed `path` (or ended): the next most recent editor writes it, else the
    /// file on disk.
    pub fn detach_editor(&self, path: &Path, session: u64) {
        {
            let mut editors = lock(&self.shared.editors);
            let Some(list) = editors.get_mut(path) else {
                return;
            };
            list.retain(|e| e.session != session);
            if list.is_empty() {
                editors.remove(path);
            }
        }
        let _ = self.command(HostCommand::Writer {
            path: path.to_owned(),
        });
    }

    /// Cancels every request and foreground tool (what ran is marked aborted, as the format
    /// says), waits for the writes (at most a few seconds), and stops the host's thread.
    /// Background jobs are not cancelled: they stay in the files as running, and the next
    /// start's orphan recovery marks them lost.
    pub fn shutdown(&self) {
        let (done, finished) = std::sync::mpsc::channel();
        if self.commands.send(HostCommand::Shutdown { done }).is_ok() {
            let _ = finished.recv_timeout(SHUTDOWN_WAIT + Duration::from_secs(1));
        }
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

/// `provider/model`, a bare model name, or a provider alone (`None` model: its default); the
/// provider is checked by the config schema.
fn parse_model_spec(spec: &str) -> Result<(Option<String>, Option<String>), RequestError> {
    let malformed = |why: &str| {
        invalid_switch(format!(
            "`{spec}` is not a model: {why}; name it as `provider/model` (e.g. `anthropic/claude-sonnet-4-5`) or as a model of the current provider (`flemmad models` lists them)"
        ))
    };
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(malformed("it is empty"));
    }
    if spec.chars().any(char::is_whitespace) {
        return Err(malformed("it contains spaces"));
    }
    match spec.split_once('/') {
        None if flemma_config::Provider::ALL
            .iter()
            .any(|provider| provider.as_str() == spec) =>
        {
            Ok((Some(spec.to_owned()), None))
        }
        None => Ok((None, Some(spec.to_owned()))),
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => {
            Ok((Some(provider.to_owned()), Some(model.to_owned())))
        }
        Some(_) => Err(malformed("the provider or the model after `/` is missing")),
    }
}

/// The document's configuration resolved under `config` and its frontmatter's layers.
fn resolved_config(
    path: &Path,
    config: &ConfigInput,
    frontmatter: &[ConfigLayer],
) -> Result<ResolvedConfig, RequestError> {
    let does_not_resolve = || {
        invalid_switch(format!(
            "the configuration of {} does not resolve; fix its diagnostics first",
            path.display()
        ))
    };
    if !config.errors.is_empty() {
        return Err(does_not_resolve());
    }
    let layers: Vec<ConfigLayer> = config.layers.iter().chain(frontmatter).cloned().collect();
    flemma_config::resolve(&layers).map_err(|_| does_not_resolve())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn jobs_of(driver: Option<&DriverState>) -> Vec<EngineJob> {
    driver.map(|d| d.jobs.clone()).unwrap_or_default()
}

fn usage_of(driver: Option<&DriverState>) -> UsageTotals {
    driver
        .map(|d| {
            crate::usage_report::totals(&d.usage, d.cost, d.cache_saved, d.rate_limits.as_ref())
        })
        .unwrap_or_default()
}

impl Shared {
    /// The layers below the frontmatter of `path`'s next request: the user file, the client
    /// settings of the editor that writes it, and its runtime switch.
    fn config_input(&self, path: &Path, config_path: Option<&Path>) -> ConfigInput {
        let mut input = crate::chat::config_input(config_path);
        let client = lock(&self.editors)
            .get(path)
            .and_then(|list| list.last())
            .and_then(|editor| editor.client_config.clone());
        if let Some(read) = client {
            input = input.with_layer(read);
        }
        if let Some((layer, _)) = lock(&self.switches).get(path) {
            input.layers.push(layer.clone());
        }
        if let Some((layer, _)) = lock(&self.modes).get(path) {
            input.layers.push(layer.clone());
        }
        input
    }

    /// The layers the document's frontmatter sets, from the document's one analysis (the
    /// engine's, when a driver works on it; else made for this question and not kept).
    fn frontmatter_layers(
        &self,
        path: &Path,
        text: &str,
    ) -> Result<Vec<ConfigLayer>, RequestError> {
        let id = DocumentId::new(std::path::absolute(path).unwrap_or_else(|_| path.to_owned()));
        let mut fresh = false;
        let analysis = crate::analyses::analysis(&self.analyses, &id, true, |host| {
            fresh = host.document(&id).is_none();
            if fresh {
                host.set_text(id.clone(), text.to_owned());
            }
        });
        if fresh {
            crate::analyses::lock(&self.analyses).forget(&id);
        }
        Ok(analysis
            .map_err(|error| invalid_switch(error.to_string()))?
            .layers
            .iter()
            .filter(|layer| layer.kind() == LayerKind::Frontmatter)
            .cloned()
            .collect())
    }

    /// The document's text now: the writer editor's buffer as last shared, else the file.
    fn text_of(&self, path: &Path) -> Result<String, String> {
        if let Some(editor) = lock(&self.editors).get(path).and_then(|list| list.last()) {
            return Ok(editor.shared.get().to_string());
        }
        crate::fsutil::read_chat(path).map_err(|error| format!("{error:#}"))
    }

    /// The store that writes `path` now: the most recently active editor, else the file.
    fn writer(&self, path: &Path) -> Box<dyn ChatStore> {
        match lock(&self.editors).get(path).and_then(|list| list.last()) {
            Some(editor) => editor.editor.store(),
            None => Box::new(FileStore {
                path: path.to_owned(),
            }),
        }
    }

    /// The session of the editor that writes `path` now (`None`: the file).
    fn writer_session(&self, path: &Path) -> Option<u64> {
        lock(&self.editors)
            .get(path)
            .and_then(|list| list.last())
            .map(|e| e.session)
    }

    /// Tells every editor that has `path` open.
    fn tell_editors(&self, path: &Path, tell: impl Fn(&dyn Editor)) {
        let editors = lock(&self.editors).get(path).cloned().unwrap_or_default();
        for editor in editors {
            tell(editor.editor.as_ref());
        }
    }

    fn publish(&self, path: &Path, event: EngineEvent) {
        self.tell_editors(path, |editor| editor.event(&event));
        self.publish_to_subscribers(path, event);
    }

    fn publish_to_subscribers(&self, path: &Path, event: EngineEvent) {
        let host_event = HostEvent {
            path: path.to_owned(),
            event,
        };
        lock(&self.subscribers).retain(|s| s.send(host_event.clone()).is_ok());
    }

    fn set_state(&self, path: &Path, update: impl FnOnce(&mut DocumentState)) {
        update(lock(&self.states).entry(path.to_owned()).or_default());
    }
}

/// The host thread's own state.
struct Inner {
    shared: Arc<Shared>,
    config_path: Option<PathBuf>,
    slots: RefCell<HashMap<PathBuf, Slot>>,
    tasks: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    stopping: std::cell::Cell<bool>,
}

/// A document with a driver.
enum Slot {
    /// Being set up: inputs (and revisions of a call's input) that arrive meanwhile wait here.
    Starting {
        queued: Vec<Input>,
        revisions: Vec<(String, serde_json::Value)>,
    },
    Running(DriverHandle),
}

async fn run_host(inner: Rc<Inner>, mut receiver: mpsc::UnboundedReceiver<HostCommand>) {
    while let Some(command) = receiver.recv().await {
        match command {
            HostCommand::Input { path, input, send } => {
                if inner.stopping.get() {
                    continue;
                }
                let mut slots = inner.slots.borrow_mut();
                match slots.get_mut(&path) {
                    Some(Slot::Starting { queued, .. }) => queued.push(input),
                    Some(Slot::Running(handle)) => {
                        handle.input(input);
                    }
                    None => {
                        drop(slots);
                        start_driver(&inner, path, First::Input(input), send);
                    }
                }
            }
            HostCommand::IfRunning { path, input } => {
                match inner.slots.borrow_mut().get_mut(&path) {
                    Some(Slot::Starting { queued, .. }) => queued.push(input),
                    Some(Slot::Running(handle)) => {
                        handle.input(input);
                    }
                    None => {}
                }
            }
            HostCommand::Compact { path, order } => {
                if inner.stopping.get() {
                    continue;
                }
                if inner.slots.borrow().contains_key(&path) {
                    inner.shared.tell_editors(&path, |editor| {
                        editor.notice("not compacted: a send started on the chat meanwhile");
                    });
                    continue;
                }
                start_driver(&inner, path, First::Compact(order), false);
            }
            HostCommand::Revise {
                path,
                tool_id,
                input,
            } => {
                if inner.stopping.get() {
                    continue;
                }
                let mut slots = inner.slots.borrow_mut();
                match slots.get_mut(&path) {
                    Some(Slot::Starting { revisions, .. }) => revisions.push((tool_id, input)),
                    Some(Slot::Running(handle)) => {
                        handle.revise(tool_id, input);
                    }
                    None => {
                        drop(slots);
                        start_driver(&inner, path, First::Revise(tool_id, input), false);
                    }
                }
            }
            HostCommand::Writer { path } => {
                if let Some(Slot::Running(handle)) = inner.slots.borrow().get(&path) {
                    handle.set_store(inner.shared.writer(&path));
                }
            }
            HostCommand::Shutdown { done } => {
                inner.stopping.set(true);
                for slot in inner.slots.borrow().values() {
                    if let Slot::Running(handle) = slot {
                        handle.leave();
                    }
                }
                let tasks: Vec<_> = inner.tasks.borrow_mut().drain(..).collect();
                let all = futures_join(tasks);
                if tokio::time::timeout(SHUTDOWN_WAIT, all).await.is_err() {
                    tracing::warn!("drivers still writing after shutdown began; stopping anyway");
                }
                // The MCP servers live on this thread's runtime: close them before it ends.
                inner.shared.mcp.shutdown().await;
                crate::agent_setup::shutdown().await;
                let _ = done.send(());
                return;
            }
        }
    }
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        let _ = task.await;
    }
}

/// Sets up and runs one driver for `path` until nothing runs any more.
/// Starts the driver of `path` (none runs) for `first`.
fn start_driver(inner: &Rc<Inner>, path: PathBuf, first: First, send: bool) {
    inner.slots.borrow_mut().insert(
        path.clone(),
        Slot::Starting {
            queued: Vec::new(),
            revisions: Vec::new(),
        },
    );
    let task = tokio::task::spawn_local(drive(inner.clone(), path, first, send));
    let mut tasks = inner.tasks.borrow_mut();
    // A finished driver's handle holds its task's memory: forget it.
    tasks.retain(|task| !task.is_finished());
    tasks.push(task);
}

/// A checkpoint's failure as the answer of `flemma/changes` or `flemma/rewind`: a call with no
/// checkpoint is the caller's mistake, the rest flemmad's.
fn checkpoint_refusal(error: crate::checkpoints::CheckpointError) -> RequestError {
    match error {
        crate::checkpoints::CheckpointError::UnknownCall(_) => {
            RequestError::invalid_params(error.to_string())
        }
        other => RequestError::refused(other.to_string()),
    }
}

/// What a driver starts for.
enum First {
    Input(Input),
    Compact(crate::compaction::ByHand),
    /// A pending call's input rewritten (`flemma/reviseProposal`).
    Revise(String, serde_json::Value),
}

async fn drive(inner: Rc<Inner>, path: PathBuf, first: First, send: bool) {
    let shared = inner.shared.clone();
    shared.set_state(&path, |state| {
        state.running = true;
        state.epoch += 1;
    });
    // One driver per chat across processes: held while this one runs.
    let outcome =
        match crate::driver_lock::DriverLock::acquire(&path, &crate::driver_lock::process_role()) {
            Ok(_lock) => run_driver(&inner, &path, first, send).await,
            Err(busy) => Err(busy.to_string()),
        };
    inner.slots.borrow_mut().remove(&path);
    let stopped = match &outcome {
        Ok(reason) => EngineStopped {
            reason: reason.label(),
            message: reason.message(),
        },
        Err(message) => EngineStopped {
            reason: StopLabel::Error,
            message: Some(message.clone()),
        },
    };
    if let Some(message) = &stopped.message {
        shared.tell_editors(&path, |editor| editor.failed(message));
    }
    shared.set_state(&path, |state| {
        state.running = false;
        state.last_failed = outcome.is_err();
        state.last_stop = Some(stopped.clone());
    });
    shared.publish(&path, EngineEvent::EngineStopped(stopped));
}

async fn run_driver(
    inner: &Rc<Inner>,
    path: &Path,
    first: First,
    send: bool,
) -> Result<StopReason, String> {
    let shared = inner.shared.clone();
    let writer = shared.writer_session(path);
    let store = shared.writer(path);
    let snapshot = store.read().await.map_err(|e| format!("{e:#}"))?;
    let prepared = match engine_setup::prepare(
        path,
        &snapshot.text,
        shared.config_input(path, inner.config_path.as_deref()),
        SetupOptions::default(),
        &shared.analyses,
        &shared.mcp,
        &shared.services,
    )
    .await
    {
        Ok(prepared) => prepared,
        Err(error @ SetupError::Blocked { .. }) => return Err(error.to_string()),
        Err(SetupError::Failed(message)) => return Err(message),
    };
    if send && !prepared.nothing_to_send.is_empty() {
        let reasons: Vec<String> = prepared
            .nothing_to_send
            .iter()
            .map(|d| d.message.clone())
            .collect();
        return Err(format!("nothing was sent: {}", reasons.join("; ")));
    }
    for warning in prepared
        .model_warnings
        .iter()
        .chain(&prepared.tool_warnings)
    {
        let message = format!("warning: {warning}");
        shared.tell_editors(path, |editor| editor.notice(&message));
    }
    // Said once per send: what the untrusted chat's frontmatter set that was ignored.
    if let Some(event) = engine_setup::trust_notice(&prepared.analysis) {
        shared.publish(path, event);
    }
    let report_shared = shared.clone();
    let report_path = path.to_owned();
    let report = Box::new(move |report: Report| match report {
        Report::Event(event) => {
            // A compaction is told to the editors too (it rewrote their chat).
            match &event {
                EngineEvent::ContextCompacted(data) => {
                    let notice = crate::compaction::notice(data);
                    report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
                }
                EngineEvent::ContextCompactionFailed(failed) => {
                    report_shared
                        .tell_editors(&report_path, |editor| editor.notice(&failed.message));
                }
                EngineEvent::ContextRestored(data) => {
                    let notice = crate::compaction::restored_notice(data);
                    report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
                }
                EngineEvent::ChatRewound(data) => {
                    let notice = crate::rewind_chat::notice(data);
                    report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
                }
                EngineEvent::ChatRewindFailed(failed) => {
                    report_shared
                        .tell_editors(&report_path, |editor| editor.notice(&failed.message));
                }
                _ => {}
            }
            report_shared.publish(&report_path, event)
        }
        Report::Notice(notice) => {
            report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
        }
        Report::Text(text) => report_shared.publish_to_subscribers(
            &report_path,
            EngineEvent::RequestText(StreamedText { text }),
        ),
        Report::Thinking(text) => report_shared.publish_to_subscribers(
            &report_path,
            EngineEvent::RequestThinking(StreamedText { text }),
        ),
    });
    let mut driver = Driver::with_store(prepared.parts, store, snapshot, report);
    let state_shared = shared.clone();
    let state_path = path.to_owned();
    driver.on_state(Box::new(move |state: DriverState| {
        state_shared.set_state(&state_path, |doc| doc.driver = Some(state));
    }));
    let handle = driver.commands();
    let (queued, revisions) = match inner
        .slots
        .borrow_mut()
        .insert(path.to_owned(), Slot::Running(handle.clone()))
    {
        Some(Slot::Starting { queued, revisions }) => (queued, revisions),
        _ => (Vec::new(), Vec::new()),
    };
    // The writer may have changed while the driver was set up.
    if shared.writer_session(path) != writer {
        handle.set_store(shared.writer(path));
    }
    let mut inputs = vec![Input::Load];
    match first {
        First::Input(input) => inputs.push(input),
        First::Compact(order) => driver.by_hand(order),
        // After `Load` (the revision is a message the driver reads once it runs).
        First::Revise(tool_id, input) => {
            handle.revise(tool_id, input);
        }
    }
    for (tool_id, input) in revisions {
        handle.revise(tool_id, input);
    }
    inputs.extend(queued);
    if inner.stopping.get() {
        handle.leave();
    }
    driver
        // Stopped through `leave` (shutdown), never interrupted like a Ctrl-C.
        .run(inputs, CancellationToken::new())
        .await
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_names_a_provider_and_model_a_model_or_a_provider() {
        let spec = |s: &str| parse_model_spec(s).map_err(|e| e.to_string());
        assert_eq!(
            spec("anthropic/claude-sonnet-4-5"),
            Ok((Some("anthropic".into()), Some("claude-sonnet-4-5".into())))
        );
        assert_eq!(spec("gpt-5"), Ok((None, Some("gpt-5".into()))));
        assert_eq!(spec("openai"), Ok((Some("openai".into()), None)));
        // A model id may hold a slash of its own (OpenRouter names).
        assert_eq!(
            spec("openai-compatible/meta-llama/llama-3"),
            Ok((
                Some("openai-compatible".into()),
                Some("meta-llama/llama-3".into())
            ))
        );
        for bad in ["", "  ", "openai/", "/gpt-5", "gpt 5"] {
            let Err(message) = spec(bad) else {
                panic!("`{bad}` is refused");
            };
            assert!(message.contains("provider/model"), "{message}");
        }
    }
}
