//! What the engine host knows and decides, with no IO: the state of every document a driver
//! ran for (its [`Phase`], the calls decided on it, how its last driver stopped), its runtime
//! layers (`flemma/switch`, `flemma/mode`), and whether the host is stopping. The host's
//! commands go through [`HostState::handle`], which changes the state and returns the
//! [`Effect`]s for the host's thread to run; the questions callers ask (`flemma/status`, may a
//! call be decided, may a compaction start) are answered from it. It is the one source of
//! truth for "is a driver running": the host's thread keeps only the handles of the drivers it
//! runs, to run the effects.
//!
//! The host makes no decision that depends on time (its one wait, the drivers' writes at
//! shutdown, is the effect's own timeout), so no clock is passed in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flemma_config::{ConfigLayer, Mode};
use flemma_engine::{EngineEvent, Input, StopReason};
use flemma_protocol::engine::{Accepted, EngineStatus, JobState, ModelSwitch};
use flemma_protocol::error::RequestError;
use flemma_protocol::event::{EngineStopped, StopLabel};
use flemma_protocol::methods::FlemmaRequest;

use crate::compaction::ByHand;
use crate::engine_driver::DriverState;
use crate::engine_host::CallOptions;

/// Where a document's driver is.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Phase {
    /// No driver runs.
    #[default]
    Idle,
    /// A driver is being set up: inputs (and revisions of a call's input) that arrive meanwhile
    /// wait here.
    Starting {
        queued: Vec<Input>,
        revisions: Vec<(String, serde_json::Value)>,
    },
    /// A driver runs: inputs are fed to it.
    Running,
}

/// How a call was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decided {
    Approved,
    Rejected,
}

impl Decided {
    fn as_str(self) -> &'static str {
        match self {
            Decided::Approved => "approved",
            Decided::Rejected => "rejected",
        }
    }
}

/// The last known state of one document.
#[derive(Debug, Clone, Default)]
pub(crate) struct DocumentState {
    pub phase: Phase,
    /// What the running (or last) driver's engine is doing.
    pub driver: Option<DriverState>,
    pub last_stop: Option<EngineStopped>,
    /// How many drivers started for the document.
    pub epoch: u64,
    /// The last driver ended with an error (it may have dropped decisions it had not applied).
    pub last_failed: bool,
    /// The calls decided and how, with the driver that handles the decision (its `epoch`):
    /// the first decision on a call is the one that counts, whichever front end sends it, even
    /// before a driver has seen it. Each with the order it was decided in (`decisions`), so
    /// that past [`DECIDED_KEPT`] the oldest go first.
    decided: HashMap<String, (Decided, u64, u64)>,
    /// How many decisions were recorded (the next one's order).
    decisions: u64,
    /// The editor sessions that have the document open, the most recently active last: the
    /// last one writes the document (none: the file on disk).
    editors: Vec<u64>,
}

impl DocumentState {
    pub fn running(&self) -> bool {
        self.phase != Phase::Idle
    }
}

/// What a driver starts for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum First {
    Input(Input),
    Compact(ByHand),
    /// A pending call's input rewritten (`flemma/reviseProposal`).
    Revise(String, serde_json::Value),
}

/// What the host's thread is told.
#[derive(Debug)]
pub(crate) enum Command {
    /// Feed `input` to the document's driver, or start one with `Load` and `input`.
    Input {
        path: PathBuf,
        input: Input,
        /// `Advance` refuses to start a driver when there is nothing to send.
        send: bool,
        /// How a driver started for it runs.
        options: CallOptions,
    },
    /// Feed `input` only to a running driver.
    IfRunning { path: PathBuf, input: Input },
    /// Compact the document, undo a compaction or cut it back: a driver starts for it (none
    /// runs).
    Compact { path: PathBuf, order: ByHand },
    /// Rewrite the input of the pending call `tool_id`: fed to the running driver, or a driver
    /// starts for it.
    Revise {
        path: PathBuf,
        tool_id: String,
        input: serde_json::Value,
    },
    /// The writer of `path` changed (an editor attached or detached: [`HostState::attach`],
    /// [`HostState::detach`]).
    Writer { path: PathBuf },
    /// The host stops: drivers leave, then the shared services close.
    Shutdown,
}

