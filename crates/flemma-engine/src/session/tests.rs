//! The session's phase transitions as data: each row a phase (the lifecycle, how the session is
//! to end, the writer, the operation in flight, a switch asked for), an input, the phase after
//! it and the effects, one line each. The session is idle otherwise (an engine with nothing to
//! do holding `CHAT`, the store's text as the row says), at a fixed time.

use std::sync::Arc;

use serde_json::Value;

use super::phase::{End, Holds, Lifecycle, Op, Rest, Writer};
use super::{Effect, Input, ReadOutcome, ReplaceOutcome, Session, SessionConfig, Snapshot};
use super::{StoreId, StoreKind};
use crate::{Decision, Engine, EngineConfig, ToolInfo, ToolPolicy, Verdict};

const CHAT: &str = "@You:\nHello\n";
const TYPED: &str = "@You:\nHello there\n";
const NOW: u64 = 1000;
const FILE: StoreId = 0;
const EDITOR: StoreId = 1;

struct NoTools;

impl ToolPolicy for NoTools {
    fn decide(&self, _name: &str, _input: &Value) -> Decision {
        Decision::new(Verdict::RequireApproval, "urn:flemma:approval:catch-all")
    }
    fn capabilities(&self, _name: &str) -> Option<ToolInfo> {
        None
    }
    fn check(&self, _name: &str, _input: &Value) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Phase {
    life: Lifecycle,
    end: End,
    writer: Writer,
    op: Op,
    switching: Option<(StoreId, StoreKind)>,
    /// A tool runs: the cycle has not stopped (the session neither ends nor writes to end).
    busy: bool,
}

struct Row {
    name: &'static str,
    before: Phase,
    input: Input,
    after: Phase,
    effects: &'static [&'static str],
}

fn running(writer: Writer, op: Op) -> Phase {
    Phase {
        life: Lifecycle::Running,
        end: End::WhenStopped,
        writer,
        op,
        switching: None,
        busy: false,
    }
}

fn busy(phase: Phase) -> Phase {
    Phase {
        busy: true,
        ..phase
    }
}

fn switching(phase: Phase, store: StoreId, kind: StoreKind) -> Phase {
    Phase {
        switching: Some((store, kind)),
        ..phase
    }
}

fn done(phase: Phase) -> Phase {
    Phase {
        life: Lifecycle::Done,
        ..phase
    }
}

fn failed(phase: Phase) -> Phase {
    Phase {
        life: Lifecycle::Failed,
        ..phase
    }
}

fn ending(phase: Phase, end: End) -> Phase {
    Phase { end, ..phase }
}

fn file(text: &str) -> Writer {
    Writer::read_as(FILE, &StoreKind::File, Snapshot::file(text))
}

fn file_settling(text: &str, settling: &str) -> Writer {
    Writer {
        store: FILE,
        holds: Holds::File {
            stored: Snapshot::file(text),
            settling: Some(settling.to_owned()),
        },
    }
}

fn taking_over() -> Writer {
    Writer {
        store: FILE,
        holds: Holds::FileTakingOver,
    }
}

fn editor(text: &str, version: i32) -> Writer {
    Writer::read_as(
        EDITOR,
        &editor_kind(),
        Snapshot {
            text: text.to_owned(),
            version: Some(version),
        },
    )
}

fn editor_kind() -> StoreKind {
    StoreKind::Editor {
        base: Arc::from(CHAT),
    }
}

fn idle(rest: Rest) -> Op {
    Op::Idle(rest)
}

fn retrying(attempts: usize) -> Op {
    Op::Idle(Rest::Retrying { attempts })
}

/// Reading the writer `store` for a write: the session's reads before the row are 1.
fn reading(store: StoreId, read: u64, attempts: usize) -> Op {
    Op::Reading {
        store,
        read,
        attempts,
    }
}

fn reading_old(store: StoreId, resume: Option<usize>) -> Op {
    Op::ReadingOld { store, resume }
}

/// Reading the editor `EDITOR`, to become the writer (its base: `CHAT`).
fn reading_incoming(resume: Option<usize>) -> Op {
    Op::ReadingIncoming {
        store: EDITOR,
        base: Arc::from(CHAT),
        resume,
    }
}

