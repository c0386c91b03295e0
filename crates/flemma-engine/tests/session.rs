//! The writer's decisions as data: a session, a fake clock, the inputs a runner would feed
//! (store answers made up by the test), and the effects it asks for, one line each.

use std::sync::Arc;

use flemma_engine::session::{
    Effect, Input, ReadOutcome, ReplaceOutcome, Session, SessionConfig, Snapshot, StoreId,
    StoreKind,
};
use flemma_engine::{EngineConfig, Input as EngineInput, Millis, RequestId, StreamOutcome};

use crate::common::{FakePolicy, text};

const FILE: StoreId = 0;
const EDITOR: StoreId = 1;

/// A session and the clock; `log` holds every effect line.
pub struct Harness {
    pub session: Session,
    pub now: Millis,
    pub log: Vec<String>,
    /// The last replacement asked for: (store, current, next).
    pub replace: Option<(StoreId, Snapshot, String)>,
}

pub fn line(effect: &Effect) -> String {
    match effect {
        Effect::StartRequest { request, .. } => format!("start request {}", request.0),
        Effect::CancelRequest { request } => format!("cancel request {}", request.0),
        Effect::StartTool { tool_id, .. } => format!("start tool {tool_id}"),
        Effect::KillTool { tool_id } => format!("kill {tool_id}"),
        Effect::SetTimer { id, at } => format!("timer {} at {at}", id.0),
        Effect::CancelTimer { id } => format!("cancel timer {}", id.0),
        Effect::Emit(event) => format!("emit {}", event.name()),
        Effect::Notice(message) => format!("notice {message}"),
        Effect::Saw { tool_id, .. } => format!("saw {tool_id}"),
        Effect::Conflict {
            incoming,
            writer,
            line,
        } => format!("conflict: {incoming} does not take over from {writer} (line {line})"),
        Effect::Read { store } => format!("read {store}"),
        Effect::Replace {
            store,
            current,
            next,
        } => {
            let edit = flemma_syntax::single_edit(&current.text, next);
            format!(
                "replace {store} at {}..{} with {:?}",
                edit.range.start, edit.range.end, edit.new_text
            )
        }
        Effect::Left { store, text } => format!("left {store} holding {text:?}"),
        Effect::WakeAt(at) => format!("wake at {at}"),
        Effect::Synced => "synced".to_owned(),
        Effect::Done(reason) => format!("done {reason:?}"),
        Effect::Failed(message) => format!("failed {message}"),
    }
}

impl Harness {
    pub fn file(text: &str) -> Self {
        Self::with(FILE, &StoreKind::File, text, None)
    }

    pub fn with(store: StoreId, kind: &StoreKind, text: &str, version: Option<i32>) -> Self {
        let config = SessionConfig {
            file: FILE,
            coalesce: 100,
            poll: 250,
            watched_poll: 2000,
            watched: false,
        };
        Self {
            session: Session::new(
                flemma_engine::Engine::new(
                    EngineConfig::default(),
                    text.to_owned(),
                    Arc::new(FakePolicy),
                ),
                store,
                kind,
                Snapshot {
                    text: text.to_owned(),
                    version,
                },
                config,
            ),
            now: 0,
            log: Vec::new(),
            replace: None,
        }
    }

    /// Feeds `input` at `at` and returns the effect lines, without the stream's events.
    pub fn at(&mut self, at: Millis, input: Input) -> Vec<String> {
        self.now = at;
        let effects = self.session.handle(at, input);
        for effect in &effects {
            if let Effect::Replace {
                store,
                current,
                next,
            } = effect
            {
                self.replace = Some((*store, current.clone(), next.clone()));
            }
        }
        let lines: Vec<String> = effects
            .iter()
            .map(line)
            .filter(|l| !l.starts_with("emit ") && !l.starts_with("timer "))
            .collect();
        self.log.extend(lines.iter().cloned());
        lines
    }

    pub fn engine(&mut self, at: Millis, input: EngineInput) -> Vec<String> {
        self.at(at, Input::Engine(input))
    }

    pub fn stream(&mut self, at: Millis, delta: &str) -> Vec<String> {
        self.engine(
            at,
            EngineInput::Stream {
                request: RequestId(1),
                event: text(delta),
            },
        )
    }

    pub fn read(&mut self, at: Millis, store: StoreId, text: &str) -> Vec<String> {
        self.read_version(at, store, text, None)
    }

