//! The document session: one [`Engine`] and everything about writing its text into a store
//! that others change too — who writes the document (the file on disk or an editor's buffer),
//! when (edits coalesced for a window, every stop written at once), how a change someone else
//! made meanwhile is merged (one edit per separate change, mapped through what the engine has
//! not written yet), how a store that moved is read again, and how the writer switches (a
//! three-way merge with an editor's base, the engine's text over a file).
//!
//! **Sans IO**, in the engine's style: [`Session::handle`] takes the time and an [`Input`] — an
//! input for the engine, what a store answered to a read or a replacement, a new writer, a
//! change on disk, a tick — and returns [`Effect`]s: the engine's own (start a request, run a
//! tool, set a timer, emit an event), and the store work for the runner: [`Effect::Read`],
//! [`Effect::Replace`] (replace-if-unchanged), [`Effect::Left`] (a store stops being the
//! writer), [`Effect::WakeAt`]. The runner performs them and feeds the outcomes back; it
//! decides nothing (`src/engine_driver.rs`).
//!
//! One store operation is in flight at a time; inputs keep arriving meanwhile (stream events,
//! keystrokes), and what they change is written by the next write. The store's answers decide,
//! never the session's hopes: a replacement is written only when the store says so (an editor
//! store says so only once its text shows the edit, `flemma_syntax::RemoteEdit`).
//!
//! What the session is doing is its phase (`phase.rs`), in types that cannot hold an illegal
//! combination: its `Lifecycle` (running, done, failed) and how it is to `End` (when the
//! cycle stops, interrupted, leaving), the `Writer` (the store and what it holds: a file, a
//! file just taken over whose text is not known yet, an editor's buffer), and the store
//! operation in flight (`Op`) with the attempts of the write it belongs to, or what the last
//! write left (`Rest`: settled, unsettled, retrying).
//!
//! Files: `api.rs` (the inputs, effects and snapshots a runner exchanges with the session),
//! `phase.rs` (the phase types and their pure transitions), this file (the session, its inputs
//! and what is due when), `running.rs` (what the engine runs: the request, tools, cancels),
//! `write.rs` (the store operations: writes, reads, writer switches) and `merge.rs` (a change
//! someone else made, fed to the engine).
//!
//! Invariants (the property test `tests/session_properties.rs` checks them against simulated
//! editors of every known behaviour, a file written by other programs, writer switches and
//! disconnects): every streamed byte lands exactly once, every change made by someone else
//! survives, the text parses without new errors, and the last writer ends with the engine's
//! text. The phase transitions are tested as data in `session/tests.rs`, the writer's decisions
//! through the public API in `tests/session.rs`.

mod api;
mod merge;
mod phase;
mod running;
mod write;

use std::collections::{HashMap, HashSet};

use flemma_syntax::TextEdit;

use crate::{CancelScope, Engine, Input as EngineInput, Millis, RequestId, StopReason};

pub use api::{
    Effect, Input, ReadOutcome, ReplaceOutcome, SessionConfig, Snapshot, StoreId, StoreKind,
};
pub use phase::MERGE_ATTEMPTS;
use phase::{End, Lifecycle, Op, Rest, Writer};

/// How long a cancelled call whose output is kept may take to return it (an asked agent
/// answers `session/cancel`, or is stopped, within a few seconds).
pub const LATE_RESULT_WAIT: Millis = 10_000;

/// Sends waiting for a read of the writer asked for after the last of them came (the user may
/// have typed what is to be sent an instant before sending: the text must hold it first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sends {
    count: usize,
    /// The number of that read.
    after_read: u64,
}