/// What the host's thread does for a command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Hand `input` to the document's running driver.
    Feed(PathBuf, Input),
    /// Hand a revision of a call's input to the document's running driver.
    Revise(PathBuf, String, serde_json::Value),
    /// Set up and run a driver for the document.
    Start {
        path: PathBuf,
        first: First,
        send: bool,
        options: CallOptions,
    },
    /// The document's running driver writes through its current writer.
    SetWriter(PathBuf),
    /// The document's running driver leaves (cancels, writes, ends).
    Leave(PathBuf),
    /// A notice for the editors that have the document open.
    Notice(PathBuf, String),
    /// The editors are told the driver failed.
    Failed(PathBuf, String),
    /// An event for the editors and the subscribers.
    Publish(PathBuf, EngineEvent),
    /// Wait for the drivers' writes, close the shared services, and end the host's thread.
    Stop,
}

/// What a driver that has just been set up is fed, after `Load` and what it started for.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Backlog {
    pub inputs: Vec<Input>,
    pub revisions: Vec<(String, serde_json::Value)>,
    /// The host is stopping: the driver leaves at once.
    pub leave: bool,
}

/// What the calls to be decided are checked on when no driver runs (a running driver's pending
/// calls, the state's own, always decide).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Checked<'a> {
    /// A text (the caller's buffer, or the file read under the state's lock).
    Text(&'a flemma_syntax::Document),
    /// Nothing known here (another editor's buffer): accepted, its driver decides.
    Unknown,
}

/// The host's state. See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct HostState {
    docs: HashMap<PathBuf, DocumentState>,
    stopping: bool,
    /// The runtime layer of every document `flemma/switch` switched, with what it set.
    switches: HashMap<PathBuf, (ConfigLayer, ModelSwitch)>,
    /// The runtime layer of every document `flemma/mode` set a mode for, with that mode.
    modes: HashMap<PathBuf, (ConfigLayer, Mode)>,
}

/// The most decisions a document remembers (the oldest are long in the text).
const DECIDED_KEPT: usize = 1024;

impl HostState {
    #[cfg(test)]
    pub fn document(&self, path: &Path) -> Option<&DocumentState> {
        self.docs.get(path)
    }

    fn doc(&mut self, path: &Path) -> &mut DocumentState {
        self.docs.entry(path.to_owned()).or_default()
    }

    pub fn is_running(&self, path: &Path) -> bool {
        self.docs.get(path).is_some_and(DocumentState::running)
    }

    /// What a command accepted for `path` now says: whether a driver starts for it.
    pub fn accepted(&self, path: &Path) -> Accepted {
        Accepted {
            started: !self.is_running(path),
            tool_ids: Vec::new(),
        }
    }

    /// The editor session that writes `path`: the most recently active one that has it open
    /// (`None`: the file on disk).
    pub fn writer(&self, path: &Path) -> Option<u64> {
        self.docs.get(path)?.editors.last().copied()
    }

    /// Whether an editor has `path` open.
    pub fn has_editor(&self, path: &Path) -> bool {
        self.writer(path).is_some()
    }

    /// `session` has `path` open, or was just active on it: it writes it now. Whether the
    /// writer changed (then [`Command::Writer`] tells a running driver).
    pub fn attach(&mut self, path: &Path, session: u64) -> bool {
        let before = self.writer(path);
        let editors = &mut self.doc(path).editors;
        editors.retain(|&s| s != session);
        editors.push(session);
        before != Some(session)
    }

    /// `session` closed `path` (or ended): the next most recently active editor writes it,
    /// else the file. Whether the writer changed.
    pub fn detach(&mut self, path: &Path, session: u64) -> bool {
        let Some(doc) = self.docs.get_mut(path) else {
            return false;
        };
        let before = doc.editors.last().copied();
        doc.editors.retain(|&s| s != session);
        before != doc.editors.last().copied()
    }

    pub fn switch(&self, path: &Path) -> Option<&(ConfigLayer, ModelSwitch)> {
        self.switches.get(path)
    }

    pub fn mode(&self, path: &Path) -> Option<&(ConfigLayer, Mode)> {
        self.modes.get(path)
    }

    pub fn set_switch(&mut self, path: &Path, layer: ConfigLayer, switched: ModelSwitch) {
        self.switches.insert(path.to_owned(), (layer, switched));
    }

    pub fn set_mode(&mut self, path: &Path, layer: ConfigLayer, mode: Mode) {
        self.modes.insert(path.to_owned(), (layer, mode));
    }