    pub fn read_version(
        &mut self,
        at: Millis,
        store: StoreId,
        text: &str,
        version: Option<i32>,
    ) -> Vec<String> {
        self.at(
            at,
            Input::Read {
                store,
                outcome: ReadOutcome::Text(Snapshot {
                    text: text.to_owned(),
                    version,
                }),
            },
        )
    }

    pub fn replaced(&mut self, at: Millis, store: StoreId, outcome: ReplaceOutcome) -> Vec<String> {
        self.at(at, Input::Replaced { store, outcome })
    }

    /// The text the last replacement asked for.
    pub fn next(&self) -> String {
        self.replace
            .as_ref()
            .map(|r| r.2.clone())
            .unwrap_or_default()
    }
}

const CHAT: &str = "@You:\nHello\n";

#[test]
fn edits_wait_for_the_coalescing_window_then_are_read_merged_and_written() {
    let mut h = Harness::file(CHAT);
    assert_eq!(
        h.engine(0, EngineInput::Advance),
        ["start request 1", "wake at 100"]
    );
    assert_eq!(h.stream(30, "One"), Vec::<String>::new());
    assert_eq!(h.stream(60, " two"), Vec::<String>::new());
    // The window of the oldest unwritten edit (made at 0) closes at 100.
    assert_eq!(h.at(100, Input::Tick), ["read 0"]);
    assert_eq!(
        h.read(101, FILE, CHAT),
        ["replace 0 at 12..12 with \"\\n@Assistant:\\nOne two\""]
    );
    // Nothing more to write: the next poll, an interval after the write.
    assert_eq!(
        h.replaced(102, FILE, ReplaceOutcome::Written),
        ["wake at 352"]
    );
    assert_eq!(h.session.max_write_delay(), 100);
}

#[test]
fn a_change_made_meanwhile_is_merged_and_a_store_that_moved_is_read_again() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    h.at(100, Input::Tick);
    // Someone typed at the start of the question: read again a moment later (a program may
    // be between truncating the file and writing it); the same text again is merged, then the
    // engine's text written.
    let typed = "@You:\nWell, Hello\n";
    assert_eq!(h.read(101, FILE, typed), ["wake at 121"]);
    assert_eq!(h.at(121, Input::Tick), ["read 0"]);
    assert_eq!(
        h.read(122, FILE, typed),
        ["replace 0 at 18..18 with \"\\n@Assistant:\\nHi.\""]
    );
    // The store moved again before the replacement: read, settle, merge, replace.
    let more = "@You:\nWell, Hello there\n";
    assert_eq!(h.replaced(123, FILE, ReplaceOutcome::Moved), ["read 0"]);
    assert_eq!(h.read(124, FILE, more), ["wake at 144"]);
    assert_eq!(h.at(144, Input::Tick), ["read 0"]);
    assert_eq!(
        h.read(145, FILE, more),
        ["replace 0 at 24..24 with \"\\n@Assistant:\\nHi.\""]
    );
    assert_eq!(h.next(), "@You:\nWell, Hello there\n\n@Assistant:\nHi.");
    h.replaced(146, FILE, ReplaceOutcome::Written);
    assert_eq!(h.session.engine().text(), h.next());
}

#[test]
fn what_streams_while_a_replacement_is_in_flight_is_written_next() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "One");
    h.at(100, Input::Tick);
    h.read(101, FILE, CHAT);
    let first = h.next();
    assert_eq!(h.stream(102, " two"), Vec::<String>::new());
    // Written: what came meanwhile waits for its own window.
    assert_eq!(
        h.replaced(103, FILE, ReplaceOutcome::Written),
        ["wake at 202"]
    );
    assert_eq!(h.at(202, Input::Tick), ["read 0"]);
    assert_eq!(
        h.read(204, FILE, &first),
        ["replace 0 at 28..28 with \" two\""]
    );
}

#[test]
fn a_stop_is_written_at_once_and_then_the_session_is_done() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    assert_eq!(
        h.engine(
            20,
            EngineInput::StreamEnded {
                request: RequestId(1),
                outcome: StreamOutcome::Finished,
            }
        ),
        ["read 0"]
    );
    h.read(21, FILE, CHAT);
    assert_eq!(h.next(), "@You:\nHello\n\n@Assistant:\nHi.\n\n@You:\n\n");
    assert_eq!(h.replaced(22, FILE, ReplaceOutcome::Written), ["done Idle"]);
    // A later input goes on, and the session is done again once written.
    assert_eq!(h.at(500, Input::Tick), Vec::<String>::new());
}

