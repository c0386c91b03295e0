//! What the engine host knows and decides, with no IO: the state of every document a driver
//! ran for (its [`Phase`], the calls decided on it, how its last driver stopped), its runtime
//! layers (`flemma/switch`, `flemma/mode`), and whether the host is stopping. The host's
//! commands go through [`HostState::handle`], which changes the state and returns the
//! [`Effect`]s for the drivers' thread to run; the questions callers ask (`flemma/status`, may
//! a call be decided, may a compaction start) are answered from it. It is the one source of
//! truth for "is a driver running": the drivers' thread keeps only the handles of the drivers
//! it runs, to run the effects. It lives on its own thread (`state_thread.rs`), which alone
//! holds it.
//!
//! The host makes no decision that depends on time (its one wait, the drivers' writes at
//! shutdown, is the effect's own timeout), so no clock is passed in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flemma_config::{ConfigLayer, Mode};
use flemma_engine::{EngineEvent, Input, StopReason};
use flemma_protocol::engine::{Accepted, ModelSwitch};
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

/// What the host's state is told to do (its effects go to the drivers' thread).
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

impl Command {
    /// Feed `input` to the document's driver, or start one (which does not send by itself).
    pub fn fed(path: PathBuf, input: Input, options: CallOptions) -> Self {
        Command::Input {
            path,
            input,
            send: false,
            options,
        }
    }
}

/// How a driver starts for an input that reached no living driver ([`Effect::Feed`]): as the
/// command that decided it said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StartAs {
    pub send: bool,
    pub options: CallOptions,
}

impl StartAs {
    /// The command that decides `input` for `path` again.
    pub fn command(self, path: PathBuf, input: Input) -> Command {
        Command::Input {
            path,
            input,
            send: self.send,
            options: self.options,
        }
    }
}

/// The drivers of one document, as the host's state knows them ([`HostState::drivers`]). Every
/// driver started ends with one `engine:stopped`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drivers {
    /// How many started (the document's epoch).
    pub started: u64,
    /// One runs, or is being set up: its `engine:stopped` is still to come.
    pub running: bool,
}

impl Drivers {
    /// How many `engine:stopped` come from the drivers that ran at `before` or started
    /// between `before` and `self` (a driver that ran then has not stopped yet).
    pub fn stops_since(self, before: Drivers) -> u64 {
        self.started.saturating_sub(before.started) + u64::from(before.running)
    }
}

/// What the drivers' thread does for a command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Hand `input` to the document's running driver. Should that driver have ended before
    /// reading it, the input is handed back (`Command::Input` as `StartAs` says: a driver
    /// starts for it) — unless `None`: it concerned only that driver (a cancel, a move to the
    /// background).
    Feed(PathBuf, Input, Option<StartAs>),
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
    /// Wait for the drivers' writes, close the shared services, and end the drivers' thread.
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

/// The host's state. See the module documentation. It is not `Send`: made on the state's
/// thread (`state_thread.rs`), it never leaves it, so no other thread can hold it.
#[derive(Debug, Default)]
pub(crate) struct HostState {
    /// Keeps the state on the thread that made it.
    on_one_thread: std::marker::PhantomData<std::rc::Rc<()>>,
    docs: HashMap<PathBuf, DocumentState>,
    stopping: bool,
    /// The runtime layer of every document `flemma/switch` switched, with what it set.
    switches: HashMap<PathBuf, (ConfigLayer, ModelSwitch)>,
    /// The runtime layer of every document `flemma/mode` set a mode for, with that mode.
    modes: HashMap<PathBuf, (ConfigLayer, Mode)>,
}

impl HostState {
    #[cfg(test)]
    pub fn document(&self, path: &Path) -> Option<&DocumentState> {
        self.docs.get(path)
    }

    fn doc(&mut self, path: &Path) -> &mut DocumentState {
        self.docs.entry(path.to_owned()).or_default()
    }

    /// The host is stopping: no command starts or feeds a driver any more.
    pub fn stopping(&self) -> bool {
        self.stopping
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

    /// How many drivers started for `path` until now, and whether one runs.
    pub fn drivers(&self, path: &Path) -> Drivers {
        self.docs
            .get(path)
            .map_or_else(Drivers::default, |doc| Drivers {
                started: doc.epoch,
                running: doc.running(),
            })
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

    /// Handles `command`: the effects for the drivers' thread to run, in order.
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
                    Phase::Running => {
                        vec![Effect::Feed(path, input, Some(StartAs { send, options }))]
                    }
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
                }) => vec![Effect::Feed(path, input, None)],
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
}

/// Whether `request`'s answer needs work that takes long, done on a thread of its own, never
/// the caller's (`EngineHost::call` waits for it there, [`super::EngineHost::call_later`]
/// does not wait): `flemma/switch` and `flemma/mode`
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

/// How a driver's end is told (`engine:stopped`): its stop reason, or the error it ended on.
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

mod decisions;
mod status;

pub(crate) use decisions::{Checked, Decided};

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