/// One document's engine and its writer. See the module documentation.
pub struct Session {
    engine: Engine,
    config: SessionConfig,
    life: Lifecycle,
    end: End,
    writer: Writer,
    /// A writer switch waiting for the store operation in flight (or, while the old writer is
    /// read, the switch under way).
    switching: Option<(StoreId, StoreKind)>,
    op: Op,
    /// The engine's edits since the writer's text was last read or written, in order (each in
    /// the coordinates before it).
    unwritten: Vec<Vec<TextEdit>>,
    /// The text as of the effect being produced (a request evaluates the text as it is when
    /// it starts; the engine's own view is already past its effects).
    view: String,
    /// When the unwritten edits must be written.
    write_at: Option<Millis>,
    /// When the oldest unwritten edit was made.
    unwritten_since: Option<Millis>,
    max_write_delay: Millis,
    next_poll: Millis,
    wake: Option<Millis>,
    request: Option<RequestId>,
    tools_running: HashSet<String>,
    /// Calls killed by a cancel whose output on their way out is kept
    /// ([`crate::EngineConfig::kept_when_cancelled`]), and until when it is waited for.
    lingering: HashMap<String, Millis>,
    refusals: usize,
    stopped: Option<StopReason>,
    /// The store reads asked for so far, of any store (none yet: the text the session was made
    /// from is the store's, read by the runner just before).
    reads: u64,
    sends: Option<Sends>,
    /// [`Input::Sync`] waits for this read of the writer.
    sync_after_read: Option<u64>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("life", &self.life)
            .field("writer", &self.writer.store)
            .field("op", &self.op)
            .field("unwritten", &self.unwritten.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session writing through `writer` (of `kind`), whose text is `stored` (as just read
    /// from it); `engine` starts from that text.
    pub fn new(
        engine: Engine,
        writer: StoreId,
        kind: &StoreKind,
        stored: Snapshot,
        config: SessionConfig,
    ) -> Self {
        let view = stored.text.clone();
        Self {
            engine,
            config,
            life: Lifecycle::Running,
            end: End::WhenStopped,
            writer: Writer::read_as(writer, kind, stored),
            switching: None,
            op: Op::Idle(Rest::Unsettled),
            unwritten: Vec::new(),
            view,
            write_at: None,
            unwritten_since: None,
            max_write_delay: 0,
            next_poll: 0,
            wake: None,
            request: None,
            tools_running: HashSet::new(),
            lingering: HashMap::new(),
            refusals: 0,
            stopped: None,
            reads: 0,
            sends: None,
            sync_after_read: None,
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether a watcher tells of the file's changes ([`Input::StoreChanged`]): the file is
    /// then polled only as a safety net.
    pub fn set_watched(&mut self, watched: bool) {
        self.config.watched = watched;
    }

    /// The request streaming now (its events are the reply text).
    pub fn request(&self) -> Option<RequestId> {
        self.request
    }

    /// The store that writes the document.
    pub fn writer(&self) -> StoreId {
        self.writer.store
    }

    /// The longest time an edit waited between being made and its write starting.
    pub fn max_write_delay(&self) -> Millis {
        self.max_write_delay
    }

    /// What the writer holds as far as the session knows: `(store, text)` when it is an
    /// editor whose base should be remembered when the runner ends.
    pub fn shared_text(&self) -> Option<(StoreId, &str)> {
        self.writer
            .editor_text()
            .map(|text| (self.writer.store, text))
    }

    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        match self.life {
            Lifecycle::Failed => return out,
            Lifecycle::Done if input != Input::Tick => self.life = Lifecycle::Running,
            Lifecycle::Done | Lifecycle::Running => {}
        }
        match input {
            // A send waits for a read of the writer that shows what the user typed before it
            // (the engine's text lags the store's until the next read).
            Input::Engine(EngineInput::Advance) if self.reads > 0 => {
                let sends = self.sends.get_or_insert(Sends {
                    count: 0,
                    after_read: 0,
                });
                sends.count += 1;
                sends.after_read = self.reads + 1;
                self.op.unsettle();
                self.write_at = Some(self.write_at.map_or(now, |at| at.min(now)));
            }
            Input::Engine(input) => self.feed(now, input, &mut out),
            // As a send: a read of the writer asked for after it came.
            Input::Sync => {
                self.sync_after_read = Some(self.reads + 1);
                self.op.unsettle();
                self.write_at = Some(self.write_at.map_or(now, |at| at.min(now)));
            }
            Input::Read { store, outcome } => self.read_answered(now, store, outcome, &mut out),
            Input::Replaced { store, outcome } => {
                self.replace_answered(now, store, outcome, &mut out)
            }
            Input::Writer { store, kind } => {
                self.switching = Some((store, kind));
                self.op.unsettle();
            }
            Input::StoreChanged => {
                if self.writer.is_file() && self.op.is_idle() {
                    self.op.unsettle();
                    self.write_at = Some(now);
                }
            }
            Input::Interrupt => self.cancel_everything(now, &mut out),
            Input::Leave => {
                self.feed(
                    now,
                    EngineInput::Cancel {
                        scope: CancelScope::All,
                    },
                    &mut out,
                );
                self.kill_everything(&mut out);
                self.stopped = Some(StopReason::Cancelled);
                self.end = self.end.leave();
            }
            // The runner's wake-up is spent: ask again for the next.
            Input::Tick => self.wake = None,
            Input::Rewrite { edits } => {
                let refusals = self.refusals;
                self.feed(
                    now,
                    EngineInput::TextChanged {
                        edits: edits.clone(),
                    },
                    &mut out,
                );
                if self.refusals == refusals {
                    self.unwritten.push(edits);
                    self.unwritten_since.get_or_insert(now);
                    if self.write_at.is_none() {
                        self.write_at = Some(now + self.config.coalesce);
                    }
                }
            }
        }
        self.step(now, &mut out);
        out
    }

    /// Starts what is due: a writer switch, a write, a poll, the end.
    fn step(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.life != Lifecycle::Running {
            return;
        }
        self.lingering.retain(|_, until| *until > now);
        if self.op.is_idle()
            && let Some(next) = self.switching.take()
        {
            self.switch(now, next, out);
        }
        if let Op::Idle(rest) = self.op {
            let poll = if self.writer.is_file() && self.config.watched {
                self.config.watched_poll
            } else {
                self.config.poll
            };
            if self.next_poll == 0 || self.next_poll > now + poll {
                self.next_poll = now + poll;
            }
            let due = self.write_at.is_some_and(|at| at <= now);
            let polled = self.write_at.is_none() && self.next_poll <= now;
            let finishing = self.is_done() && rest != Rest::Settled;
            if due || polled || finishing {
                if polled {
                    self.next_poll = now + poll;
                }
                self.begin_write(now, rest, out);
            } else if self.is_done() && rest == Rest::Settled && self.sends.is_none() {
                self.life = Lifecycle::Done;
                out.push(Effect::Done(self.end.reason(self.stopped.as_ref())));
            }
        }
        let wake = match (self.op.is_idle(), self.write_at) {
            _ if self.life == Lifecycle::Done => None,
            (false, _) => None,
            (true, Some(at)) => Some(at),
            (true, None) => Some(self.next_poll),
        };
        // A lingering call given up on is checked when its wait ends.
        let wake = match (wake, self.lingering.values().min()) {
            (Some(at), Some(until)) => Some(at.min(*until)),
            (wake, _) => wake,
        };
        if let Some(at) = wake
            && self.wake != Some(at)
        {
            self.wake = Some(at);
            out.push(Effect::WakeAt(at));
        }
    }

    /// Nothing the session started still runs and nothing is scheduled: the cycle stopped, or
    /// never started (an approval that leaves other calls pending).
    fn is_done(&self) -> bool {
        self.end.is_leaving()
            || (!self.engine.is_busy()
                && self.request.is_none()
                && self.tools_running.is_empty()
                && self.lingering.is_empty())
    }
}

#[cfg(test)]
mod tests;