/// `EDITOR` is to write (its base: `CHAT`).
fn editor_writes() -> Input {
    Input::Writer {
        store: EDITOR,
        kind: editor_kind(),
    }
}

fn replacing(store: StoreId, next: &str, carries: usize, attempts: usize) -> Op {
    Op::Replacing {
        store,
        next: next.to_owned(),
        carries,
        attempts,
    }
}

fn read(store: StoreId, text: &str, version: Option<i32>) -> Input {
    Input::Read {
        store,
        outcome: ReadOutcome::Text(Snapshot {
            text: text.to_owned(),
            version,
        }),
    }
}

fn replaced(store: StoreId, outcome: ReplaceOutcome) -> Input {
    Input::Replaced { store, outcome }
}

fn line(effect: &Effect) -> String {
    match effect {
        Effect::Read { store } => format!("read {store}"),
        Effect::Replace { store, next, .. } => format!("replace {store} with {next:?}"),
        Effect::Left { store, text } => format!("left {store} holding {text:?}"),
        Effect::WakeAt(at) => format!("wake at {at}"),
        Effect::Done(reason) => format!("done {reason:?}"),
        // The first clause of a failure.
        Effect::Failed(message) => format!("failed {}", message.split(';').next().unwrap_or("")),
        other => format!("{other:?}"),
    }
}