    /// The host's thread handles `command`: the effects to run, in order.
    pub fn handle(&mut self, command: Command) -> Vec<Effect> {
        match command {
            Command::Input {
                path,
                input,
                send,
                options,
            } => {
                if self.stopping {
                    return Vec::new();
                }
                let doc = self.doc(&path);
                match &mut doc.phase {
                    Phase::Starting { queued, .. } => {
                        queued.push(input);
                        Vec::new()
                    }
                    Phase::Running => vec![Effect::Feed(path, input)],
                    Phase::Idle => self.start(path, First::Input(input), send, options),
                }
            }
            Command::IfRunning { path, input } => match self.docs.get_mut(&path) {
                Some(DocumentState {
                    phase: Phase::Starting { queued, .. },
                    ..
                }) => {
                    queued.push(input);
                    Vec::new()
                }
                Some(DocumentState {
                    phase: Phase::Running,
                    ..
                }) => vec![Effect::Feed(path, input)],
                _ => Vec::new(),
            },
            Command::Compact { path, order } => {
                if self.stopping {
                    Vec::new()
                } else if self.is_running(&path) {
                    let notice = "not compacted: a send started on the chat meanwhile";
                    vec![Effect::Notice(path, notice.into())]
                } else {
                    self.start(path, First::Compact(order), false, CallOptions::default())
                }
            }
            Command::Revise {
                path,
                tool_id,
                input,
            } => {
                if self.stopping {
                    return Vec::new();
                }
                match &mut self.doc(&path).phase {
                    Phase::Starting { revisions, .. } => {
                        revisions.push((tool_id, input));
                        Vec::new()
                    }
                    Phase::Running => vec![Effect::Revise(path, tool_id, input)],
                    Phase::Idle => self.start(
                        path,
                        First::Revise(tool_id, input),
                        false,
                        CallOptions::default(),
                    ),
                }
            }
            Command::Writer { path } => match self.docs.get(&path) {
                Some(doc) if doc.phase == Phase::Running => vec![Effect::SetWriter(path)],
                _ => Vec::new(),
            },
            Command::Shutdown => {
                self.stopping = true;
                let mut running: Vec<&PathBuf> = self
                    .docs
                    .iter()
                    .filter(|(_, doc)| doc.phase == Phase::Running)
                    .map(|(path, _)| path)
                    .collect();
                running.sort();
                let mut effects: Vec<Effect> = running
                    .into_iter()
                    .map(|path| Effect::Leave(path.clone()))
                    .collect();
                effects.push(Effect::Stop);
                effects
            }
        }
    }

    fn start(
        &mut self,
        path: PathBuf,
        first: First,
        send: bool,
        options: CallOptions,
    ) -> Vec<Effect> {
        let doc = self.doc(&path);
        doc.phase = Phase::Starting {
            queued: Vec::new(),
            revisions: Vec::new(),
        };
        doc.epoch += 1;
        vec![Effect::Start {
            path,
            first,
            send,
            options,
        }]
    }

    /// The driver of `path` is set up and runs: what waited for it.
    pub fn driver_running(&mut self, path: &Path) -> Backlog {
        let stopping = self.stopping;
        let doc = self.doc(path);
        match std::mem::replace(&mut doc.phase, Phase::Running) {
            Phase::Starting { queued, revisions } => Backlog {
                inputs: queued,
                revisions,
                leave: stopping,
            },
            _ => Backlog {
                leave: stopping,
                ..Backlog::default()
            },
        }
    }

    /// What the driver of `path` is doing changed.
    pub fn driver_state(&mut self, path: &Path, state: DriverState) {
        self.doc(path).driver = Some(state);
    }

    /// The driver of `path` ended (or could not start) with `outcome`: how it stopped is told.
    /// A driver that could not start says what was asked of it meanwhile and not done (the
    /// inputs and revisions that waited for it), so that nothing is dropped unsaid.
    pub fn driver_ended(
        &mut self,
        path: &Path,
        outcome: &Result<StopReason, String>,
    ) -> Vec<Effect> {
        let doc = self.doc(path);
        let waited = match &doc.phase {
            Phase::Starting { queued, revisions } => queued.len() + revisions.len(),
            Phase::Idle | Phase::Running => 0,
        };
        let mut stopped = stopped(outcome);
        if let (Err(_), Some(message)) = (outcome, stopped.message.as_mut())
            && waited > 0
        {
            let (requests, were, them) = if waited == 1 {
                ("request", "was", "it")
            } else {
                ("requests", "were", "them")
            };
            message.push_str(&format!(
                " ({waited} {requests} made while the driver started {were} not done: make {them} again)"
            ));
        }
        doc.phase = Phase::Idle;
        doc.last_failed = outcome.is_err();
        doc.last_stop = Some(stopped.clone());
        let mut effects = Vec::new();
        if let Some(message) = &stopped.message {
            effects.push(Effect::Failed(path.to_owned(), message.clone()));
        }
        effects.push(Effect::Publish(
            path.to_owned(),
            EngineEvent::EngineStopped(stopped),
        ));
        effects
    }