#[test]
fn a_send_right_after_the_user_typed_waits_for_a_read_that_shows_what_was_typed() {
    // The user types the next question into the `@You:` the reply left and sends at once:
    // the send reaches the session while its last read of the buffer is on its way, answered
    // from before the keystrokes (Neovim's smoke test met this).
    let base: Arc<str> = Arc::from(CHAT);
    let mut h = Harness::with(EDITOR, &StoreKind::Editor { base }, CHAT, Some(1));
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    assert_eq!(
        h.engine(
            20,
            EngineInput::StreamEnded {
                request: RequestId(1),
                outcome: StreamOutcome::Finished,
            }
        ),
        ["read 1"]
    );
    h.read_version(21, EDITOR, CHAT, Some(1));
    let replied = h.next();
    // An editor's buffer is read once more before the session ends (what did it apply?).
    assert_eq!(h.replaced(22, EDITOR, ReplaceOutcome::Written), ["read 1"]);
    assert_eq!(h.engine(23, EngineInput::Advance), Vec::<String>::new());
    // That read was asked before the send: another one is, and the session is not done.
    assert_eq!(h.read_version(24, EDITOR, &replied, Some(2)), ["read 1"]);
    let typed = format!("{replied}Next question.\n");
    let lines = h.read_version(25, EDITOR, &typed, Some(3));
    assert!(lines.contains(&"start request 2".to_owned()), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("notice")), "{lines:?}");
    assert!(
        h.session
            .engine()
            .text()
            .contains("@You:\n\nNext question.\n"),
        "{}",
        h.session.engine().text()
    );
}

#[test]
fn a_sync_reads_the_editor_and_answers_once_what_was_typed_is_in_the_engine_text() {
    // A compaction's summary is back: before it replaces the turns it read, the engine's text
    // must hold what the user typed since the last read (in those turns, it refuses).
    let base: Arc<str> = Arc::from(CHAT);
    let mut h = Harness::with(EDITOR, &StoreKind::Editor { base }, CHAT, Some(1));
    let asked = h.at(10, Input::Sync);
    assert_eq!(asked, ["read 1"], "{asked:?}");
    let typed = CHAT.replace("Hello", "Hello, typed meanwhile");
    let lines = h.read_version(11, EDITOR, &typed, Some(2));
    assert!(lines.contains(&"synced".to_owned()), "{lines:?}");
    assert_eq!(h.session.engine().text(), typed);
    // Once: a later read says nothing more.
    h.at(300, Input::Tick);
    let again = h.read_version(301, EDITOR, &typed, Some(2));
    assert!(!again.contains(&"synced".to_owned()), "{again:?}");
}

#[test]
fn a_new_editor_writer_is_merged_three_ways_and_keeps_what_its_user_typed() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    h.at(100, Input::Tick);
    h.read(101, FILE, CHAT);
    h.replaced(102, FILE, ReplaceOutcome::Written);
    let on_disk = h.next();
    // An editor opened the chat before the reply (its base), and its user typed at the top.
    let base: Arc<str> = Arc::from(CHAT);
    let buffer = "Note\n@You:\nHello\n";
    h.stream(150, " More.");
    assert_eq!(
        h.at(
            160,
            Input::Writer {
                store: EDITOR,
                kind: StoreKind::Editor { base }
            }
        ),
        ["read 0"]
    );
    // The file hands over (nothing changed there), then the editor is read for the merge.
    assert_eq!(h.read(161, FILE, &on_disk), ["read 1"]);
    assert_eq!(h.read_version(162, EDITOR, buffer, Some(3)), ["read 1"]);
    assert_eq!(
        h.read_version(163, EDITOR, buffer, Some(3)),
        ["replace 1 at 17..17 with \"\\n@Assistant:\\nHi. More.\""]
    );
    assert_eq!(h.replace.as_ref().unwrap().1.version, Some(3));
    assert_eq!(h.session.writer(), EDITOR);
}

