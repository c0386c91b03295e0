//! The runner of one document session (`flemma_engine::session::Session`): it performs the
//! session's effects — store reads and compare-and-swap replacements through a [`ChatStore`]
//! (the file on disk, or an editor's buffer), requests streamed with the provider client, tools
//! run on their own threads, timers, wake-ups — and feeds the outcomes back as inputs, until
//! the session says it is done. It decides nothing: who writes, when, and how changes made by
//! others merge are the session's. `flemmad send` is one user; the engine host owns one per
//! document being worked on, and feeds it commands while it runs through its
//! [`DriverHandle`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_conversation::StreamEvent;
use flemma_engine::session::{
    Effect, Input, ReadOutcome, ReplaceOutcome, Session, SessionConfig, StoreId, StoreKind,
};
use flemma_engine::{
    Engine, EngineConfig, EngineEvent, Input as EngineInput, Millis, RequestId, StopReason,
    StreamOutcome, TimerId,
};
use flemma_ide::DocumentId;
use flemma_provider::explain::ProviderError;
use flemma_provider::http::{ClientEvent, ProviderClient};
use flemma_tools::Cancel;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::chat_store::{ChatStore, EditorGone, FileStore, Snapshot};
use crate::provider_setup::ProviderSetup;
use crate::tool_setup::{SetupPolicy, ToolSetup};
use crate::trust::CallRecords;

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

/// What a driver's engine is doing, for `flemma/status`, `jobs` and `usage`.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverState {
    /// A request streams.
    pub streaming: bool,
    /// Foreground tools running (tool use ids).
    pub running_tools: Vec<String>,
    /// Their tool names, in the same order (for progress messages).
    pub running_tool_names: Vec<String>,
    /// Tool calls waiting for approval (tool use ids).
    pub pending: Vec<String>,
    /// Background jobs the engine knows.
    pub jobs: Vec<flemma_protocol::engine::EngineJob>,
    pub usage: flemma_conversation::Usage,
    pub cost: Option<f64>,
    pub cache_saved: Option<f64>,
    pub rate_limits: Option<flemma_conversation::RateLimits>,
    /// The context meter of the last request sent.
    pub context: Option<flemma_protocol::status::ContextStatus>,
}

impl DriverState {
    fn of(engine: &Engine, streaming: bool) -> Self {
        let owned = |names: Vec<&str>| names.into_iter().map(str::to_owned).collect();
        Self {
            streaming,
            running_tools: owned(engine.running_tools()),
            running_tool_names: owned(engine.running_tool_names()),
            pending: engine
                .document()
                .placeholders(Some(flemma_syntax::Status::Pending))
                .into_iter()
                .map(|(_, _, result)| result.tool_use_id.clone())
                .collect(),
            jobs: engine
                .jobs()
                .map(|job| flemma_protocol::engine::EngineJob {
                    job_id: job.job_id.clone(),
                    tool_id: job.tool_id.clone(),
                    tool_name: job.tool_name.clone(),
                    state: job.state,
                })
                .collect(),
            usage: engine.usage(),
            cost: engine.cost(),
            cache_saved: engine.cache_saved(),
            rate_limits: engine.rate_limits().cloned(),
            context: None,
        }
    }
}

/// Feeds a running driver from anywhere (any thread): commands, and the store to write to.
#[derive(Clone)]
pub struct DriverHandle {
    sender: mpsc::UnboundedSender<Message>,
}

impl std::fmt::Debug for DriverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriverHandle")
    }
}

impl DriverHandle {
    /// Feeds `input` to the engine; `false` when the driver has ended.
    pub fn input(&self, input: EngineInput) -> bool {
        self.sender
            .send(Message::Session(Input::Engine(input)))
            .is_ok()
    }

    /// The process is shutting down: cancel the request and the foreground tools (what ran is
    /// marked aborted), write, and end. Background jobs are left as the file says: the next
    /// start's orphan recovery marks them lost.
    pub fn leave(&self) -> bool {
        self.sender.send(Message::Session(Input::Leave)).is_ok()
    }

    /// Rewrites the input of the pending call `tool_id` as `input` (`flemma/reviseProposal`).
    pub fn revise(&self, tool_id: String, input: serde_json::Value) -> bool {
        self.sender.send(Message::Revise(tool_id, input)).is_ok()
    }