fn rows() -> Vec<Row> {
    vec![
        // ----- writes -----
        Row {
            name: "a change on disk makes a settled file read at once",
            before: running(file(CHAT), idle(Rest::Settled)),
            input: Input::StoreChanged,
            after: running(file(CHAT), reading(FILE, 2, 0)),
            effects: &["read 0"],
        },
        Row {
            name: "a write waiting to be tried again goes on counting its attempts",
            before: running(file(CHAT), retrying(7)),
            input: Input::StoreChanged,
            after: running(file(CHAT), reading(FILE, 2, 7)),
            effects: &["read 0"],
        },
        Row {
            name: "a store read holding the engine's text is settled, and the session done",
            before: running(file(CHAT), reading(FILE, 2, 3)),
            input: read(FILE, CHAT, None),
            after: done(running(file(CHAT), idle(Rest::Settled))),
            effects: &["done Idle"],
        },
        Row {
            name: "a file changed by someone else waits for a second read",
            before: busy(running(file(CHAT), reading(FILE, 2, 3))),
            input: read(FILE, TYPED, None),
            after: busy(running(file_settling(CHAT, TYPED), retrying(3))),
            effects: &["wake at 1020"],
        },
        Row {
            name: "two reads that agree merge the change",
            before: running(file_settling(CHAT, TYPED), reading(FILE, 2, 3)),
            input: read(FILE, TYPED, None),
            after: done(running(file(TYPED), idle(Rest::Settled))),
            effects: &["done Idle"],
        },
        Row {
            name: "an editor's buffer changed is merged at once",
            before: running(editor(CHAT, 1), reading(EDITOR, 2, 0)),
            input: read(EDITOR, TYPED, Some(2)),
            after: done(running(editor(TYPED, 2), idle(Rest::Settled))),
            effects: &["done Idle"],
        },
        Row {
            name: "a file just taken over is the base the engine's text is written over",
            before: running(taking_over(), reading(FILE, 2, 0)),
            input: read(FILE, "stale", None),
            after: running(file("stale"), replacing(FILE, CHAT, 1, 0)),
            effects: &["replace 0 with \"@You:\\nHello\\n\""],
        },
        Row {
            name: "a file written holds the engine's text",
            before: running(file("stale"), replacing(FILE, CHAT, 1, 2)),
            input: replaced(FILE, ReplaceOutcome::Written),
            after: done(running(file(CHAT), idle(Rest::Settled))),
            effects: &["done Idle"],
        },
        Row {
            name: "an editor written is read once more (it may apply the edit its own way)",
            before: running(editor("stale", 4), replacing(EDITOR, CHAT, 1, 2)),
            input: replaced(EDITOR, ReplaceOutcome::Written),
            after: running(editor(CHAT, 5), reading(EDITOR, 2, 0)),
            effects: &["read 1"],
        },
        Row {
            name: "a store that moved is read again at once",
            before: running(file("stale"), replacing(FILE, CHAT, 1, 2)),
            input: replaced(FILE, ReplaceOutcome::Moved),
            after: running(file("stale"), reading(FILE, 2, 3)),
            effects: &["read 0"],
        },
        Row {
            name: "a store that keeps moving is tried again later",
            before: busy(running(file("stale"), replacing(FILE, CHAT, 1, 5))),
            input: replaced(FILE, ReplaceOutcome::Moved),
            after: busy(running(file("stale"), retrying(6))),
            effects: &["wake at 1025"],
        },
        Row {
            name: "a store that never stops moving fails the session",
            before: running(file("stale"), replacing(FILE, CHAT, 1, 19)),
            input: replaced(FILE, ReplaceOutcome::Moved),
            after: failed(running(file("stale"), idle(Rest::Unsettled))),
            effects: &["failed the document keeps changing while flemmad writes it"],
        },
        Row {
            name: "an unreadable file fails the session",
            before: running(file(CHAT), reading(FILE, 2, 0)),
            input: Input::Read {
                store: FILE,
                outcome: ReadOutcome::Failed("gone".into()),
            },
            after: failed(running(file(CHAT), idle(Rest::Unsettled))),
            effects: &["failed gone"],
        },
        Row {
            name: "an answer to nothing in flight is ignored",
            before: running(file(CHAT), reading(FILE, 2, 0)),
            input: replaced(FILE, ReplaceOutcome::Written),
            after: running(file(CHAT), reading(FILE, 2, 0)),
            effects: &[],
        },
        // ----- writers -----
        Row {
            name: "an editor gone mid-write leaves, and the file takes over at once",
            before: running(editor(CHAT, 1), replacing(EDITOR, TYPED, 1, 2)),
            input: replaced(EDITOR, ReplaceOutcome::Gone("closed".into())),
            after: running(taking_over(), reading(FILE, 2, 3)),
            effects: &["left 1 holding \"@You:\\nHello\\n\"", "read 0"],
        },
        Row {
            name: "a new writer reads the old one first",
            before: running(file(CHAT), idle(Rest::Unsettled)),
            input: editor_writes(),
            after: switching(
                running(file(CHAT), reading_old(FILE, None)),
                EDITOR,
                editor_kind(),
            ),
            effects: &["read 0"],
        },
        Row {
            name: "a switch carries the attempts of a write waiting to be tried again",
            before: running(file(CHAT), retrying(4)),
            input: editor_writes(),
            after: switching(
                running(file(CHAT), reading_old(FILE, Some(4))),
                EDITOR,
                editor_kind(),
            ),
            effects: &["read 0"],
        },
        Row {
            name: "the old writer read, the incoming editor is read",
            before: switching(
                running(file(CHAT), reading_old(FILE, Some(4))),
                EDITOR,
                editor_kind(),
            ),
            input: read(FILE, CHAT, None),
            after: running(file(CHAT), reading_incoming(Some(4))),
            effects: &["read 1"],
        },
        Row {
            name: "an incoming editor that merges becomes the writer, and the write goes on",
            before: running(file(CHAT), reading_incoming(Some(4))),
            input: read(EDITOR, TYPED, Some(5)),
            after: running(editor(CHAT, 5), reading(EDITOR, 2, 4)),
            effects: &["read 1"],
        },
        Row {
            name: "an incoming editor gone already leaves the writer as it was",
            before: running(file(CHAT), reading_incoming(None)),
            input: Input::Read {
                store: EDITOR,
                outcome: ReadOutcome::Gone("closed".into()),
            },
            after: running(file(CHAT), reading(FILE, 2, 0)),
            effects: &["read 0"],
        },
        Row {
            name: "an editor handing over to the file leaves with what it holds",
            before: switching(
                running(editor(CHAT, 3), reading_old(EDITOR, None)),
                FILE,
                StoreKind::File,
            ),
            input: read(EDITOR, CHAT, Some(3)),
            after: running(taking_over(), reading(FILE, 2, 0)),
            effects: &["left 1 holding \"@You:\\nHello\\n\"", "read 0"],
        },
        Row {
            name: "a file just taken over is not read as an old writer",
            before: running(taking_over(), idle(Rest::Unsettled)),
            input: editor_writes(),
            after: running(taking_over(), reading_incoming(None)),
            effects: &["read 1"],
        },
        Row {
            name: "the writer it is already is no switch",
            before: running(file(CHAT), idle(Rest::Settled)),
            input: Input::Writer {
                store: FILE,
                kind: StoreKind::File,
            },
            after: running(file(CHAT), reading(FILE, 2, 0)),
            effects: &["read 0"],
        },
        // ----- the lifecycle -----
        Row {
            name: "a done session stays done on a tick",
            before: done(running(file(CHAT), idle(Rest::Settled))),
            input: Input::Tick,
            after: done(running(file(CHAT), idle(Rest::Settled))),
            effects: &[],
        },
        Row {
            name: "a done session runs again on any other input",
            before: done(running(file(CHAT), idle(Rest::Settled))),
            input: Input::StoreChanged,
            after: running(file(CHAT), reading(FILE, 2, 0)),
            effects: &["read 0"],
        },
        Row {
            name: "a failed session ignores everything",
            before: failed(running(file(CHAT), idle(Rest::Unsettled))),
            input: Input::StoreChanged,
            after: failed(running(file(CHAT), idle(Rest::Unsettled))),
            effects: &[],
        },
        Row {
            name: "Ctrl-C writes the stop at once; the end is to be cancelled",
            before: running(file(CHAT), idle(Rest::Settled)),
            input: Input::Interrupt,
            after: ending(running(file(CHAT), reading(FILE, 2, 0)), End::Interrupted),
            effects: &["read 0"],
        },
        Row {
            name: "an interrupted session ends cancelled once written",
            before: ending(running(file(CHAT), reading(FILE, 2, 0)), End::Interrupted),
            input: read(FILE, CHAT, None),
            after: done(ending(
                running(file(CHAT), idle(Rest::Settled)),
                End::Interrupted,
            )),
            effects: &["done Cancelled"],
        },
        Row {
            name: "leaving while a write is in flight waits for it",
            before: running(file(CHAT), reading(FILE, 2, 0)),
            input: Input::Leave,
            after: ending(
                running(file(CHAT), reading(FILE, 2, 0)),
                End::Leaving { interrupted: false },
            ),
            effects: &[],
        },
        Row {
            name: "Ctrl-C while leaving makes the end cancelled",
            before: ending(
                running(file(CHAT), reading(FILE, 2, 0)),
                End::Leaving { interrupted: false },
            ),
            input: Input::Interrupt,
            after: ending(
                running(file(CHAT), reading(FILE, 2, 0)),
                End::Leaving { interrupted: true },
            ),
            effects: &[],
        },
    ]
}

