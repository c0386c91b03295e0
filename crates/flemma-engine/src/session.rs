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
//! Invariants (the property test `tests/session.rs` checks them against simulated editors of
//! every known behaviour, a file written by other programs, writer switches and disconnects):
//! every streamed byte lands exactly once, every change made by someone else survives, the text
//! parses without new errors, and the last writer ends with the engine's text.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use flemma_syntax::{
    Assoc, TextEdit, TextRange, apply_edits, diff_to_edits, map_offset, single_edit, three_way_base,
};

use crate::{
    CancelScope, Effect as EngineEffect, Engine, EngineEvent, Input as EngineInput, JobState,
    Millis, RequestId, StopReason, TimerId,
};

/// How long a cancelled call whose output is kept may take to return it (an asked agent
/// answers `session/cancel`, or is stopped, within a few seconds).
pub const LATE_RESULT_WAIT: Millis = 10_000;

/// How often a write re-reads and merges when the store moved under it, before giving up.
pub const MERGE_ATTEMPTS: usize = 20;

/// How many of those are tried at once (a user typing meets a streak of a few refused edits);
/// after them each waits longer (the user types faster than the editor's round trip, or a
/// program keeps rewriting the file), up to [`MAX_RETRY_DELAY`]: the attempts span nearly ten
/// seconds before the session gives up.
const QUICK_ATTEMPTS: usize = 6;
const MAX_RETRY_DELAY: Millis = 1000;

/// How long a file changed by someone else is left to settle before it is read again: the
/// change is merged only once two reads agree (a program that truncates and then writes the
/// file must not be read in between, as an empty file).
const SETTLE: Millis = 20;

/// A store, as the runner numbers them (the file, each editor's buffer).
pub type StoreId = u64;

/// A chat's text as one store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub text: String,
    /// An editor's document version (`None` for a file).
    pub version: Option<i32>,
}

impl Snapshot {
    pub fn file(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            version: None,
        }
    }
}

/// What a store is, as far as writing it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// The file on disk: when it becomes the writer, the engine's text is written over it (it
    /// holds an older copy while an editor writes).
    File,
    /// An editor's buffer, with the text it and the engine last agreed on (its text at open,
    /// then its buffer when it stopped being the writer): the base of the three-way merge when
    /// it becomes the writer, so what its user typed meanwhile is kept.
    Editor { base: Arc<str> },
}

/// What a store answered to [`Effect::Read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    Text(Snapshot),
    /// An editor that closed the document or went away: the file takes over.
    Gone(String),
    /// The store cannot be read (the file was deleted): the session stops.
    Failed(String),
}

/// What a store answered to [`Effect::Replace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaceOutcome {
    /// The store holds the new text.
    Written,
    /// The store changed since the snapshot (nothing was written; for an editor: refused,
    /// dropped, or its buffer moved): read again and merge.
    Moved,
    Gone(String),
    Failed(String),
}

/// What happens to a document session.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// An input for the engine: a command, a stream event, a tool or job outcome, a timer.
    Engine(EngineInput),
    Read {
        store: StoreId,
        outcome: ReadOutcome,
    },
    Replaced {
        store: StoreId,
        outcome: ReplaceOutcome,
    },
    /// `store` writes the document from now on (an editor attached, or the last one left).
    Writer { store: StoreId, kind: StoreKind },
    /// The file changed on disk, by someone else (a watcher saw it).
    StoreChanged,
    /// Ctrl-C: cancel everything, background jobs too, write, and end `Cancelled`.
    Interrupt,
    /// The process shuts down: cancel the request and the foreground tools, write, and end
    /// (jobs are left as the file says, for the next start's orphan recovery).
    Leave,
    /// A wake-up the session asked for ([`Effect::WakeAt`]).
    Tick,
    /// The runner rewrites part of the engine's text (a compaction: older turns replaced by
    /// their summary), in the engine's current coordinates: the engine takes it as a change,
    /// and the session writes it to the store as it writes the engine's own edits (a change
    /// someone makes meanwhile is merged around it). Refused (a `Notice`, nothing changed)
    /// when the edits do not fit the text.
    Rewrite { edits: Vec<TextEdit> },
    /// The runner is about to rewrite part of the text from what the engine holds (a
    /// compaction's summary is back): read the writer first, so that the engine's text holds
    /// what the user typed until now, and answer [`Effect::Synced`] once it is merged.
    Sync,
}

