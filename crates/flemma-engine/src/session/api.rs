//! What a runner and a document session say to each other: the [`Input`]s it feeds (the
//! engine's inputs, what a store answered, a new writer, …), the [`Effect`]s it performs (the
//! engine's, and the store work: read, replace-if-unchanged, a writer leaving, a wake-up), the
//! snapshots of a store's text, and the session's timings.

use std::sync::Arc;

use flemma_syntax::TextEdit;

use crate::{EngineEvent, Input as EngineInput, Millis, RequestId, StopReason, TimerId};

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
