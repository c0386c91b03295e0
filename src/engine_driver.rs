//! The runner of one document session (`flemma_engine::session::Session`): it performs the
//! session's effects — store reads and compare-and-swap replacements through a [`ChatStore`]
//! (the file on disk, or an editor's buffer), requests streamed with the provider client, tools
//! run on their own threads, timers, wake-ups — and feeds the outcomes back as inputs, until
//! the session says it is done. It decides nothing: who writes, when, and how changes made by
//! others merge are the session's. `flemmad send` is one user; the engine host owns one per
//! document being worked on, and feeds it commands while it runs through its
//! [`DriverHandle`].

mod by_hand;
mod decisions;
mod effects;
mod handle;
mod inputs;
mod request;
mod tools;

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_engine::session::{Input, Session, SessionConfig, StoreId, StoreKind};
use flemma_engine::{
    Engine, EngineConfig, EngineEvent, Input as EngineInput, Millis, RequestId, StopReason, TimerId,
};
use flemma_ide::DocumentId;
use flemma_provider::http::ProviderClient;
use flemma_tools::Cancel;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::chat_store::{ChatStore, FileStore, Snapshot};
use crate::provider_setup::ProviderSetup;
use crate::tool_setup::{SetupPolicy, ToolSetup};
use crate::trust::CallRecords;
use decisions::{DiskWatch, Warned};
pub use handle::{DriverHandle, DriverState};
use inputs::{changed_on_disk, sleep_until};

/// The file's store number (the session hands over to it when an editor goes away).
const FILE: StoreId = 0;
/// How often a store nobody tells the session about is read for others' changes.
const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// The same while the file watcher tells of every change: a safety net only.
const WATCHED_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// What the driver tells its user as it goes.
#[derive(Debug, Clone)]
pub enum Report {
    /// A lifecycle event of the engine.
    Event(EngineEvent),
    /// Reply text as it streams in.
    Text(String),
    /// Thinking text as it streams in.
    Thinking(String),
    /// A notice for a human (retries, warnings, refused inputs).
    Notice(String),
}

/// Everything the driver needs besides the text.
pub struct DriverParts {
    /// The chat file (written through a [`FileStore`] unless [`Driver::with_store`] says
    /// otherwise, and when an editor's store goes away).
    pub path: PathBuf,
    pub engine: EngineConfig,
    pub tools: Arc<ToolSetup>,
    pub provider: ProviderSetup,
    pub client: Arc<ProviderClient>,
    /// Evaluates the text for each request (templates, includes, frontmatter): the process's
    /// one host of the engine's documents.
    pub host: crate::analyses::Analyses,
    pub id: DocumentId,
    /// Coalescing window of the writes.
    pub coalesce: Duration,
    /// Set when the chat is not trusted: its engine runs its calls only as far as flemmad saw
    /// them happen (these records, and what it sees itself, which it records here).
    pub untrusted: Option<Arc<CallRecords>>,
    /// What the chat's last driver left when it did not end cleanly (`crate::interruptions`).
    pub recovery: flemma_engine::Recovery,
    /// What the owner of the drivers shares with each.
    pub services: DriverServices,
}

/// What the owner of the drivers (the engine host, `flemmad send`) owns and hands to each of
/// them, instead of a process-wide global: the process's context, the file watcher, the
/// editors' sessions, the agents `ask_agent` asks and the records of interrupted drivers.
#[derive(Debug, Clone)]
pub struct DriverServices {
    /// The process's folders and configuration choice (read once in `main`).
    pub context: Arc<crate::process_context::ProcessContext>,
    /// Tells of changes made on disk by others.
    pub watcher: crate::watcher::ChatWatcher,
    /// What ACP sessions gave the chats (MCP servers, the client's files).
    pub editors: crate::editor_sessions::EditorSessions,
    /// The agents the chats' `ask_agent` asks, and their questions.
    pub agents: crate::agent_setup::AskedAgents,
    /// What a driver that does not end cleanly leaves for the next one.
    pub interruptions: crate::interruptions::Interruptions,
}

impl DriverServices {
    /// New services (no chat watched yet) for the drivers of a process with `context`.
    pub fn new(context: Arc<crate::process_context::ProcessContext>) -> Self {
        Self {
            interruptions: crate::interruptions::Interruptions::for_dirs(&context.dirs),
            watcher: crate::watcher::ChatWatcher::new(context.poll_files),
            context,
            editors: crate::editor_sessions::EditorSessions::default(),
            agents: crate::agent_setup::AskedAgents::default(),
        }
    }
}

