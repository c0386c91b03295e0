//! The shell around one [`Engine`] for a chat: it performs the engine's effects — edits
//! written through a [`ChatStore`] (the file on disk, or an editor's buffer) with the
//! compare-and-swap merging writer, requests streamed with the provider client, tools run on
//! their own threads, timers — and feeds the outcomes back as inputs until the cycle stops and
//! nothing runs any more. `flemmad send` is one user; the engine host owns one per document
//! being worked on, and feeds it commands while it runs through its [`DriverHandle`].
//!
//! The text is shared with the user: before every write the driver reads the store, and a
//! change it did not make is turned into one edit, mapped through the engine's edits not yet
//! written, and fed to the engine as `TextChanged`, so text typed meanwhile is kept (and a user
//! edit during the resume delay cancels the resume, as in an editor).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_conversation::StreamEvent;
use flemma_engine::{
    Assoc, CancelScope, Effect, Engine, EngineConfig, Event, Input, JobState, Millis, RequestId,
    StopReason, StreamOutcome, TimerId, map_offset,
};
use flemma_ide::{AnalysisHost, DocumentId};
use flemma_provider::explain::ProviderError;
use flemma_provider::http::{ClientEvent, ProviderClient};
use flemma_syntax::{TextEdit, TextRange};
use flemma_tools::Cancel;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::chat_store::{ChatStore, EditorGone, FileStore, Snapshot};
use crate::provider_setup::ProviderSetup;
use crate::tool_setup::{SetupPolicy, ToolSetup};
use crate::trust::CallRecords;