    /// Whether the calls to decide on `path` are checked on the file when the caller holds no
    /// buffer: no driver runs, and no other editor has it open.
    pub fn decided_on_file(&self, path: &Path, another_editor: bool) -> bool {
        !self.is_running(path) && !another_editor
    }

    /// Decides `tool_id` (or, with `None`, every pending call) as `how`: **the first decision
    /// on a call is the one that counts**, whichever front end sends it and however close
    /// together. Each call is checked on what knows it best — a running driver's pending
    /// calls, else `text` — and against the decisions already taken; the decision is recorded
    /// with the driver that will handle it (the running one, else the next). A recorded
    /// decision is in flight until the text shows it; only a driver that failed may have
    /// dropped decisions, and then a new one may be taken. Returns what was accepted.
    pub fn decide(
        &mut self,
        path: &Path,
        tool_id: Option<&str>,
        how: Decided,
        text: Checked<'_>,
    ) -> Result<Accepted, RequestError> {
        use flemma_ide::actions::{ActionError, check_pending, pending_ids};
        let state = self.doc(path);
        let running = state.running();
        let handler = state.epoch + u64::from(!running);
        let waiting: Option<Vec<String>> = state
            .driver
            .as_ref()
            .filter(|_| running)
            .map(|driver| driver.pending.clone());
        let text = match (&waiting, text) {
            (Some(_), _) | (None, Checked::Unknown) => None,
            (None, Checked::Text(doc)) => Some(doc),
        };
        let refused = |error: ActionError| RequestError::invalid_params(error.to_string());
        let pending_now = |id: &str| match (&waiting, text) {
            (Some(waiting), _) => waiting.iter().any(|w| w == id),
            (None, Some(doc)) => check_pending(doc, id).is_ok(),
            (None, None) => true,
        };
        let ids: Vec<String> = match tool_id {
            Some(id) => vec![id.to_owned()],
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
            let before = state
                .decided
                .get(id.as_str())
                .map(|&(how, by, _)| (how, by));
            let refusal = match (before, pending_now(id)) {
                // The text says it is decided: say what it says.
                (before, false) => Some(match (text, &waiting, before) {
                    (Some(doc), None, _) => match check_pending(doc, id) {
                        Err(error) => refused(error),
                        Ok(()) => already(before.map_or("decided", |b| b.0.as_str())),
                    },
                    (_, _, Some((was, _))) => already(was.as_str()),
                    _ => RequestError::refused(format!(
                        "`{id}` is not waiting for approval (it was decided already, or it is not in the chat); pending: {}",
                        waiting
                            .as_ref()
                            .filter(|w| !w.is_empty())
                            .map_or_else(|| "none".to_owned(), |w| w.join(", "))
                    )),
                }),
                // Still pending, decided before: in flight (the host hands every decision to
                // the running driver, which applies what it got before it ends, or to the next
                // one), unless the driver failed before applying it.
                (Some((was, by)), true) => {
                    let lost = !running && state.last_failed && by <= state.epoch;
                    (!lost).then(|| already(was.as_str()))
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
            state.decisions += 1;
            let order = state.decisions;
            state.decided.insert(id.clone(), (how, handler, order));
        }
        // An `approveAll` may add many at once: the oldest decisions go until the rest fit.
        while state.decided.len() > DECIDED_KEPT {
            let oldest = state
                .decided
                .iter()
                .min_by_key(|(_, (_, _, order))| *order)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => state.decided.remove(&id),
                None => break,
            };
        }
        Ok(Accepted {
            started: !running,
            tool_ids: decided,
        })
    }

    /// Refuses `action` (`cancel`, `move to the background`) of `what` when no driver runs for
    /// `path`.
    pub fn running_only(
        &self,
        path: &Path,
        what: &str,
        action: &str,
    ) -> Result<Accepted, RequestError> {
        match self.is_running(path) {
            true => Ok(Accepted::default()),
            false => Err(RequestError::refused(format!(
                "nothing runs for {}: there is no {what} to {action}",
                path.display()
            ))),
        }
    }

    /// Refuses a compaction, its undo or a cut by hand while a driver works on `path`
    /// (automatic compaction runs there).
    pub fn by_hand(&self, path: &Path, order: &ByHand) -> Result<Accepted, RequestError> {
        let what = match order {
            ByHand::Compact(_) => "compact",
            ByHand::Undo { .. } => "undo the compaction",
            ByHand::Rewind { .. } => "cut the chat back",
        };
        let hint = "during a send, `context.compact_at` compacts on its own";
        self.idle_for(path, what, hint)?;
        Ok(self.accepted(path))
    }

    /// Refuses a rewind while a driver works on `path`.
    pub fn rewind(&self, path: &Path) -> Result<(), RequestError> {
        self.idle_for(path, "rewind", "cancel it first")
    }

    /// Refuses `what` while a driver works on `path` (`hint`: what to do meanwhile).
    fn idle_for(&self, path: &Path, what: &str, hint: &str) -> Result<(), RequestError> {
        if !self.is_running(path) {
            return Ok(());
        }
        Err(RequestError::refused(format!(
            "flemmad works on {} (a send, tools or jobs): {what} once it stops ({hint})",
            path.display()
        )))
    }

    /// `flemma/status` of `path`; `questions` are the ids of the questions asked agents wait
    /// for (answered as pending calls are).
    pub fn status(&self, path: &Path, questions: Vec<String>) -> EngineStatus {
        let unknown = DocumentState::default();
        let state = self.docs.get(path).unwrap_or(&unknown);
        let driver = state.driver.as_ref();
        let mut pending = driver.map(|d| d.pending.clone()).unwrap_or_default();
        pending.extend(questions);
        EngineStatus {
            path: path.display().to_string(),
            state: status_label(state).to_owned(),
            running_tools: driver.map(|d| d.running_tools.clone()).unwrap_or_default(),
            pending,
            jobs: driver.map(|d| d.jobs.clone()).unwrap_or_default(),
            usage: usage_of(driver),
            last_stop: state.last_stop.as_ref().map(|stop| match &stop.message {
                Some(message) => format!("{}: {message}", stop.reason),
                None => stop.reason.to_string(),
            }),
            switched: self
                .switches
                .get(path)
                .map(|(_, switched)| switched.clone()),
            mode: self
                .modes
                .get(path)
                .map(|(_, mode)| mode.as_str().to_owned()),
            context: driver.and_then(|d| d.context.clone()).map(Box::new),
        }
    }

    /// `flemma/jobs` of `path`.
    pub fn jobs(&self, path: &Path) -> Vec<flemma_protocol::engine::EngineJob> {
        self.driver(path)
            .map(|d| d.jobs.clone())
            .unwrap_or_default()
    }

    /// `flemma/usage` of `path`.
    pub fn usage(&self, path: &Path) -> flemma_protocol::engine::UsageTotals {
        usage_of(self.driver(path))
    }

    fn driver(&self, path: &Path) -> Option<&DriverState> {
        self.docs.get(path).and_then(|d| d.driver.as_ref())
    }
}

/// Whether `request`'s answer needs work that takes long, which a caller that must not wait
/// has done elsewhere ([`super::EngineHost::call_later`]): `flemma/switch` and `flemma/mode`
/// evaluate the frontmatter (templates, up to their time budget), `flemma/rewind` and
/// `flemma/changes` read the checkpoints (git). They change nothing a request sent after them
/// without waiting for their answer could depend on, but the layers `switch` and `mode` set.
pub(crate) fn answered_off_thread(request: &FlemmaRequest) -> bool {
    matches!(
        request,
        FlemmaRequest::Switch(_)
            | FlemmaRequest::Mode(_)
            | FlemmaRequest::Rewind(_)
            | FlemmaRequest::Changes(_)
    )
}

/// How a driver's end is told (`engine:stopped`): its stop reason, or the error it ended on.
/// Whether `request` may start a driver (then no other process may be driving the chat).
pub(crate) fn may_start_a_driver(request: &FlemmaRequest) -> bool {
    use FlemmaRequest as R;
    matches!(
        request,
        R::Send(_)
            | R::Approve(_)
            | R::Reject(_)
            | R::ApproveAll(_)
            | R::Execute(_)
            | R::ReviseProposal(_)
            | R::ApproveHunks(_)
    )
}

pub(crate) fn stopped(outcome: &Result<StopReason, String>) -> EngineStopped {
    match outcome {
        Ok(reason) => EngineStopped {
            reason: reason.label(),
            message: reason.message(),
        },
        Err(message) => EngineStopped {
            reason: StopLabel::Error,
            message: Some(message.clone()),
        },
    }
}

/// The `state` of `flemma/status`: `idle` or `awaiting-approval` when no driver runs (as the
/// last one stopped), else `streaming`, `tools` (foreground tools or running jobs) or
/// `working`.
pub(crate) fn status_label(state: &DocumentState) -> &'static str {
    let driver = state.driver.as_ref();
    match driver {
        _ if !state.running() => {
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
    }
}

fn usage_of(driver: Option<&DriverState>) -> flemma_protocol::engine::UsageTotals {
    driver
        .map(|d| {
            crate::usage_report::totals(&d.usage, d.cost, d.cache_saved, d.rate_limits.as_ref())
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