/// What the runner must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Evaluate `text` (the engine's text when the request starts) and stream the reply as
    /// `Stream` inputs, then `StreamEnded`.
    StartRequest {
        request: RequestId,
        text: String,
    },
    CancelRequest {
        request: RequestId,
    },
    StartTool {
        tool_id: String,
        name: String,
        input: serde_json::Value,
        /// `Some` for a background job.
        job_id: Option<String>,
    },
    KillTool {
        tool_id: String,
    },
    SetTimer {
        id: TimerId,
        at: Millis,
    },
    CancelTimer {
        id: TimerId,
    },
    Emit(EngineEvent),
    /// Tell the user (an input the engine refused, a writer that could not take over).
    Notice(String),
    /// The engine saw a tool call happen in an untrusted chat (the engine's `Saw`): record it.
    Saw {
        seen: flemma_config::Seen,
        tool_id: String,
        name: String,
        input: serde_json::Value,
    },
    /// The editor `incoming` did not become the writer: its text and the engine's were both
    /// changed at `line` (of their shared base); `writer` goes on writing. Tell its user.
    Conflict {
        incoming: StoreId,
        writer: StoreId,
        line: usize,
    },
    /// Read the store; answer with [`Input::Read`].
    Read {
        store: StoreId,
    },
    /// Replace `current` (the store's text as last read) with `next`, only if the store still
    /// holds `current`; answer with [`Input::Replaced`].
    Replace {
        store: StoreId,
        current: Snapshot,
        next: String,
    },
    /// `store` stops being the writer; `text` is what it held after the session's last read
    /// or write (remember it as its [`StoreKind::Editor`] base).
    Left {
        store: StoreId,
        text: String,
    },
    /// Feed [`Input::Tick`] at this time (the earliest the session needs one; a later effect
    /// replaces an earlier one).
    WakeAt(Millis),
    /// The writer was read after [`Input::Sync`] and what it held is merged: the engine's text
    /// holds everything typed before the sync.
    Synced,
    /// Everything is written and nothing runs: the runner may end (an input arriving later
    /// goes on).
    Done(StopReason),
    /// The session cannot go on (the file is gone, a change cannot be merged, the store keeps
    /// moving): everything written before stays.
    Failed(String),
}

/// The timings of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// The file store, which takes over when an editor goes away.
    pub file: StoreId,
    /// How long an edit waits for the next before they are written together.
    pub coalesce: Millis,
    /// How often a store nobody tells the session about is read for changes made by others
    /// (an editor's buffer, or a file without a watcher).
    pub poll: Millis,
    /// The same for the file while a watcher tells of its changes: a safety net only.
    pub watched_poll: Millis,
    /// A watcher tells of the file's changes ([`Input::StoreChanged`]).
    pub watched: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            file: 0,
            coalesce: 100,
            poll: 250,
            watched_poll: 2000,
            watched: false,
        }
    }
}

/// The store operation in flight.
#[derive(Debug, Clone, PartialEq)]
enum Op {
    Idle,
    /// Reading the writer that is about to hand over (what its side changed is merged first).
    ReadingOld {
        store: StoreId,
    },
    /// Reading the editor that is to become the writer.
    ReadingIncoming {
        store: StoreId,
        base: Arc<str>,
    },
    /// Reading the writer before replacing it.
    Reading {
        store: StoreId,
    },
    /// Replacing the writer's text with `next`.
    Replacing {
        store: StoreId,
        next: String,
    },
}