/// How often a write re-reads and merges when the file changed under it.
const MERGE_ATTEMPTS: usize = 20;
/// How often the store is checked for changes made by someone else while nothing is written,
/// when no watcher tells (an editor's buffer, or no file watcher could be set up).
const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// The same while the file watcher tells of every change: a safety net only.
const WATCHED_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// What the driver tells its user as it goes.
#[derive(Debug, Clone)]
pub enum Report {
    /// A lifecycle event of the engine.
    Event(Event),
    /// Reply text as it streams in.
    Text(String),
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
    /// Background jobs the engine knows: (job id, tool use id, tool name, state).
    pub jobs: Vec<(String, String, String, &'static str)>,
    pub usage: flemma_conversation::Usage,
    pub cost: Option<f64>,
}

impl DriverState {
    fn of(engine: &Engine, streaming: bool) -> Self {
        Self {
            streaming,
            running_tools: engine
                .running_tools()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            running_tool_names: engine
                .running_tool_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            pending: engine
                .document()
                .placeholders(Some(flemma_syntax::Status::Pending))
                .into_iter()
                .map(|(_, _, result)| result.tool_use_id.clone())
                .collect(),
            jobs: engine
                .jobs()
                .map(|job| {
                    let state = match job.state {
                        JobState::Running => "running",
                        JobState::Completed { .. } => "completed",
                        JobState::Delivered => "delivered",
                    };
                    (
                        job.job_id.clone(),
                        job.tool_id.clone(),
                        job.tool_name.clone(),
                        state,
                    )
                })
                .collect(),
            usage: engine.usage(),
            cost: engine.cost(),
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
    pub fn input(&self, input: Input) -> bool {
        self.sender.send(Message::Input(input)).is_ok()
    }

    /// The process is shutting down: cancel the request and the foreground tools (what ran is
    /// marked aborted), write, and end. Background jobs are left as the file says: the next
    /// start's orphan recovery marks them lost.
    pub fn leave(&self) -> bool {
        self.sender.send(Message::Leave).is_ok()
    }

    /// Writes through `store` from now on (an editor opened or closed the document); its text
    /// becomes the base the engine's text is written over.
    pub fn set_store(&self, store: Box<dyn ChatStore>) -> bool {
        self.sender.send(Message::SetStore(store)).is_ok()
    }
}

/// Everything the driver needs besides the text.
pub struct DriverParts {
    /// The chat file (written through a [`FileStore`] unless [`Driver::with_store`] says
    /// otherwise).
    pub path: PathBuf,
    pub engine: EngineConfig,
    pub tools: Arc<ToolSetup>,
    pub provider: ProviderSetup,
    pub client: Arc<ProviderClient>,
    /// Evaluates the text for each request (templates, includes, frontmatter).
    pub host: AnalysisHost,
    pub id: DocumentId,
    /// Coalescing window of the writes.
    pub coalesce: Duration,
    /// Set when the chat is not trusted: its engine runs its calls only as far as flemmad saw
    /// them happen (these records, and what it sees itself, which it records here).
    pub untrusted: Option<Arc<CallRecords>>,
}

/// What arrives from the driver's tasks and threads.
enum Message {
    Input(Input),
    Notice(String),
    /// A warning about a request: said once per driver (one send), however many requests of
    /// the cycle it concerns.
    Warning(String),
    SetStore(Box<dyn ChatStore>),
    Leave,
}

/// One engine and the IO it performs on one file.
pub struct Driver {
    engine: Engine,
    store: Box<dyn ChatStore>,
    /// The chat file: written when an editor's store goes away under the driver.
    path: PathBuf,
    tools: Arc<ToolSetup>,
    provider: ProviderSetup,
    client: Arc<ProviderClient>,
    host: AnalysisHost,
    id: DocumentId,
    coalesce: Duration,
    /// The records of an untrusted chat's calls (see [`DriverParts::untrusted`]).
    records: Option<Arc<CallRecords>>,
    epoch: Instant,
    /// What the store held after our last read or write.
    stored: Snapshot,
    /// The last state reported.
    state: Option<DriverState>,
    /// The text as of the effect being performed (the engine's view is already past the
    /// effects of the input it handled; a request evaluates the text as it is when it starts).
    view: String,
    /// The engine's edits since `disk`, in order (each in the coordinates before it).
    unwritten: Vec<Vec<TextEdit>>,
    /// When the unwritten edits must be written.
    write_at: Option<Instant>,
    /// When the oldest unwritten edit was made.
    unwritten_since: Option<Instant>,
    /// The longest time an edit waited between being made and its write starting.
    max_write_delay: Duration,
    sender: mpsc::UnboundedSender<Message>,
    receiver: mpsc::UnboundedReceiver<Message>,
    request: Option<(RequestId, CancellationToken)>,
    tools_running: HashMap<String, Cancel>,
    timers: HashMap<TimerId, tokio::task::JoinHandle<()>>,
    stopped: Option<StopReason>,
    refusals: usize,
    /// The store was switched: its text is the new base, not a change to merge.
    rebase: bool,
    /// The file as the driver's last read or write of it left it (its store is the file):
    /// the watcher's news of that very file is the driver's own write, not a change.
    on_disk: Option<FileIdentity>,
    /// A store that is to become the writer once its text merges with the engine's (it
    /// shares a base with the engine: an editor's buffer), with that base.
    incoming: Option<(Box<dyn ChatStore>, std::sync::Arc<str>)>,
    /// Shutting down: done once written, whatever still runs.
    leaving: bool,
    report: Box<dyn FnMut(Report) + Send>,
    on_state: Option<Box<dyn FnMut(DriverState)>>,
    /// The request warnings already said.
    warned: std::collections::HashSet<String>,
}

impl Driver {
    /// A driver for the file whose text is `text` (as just read).
    pub fn new(parts: DriverParts, text: String, report: Box<dyn FnMut(Report) + Send>) -> Self {
        let store = Box::new(FileStore {
            path: parts.path.clone(),
        });
        let stored = Snapshot {
            text,
            version: None,
        };
        Self::with_store(parts, store, stored, report)
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
        let text = stored.text.clone();
        let mut engine = Engine::new(parts.engine, text.clone(), policy);
        if let Some(records) = &parts.untrusted {
            let chat = parts.id.path().to_owned();
            let seen = Arc::new(records.load(&chat));
            engine = engine.untrusted(chat, seen);
        }
        Self {
            engine,
            store,
            path: parts.path,
            tools: parts.tools,
            provider: parts.provider,
            client: parts.client,
            host: parts.host,
            id: parts.id,
            coalesce: parts.coalesce,
            records: parts.untrusted,
            epoch: Instant::now(),
            view: text,
            stored,
            state: None,
            unwritten: Vec::new(),
            write_at: None,
            unwritten_since: None,
            max_write_delay: Duration::ZERO,
            sender,
            receiver,
            request: None,
            tools_running: HashMap::new(),
            timers: HashMap::new(),
            stopped: None,
            refusals: 0,
            rebase: false,
            on_disk: None,
            incoming: None,
            leaving: false,
            report,
            on_state: None,
            warned: std::collections::HashSet::new(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
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
        self.max_write_delay
    }

    /// Feeds `inputs`, then performs effects and feeds outcomes until the cycle has stopped
    /// and nothing runs any more (background jobs are waited for and delivered). `interrupt`
    /// (Ctrl-C) cancels everything, jobs included, and the result is `Cancelled`.
    ///
    /// An error (the file cannot be read or written, or changed in a way that cannot be
    /// merged) stops at once; everything written before stays in the file.
    ///
    /// Must run inside a [`tokio::task::LocalSet`] (requests stream on local tasks).
    pub async fn run(
        &mut self,
        inputs: Vec<Input>,
        interrupt: CancellationToken,
    ) -> anyhow::Result<StopReason> {
        for input in inputs {
            self.handle(input);
        }
        let mut interrupted = false;
        // Changes made on disk by others are merged as soon as the watcher tells.
        let file_watch = crate::watcher::watch(&self.path);
        let mut next_poll = Instant::now();
        loop {
            self.report_state();
            if self.is_done() {
                self.write().await?;
                // A command that arrived meanwhile is handled before the driver ends.
                match self.receiver.try_recv() {
                    Ok(message) => {
                        self.receive(message);
                        continue;
                    }
                    Err(_) if self.is_done() => break,
                    Err(_) => continue,
                }
            }
            let write_at = self.write_at;
            let poll_interval = if file_watch.is_some() && self.store.is_disk() {
                WATCHED_POLL_INTERVAL
            } else {
                POLL_INTERVAL
            };
            next_poll = next_poll.min(Instant::now() + poll_interval);
            tokio::select! {
                message = self.receiver.recv() => match message {
                    Some(message) => self.receive(message),
                    // The driver holds a sender: never closed.
                    None => break,
                },
                () = sleep_until(write_at) => self.write().await?,
                () = changed_on_disk(file_watch.as_ref()) => {
                    // The watcher also tells of the driver's own writes: only a text other
                    // than the one last read or written is merged (and written) at once.
                    if self.store.is_disk()
                        && (self.on_disk.is_none() || self.on_disk != FileIdentity::of(&self.path))
                        && self.store.read().await?.text != self.stored.text
                    {
                        tracing::debug!(path = %self.path.display(), "changed on disk by someone else");
                        self.write().await?;
                    }
                }
                () = tokio::time::sleep_until(next_poll.into()) => {
                    next_poll = Instant::now() + poll_interval;
                    if self.write_at.is_none() {
                        self.write().await?;
                    }
                }
                () = interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    self.cancel_everything();
                }
            }
            if self.write_at.is_some_and(|at| Instant::now() >= at) {
                self.write().await?;
            }
        }
        let reason = self.stopped.take().unwrap_or(StopReason::Idle);
        Ok(if interrupted {
            StopReason::Cancelled
        } else {
            reason
        })
    }

    fn receive(&mut self, message: Message) {
        match message {
            Message::Input(input) => self.handle(input),
            Message::Notice(notice) => (self.report)(Report::Notice(notice)),
            Message::Warning(warning) => {
                if self.warned.insert(warning.clone()) {
                    (self.report)(Report::Notice(format!("warning: {warning}")));
                }
            }
            Message::SetStore(store) => self.switch_store(store),
            Message::Leave => {
                self.handle(Input::Cancel {
                    scope: CancelScope::All,
                });
                for cancel in self.tools_running.values() {
                    cancel.cancel();
                }
                self.tools_running.clear();
                if let Some((_, token)) = self.request.take() {
                    token.cancel();
                }
                self.stopped = Some(StopReason::Cancelled);
                self.leaving = true;
            }
        }
    }

    /// Writes through `store` from now on. Its text is taken as the base (the document's
    /// previous writer had the latest text; the new one may hold an older copy, as a file does
    /// while an editor has it open): the engine's text is written over it at once.
    ///
    /// A store that knows the text it last shared with the engine (an editor's buffer) is
    /// merged instead, at the next write ([`Self::take_incoming`]): what its user typed
    /// meanwhile is kept.
    fn switch_store(&mut self, store: Box<dyn ChatStore>) {
        tracing::info!(
            from = self.store.describe(),
            to = store.describe(),
            "switching the writer"
        );
        if !self.rebase {
            self.store.left(&self.stored.text);
        }
        if let Some(base) = store.shared_base() {
            self.incoming = Some((store, base));
            self.write_at = Some(Instant::now());
            return;
        }
        self.incoming = None;
        self.store = store;
        self.stored = Snapshot {
            text: String::new(),
            version: None,
        };
        self.rebase = true;
        self.write_at = Some(Instant::now());
    }

    /// Reports the engine's state when it changed.
    fn report_state(&mut self) {
        if self.on_state.is_none() {
            return;
        }
        let state = DriverState::of(&self.engine, self.request.is_some());
        if self.state.as_ref() != Some(&state) {
            self.state = Some(state.clone());
            if let Some(observe) = self.on_state.as_mut() {
                observe(state);
            }
        }
    }

    /// Nothing the driver started still runs and nothing is scheduled: the cycle stopped, or
    /// never started (an approval that leaves other calls pending).
    fn is_done(&self) -> bool {
        self.leaving
            || (!self.engine.is_busy() && self.request.is_none() && self.tools_running.is_empty())
    }

    fn now(&self) -> Millis {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Ctrl-C: the request, the foreground tools and every job.
    fn cancel_everything(&mut self) {
        self.handle(Input::Cancel {
            scope: CancelScope::All,
        });
        let jobs: Vec<String> = self
            .engine
            .jobs()
            .filter(|job| job.state == JobState::Running)
            .map(|job| job.tool_id.clone())
            .collect();
        for tool_id in jobs {
            self.handle(Input::Cancel {
                scope: CancelScope::Tool(tool_id),
            });
        }
        for cancel in self.tools_running.values() {
            cancel.cancel();
        }
        // Their threads end on their own; nothing waits for a killed tool's result.
        self.tools_running.clear();
        if let Some((_, token)) = self.request.take() {
            token.cancel();
        }
        self.stopped = Some(StopReason::Cancelled);
    }

    fn handle(&mut self, input: Input) {
        match &input {
            Input::Stream {
                request,
                event: StreamEvent::TextDelta { text },
            } if self.request.as_ref().is_some_and(|(r, _)| r == request) => {
                (self.report)(Report::Text(text.clone()));
            }
            Input::StreamEnded { request, .. }
                if self.request.as_ref().is_some_and(|(r, _)| r == request) =>
            {
                self.request = None;
            }
            Input::ToolFinished { tool_id, .. } => {
                self.tools_running.remove(tool_id);
            }
            Input::JobFinished { job_id, .. } => {
                if let Some(job) = self.engine.jobs().find(|job| &job.job_id == job_id) {
                    let tool_id = job.tool_id.clone();
                    self.tools_running.remove(&tool_id);
                }
            }
            _ => {}
        }
        let changed = match &input {
            Input::TextChanged { edits } => flemma_syntax::apply_edits(&self.view, edits).ok(),
            _ => None,
        };
        let now = self.now();
        let effects = self.engine.handle(now, input);
        let refused = effects
            .iter()
            .any(|effect| matches!(effect, Effect::Refused { .. }));
        if let Some(changed) = changed
            && !refused
        {
            self.view = changed;
        }
        for effect in effects {
            self.perform(effect);
        }
    }

    fn perform(&mut self, effect: Effect) {
        match effect {
            Effect::Edit { edits } => {
                match flemma_syntax::apply_edits(&self.view, &edits) {
                    Ok(next) => self.view = next,
                    // The engine only emits edits that fit its own view, which this follows.
                    Err(error) => tracing::error!("an engine edit does not fit: {error}"),
                }
                self.unwritten.push(edits);
                self.unwritten_since.get_or_insert_with(Instant::now);
                if self.write_at.is_none() {
                    self.write_at = Some(Instant::now() + self.coalesce);
                }
            }
            Effect::StartRequest { request } => self.start_request(request),
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
                background,
                job_id,
            } => self.start_tool(tool_id, name, input, background.then_some(job_id).flatten()),
            Effect::KillTool { tool_id } => {
                if let Some(cancel) = self.tools_running.remove(&tool_id) {
                    cancel.cancel();
                }
            }
            Effect::SetTimer { id, at } => {
                let sender = self.sender.clone();
                let when = self.epoch + Duration::from_millis(at);
                let task = tokio::spawn(async move {
                    tokio::time::sleep_until(when.into()).await;
                    let _ = sender.send(Message::Input(Input::Timer { id }));
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
            Effect::Emit(event) => (self.report)(Report::Event(event)),
            Effect::Stopped { reason } => {
                self.stopped = Some(reason);
                // Every stop is written at once.
                self.write_at = Some(Instant::now());
            }
            Effect::Refused { message } => {
                self.refusals += 1;
                (self.report)(Report::Notice(message));
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

    /// Evaluates the text as it is now and streams the reply.
    fn start_request(&mut self, request: RequestId) {
        self.stopped = None;
        let sender = self.sender.clone();
        let fail = |message: String| {
            let _ = sender.send(Message::Input(Input::StreamEnded {
                request,
                outcome: StreamOutcome::Failed {
                    message,
                    retryable: false,
                },
            }));
        };
        self.host.set_text(self.id.clone(), self.view.clone());
        let analysis = match self.host.analysis(&self.id) {
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
        let conversation = analysis.evaluation.conversation.clone();
        let token = CancellationToken::new();
        self.request = Some((request, token.clone()));
        let client = self.client.clone();
        let provider = self.provider.clone();
        // The provider's observer is not `Send`: the stream runs on the driver's `LocalSet`.
        tokio::task::spawn_local(async move {
            let events = sender.clone();
            let result = client
                .stream(
                    provider.kind,
                    &conversation,
                    &provider.options,
                    &provider.endpoint,
                    token,
                    &mut |event| match event {
                        ClientEvent::Event(event) => {
                            let _ = events.send(Message::Input(Input::Stream { request, event }));
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
                    match summary.stop_error() {
                        Some(error) => StreamOutcome::Failed {
                            message: error.to_string(),
                            retryable: false,
                        },
                        None => StreamOutcome::Finished,
                    }
                }
                Err(ProviderError::Cancelled) => StreamOutcome::Cancelled,
                Err(error) => StreamOutcome::Failed {
                    message: error.to_string(),
                    retryable: false,
                },
            };
            let _ = sender.send(Message::Input(Input::StreamEnded { request, outcome }));
        });
    }

    /// Runs a tool on its own thread (a killed tool's thread is never waited for).
    fn start_tool(
        &mut self,
        tool_id: String,
        name: String,
        input: serde_json::Value,
        job_id: Option<String>,
    ) {
        let cancel = Cancel::new();
        let mut ctx = self.tools.ctx.clone();
        ctx.cancel = cancel.clone();
        self.tools_running.insert(tool_id.clone(), cancel);
        let tools = self.tools.clone();
        let sender = self.sender.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tool {name}"))
            .spawn(move || {
                let (text, is_error) =
                    match tools
                        .registry
                        .execute(&name, input, &ctx, &tools.store, &tool_id)
                    {
                        Ok(outcome) => (outcome.text, outcome.is_error),
                        Err(error) => (error.to_string(), true),
                    };
                let input = match job_id {
                    Some(job_id) => Input::JobFinished {
                        job_id,
                        text,
                        is_error,
                    },
                    None => Input::ToolFinished {
                        tool_id,
                        text,
                        is_error,
                    },
                };
                let _ = sender.send(Message::Input(input));
            });
        if let Err(error) = spawned {
            let _ = self.sender.send(Message::Notice(format!(
                "cannot start a thread for a tool: {error}"
            )));
        }
    }

    /// Writes the engine's text through the store, merging what someone else wrote meanwhile.
    async fn write(&mut self) -> anyhow::Result<()> {
        self.write_at = None;
        if let Some(since) = self.unwritten_since.take() {
            self.max_write_delay = self.max_write_delay.max(since.elapsed());
        }
        for _ in 0..MERGE_ATTEMPTS {
            match self.write_once().await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(error) if error.downcast_ref::<EditorGone>().is_some() => {
                    // The editor went away between the host's switch and this write: the
                    // file takes over with the engine's text.
                    tracing::info!(%error, "the editor is gone; writing the file");
                    self.switch_store(Box::new(FileStore {
                        path: self.path.clone(),
                    }));
                    self.write_at = None;
                }
                Err(error) => return Err(error),
            }
        }
        anyhow::bail!(
            "{} keeps changing while flemmad writes it; stopped after {MERGE_ATTEMPTS} attempts (everything written before is in it)",
            self.store.describe()
        )
    }

    /// Makes the incoming store the writer when its text and the engine's merge: base = the
    /// text they last shared, ours = the engine's text, theirs = the store's text now. On a
    /// conflict (both changed the same place) the writer stays what it was and the user is
    /// told.
    async fn take_incoming(&mut self) -> anyhow::Result<()> {
        let Some((mut store, base)) = self.incoming.take() else {
            return Ok(());
        };
        let current = match store.read().await {
            Ok(current) => current,
            Err(error) => {
                tracing::info!(%error, "the incoming writer is gone; keeping the current one");
                return Ok(());
            }
        };
        match three_way_base(&base, self.engine.text(), &current.text) {
            Ok(agreed) => {
                tracing::info!(to = store.describe(), "the new writer's text merges");
                self.unwritten = vec![flemma_syntax::diff_to_edits(&agreed, self.engine.text())];
                self.stored = Snapshot {
                    text: agreed,
                    version: current.version,
                };
                self.store = store;
                self.rebase = false;
            }
            Err(conflict) => {
                // The new writer keeps what it has; it shares nothing new with the engine.
                let message = format!(
                    "{} and the text flemmad is writing were both changed at {conflict}; flemmad goes on writing {} instead. Copy your change over, or close one of the editors",
                    store.describe(),
                    self.store.describe()
                );
                tracing::warn!(%message, "not switching the writer");
                (self.report)(Report::Notice(message));
            }
        }
        Ok(())
    }

    /// One read, merge and compare-and-swap write; `false` when the store moved meanwhile.
    async fn write_once(&mut self) -> anyhow::Result<bool> {
        let done = self.read_merge_and_replace().await;
        self.on_disk = match done {
            Ok(true) if self.store.is_disk() => FileIdentity::of(&self.path),
            _ => None,
        };
        done
    }

    async fn read_merge_and_replace(&mut self) -> anyhow::Result<bool> {
        self.take_incoming().await?;
        {
            let current = self.store.read().await?;
            if self.rebase {
                self.rebase = false;
                self.stored = current.clone();
                self.unwritten = vec![flemma_syntax::diff_to_edits(
                    &current.text,
                    self.engine.text(),
                )];
            } else if current.text != self.stored.text {
                self.absorb(&current.text)?;
            }
            self.stored.version = current.version;
            if self.engine.text() == current.text {
                self.stored = current;
                self.unwritten.clear();
                return Ok(true);
            }
            let next = self.engine.text().to_owned();
            if self.store.replace_if_unchanged(&current, &next).await? {
                self.stored = Snapshot {
                    text: next,
                    version: current.version.map(|v| v + 1),
                };
                self.unwritten.clear();
                self.write_at = None;
                return Ok(true);
            }
            Ok(false)
        }
    }

    /// Feeds a change someone else made (`current` instead of what was stored) to the
    /// engine, in the engine's coordinates.
    fn absorb(&mut self, current: &str) -> anyhow::Result<()> {
        // One edit per separate change (keystrokes at several places between two reads stay
        // several small edits, never one replacement spanning the text between them).
        let theirs = flemma_syntax::diff_to_edits(&self.stored.text, current);
        let edits: Vec<TextEdit> = theirs
            .into_iter()
            .map(|edit| {
                let mut start = edit.range.start;
                let mut end = edit.range.end;
                for batch in &self.unwritten {
                    // Text inserted where the engine also inserted goes after the engine's text.
                    start = map_offset(start, batch, Assoc::After);
                    end = map_offset(end, batch, Assoc::Before);
                }
                TextEdit {
                    range: TextRange::new(start, end.max(start)),
                    new_text: edit.new_text,
                }
            })
            .collect();
        tracing::debug!(
            edits = ?edits.iter().map(|e| (e.range, e.new_text.len())).collect::<Vec<_>>(),
            "merging a change made by someone else"
        );
        let refusals = self.refusals;
        let streaming = self.engine.request().is_some();
        self.handle(Input::TextChanged { edits });
        if streaming && self.engine.request().is_none() && self.refusals == refusals {
            // The change deleted the block being written (the engine cancelled the request):
            // the reply text not yet written went with it, not to wherever its anchor fell.
            let orphan = single_edit(self.engine.text(), current);
            if !orphan.range.is_empty() || !orphan.new_text.is_empty() {
                self.handle(Input::TextChanged {
                    edits: vec![orphan],
                });
            }
        }
        if self.refusals > refusals {
            anyhow::bail!(
                "{} was changed by someone else in a way flemmad cannot merge with what it was writing; stopped without writing, so that change is kept. Look at it and send again",
                self.store.describe()
            );
        }
        self.stored.text = current.to_owned();
        self.unwritten = vec![flemma_syntax::diff_to_edits(
            &self.stored.text,
            self.engine.text(),
        )];
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The writer's text is what it shares with the engine (the next driver's merge base).
        if !self.rebase {
            self.store.left(&self.stored.text);
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

/// Where the three-way merge of [`three_way_base`] found both sides changing the same text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflict {
    /// The line (1-based) of the base where the changes meet.
    pub line: usize,
}

impl std::fmt::Display for MergeConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}", self.line)
    }
}

/// The three-way merge of `ours` and `theirs`, both edited from `base`, as the text both
/// agree on: `base` with the changes both made the same way. The driver then applies the
/// rest of `theirs` over the engine's text (`absorb`, which maps it through the engine's
/// edits). A change of one side that overlaps a different change of the other (or two
/// insertions at one place) is a conflict.
pub fn three_way_base(base: &str, ours: &str, theirs: &str) -> Result<String, MergeConflict> {
    let ours = flemma_syntax::diff_to_edits(base, ours);
    let theirs = flemma_syntax::diff_to_edits(base, theirs);
    let mut agreed: Vec<&TextEdit> = Vec::new();
    for their in &theirs {
        if let Some(same) = ours.iter().find(|our| *our == their) {
            agreed.push(same);
            continue;
        }
        for our in &ours {
            let (a, b) = (our.range, their.range);
            let overlap = a.start.max(b.start) < a.end.min(b.end);
            let inside = |point: TextRange, other: TextRange| {
                point.is_empty() && other.start < point.start && point.start < other.end
            };
            let same_point = a.is_empty() && b.is_empty() && a.start == b.start;
            if overlap || inside(a, b) || inside(b, a) || same_point {
                let at = a.start.max(b.start).min(base.len());
                let line = base.as_bytes()[..at]
                    .iter()
                    .filter(|&&c| c == b'\n')
                    .count()
                    + 1;
                return Err(MergeConflict { line });
            }
        }
    }
    let mut text = base.to_owned();
    for edit in agreed.iter().rev() {
        text.replace_range(edit.range.start..edit.range.end, &edit.new_text);
    }
    Ok(text)
}

/// The one edit turning `before` into `after`: everything between their common prefix and
/// common suffix (on character boundaries).
pub fn single_edit(before: &str, after: &str) -> TextEdit {
    let (a, b) = (before.as_bytes(), after.as_bytes());
    let mut prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    while !before.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = a.len().min(b.len()) - prefix;
    let mut suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    while !before.is_char_boundary(a.len() - suffix) {
        suffix -= 1;
    }
    TextEdit {
        range: TextRange::new(prefix, a.len() - suffix),
        new_text: after[prefix..b.len() - suffix].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, edit: &TextEdit) -> String {
        let mut out = text[..edit.range.start].to_owned();
        out.push_str(&edit.new_text);
        out.push_str(&text[edit.range.end..]);
        out
    }

    #[test]
    fn a_three_way_merge_keeps_both_sides_and_finds_conflicts() {
        let base = "@You:\nfirst\n\n@Assistant:\nhello\n\n@You:\nlast\n";
        let ours = "@You:\nfirst\n\n@Assistant:\nhello\n\n@You:\nlast\n\n@Assistant:\nreply\n";
        let theirs = "@You:\nfirst, edited\n\n@Assistant:\nhello\n\n@You:\nlast\n";
        // Nothing both changed the same way: the agreed text is the base.
        assert_eq!(three_way_base(base, ours, theirs).as_deref(), Ok(base));
        // The same change on both sides is agreed once.
        let agreed = three_way_base(base, ours, ours).unwrap();
        assert_eq!(agreed, ours);
        // Different changes of one line conflict, and the message names it.
        let other = "@You:\nfirst\n\n@Assistant:\nhello there\n\n@You:\nlast\n";
        let mine = "@You:\nfirst\n\n@Assistant:\nhello, you\n\n@You:\nlast\n";
        let conflict = three_way_base(base, mine, other).unwrap_err();
        assert_eq!(conflict.line, 5);
    }

    #[test]
    fn one_edit_turns_before_into_after() {
        for (before, after) in [
            ("abc", "abXc"),
            ("abc", "abc"),
            ("", "x"),
            ("x", ""),
            ("aaa", "aaaa"),
            ("héllo", "hèllo"),
            ("@You:\nhi\n", "@You:\nhi\n\nTYPED"),
        ] {
            let edit = single_edit(before, after);
            assert_eq!(apply(before, &edit), after, "{before:?} -> {after:?}");
        }
        let edit = single_edit("aaa", "aaaa");
        assert_eq!(edit.new_text, "a");
    }
}