    /// Writes through `store` from now on (an editor opened or closed the document).
    pub fn set_store(&self, store: Box<dyn ChatStore>) -> bool {
        self.sender.send(Message::Writer(store)).is_ok()
    }
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
/// them, instead of a process-wide global: the file watcher and the editors' sessions.
#[derive(Debug, Clone, Default)]
pub struct DriverServices {
    /// Tells of changes made on disk by others.
    pub watcher: crate::watcher::ChatWatcher,
    /// What ACP sessions gave the chats (MCP servers, the client's files).
    pub editors: crate::editor_sessions::EditorSessions,
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
    /// The file as the driver's last read or write of it left it: the watcher's news of that
    /// very file is the driver's own write, not a change.
    on_disk: Option<FileIdentity>,
    /// A write of the file is under way (on the blocking pool): what the watcher tells
    /// meanwhile is acted on once it is done.
    writing_file: bool,
    /// The watcher told of a change while the file was being written.
    changed_while_writing: bool,
    /// How the session ended, once it did.
    outcome: Option<Result<StopReason, String>>,
    report: Box<dyn FnMut(Report) + Send>,
    on_state: Option<Box<dyn FnMut(DriverState)>>,
    /// The request warnings already said.
    warned: std::collections::HashSet<String>,
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
    /// A driver for the file whose text is `text` (as just read).
    pub fn new(parts: DriverParts, text: String, report: Box<dyn FnMut(Report) + Send>) -> Self {
        let store = Box::new(FileStore {
            path: parts.path.clone(),
        });
        Self::with_store(parts, store, Snapshot::file(text), report)
    }

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
            on_disk: None,
            writing_file: false,
            changed_while_writing: false,
            outcome: None,
            report,
            on_state: None,
            warned: std::collections::HashSet::new(),
            meter: flemma_provider::Meter::new(),
            context: None,
            auto: crate::compaction::Auto::default(),
            compacting: false,
            summary_waiting: None,
            restored: Vec::new(),
        }
    }

    pub fn engine(&self) -> &Engine {
        self.session.engine()
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
                            crate::interruptions::clear(self.id.path());
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
                () = changed_on_disk(file_watch.as_ref()) => {
                    if self.writing_file {
                        self.changed_while_writing = true;
                    } else {
                        self.changed_on_disk();
                    }
                }
                () = interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    self.feed(Input::Interrupt);
                }
            }
        }
    }

    /// The watcher told of a change. It also tells of the driver's own writes: only a file
    /// other than the one last read or written is news.
    fn changed_on_disk(&mut self) {
        if self.session.writer() == FILE
            && (self.on_disk.is_none() || self.on_disk != FileIdentity::of(&self.path))
        {
            tracing::debug!(path = %self.path.display(), "changed on disk by someone else");
            self.feed(Input::StoreChanged);
        }
    }

    fn receive(&mut self, message: Message) {
        match message {
            Message::Session(input) => self.feed(input),
            Message::Event(event) => (self.report)(Report::Event(event)),
            Message::Notice(notice) => (self.report)(Report::Notice(notice)),
            Message::Writer(store) => {
                let kind = match store.shared_base() {
                    Some(base) => StoreKind::Editor { base },
                    None => StoreKind::File,
                };
                let id = self.number(store);
                tracing::info!(
                    to = self.stores[&id].describe(),
                    "the document's writer changes"
                );
                self.feed(Input::Writer { store: id, kind });
            }
            // What the user typed until now must be in the engine's text before the summary
            // replaces the turns it read (typing inside them refuses the compaction).
            Message::Compacted(summary) => {
                self.summary_waiting = Some(summary);
                self.feed(Input::Sync);
            }
            Message::Synced => {
                if let Some(summary) = self.summary_waiting.take() {
                    self.compacted(*summary);
                }
            }
            Message::Revise(tool_id, input) => self.revise(&tool_id, &input),
            Message::Restore(line) => self.restore(line),
            Message::CutChat(tool_id) => self.cut_chat(&tool_id),
            Message::Warning(warning) => {
                if self.warned.insert(warning.clone()) {
                    (self.report)(Report::Notice(format!("warning: {warning}")));
                }
            }
        }
    }

    /// The number of `store`: the one it already has when it is a store the driver knows.
    fn number(&mut self, store: Box<dyn ChatStore>) -> StoreId {
        let key = store.key();
        if let Some((&id, _)) = self.stores.iter().find(|(_, s)| s.key() == key) {
            self.stores.insert(id, Rc::from(store));
            return id;
        }
        let id = self.stores.keys().max().map_or(1, |max| max + 1);
        self.stores.insert(id, Rc::from(store));
        id
    }

    fn now(&self) -> Millis {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Hands `input` to the session and performs what it asks.
    fn feed(&mut self, input: Input) {
        let file_written = matches!(input, Input::Replaced { store: FILE, .. });
        match &input {
            Input::Engine(EngineInput::Stream {
                request,
                event: StreamEvent::TextDelta { text },
            }) if self.session.request() == Some(*request) => {
                (self.report)(Report::Text(text.clone()));
            }
            Input::Engine(EngineInput::Stream {
                request,
                event: StreamEvent::ThinkingDelta { text },
            }) if self.session.request() == Some(*request) => {
                (self.report)(Report::Thinking(text.clone()));
            }
            Input::Engine(EngineInput::StreamEnded { request, .. })
                if self.request.as_ref().is_some_and(|(r, _)| r == request) =>
            {
                self.request = None;
            }
            Input::Engine(EngineInput::ToolFinished { tool_id, .. }) => {
                self.tools_running.remove(tool_id);
            }
            // The file as the driver read or wrote it: the watcher's news of it is not news.
            Input::Read {
                store: FILE,
                outcome: ReadOutcome::Text(_),
            }
            | Input::Replaced {
                store: FILE,
                outcome: ReplaceOutcome::Written,
            } => self.on_disk = FileIdentity::of(&self.path),
            Input::Engine(EngineInput::JobFinished { job_id, .. }) => {
                let tool = self.session.engine().jobs().find(|j| &j.job_id == job_id);
                if let Some(tool_id) = tool.map(|job| job.tool_id.clone()) {
                    self.tools_running.remove(&tool_id);
                }
            }
            _ => {}
        }
        let now = self.now();
        for effect in self.session.handle(now, input) {
            self.perform(effect);
        }
        self.report_state();
        if file_written {
            self.writing_file = false;
            // Someone else's change made while the write was under way is already in the
            // file's identity as the write left it: not a sign to go by. The file is read
            // again (a read that finds the engine's text changes nothing).
            if std::mem::take(&mut self.changed_while_writing) && self.session.writer() == FILE {
                self.feed(Input::StoreChanged);
            }
        }
    }

    fn perform(&mut self, effect: Effect) {
        match effect {
            Effect::StartRequest { request, text } => self.start_request(request, text),
            Effect::CancelRequest { request } => {
                if let Some((current, token)) = &self.request
                    && *current == request
                {
                    token.cancel();
                }
            }
            Effect::StartTool {
                tool_id,
                name,
                input,
                job_id,
            } => self.start_tool(tool_id, name, input, job_id),
            Effect::KillTool { tool_id } => {
                if let Some(cancel) = self.tools_running.remove(&tool_id) {
                    cancel.cancel();
                }
            }
            Effect::SetTimer { id, at } => {
                let sender = self.sender.clone();
                let when = self.epoch + Duration::from_millis(at);
                let task = tokio::task::spawn_local(async move {
                    tokio::time::sleep_until(when.into()).await;
                    let _ = sender.send(Message::Session(Input::Engine(EngineInput::Timer { id })));
                });
                if let Some(old) = self.timers.insert(id, task) {
                    old.abort();
                }
            }
            Effect::CancelTimer { id } => {
                if let Some(task) = self.timers.remove(&id) {
                    task.abort();
                }
            }
            Effect::Emit(event) => {
                if let EngineEvent::RequestComposing(call) = &event {
                    self.prepare_checkpoints(&call.tool_name);
                }
                (self.report)(Report::Event(event))
            }
            Effect::Notice(message) => (self.report)(Report::Notice(message)),
            Effect::Conflict {
                incoming,
                writer,
                line,
            } => {
                let message = format!(
                    "{} and the text flemmad is writing were both changed at line {line}; flemmad goes on writing {} instead. Copy your change over, or close one of the editors",
                    self.describe(incoming),
                    self.describe(writer),
                );
                tracing::warn!(%message, "not switching the writer");
                (self.report)(Report::Notice(message));
            }
            Effect::Read { store } => {
                tracing::trace!(store, "read");
                self.read(store)
            }
            Effect::Replace {
                store,
                current,
                next,
            } => {
                tracing::trace!(store, len = next.len(), "replace");
                self.replace(store, current, next)
            }
            Effect::Left { store, text } => {
                if let Some(store) = self.stores.get(&store) {
                    store.left(&text);
                }
            }
            Effect::WakeAt(at) => self.wake = Some(self.epoch + Duration::from_millis(at)),
            // Handled after the effects of this input (a `Done` among them must not end the
            // driver after the summary's rewrite was fed).
            Effect::Synced => {
                let _ = self.sender.send(Message::Synced);
            }
            Effect::Done(reason) => {
                if let StopReason::AwaitingApproval { .. } = &reason {
                    // What each pending `write` and `edit` is reviewed against until approved.
                    let calls = self.session.engine().pending_calls();
                    crate::reviewed::pending(self.id.path(), &calls, &self.tools.ctx);
                }
                self.outcome = Some(Ok(reason))
            }
            Effect::Failed(message) => {
                tracing::warn!(%message, "the document session stopped");
                // Nothing more is written: a compaction waiting for the session ends too.
                self.compacting = false;
                self.outcome = Some(Err(message));
            }
            Effect::Saw {
                seen,
                tool_id,
                name,
                input,
            } => {
                let Some(records) = &self.records else {
                    return;
                };
                if let Err(error) = records.record(self.id.path(), seen, &tool_id, &name, &input) {
                    (self.report)(Report::Notice(format!(
                        "cannot record that `{tool_id}` was {} ({error:#}); a later send will ask for its approval again",
                        match seen {
                            flemma_config::Seen::Approved => "approved",
                            flemma_config::Seen::FromModel => "asked for by the model",
                        }
                    )));
                }
            }
        }
    }

    fn describe(&self, store: StoreId) -> String {
        self.stores
            .get(&store)
            .map_or_else(|| format!("store {store}"), |s| s.describe())
    }

    /// Reads `store` on a local task; the answer comes back as [`Input::Read`].
    fn read(&mut self, id: StoreId) {
        let sender = self.sender.clone();
        let Some(store) = self.stores.get(&id).cloned() else {
            let outcome = ReadOutcome::Gone(format!("store {id} is unknown"));
            let _ = sender.send(Message::Session(Input::Read { store: id, outcome }));
            return;
        };
        tokio::task::spawn_local(async move {
            let outcome = match store.read().await {
                Ok(snapshot) => ReadOutcome::Text(snapshot),
                Err(error) if error.downcast_ref::<EditorGone>().is_some() => {
                    ReadOutcome::Gone(error.to_string())
                }
                Err(error) => ReadOutcome::Failed(format!("{error:#}")),
            };
            let _ = sender.send(Message::Session(Input::Read { store: id, outcome }));
        });
    }

    /// Replaces `current` with `next` in `store` on a local task; the answer comes back as
    /// [`Input::Replaced`].
    fn replace(&mut self, id: StoreId, current: Snapshot, next: String) {
        let sender = self.sender.clone();
        let Some(store) = self.stores.get(&id).cloned() else {
            let outcome = ReplaceOutcome::Gone(format!("store {id} is unknown"));
            let _ = sender.send(Message::Session(Input::Replaced { store: id, outcome }));
            return;
        };
        let chat = (id == FILE).then(|| self.id.path().to_owned());
        self.writing_file |= id == FILE;
        tokio::task::spawn_local(async move {
            let outcome = match store.replace_if_unchanged(&current, &next).await {
                Ok(true) => ReplaceOutcome::Written,
                Ok(false) => ReplaceOutcome::Moved,
                Err(error) if error.downcast_ref::<EditorGone>().is_some() => {
                    tracing::info!(%error, "the editor is gone; writing the file");
                    ReplaceOutcome::Gone(error.to_string())
                }
                Err(error) => {
                    let message = format!("{error:#}");
                    // The driver stops writing here: the next one says why on what is left.
                    if let Some(chat) = &chat {
                        crate::interruptions::write_failed(chat, &message);
                    }
                    ReplaceOutcome::Failed(message)
                }
            };
            let _ = sender.send(Message::Session(Input::Replaced { store: id, outcome }));
        });
    }

    /// Reports the engine's state when it changed.
    fn report_state(&mut self) {
        if self.on_state.is_none() {
            return;
        }
        let mut state = DriverState::of(self.session.engine(), self.session.request().is_some());
        state.context = self.context.clone();
        if self.state.as_ref() != Some(&state) {
            self.state = Some(state.clone());
            if let Some(observe) = self.on_state.as_mut() {
                observe(state);
            }
        }
    }

    /// Evaluates `text` (the chat when the request starts) and streams the reply.
    fn start_request(&mut self, request: RequestId, text: String) {
        // Before the reply's first byte reaches the file: a process killed from now on leaves
        // a cut reply that the next driver marks as such.
        crate::interruptions::reply_started(self.id.path());
        let sender = self.sender.clone();
        let fail = |message: String| {
            let _ = sender.send(Message::Session(Input::Engine(EngineInput::StreamEnded {
                request,
                outcome: StreamOutcome::Failed {
                    message,
                    retryable: false,
                },
            })));
        };
        // The document's analysis moves to this text by its changes (the template cache
        // evaluates only the messages they touch).
        let analysis = crate::analyses::analysis(&self.host, &self.id, true, |host| {
            host.change_text(&self.id, &text)
        });
        let analysis = match analysis {
            Ok(analysis) => analysis,
            Err(error) => return fail(error.to_string()),
        };
        let blockers = analysis.send_blockers();
        if !blockers.is_empty() {
            let messages: Vec<String> = blockers.iter().map(|d| d.message.clone()).collect();
            return fail(format!(
                "the chat cannot be sent: {}; fix it and send again",
                messages.join("; ")
            ));
        }
        let conversation = crate::context::request_conversation(&analysis).into_owned();
        // A request that cannot fit the model's window is not sent (docs/context.md): the
        // estimate says when to ask, the provider's count (where it has one) decides.
        let estimate = self
            .meter
            .estimate(&conversation, &self.provider.options.tools);
        let window = self
            .provider
            .model
            .as_ref()
            .map_or(0, |model| model.context_window);
        let over_window = window > 0 && estimate > window;
        if let Some(resolved) = &analysis.config {
            self.context = Some(crate::context::status(
                estimate,
                crate::context::Counted::Estimate,
                &self.provider,
                &resolved.config.context,
            ));
        }
        if let Some(event) = self.auto.compacted_event(estimate) {
            (self.report)(Report::Event(event));
        }
        // Past `context.compact_at`, the older turns are compacted first (docs/context.md).
        let token = CancellationToken::new();
        match self.auto.start(
            request,
            &text,
            &analysis,
            estimate,
            (&self.provider, &self.client),
            self.id.path(),
            token.clone(),
        ) {
            crate::compaction::AutoStart::Summarising(task) => {
                self.request = Some((request, token));
                let sender = self.sender.clone();
                tokio::task::spawn_local(async move {
                    let summary = task.await;
                    let _ = sender.send(Message::Compacted(Box::new(summary)));
                });
                return;
            }
            // Said once per driver, however many requests it concerns.
            crate::compaction::AutoStart::Cannot(why) => {
                if self.warned.insert(why.clone()) {
                    (self.report)(Report::Notice(why));
                }
            }
            crate::compaction::AutoStart::No => {}
        }
        let cannot = self.auto.cannot(request);
        self.request = Some((request, token.clone()));
        let client = self.client.clone();
        let provider = self.provider.clone();
        // The provider's observer is not `Send`: the stream runs on the driver's `LocalSet`.
        tokio::task::spawn_local(async move {
            let events = sender.clone();
            let send = |input: EngineInput| {
                let _ = events.send(Message::Session(Input::Engine(input)));
            };
            if over_window {
                let (used, counted) = if provider.kind.counts_tokens() {
                    match client
                        .count_tokens(
                            provider.kind,
                            &conversation,
                            &provider.options,
                            &provider.endpoint,
                            token.clone(),
                        )
                        .await
                    {
                        Ok(exact) => (exact, "exact"),
                        // The provider will say itself whether it fits.
                        Err(_) => (0, "exact"),
                    }
                } else {
                    (estimate, "estimate")
                };
                if used > window {
                    let mut message =
                        crate::context::too_long(used, window, &provider.options.model, counted);
                    if let Some(why) = cannot {
                        message.push_str(&format!(" (automatic compaction: {why})"));
                    }
                    send(EngineInput::StreamEnded {
                        request,
                        outcome: StreamOutcome::Failed {
                            message,
                            retryable: false,
                        },
                    });
                    return;
                }
            }
            let result = client
                .stream(
                    provider.kind,
                    &conversation,
                    &provider.options,
                    &provider.endpoint,
                    token,
                    &mut |event| match event {
                        ClientEvent::Event(event) => {
                            if let StreamEvent::RateLimits { limits } = &event {
                                crate::usage_report::remember(provider.kind.name(), limits);
                            }
                            send(EngineInput::Stream { request, event })
                        }
                        ClientEvent::Retrying {
                            attempt,
                            delay,
                            reason,
                        } => {
                            let _ = events.send(Message::Notice(format!(
                                "{reason}; retrying in {:.1}s (attempt {attempt})",
                                delay.as_secs_f64()
                            )));
                        }
                        ClientEvent::FirstByte => {}
                    },
                )
                .await;
            let outcome = match result {
                Ok(summary) => {
                    for warning in &summary.warnings {
                        let _ = sender.send(Message::Warning(warning.clone()));
                    }
                    summary.stop_error().map_or(StreamOutcome::Finished, failed)
                }
                Err(ProviderError::Cancelled) => StreamOutcome::Cancelled,
                Err(error) => failed(error),
            };
            let _ = sender.send(Message::Session(Input::Engine(EngineInput::StreamEnded {
                request,
                outcome,
            })));
        });
    }

    /// The summary of an automatic compaction is back: the compaction goes into the engine's
    /// text through the session (written like the engine's own edits, merged with what others
    /// change meanwhile), and the request starts on the compacted text; a failure, a cancel or
    /// a chat changed meanwhile leaves the text as it was.
    fn compacted(&mut self, summary: crate::compaction::AutoSummary) {
        let Some(request) = summary.request else {
            return self.compacted_by_hand(summary);
        };
        let ours = match &self.request {
            Some((current, token)) if *current == request => !token.is_cancelled(),
            _ => return,
        };
        if !ours {
            self.feed(Input::Engine(EngineInput::StreamEnded {
                request,
                outcome: StreamOutcome::Cancelled,
            }));
            return;
        }
        self.request = None;
        let text = summary.text.clone();
        match self
            .auto
            .finish(summary, self.id.path(), self.session.engine().text())
        {
            Ok((edit, next)) => {
                self.feed(Input::Rewrite { edits: vec![edit] });
                if self.auto.applied(self.session.engine().text()) {
                    return self.start_request(request, next);
                }
                (self.report)(Report::Notice(
                    "automatic compaction: the chat changed while its summary was written; the chat is unchanged".into(),
                ));
            }
            Err(why) => (self.report)(Report::Notice(why)),
        }
        self.start_request(request, text);
    }

    /// Rewrites the input of the call `tool_id`, still pending in the engine's text, as
    /// `input` (`flemma/reviseProposal`): written through the session as the engine's own edits
    /// are (what someone types meanwhile is merged around it). A call no longer pending is left
    /// as it is, and the editors are told.
    fn revise(&mut self, tool_id: &str, input: &serde_json::Value) {
        let doc = flemma_syntax::Document::parse(self.session.engine().text().to_owned());
        let pending = flemma_ide::actions::awaits_approval(&doc, tool_id);
        let fence = doc
            .tool_use(tool_id)
            .and_then(|(_, _, tool_use)| tool_use.fence.clone())
            .filter(|fence| pending && fence.close.is_some());
        // The session is done again once the revision is written (as after a compaction).
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        let (Some(fence), Ok(json)) = (fence, serde_json::to_string_pretty(input)) else {
            (self.report)(Report::Notice(format!(
                "the proposal of `{tool_id}` was not written back: the call is no longer waiting for approval"
            )));
            // Nothing to write: any input but a tick makes the session say it is done again
            // (this one only has it check the file), so the driver does not wait for nothing.
            return self.feed(Input::StoreChanged);
        };
        let edit = flemma_syntax::TextEdit {
            range: fence.content,
            // Pretty JSON: no line of it is a fence's closer.
            new_text: format!("{json}\n"),
        };
        self.feed(Input::Rewrite { edits: vec![edit] });
    }

    /// A compaction or its undo asked for by hand (`flemma/compact`, `flemma/compactUndo`),
    /// before the driver runs.
    pub fn by_hand(&mut self, order: crate::compaction::ByHand) {
        match order {
            crate::compaction::ByHand::Compact(order) => self.compact(order),
            // Once the driver runs (after its text is loaded).
            crate::compaction::ByHand::Undo { line } => {
                let _ = self.sender.send(Message::Restore(line));
            }
            crate::compaction::ByHand::Rewind { tool_id } => {
                let _ = self.sender.send(Message::CutChat(tool_id));
            }
        }
    }

    /// Cuts the chat back to before the answer that made the call `tool_id` (`flemma/rewind`
    /// with `chat`) through the session, as the engine's own edits are written: an editor with
    /// the chat open gets an edit, and what it types after the cut meanwhile stays. The whole
    /// chat as it was is kept first (`crate::rewind_chat`).
    fn cut_chat(&mut self, tool_id: &str) {
        let failed = |message: String| {
            EngineEvent::ChatRewindFailed(flemma_protocol::event::CompactionFailed { message })
        };
        let text = self.session.engine().text().to_owned();
        let prepared = match crate::rewind_chat::prepare(self.id.path(), &text, tool_id) {
            Ok(prepared) => prepared,
            Err(why) => return (self.report)(Report::Event(failed(format!("not cut: {why}")))),
        };
        // The session is done again once the cut is written.
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        self.feed(Input::Rewrite {
            edits: vec![prepared.edit()],
        });
        let event = if prepared.applied(self.session.engine().text()) {
            EngineEvent::ChatRewound(prepared.event(tool_id))
        } else {
            failed("not cut: the chat changed meanwhile; nothing was changed".into())
        };
        (self.report)(Report::Event(event));
    }

    /// Undoes a compaction (`flemma/compactUndo`) through the session: the summary is replaced
    /// by the turns its archive holds (written like the engine's own edits, merged with what an
    /// editor types meanwhile); the archive goes once the file is written (an editor's buffer
    /// may be thrown away unsaved: its archive is kept).
    fn restore(&mut self, line: Option<usize>) {
        let text = self.session.engine().text().to_owned();
        let restore = match crate::compaction::plan_undo(self.id.path(), &text, line) {
            Ok(restore) => restore,
            Err(refused) => return self.compaction_failed(format!("not restored: {refused}")),
        };
        // The session is done again once the undo is written.
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        self.feed(Input::Rewrite {
            edits: vec![restore.edit()],
        });
        if !restore.applied(self.session.engine().text()) {
            return self.compaction_failed(
                "not restored: the chat changed meanwhile; nothing was changed".into(),
            );
        }
        let event = EngineEvent::ContextRestored(restore.event_data());
        self.restored.push(restore);
        (self.report)(Report::Event(event));
    }

    /// Compacts the chat by hand (`flemma/compact`): the summary is asked for now, and the
    /// driver does not end before it is back and written.
    pub fn compact(&mut self, order: crate::compaction::Order) {
        let text = self.session.engine().text().to_owned();
        let analysis = crate::analyses::analysis(&self.host, &self.id, true, |host| {
            host.change_text(&self.id, &text)
        });
        let analysis = match analysis {
            Ok(analysis) => analysis,
            Err(error) => return self.compaction_failed(format!("not compacted: {error}")),
        };
        let conversation = crate::context::request_conversation(&analysis).into_owned();
        let estimate = self
            .meter
            .estimate(&conversation, &self.provider.options.tools);
        match self.auto.manual(
            &text,
            &analysis,
            order,
            estimate,
            (&self.provider, &self.client),
            self.id.path(),
        ) {
            Ok(task) => {
                self.compacting = true;
                let sender = self.sender.clone();
                tokio::task::spawn_local(async move {
                    let summary = task.await;
                    let _ = sender.send(Message::Compacted(Box::new(summary)));
                });
            }
            Err(why) => self.compaction_failed(format!("not compacted: {why}")),
        }
    }

    /// A compaction asked for by hand did not happen: its event (the editors' notice).
    fn compaction_failed(&mut self, message: String) {
        (self.report)(Report::Event(EngineEvent::ContextCompactionFailed(
            flemma_protocol::event::CompactionFailed { message },
        )));
    }

    fn compacted_by_hand(&mut self, summary: crate::compaction::AutoSummary) {
        self.compacting = false;
        let outcome = self
            .auto
            .finish(summary, self.id.path(), self.session.engine().text());
        let (edit, next) = match outcome {
            Ok(done) => done,
            Err(why) => return self.compaction_failed(why),
        };
        // The session is done again once the compaction is written.
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        self.feed(Input::Rewrite { edits: vec![edit] });
        if !self.auto.applied(self.session.engine().text()) {
            return self.compaction_failed(
                "compaction: the chat changed while its summary was written; the chat is unchanged"
                    .into(),
            );
        }
        let after = crate::analyses::analysis(&self.host, &self.id, true, |host| {
            host.change_text(&self.id, &next)
        })
        .map(|analysis| {
            let conversation = crate::context::request_conversation(&analysis).into_owned();
            self.meter
                .estimate(&conversation, &self.provider.options.tools)
        })
        .unwrap_or(0);
        if let Some(event) = self.auto.compacted_event(after) {
            (self.report)(Report::Event(event));
        }
    }

    /// What a call gets besides the chat's context: where it tells what it does (events of
    /// the chat), and the chat's text when the tool reads the conversation.
    /// While the model still writes a call that can change files, the chat's first
    /// checkpoint is prepared on a thread of its own (the project's files hashed, their
    /// monitor started), so that the call does not wait for it (`crate::checkpoints`).
    fn prepare_checkpoints(&self, tool_name: &str) {
        // The `lsp` tool changes files only for a rename, not known before its input.
        if tool_name == "lsp"
            || !crate::checkpoints::changes_files(tool_name, &serde_json::Value::Null)
        {
            return;
        }
        let Some(chat) = self.tools.ctx.chat_path.clone() else {
            return;
        };
        let tools = self.tools.clone();
        let _ = std::thread::Builder::new()
            .name("checkpoint ahead".into())
            .spawn(move || {
                if let Some(Err(error)) = tools.checkpoints(&chat).map(|c| c.prepare()) {
                    tracing::info!(%error, "no checkpoint prepared ahead");
                }
            });
    }

    fn tool_context(&self, ctx: &mut flemma_tools::RunContext, tool_id: &str, name: &str) {
        let sender = self.sender.clone();
        ctx.reporter = Some(Arc::new(crate::tool_reporter::CallReporter::new(
            tool_id,
            name,
            move |event| {
                let _ = sender.send(Message::Event(event));
            },
        )));
        let reads = self
            .tools
            .registry
            .get(name)
            .is_some_and(|tool| tool.spec.has(flemma_tools::Capability::ReadsConversation));
        if reads {
            ctx.conversation = Some(self.session.engine().text().into());
        }
        // An ACP client's files, as this call's: its requests wait until the client knows it.
        if ctx.editor.is_some()
            && let Some(chat) = ctx.chat_path.clone()
        {
            ctx.editor = self.services.editors.editor_files_for(&chat, Some(tool_id));
        }
    }

    /// Runs a tool on its own thread (a killed tool's thread is never waited for).
    fn start_tool(
        &mut self,
        tool_id: String,
        name: String,
        input: serde_json::Value,
        job_id: Option<String>,
    ) {
        if job_id.is_none() {
            // Killed while it runs, it must not run again unasked (`crate::interruptions`).
            crate::interruptions::call_started(self.id.path(), &tool_id);
        }
        let cancel = Cancel::new();
        let mut ctx = self.tools.ctx.clone();
        ctx.cancel = cancel.clone();
        self.tool_context(&mut ctx, &tool_id, &name);
        self.tools_running.insert(tool_id.clone(), cancel);
        let tools = self.tools.clone();
        let sender = self.sender.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tool {name}"))
            .spawn(move || {
                // The project's files before and after a call that can change them
                // (`flemmad changes`, `flemmad rewind`).
                let checkpoints = ctx
                    .chat_path
                    .as_deref()
                    .filter(|_| crate::checkpoints::changes_files(&name, &input))
                    .and_then(|chat| tools.checkpoints(chat));
                let record = |phase| {
                    if let Some(checkpoints) = &checkpoints
                        && let Err(error) = checkpoints.record(phase, &tool_id, &name)
                    {
                        tracing::info!(%error, tool_id, "no checkpoint for this call");
                    }
                };
                // The file an approved `write`/`edit` changes is still the one reviewed.
                let reviewed = match ctx.chat_path.as_deref() {
                    Some(chat) => crate::reviewed::check(chat, &tool_id, &name, &input, &ctx),
                    None => Ok(crate::reviewed::Checked::AsWritten),
                };
                record(crate::checkpoints::Phase::Before);
                let run =
                    |input| match tools
                        .registry
                        .execute(&name, input, &ctx, &tools.store, &tool_id)
                    {
                        Ok(outcome) => (outcome.text, outcome.is_error),
                        Err(error) => (error.to_string(), true),
                    };
                let (text, is_error) = match reviewed {
                    Err(refusal) => (refusal, true),
                    Ok(crate::reviewed::Checked::AsWritten) => run(input),
                    // Some hunks only were approved: the call applies those, and its result
                    // tells the model which were rejected and why.
                    Ok(crate::reviewed::Checked::Narrowed { input, note }) => {
                        let (text, is_error) = run(input);
                        (format!("{}\n\n{note}", text.trim_end()), is_error)
                    }
                };
                record(crate::checkpoints::Phase::After);
                if let Some(Err(error)) = checkpoints.map(|c| c.prune()) {
                    tracing::info!(%error, "old checkpoints were not pruned");
                }
                let input = match job_id {
                    Some(job_id) => EngineInput::JobFinished {
                        job_id,
                        text,
                        is_error,
                    },
                    None => EngineInput::ToolFinished {
                        tool_id,
                        text,
                        is_error,
                    },
                };
                let _ = sender.send(Message::Session(Input::Engine(input)));
            });
        if let Err(error) = spawned {
            let _ = self.sender.send(Message::Notice(format!(
                "cannot start a thread for a tool: {error}"
            )));
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The document leaves the engine's host (its messages' results stay in the template
        // cache, for the editor that has it open).
        crate::analyses::lock(&self.host).forget(&self.id);
        // The writer's text is what it shares with the engine (the next driver's merge base).
        if let Some((store, text)) = self.session.shared_text()
            && let Some(store) = self.stores.get(&store)
        {
            store.left(text);
        }
        for task in self.timers.values() {
            task.abort();
        }
        // A driver that ends with work running (it stopped on an error: the file is gone,
        // or cannot be merged) stops that work: nothing could write its results.
        if let Some((_, token)) = self.request.take() {
            token.cancel();
        }
        for cancel in self.tools_running.values() {
            cancel.cancel();
        }
    }
}

/// What tells one state of a file from another without reading it: its inode (a rename
/// over it is a new one), size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileIdentity {
    fn of(path: &std::path::Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self {
            inode: metadata.ino(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

async fn changed_on_disk(watch: Option<&crate::watcher::FileWatch>) {
    match watch {
        Some(watch) => watch.changed().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// How a provider's error ends a stream: a refusal as such, anything else as a failure.
fn failed(error: ProviderError) -> StreamOutcome {
    let message = error.to_string();
    match error {
        ProviderError::Refusal { .. } => StreamOutcome::Refused { message },
        _ => StreamOutcome::Failed {
            message,
            retryable: false,
        },
    }
}