/// What arrives from the driver's tasks and threads.
enum Message {
    Session(Input),
    /// A pending call's input rewritten ([`DriverHandle::revise`]).
    Revise(String, serde_json::Value),
    /// An event a running tool tells (`tool:progress`, `agent:permission-required`).
    Event(EngineEvent),
    Notice(String),
    /// A warning about a request: said once per driver (one send), however many requests of
    /// the cycle it concerns.
    Warning(String),
    Writer(Box<dyn ChatStore>),
    /// The summary of an automatic compaction came back (or failed).
    Compacted(Box<crate::compaction::AutoSummary>),
    /// The session read the writer after `Input::Sync` (`Effect::Synced`): the summary that
    /// waited for it is written now.
    Synced,
    /// Undo a compaction (`flemma/compactUndo`): the summary holding this line, else the last.
    Restore(Option<usize>),
    /// Cut the chat back to before the answer that made this call (`flemma/rewind`).
    CutChat(String),
}

/// One session and the IO it performs.
pub struct Driver {
    session: Session,
    /// The stores by number: the file is [`FILE`].
    stores: HashMap<StoreId, Rc<dyn ChatStore>>,
    path: PathBuf,
    tools: Arc<ToolSetup>,
    provider: ProviderSetup,
    client: Arc<ProviderClient>,
    host: crate::analyses::Analyses,
    id: DocumentId,
    /// The records of an untrusted chat's calls (see [`DriverParts::untrusted`]).
    records: Option<Arc<CallRecords>>,
    /// The watcher and the editors' sessions (see [`DriverParts::services`]).
    services: DriverServices,
    epoch: Instant,
    /// When the session wants a tick.
    wake: Option<Instant>,
    /// The last state reported.
    state: Option<DriverState>,
    sender: mpsc::UnboundedSender<Message>,
    receiver: mpsc::UnboundedReceiver<Message>,
    request: Option<(RequestId, CancellationToken)>,
    tools_running: HashMap<String, Cancel>,
    timers: HashMap<TimerId, tokio::task::JoinHandle<()>>,
    /// The file as the driver last read or wrote it: the watcher's news of that very file is
    /// the driver's own write, not a change.
    disk: DiskWatch,
    /// How the session ended, once it did.
    outcome: Option<Result<StopReason, String>>,
    report: Box<dyn FnMut(Report) + Send>,
    on_state: Option<Box<dyn FnMut(DriverState)>>,
    /// The request warnings already said.
    warned: Warned,
    /// The context meter of the chat's requests (each message's estimate kept while the
    /// message is unchanged).
    meter: flemma_provider::Meter,
    /// The meter of the last request sent (`flemma/status`).
    context: Option<flemma_protocol::status::ContextStatus>,
    /// Automatic compaction before a request (`context.compact_at`).
    auto: crate::compaction::Auto,
    /// A compaction asked for by hand waits for its summary: the driver does not end.
    compacting: bool,
    /// A compaction's summary, back, waiting for the session to read the writer (`Synced`).
    summary_waiting: Option<Box<crate::compaction::AutoSummary>>,
    /// The compactions undone: their archives are removed once the file holds their turns.
    restored: Vec<crate::compaction::Restore>,
}