fn session_in(phase: &Phase) -> Session {
    let engine = Engine::new(EngineConfig::default(), CHAT.to_owned(), Arc::new(NoTools));
    let mut session = Session::new(
        engine,
        FILE,
        &StoreKind::File,
        Snapshot::file(CHAT),
        SessionConfig::default(),
    );
    session.life = phase.life;
    session.end = phase.end;
    session.writer = phase.writer.clone();
    session.op = phase.op.clone();
    session.switching = phase.switching.clone();
    session.reads = 1;
    if phase.busy {
        session.tools_running.insert("call".into());
    }
    session
}

fn phase_of(session: &Session) -> Phase {
    Phase {
        life: session.life,
        end: session.end,
        writer: session.writer.clone(),
        op: session.op.clone(),
        switching: session.switching.clone(),
        busy: !session.tools_running.is_empty(),
    }
}

#[test]
fn phase_transitions() {
    let mut failures = Vec::new();
    for row in rows() {
        let mut session = session_in(&row.before);
        let effects: Vec<String> = session.handle(NOW, row.input).iter().map(line).collect();
        let after = phase_of(&session);
        if after != row.after || effects != row.effects {
            failures.push(format!(
                "{}:\n  phase   {after:?}\n  wanted  {:?}\n  effects {effects:?}\n  wanted  {:?}",
                row.name, row.after, row.effects
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