/// One document's engine and its writer. See the module documentation.
pub struct Session {
    engine: Engine,
    config: SessionConfig,
    /// The store that writes the document, and whether it is a file.
    writer: StoreId,
    writer_is_file: bool,
    /// What the writer held after the session's last read or write.
    stored: Snapshot,
    /// The writer was switched to a file: its text is the new base, not a change to merge.
    rebase: bool,
    /// The engine's edits since `stored`, in order (each in the coordinates before it).
    unwritten: Vec<Vec<TextEdit>>,
    /// How many of `unwritten` the replacement in flight carries.
    in_flight: usize,
    /// A writer switch waiting for the store operation in flight.
    switching: Option<(StoreId, StoreKind)>,
    /// The text as of the effect being produced (a request evaluates the text as it is when
    /// it starts; the engine's own view is already past its effects).
    view: String,
    op: Op,
    /// The attempts of the write in progress (kept across the waits between them).
    attempts: usize,
    retrying: bool,
    /// A change someone else made to the file, read once and waiting for a second read that
    /// shows the same text before it is merged.
    settling: Option<String>,
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
    interrupted: bool,
    leaving: bool,
    /// The last write found the store holding the engine's text, and nothing changed since.
    settled: bool,
    failed: bool,
    done: bool,
    /// A store operation was asked for since the session began (until then the text it was
    /// made from is the store's: the runner read it just before).
    store_touched: bool,
    /// The reads of the writer asked for so far, and the number of the one in flight.
    reads: u64,
    read_in_flight: u64,
    /// A send waiting for a read of the writer asked for after it came (the user may have
    /// typed what is to be sent an instant before sending: the text must hold it first), and
    /// the number of that read.
    sends: Vec<EngineInput>,
    sends_after_read: u64,
    /// [`Input::Sync`] waits for this read of the writer.
    sync_after_read: Option<u64>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("writer", &self.writer)
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
        let text = stored.text.clone();
        Self {
            engine,
            config,
            writer,
            writer_is_file: *kind == StoreKind::File,
            stored,
            rebase: false,
            unwritten: Vec::new(),
            in_flight: 0,
            switching: None,
            view: text,
            op: Op::Idle,
            attempts: 0,
            retrying: false,
            settling: None,
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
            interrupted: false,
            leaving: false,
            settled: false,
            failed: false,
            done: false,
            store_touched: false,
            reads: 0,
            read_in_flight: 0,
            sends: Vec::new(),
            sends_after_read: 0,
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
        self.writer
    }

    /// The longest time an edit waited between being made and its write starting.
    pub fn max_write_delay(&self) -> Millis {
        self.max_write_delay
    }