impl Driver {
    /// A driver writing through `store`, whose text is `stored` (as just read from it).
    pub fn with_store(
        parts: DriverParts,
        store: Box<dyn ChatStore>,
        stored: Snapshot,
        report: Box<dyn FnMut(Report) + Send>,
    ) -> Self {
        let policy = Arc::new(SetupPolicy(parts.tools.clone()));
        let (sender, receiver) = mpsc::unbounded_channel();
        let file: Rc<dyn ChatStore> = Rc::new(FileStore {
            path: parts.path.clone(),
            dirs: parts.services.context.dirs.clone(),
        });
        let mut stores = HashMap::from([(FILE, file)]);
        let writer = if store.is_disk() {
            FILE
        } else {
            stores.insert(1, Rc::from(store));
            1
        };
        let kind = match stores[&writer].shared_base() {
            Some(base) => StoreKind::Editor { base },
            None => StoreKind::File,
        };
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let config = SessionConfig {
            file: FILE,
            coalesce: millis(parts.coalesce),
            poll: millis(POLL_INTERVAL),
            watched_poll: millis(WATCHED_POLL_INTERVAL),
            watched: false,
        };
        let mut engine =
            Engine::new(parts.engine, stored.text.clone(), policy).recovering(parts.recovery);
        if let Some(records) = &parts.untrusted {
            let chat = parts.id.path().to_owned();
            let seen = Arc::new(records.load(&chat));
            engine = engine.untrusted(chat, seen);
        }
        Self {
            session: Session::new(engine, writer, &kind, stored, config),
            stores,
            path: parts.path,
            tools: parts.tools,
            provider: parts.provider,
            client: parts.client,
            host: parts.host,
            id: parts.id,
            records: parts.untrusted,
            services: parts.services,
            epoch: Instant::now(),
            wake: None,
            state: None,
            sender,
            receiver,
            request: None,
            tools_running: HashMap::new(),
            timers: HashMap::new(),
            disk: DiskWatch::default(),
            outcome: None,
            report,
            on_state: None,
            warned: Warned::default(),
            meter: flemma_provider::Meter::new(),
            context: None,
            auto: crate::compaction::Auto::default(),
            compacting: false,
            summary_waiting: None,
            restored: Vec::new(),
        }
    }

    /// Calls `observe` whenever what the engine is doing changes.
    pub fn on_state(&mut self, observe: Box<dyn FnMut(DriverState)>) {
        self.on_state = Some(observe);
    }

    /// A handle to feed this driver while it runs.
    pub fn commands(&self) -> DriverHandle {
        DriverHandle {
            sender: self.sender.clone(),
        }
    }

    /// The longest time an edit waited between being made and its write starting.
    pub fn max_write_delay(&self) -> Duration {
        Duration::from_millis(self.session.max_write_delay())
    }

    /// Feeds `inputs`, then performs effects and feeds outcomes until the session is done
    /// (the cycle stopped, nothing runs, everything is written; background jobs are waited
    /// for and delivered). `interrupt` (Ctrl-C) cancels everything, jobs included, and the
    /// result is `Cancelled`.
    ///
    /// An error (the file cannot be read or written, or changed in a way that cannot be
    /// merged) stops at once; everything written before stays in the file.
    ///
    /// Must run inside a [`tokio::task::LocalSet`] (requests and store work run on local
    /// tasks).
    pub async fn run(
        &mut self,
        inputs: Vec<EngineInput>,
        interrupt: CancellationToken,
    ) -> anyhow::Result<StopReason> {
        // Changes made on disk by others are told as soon as the watcher sees them.
        let file_watch = self.services.watcher.watch(&self.path);
        self.session.set_watched(file_watch.is_some());
        for input in inputs {
            self.feed(Input::Engine(input));
        }
        self.feed(Input::Tick);
        let mut interrupted = false;
        loop {
            if !self.compacting
                && let Some(outcome) = self.outcome.take()
            {
                match outcome {
                    // A command that arrived meanwhile is handled before the driver ends.
                    Ok(reason) => match self.receiver.try_recv() {
                        Ok(message) => self.receive(message),
                        Err(_) => {
                            // Everything is written: nothing for the next driver to recover,
                            // and what the undone compactions' archives held is in the file
                            // (an editor's buffer may still be thrown away: kept then).
                            self.services.interruptions.clear(self.id.path());
                            let on_disk = self.session.writer() == FILE;
                            for restore in self.restored.drain(..) {
                                if on_disk {
                                    restore.spend();
                                }
                            }
                            return Ok(reason);
                        }
                    },
                    Err(message) => anyhow::bail!(message),
                }
                continue;
            }
            let wake = self.wake;
            tokio::select! {
                message = self.receiver.recv() => match message {
                    Some(message) => self.receive(message),
                    // The driver holds a sender: never closed.
                    None => anyhow::bail!("the driver's channel closed"),
                },
                () = sleep_until(wake) => {
                    self.wake = None;
                    self.feed(Input::Tick);
                }
                () = changed_on_disk(file_watch.as_ref()) => self.changed_on_disk(),
                () = interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    self.feed(Input::Interrupt);
                }
            }
        }
    }

    fn now(&self) -> Millis {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