#[test]
fn a_new_writer_whose_change_conflicts_does_not_take_over() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    let base: Arc<str> = Arc::from(CHAT);
    h.at(
        20,
        Input::Writer {
            store: EDITOR,
            kind: StoreKind::Editor { base },
        },
    );
    h.read(21, FILE, CHAT);
    // The editor's user wrote where the engine writes: at the end.
    assert_eq!(
        h.read(22, EDITOR, "@You:\nHello\n\n@You:\nelse\n"),
        ["conflict: 1 does not take over from 0 (line 3)", "read 0"]
    );
    assert_eq!(h.session.writer(), FILE);
}

#[test]
fn switching_to_the_file_reads_the_editor_first_and_writes_the_engine_text_over_the_file() {
    let base: Arc<str> = Arc::from(CHAT);
    let mut h = Harness::with(EDITOR, &StoreKind::Editor { base }, CHAT, Some(1));
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    assert_eq!(
        h.at(
            20,
            Input::Writer {
                store: FILE,
                kind: StoreKind::File
            }
        ),
        ["read 1"]
    );
    // The editor's user typed before it closed: merged, and left as its base.
    let typed = "@You:\nHello!\n";
    assert_eq!(
        h.read_version(21, EDITOR, typed, Some(2)),
        ["left 1 holding \"@You:\\nHello!\\n\"", "read 0"]
    );
    // The file holds something old: the engine's text goes over it.
    assert_eq!(
        h.read(22, FILE, "stale"),
        ["replace 0 at 0..5 with \"@You:\\nHello!\\n\\n@Assistant:\\nHi.\""]
    );
}

#[test]
fn an_editor_gone_mid_write_hands_over_to_the_file() {
    let base: Arc<str> = Arc::from(CHAT);
    let mut h = Harness::with(EDITOR, &StoreKind::Editor { base }, CHAT, Some(1));
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    h.at(100, Input::Tick);
    h.read_version(101, EDITOR, CHAT, Some(1));
    assert_eq!(
        h.replaced(102, EDITOR, ReplaceOutcome::Gone("closed".into())),
        ["left 1 holding \"@You:\\nHello\\n\"", "read 0"]
    );
    assert_eq!(
        h.read(103, FILE, CHAT),
        ["replace 0 at 12..12 with \"\\n@Assistant:\\nHi.\""]
    );
}

#[test]
fn a_store_that_keeps_moving_is_tried_again_more_slowly_then_the_session_stops() {
    // An editor whose user types faster than its round trip: every edit is refused.
    let base: Arc<str> = Arc::from(CHAT);
    let mut h = Harness::with(EDITOR, &StoreKind::Editor { base }, CHAT, Some(1));
    h.engine(0, EngineInput::Advance);
    h.at(100, Input::Tick);
    let mut text = CHAT.to_owned();
    let mut now = 101;
    let mut waits = Vec::new();
    for attempt in 1..=20 {
        h.read_version(now, EDITOR, &text, Some(attempt));
        text.push('x');
        let lines = h.replaced(now, EDITOR, ReplaceOutcome::Moved);
        if attempt == 20 {
            assert!(
                lines[0].starts_with("failed the document keeps changing"),
                "{lines:?}"
            );
            break;
        }
        match lines.as_slice() {
            [read] if read == "read 1" => {}
            [wake] => {
                let at: Millis = wake.trim_start_matches("wake at ").parse().unwrap();
                waits.push(at - now);
                now = at;
                assert_eq!(h.at(now, Input::Tick), ["read 1"]);
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    // Six at once, then waits that double up to a second: over nine seconds in all.
    assert_eq!(waits[..6], [25, 50, 100, 200, 400, 800]);
    assert!(waits[6..].iter().all(|w| *w == 1000), "{waits:?}");
    assert!(now > 9_000, "{now}");
}

#[test]
fn deleting_the_reply_being_written_drops_its_unwritten_text() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Written.");
    h.at(100, Input::Tick);
    h.read(101, FILE, CHAT);
    h.replaced(102, FILE, ReplaceOutcome::Written);
    h.stream(110, " Not yet written.");
    // The user deleted the reply (what was written of it) before the next write.
    assert_eq!(h.at(210, Input::Tick), ["read 0"]);
    assert_eq!(h.read(211, FILE, CHAT), ["wake at 231"]);
    assert_eq!(h.at(231, Input::Tick), ["read 0"]);
    let lines = h.read(232, FILE, CHAT);
    assert_eq!(lines[0], "cancel request 1", "{lines:?}");
    assert_eq!(h.session.engine().text(), CHAT);
}

#[test]
fn a_file_read_in_the_middle_of_someone_elses_write_is_not_merged() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    h.at(100, Input::Tick);
    // Another program truncated the file and has not written it yet.
    assert_eq!(h.read(101, FILE, ""), ["wake at 121"]);
    assert_eq!(h.at(121, Input::Tick), ["read 0"]);
    // Written now: the two reads disagree, so it is read once more.
    let saved = "Note.\n@You:\nHello\n";
    assert_eq!(h.read(122, FILE, saved), ["wake at 142"]);
    assert_eq!(h.at(142, Input::Tick), ["read 0"]);
    assert_eq!(
        h.read(143, FILE, saved),
        ["replace 0 at 18..18 with \"\\n@Assistant:\\nHi.\""]
    );
    assert!(h.next().starts_with(saved), "{}", h.next());
}

#[test]
fn an_unreadable_file_stops_the_session() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.at(100, Input::Tick);
    assert_eq!(
        h.at(
            101,
            Input::Read {
                store: FILE,
                outcome: ReadOutcome::Failed("gone".into())
            }
        ),
        ["failed gone"]
    );
    assert_eq!(h.at(500, Input::Tick), Vec::<String>::new());
}