    /// What the writer holds as far as the session knows: `(store, text)` when it is an
    /// editor whose base should be remembered when the runner ends.
    pub fn shared_text(&self) -> Option<(StoreId, &str)> {
        (!self.rebase && !self.writer_is_file).then_some((self.writer, self.stored.text.as_str()))
    }

    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.failed {
            return out;
        }
        if self.done && input != Input::Tick {
            self.done = false;
        }
        match input {
            // A send waits for a read of the writer that shows what the user typed before it
            // (the engine's text lags the store's until the next read).
            Input::Engine(EngineInput::Advance) if self.store_touched => {
                self.sends.push(EngineInput::Advance);
                self.sends_after_read = self.reads + 1;
                self.settled = false;
                self.write_at = Some(self.write_at.map_or(now, |at| at.min(now)));
            }
            Input::Engine(input) => self.feed(now, input, &mut out),
            // As a send: a read of the writer asked for after it came.
            Input::Sync => {
                self.sync_after_read = Some(self.reads + 1);
                self.settled = false;
                self.write_at = Some(self.write_at.map_or(now, |at| at.min(now)));
            }
            Input::Read { store, outcome } => self.read_answered(now, store, outcome, &mut out),
            Input::Replaced { store, outcome } => {
                self.replace_answered(now, store, outcome, &mut out)
            }
            Input::Writer { store, kind } => {
                self.switching = Some((store, kind));
                self.settled = false;
            }
            Input::StoreChanged => {
                if self.writer_is_file && self.op == Op::Idle {
                    self.settled = false;
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
                self.leaving = true;
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
        if self.failed || self.done {
            return;
        }
        self.lingering.retain(|_, until| *until > now);
        if self.op == Op::Idle {
            if let Some((store, kind)) = self.switching.take() {
                self.switch(now, store, kind, out);
            }
        }
        if self.op == Op::Idle {
            let poll = if self.writer_is_file && self.config.watched {
                self.config.watched_poll
            } else {
                self.config.poll
            };
            if self.next_poll == 0 || self.next_poll > now + poll {
                self.next_poll = now + poll;
            }
            let due = self.write_at.is_some_and(|at| at <= now);
            let polled = self.write_at.is_none() && self.next_poll <= now;
            let finishing = self.is_done() && !self.settled;
            if due || polled || finishing {
                if polled {
                    self.next_poll = now + poll;
                }
                self.begin_write(now, out);
            } else if self.is_done() && self.settled && !self.done && self.sends.is_empty() {
                self.done = true;
                let reason = if self.interrupted {
                    StopReason::Cancelled
                } else {
                    self.stopped.clone().unwrap_or(StopReason::Idle)
                };
                out.push(Effect::Done(reason));
            }
        }
        let wake = match (self.op == Op::Idle, self.write_at) {
            _ if self.done => None,
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
        self.leaving
            || (!self.engine.is_busy()
                && self.request.is_none()
                && self.tools_running.is_empty()
                && self.lingering.is_empty())
    }

    // ----- the engine -----

    fn feed(&mut self, now: Millis, input: EngineInput, out: &mut Vec<Effect>) {
        match &input {
            EngineInput::StreamEnded { request, .. } if self.request == Some(*request) => {
                self.request = None;
            }
            EngineInput::ToolFinished { tool_id, .. } => {
                self.tools_running.remove(tool_id);
                self.lingering.remove(tool_id);
            }
            EngineInput::JobFinished { job_id, .. } => {
                if let Some(job) = self.engine.jobs().find(|job| &job.job_id == job_id) {
                    self.tools_running.remove(&job.tool_id);
                }
            }
            _ => {}
        }
        let changed = match &input {
            EngineInput::TextChanged { edits } => apply_edits(&self.view, edits).ok(),
            _ => None,
        };
        let effects = self.engine.handle(now, input);
        let refused = effects
            .iter()
            .any(|effect| matches!(effect, EngineEffect::Refused { .. }));
        if let Some(changed) = changed
            && !refused
        {
            self.view = changed;
            self.settled = false;
        }
        for effect in effects {
            self.perform(now, effect, out);
        }
    }

    fn perform(&mut self, now: Millis, effect: EngineEffect, out: &mut Vec<Effect>) {
        match effect {
            EngineEffect::Edit { edits } => {
                if let Ok(next) = apply_edits(&self.view, &edits) {
                    self.view = next;
                }
                self.unwritten.push(edits);
                self.settled = false;
                self.unwritten_since.get_or_insert(now);
                if self.write_at.is_none() {
                    self.write_at = Some(now + self.config.coalesce);
                }
            }
            EngineEffect::StartRequest { request } => {
                self.stopped = None;
                self.request = Some(request);
                out.push(Effect::StartRequest {
                    request,
                    text: self.view.clone(),
                });
            }
            EngineEffect::CancelRequest { request } => out.push(Effect::CancelRequest { request }),
            EngineEffect::StartTool {
                tool_id,
                name,
                input,
                background,
                job_id,
            } => {
                self.tools_running.insert(tool_id.clone());
                out.push(Effect::StartTool {
                    tool_id,
                    name,
                    input,
                    job_id: background.then_some(job_id).flatten(),
                });
            }
            EngineEffect::KillTool { tool_id } => {
                if self.tools_running.remove(&tool_id) {
                    if self.engine.keeps_late_result(&tool_id) {
                        self.lingering
                            .insert(tool_id.clone(), now + LATE_RESULT_WAIT);
                    }
                    out.push(Effect::KillTool { tool_id });
                }
            }
            EngineEffect::SetTimer { id, at } => out.push(Effect::SetTimer { id, at }),
            EngineEffect::CancelTimer { id } => out.push(Effect::CancelTimer { id }),
            EngineEffect::Emit(event) => out.push(Effect::Emit(event)),
            EngineEffect::Stopped { reason } => {
                self.stopped = Some(reason);
                // Every stop is written at once.
                self.write_at = Some(now);
                self.settled = false;
            }
            EngineEffect::Refused { message } => {
                self.refusals += 1;
                out.push(Effect::Notice(message));
            }
            EngineEffect::Saw {
                seen,
                tool_id,
                name,
                input,
            } => out.push(Effect::Saw {
                seen,
                tool_id,
                name,
                input,
            }),
        }
    }

    /// Kills the foreground tools and the request (shutdown, Ctrl-C).
    fn kill_everything(&mut self, out: &mut Vec<Effect>) {
        let mut tools: Vec<String> = self.tools_running.drain().collect();
        tools.sort();
        for tool_id in tools {
            out.push(Effect::KillTool { tool_id });
        }
        if let Some(request) = self.request.take()
            && !out.contains(&Effect::CancelRequest { request })
        {
            out.push(Effect::CancelRequest { request });
        }
    }

    /// Ctrl-C: the request, the foreground tools and every job.
    fn cancel_everything(&mut self, now: Millis, out: &mut Vec<Effect>) {
        self.feed(
            now,
            EngineInput::Cancel {
                scope: CancelScope::All,
            },
            out,
        );
        let jobs: Vec<String> = self
            .engine
            .jobs()
            .filter(|job| job.state == JobState::Running)
            .map(|job| job.tool_id.clone())
            .collect();
        for tool_id in jobs {
            self.feed(
                now,
                EngineInput::Cancel {
                    scope: CancelScope::Tool(tool_id),
                },
                out,
            );
        }
        // Their threads end on their own; nothing waits for a killed tool's result.
        self.kill_everything(out);
        self.stopped = Some(StopReason::Cancelled);
        self.interrupted = true;
    }

    // ----- the writer -----

    /// A new writer (between store operations). The writer handing over is read first, so
    /// what was changed on its side is merged before it goes (a file written by another
    /// program, a buffer typed in since the last read).
    fn switch(&mut self, now: Millis, store: StoreId, kind: StoreKind, out: &mut Vec<Effect>) {
        if store == self.writer && !self.rebase {
            return;
        }
        self.switching = Some((store, kind));
        if !self.rebase {
            self.store_touched = true;
            self.op = Op::ReadingOld { store: self.writer };
            out.push(Effect::Read { store: self.writer });
        } else {
            self.hand_over(now, out);
        }
    }

    /// The old writer is read (or could not be): the new one takes over.
    fn hand_over(&mut self, now: Millis, out: &mut Vec<Effect>) {
        let Some((store, kind)) = self.switching.take() else {
            return;
        };
        if !self.rebase && !self.writer_is_file {
            out.push(Effect::Left {
                store: self.writer,
                text: self.stored.text.clone(),
            });
        }
        self.write_at = Some(now);
        self.settled = false;
        match kind {
            StoreKind::Editor { base } => {
                self.store_touched = true;
                self.op = Op::ReadingIncoming { store, base };
                out.push(Effect::Read { store });
            }
            StoreKind::File => {
                self.writer = store;
                self.writer_is_file = true;
                self.stored = Snapshot::file(String::new());
                self.rebase = true;
            }
        }
    }

    fn begin_write(&mut self, now: Millis, out: &mut Vec<Effect>) {
        self.write_at = None;
        if let Some(since) = self.unwritten_since.take() {
            self.max_write_delay = self.max_write_delay.max(now.saturating_sub(since));
        }
        if !std::mem::take(&mut self.retrying) {
            self.attempts = 0;
        }
        self.read_writer(out);
    }

    fn read_writer(&mut self, out: &mut Vec<Effect>) {
        self.store_touched = true;
        self.reads += 1;
        self.read_in_flight = self.reads;
        self.op = Op::Reading { store: self.writer };
        out.push(Effect::Read { store: self.writer });
    }

    fn read_answered(
        &mut self,
        now: Millis,
        store: StoreId,
        outcome: ReadOutcome,
        out: &mut Vec<Effect>,
    ) {
        match std::mem::replace(&mut self.op, Op::Idle) {
            Op::ReadingOld { store: old } if old == store => {
                if let ReadOutcome::Text(current) = outcome
                    && self.merge(now, &current, out)
                {
                    self.stored.version = current.version;
                }
                if !self.failed {
                    self.hand_over(now, out);
                }
            }
            Op::ReadingIncoming {
                store: incoming,
                base,
            } if incoming == store => {
                match outcome {
                    ReadOutcome::Text(current) => self.take_incoming(store, &base, current, out),
                    // The incoming writer is gone already: the current one goes on.
                    ReadOutcome::Gone(_) | ReadOutcome::Failed(_) => {}
                }
            }
            Op::Reading { store: writer } if writer == store => match outcome {
                ReadOutcome::Text(current) => self.read_for_write(now, current, out),
                ReadOutcome::Gone(_) => self.writer_gone(now, out),
                ReadOutcome::Failed(message) => self.fail(message, out),
            },
            other => {
                // An answer to nothing in flight (cannot happen with one runner): ignored.
                self.op = other;
            }
        }
    }

    /// Makes the incoming editor the writer when its text and the engine's merge: base = the
    /// text they last shared, ours = the engine's text, theirs = its buffer now. On a conflict
    /// (both changed the same place) the writer stays what it was and the user is told.
    fn take_incoming(
        &mut self,
        store: StoreId,
        base: &str,
        current: Snapshot,
        out: &mut Vec<Effect>,
    ) {
        match three_way_base(base, self.engine.text(), &current.text) {
            Ok(agreed) => {
                self.unwritten = vec![diff_to_edits(&agreed, self.engine.text())];
                self.stored = Snapshot {
                    text: agreed,
                    version: current.version,
                };
                self.writer = store;
                self.writer_is_file = false;
                self.rebase = false;
            }
            Err(conflict) => out.push(Effect::Conflict {
                incoming: store,
                writer: self.writer,
                line: conflict.line,
            }),
        }
    }

    /// The writer was read for a write: merge what changed there, then replace it with the
    /// engine's text unless it holds it already.
    fn read_for_write(&mut self, now: Millis, current: Snapshot, out: &mut Vec<Effect>) {
        // The store was just read: the next poll is a whole interval away.
        self.next_poll = 0;
        if self.writer_is_file && !self.rebase && current.text != self.stored.text {
            if self.settling.as_ref() != Some(&current.text) {
                // Read it again a moment later: merged once two reads agree. Not settled
                // meanwhile: a session whose last write was followed by someone else's must
                // not end before it has taken that change in.
                self.settling = Some(current.text);
                self.retrying = true;
                self.settled = false;
                self.write_at = Some(now + SETTLE);
                return;
            }
            self.settling = None;
        }
        if self.rebase {
            self.rebase = false;
            self.stored = current.clone();
            self.unwritten = vec![diff_to_edits(&current.text, self.engine.text())];
        } else if !self.merge(now, &current, out) {
            return;
        }
        self.stored.version = current.version;
        if self
            .sync_after_read
            .is_some_and(|after| self.read_in_flight >= after)
        {
            self.sync_after_read = None;
            out.push(Effect::Synced);
        }
        if !self.sends.is_empty() && self.read_in_flight >= self.sends_after_read {
            // The text holds what the user typed before sending: send it.
            for send in std::mem::take(&mut self.sends) {
                self.feed(now, send, out);
            }
        }
        if self.engine.text() == current.text {
            self.stored = current;
            self.unwritten.clear();
            self.settled = true;
            return;
        }
        let next = self.engine.text().to_owned();
        self.in_flight = self.unwritten.len();
        self.op = Op::Replacing {
            store: self.writer,
            next: next.clone(),
        };
        out.push(Effect::Replace {
            store: self.writer,
            current,
            next,
        });
    }

    fn replace_answered(
        &mut self,
        now: Millis,
        store: StoreId,
        outcome: ReplaceOutcome,
        out: &mut Vec<Effect>,
    ) {
        let Op::Replacing {
            store: writer,
            next,
        } = std::mem::replace(&mut self.op, Op::Idle)
        else {
            return;
        };
        if writer != store {
            return;
        }
        match outcome {
            ReplaceOutcome::Written => {
                self.stored = Snapshot {
                    version: self.stored.version.map(|v| v + 1),
                    text: next,
                };
                // What the engine did while the replacement was in flight is still to write.
                self.unwritten
                    .drain(..self.in_flight.min(self.unwritten.len()));
                // A file holds exactly what was written; an editor's buffer holds the edit as
                // the editor applied it (Neovim adds a line break after an insertion at the
                // very end): the session ends only after a read shows what it holds.
                self.settled = self.unwritten.is_empty() && self.writer_is_file;
                if !self.unwritten.is_empty() && self.write_at.is_none() {
                    self.write_at = Some(now);
                }
            }
            ReplaceOutcome::Moved => {
                self.attempts += 1;
                if self.attempts >= MERGE_ATTEMPTS {
                    return self.fail(
                        format!(
                            "the document keeps changing while flemmad writes it; stopped after {MERGE_ATTEMPTS} attempts (everything written before is in it)"
                        ),
                        out,
                    );
                }
                if self.attempts < QUICK_ATTEMPTS {
                    self.read_writer(out);
                } else {
                    let shift = (self.attempts - QUICK_ATTEMPTS).min(10) as u32;
                    let delay = (25 << shift).min(MAX_RETRY_DELAY);
                    self.retrying = true;
                    self.settled = false;
                    self.write_at =
                        Some(self.write_at.map_or(now + delay, |at| at.max(now + delay)));
                }
            }
            ReplaceOutcome::Gone(_) => self.writer_gone(now, out),
            ReplaceOutcome::Failed(message) => self.fail(message, out),
        }
    }

    /// The writing editor went away between the host's switch and this write: the file takes
    /// over with the engine's text.
    fn writer_gone(&mut self, now: Millis, out: &mut Vec<Effect>) {
        self.op = Op::Idle;
        let file = self.config.file;
        if self.writer == file {
            return self.fail("the file cannot be written".into(), out);
        }
        // The gone editor cannot be read: hand over at once (a switch the host asked for
        // meanwhile still follows).
        let asked = self.switching.replace((file, StoreKind::File));
        self.hand_over(now, out);
        self.switching = asked;
        self.write_at = None;
        self.attempts += 1;
        self.read_writer(out);
    }

    /// Feeds a change someone else made (`current` instead of what was stored) to the engine,
    /// in the engine's coordinates; `false` when it cannot be merged (the session failed).
    fn merge(&mut self, now: Millis, current: &Snapshot, out: &mut Vec<Effect>) -> bool {
        if current.text == self.stored.text {
            return true;
        }
        // What the store holds of the engine's own changes is not someone else's: an edit an
        // editor applied after all (its echo came after the bounded wait, and the edit was
        // taken for dropped), or the beginning of one.
        if let Ok(agreed) = three_way_base(&self.stored.text, self.engine.text(), &current.text)
            && agreed != self.stored.text
        {
            self.unwritten = vec![diff_to_edits(&agreed, self.engine.text())];
            self.stored.text = agreed;
            if current.text == self.stored.text {
                return true;
            }
        }
        // One edit per separate change (keystrokes at several places between two reads stay
        // several small edits, never one replacement spanning the text between them).
        let theirs = diff_to_edits(&self.stored.text, &current.text);
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
        let refusals = self.refusals;
        let streaming = self.engine.request().is_some();
        self.feed(now, EngineInput::TextChanged { edits }, out);
        if streaming && self.engine.request().is_none() && self.refusals == refusals {
            // The change deleted the block being written (the engine cancelled the request):
            // the reply text not yet written went with it, not to wherever its anchor fell.
            let orphan = single_edit(self.engine.text(), &current.text);
            if !orphan.range.is_empty() || !orphan.new_text.is_empty() {
                self.feed(
                    now,
                    EngineInput::TextChanged {
                        edits: vec![orphan],
                    },
                    out,
                );
            }
        }
        if self.refusals > refusals {
            self.fail(
                "the document was changed by someone else in a way flemmad cannot merge with what it was writing; stopped without writing, so that change is kept. Look at it and send again".into(),
                out,
            );
            return false;
        }
        self.stored.text = current.text.clone();
        self.unwritten = vec![diff_to_edits(&self.stored.text, self.engine.text())];
        true
    }

    fn fail(&mut self, message: String, out: &mut Vec<Effect>) {
        self.failed = true;
        self.op = Op::Idle;
        out.push(Effect::Failed(message));
    }
}