#[test]
fn leaving_cancels_writes_and_ends_cancelled() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Part");
    assert_eq!(h.at(20, Input::Leave), ["cancel request 1", "read 0"]);
    h.read(21, FILE, CHAT);
    assert!(h.next().contains("Part"), "{}", h.next());
    assert_eq!(
        h.replaced(22, FILE, ReplaceOutcome::Written),
        ["done Cancelled"]
    );
}

#[test]
fn an_idle_writer_is_polled_and_a_change_on_disk_is_read_at_once() {
    let mut h = Harness::file(CHAT);
    h.engine(0, EngineInput::Advance);
    h.stream(10, "Hi.");
    h.at(100, Input::Tick);
    h.read(101, FILE, CHAT);
    assert_eq!(
        h.replaced(102, FILE, ReplaceOutcome::Written),
        ["wake at 352"]
    );
    // Nothing to write: the next poll reads the file.
    assert_eq!(h.at(352, Input::Tick), ["read 0"]);
    let written = h.next();
    assert_eq!(h.read(353, FILE, &written), ["wake at 603"]);
    // A watcher's news of the file: read at once.
    assert_eq!(h.at(400, Input::StoreChanged), ["read 0"]);
}

#[test]
fn a_rewrite_is_written_like_the_engines_edits_and_what_was_typed_meanwhile_is_kept() {
    let chat = "@You:\nold question\n\n@Assistant:\nold answer\n\n@You:\nHello\n";
    let mut h = Harness::file(chat);
    h.engine(0, EngineInput::Advance);
    // A compaction: the first exchange replaced by its summary, while the request waits.
    let summary = "@You:\nSummary.\n\n";
    let cut = chat.find("@You:\nHello").unwrap();
    assert_eq!(
        h.at(
            10,
            Input::Rewrite {
                edits: vec![flemma_syntax::TextEdit {
                    range: flemma_syntax::TextRange::new(0, cut),
                    new_text: summary.to_owned(),
                }],
            },
        ),
        Vec::<String>::new()
    );
    h.stream(20, "Hi.");
    assert_eq!(h.at(100, Input::Tick), ["read 0"]);
    // The user typed in the last message meanwhile: merged around the rewrite.
    let typed = chat.replace("Hello", "Hello there");
    assert_eq!(h.read(101, FILE, &typed), ["wake at 121"]);
    h.at(121, Input::Tick);
    h.read(122, FILE, &typed);
    assert_eq!(
        h.next(),
        "@You:\nSummary.\n\n@You:\nHello there\n\n@Assistant:\nHi."
    );

    // A rewrite that does not fit the text is refused, and nothing changes.
    let before = h.session.engine().text().to_owned();
    let refused = h.at(
        200,
        Input::Rewrite {
            edits: vec![flemma_syntax::TextEdit {
                range: flemma_syntax::TextRange::new(0, before.len() + 10),
                new_text: String::new(),
            }],
        },
    );
    assert!(
        refused.iter().any(|l| l.starts_with("notice ")),
        "{refused:?}"
    );
    assert_eq!(h.session.engine().text(), before);
}
