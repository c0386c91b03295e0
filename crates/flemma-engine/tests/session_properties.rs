//! The document session against the world (`session_world.rs`): random interleavings of the
//! reply streaming in, users typing in one to three editors of any known behaviour (Helix, VS
//! Code, Neovim 0.7–0.11, eglot, one that never answers), another program writing the file,
//! editors opening, closing, becoming active and disconnecting, messages crossing on the wire,
//! and time passing. Invariants:
//!
//! * every streamed byte is in the final text exactly once;
//! * every keystroke survives: what the engine had once it keeps, and what is typed in an
//!   editor still open at the end is merged once that editor writes (keystrokes of an editor
//!   closed or disconnected before the session read them go with its buffer);
//! * the final text parses without errors the chat did not have;
//! * the last writer ends with the engine's text (the file on disk when no editor is left).
//!
//! It fails when an edit counts as written on `applied: true` and a newer version alone
//! (Neovim drops stale edits and says `applied: true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use proptest::prelude::*;

use crate::session_world::{FILE, Profile, REPLY_KEYS, World, tokens_in};

const INITIAL: &str = "@You:\nfirst line\nsecond line\n\n@Assistant:\nok.\n\n@You:\nthe question\n";

#[derive(Debug, Clone)]
enum Action {
    Stream,
    Type(usize, usize),
    ToServer(usize),
    ToClient(usize),
    Flush(usize),
    Store,
    Foreign(usize),
    Open(usize),
    Close(usize),
    Touch(usize),
    Disconnect(usize),
    Expire(usize),
    TimeOut(usize),
    Pass(u64),
}

fn action() -> impl Strategy<Value = Action> {
    let slot = 0usize..3;
    prop_oneof![
        6 => Just(Action::Stream),
        5 => (slot.clone(), any::<usize>()).prop_map(|(s, p)| Action::Type(s, p)),
        6 => slot.clone().prop_map(Action::ToServer),
        6 => slot.clone().prop_map(Action::ToClient),
        3 => slot.clone().prop_map(Action::Flush),
        7 => Just(Action::Store),
        1 => any::<usize>().prop_map(Action::Foreign),
        2 => slot.clone().prop_map(Action::Open),
        1 => slot.clone().prop_map(Action::Close),
        1 => slot.clone().prop_map(Action::Touch),
        1 => slot.clone().prop_map(Action::Disconnect),
        1 => slot.clone().prop_map(Action::Expire),
        1 => slot.prop_map(Action::TimeOut),
        4 => (1u64..300).prop_map(Action::Pass),
    ]
}

fn profile() -> impl Strategy<Value = Profile> {
    prop_oneof![
        3 => Just(Profile::Neovim),
        2 => Just(Profile::Helix),
        2 => Just(Profile::VsCode),
        1 => Just(Profile::Eglot),
        1 => Just(Profile::NeverAnswers),
    ]
}

/// The reply: thirty pieces, each a character of its own (so that finding it in the text says
/// whether it is there once), a line break after every fourth.
fn chunks() -> Vec<String> {
    (1..=30u32)
        .map(|i| {
            let piece = char::from_u32(REPLY_KEYS + i).unwrap_or('?');
            if i % 4 == 0 {
                format!("{piece}\n")
            } else {
                format!("{piece} ")
            }
        })
        .collect()
}

fn error_codes(text: &str) -> BTreeSet<String> {
    flemma_syntax::parse(text)
        .diagnostics()
        .iter()
        .filter(|d| d.severity == flemma_syntax::Severity::Error)
        .map(|d| d.code.as_str().to_owned())
        .collect()
}

/// Runs `actions` with editors of `profiles` (one per slot) and checks the invariants.
fn run(actions: &[Action], profiles: &[Profile]) -> Result<World, TestCaseError> {
    let mut world = World::new(INITIAL, chunks());
    let mut held: BTreeSet<String> = BTreeSet::new();
    for action in actions {
        match action.clone() {
            Action::Stream => world.stream_chunk(),
            Action::Type(slot, pick) => world.type_in(slot, pick),
            Action::ToServer(slot) => world.deliver_to_server(slot),
            Action::ToClient(slot) => world.deliver_to_client(slot),
            Action::Flush(slot) => world.flush(slot),
            Action::Store => world.answer_store(),
            Action::Foreign(pick) => world.foreign_write(pick),
            Action::Open(slot) => world.open(slot, profiles[slot]),
            Action::Close(slot) => world.close(slot),
            Action::Touch(slot) => world.touch(slot),
            Action::Disconnect(slot) => world.disconnect(slot),
            Action::Expire(slot) => world.expire(slot),
            Action::TimeOut(slot) => world.time_out(slot),
            Action::Pass(ms) => world.pass(ms),
        }
        held.extend(tokens_in(world.session.engine().text()));
    }
    world.finish();
    prop_assert!(
        world.failed.is_none(),
        "the session failed: {:?}",
        world.failed
    );
    let text = world.session.engine().text().to_owned();
    held.extend(tokens_in(&text));

    // Every streamed byte exactly once.
    for chunk in &world.chunks {
        let word = chunk.trim_end();
        prop_assert_eq!(
            text.matches(word).count(),
            1,
            "{:?} is not in the text exactly once:\n{}",
            word,
            text
        );
    }
    // Every keystroke the engine had, and every keystroke of an editor still open, once.
    let mut required = held.clone();
    for editor in world.editors.iter().filter(|e| e.open && !e.conflicted) {
        required.extend(editor.typed.iter().cloned());
    }
    for token in &required {
        prop_assert_eq!(
            text.matches(token.as_str()).count(),
            1,
            "{} is not in the text exactly once:\n{}",
            token,
            text
        );
    }
    for token in tokens_in(&text) {
        prop_assert_eq!(text.matches(token.as_str()).count(), 1, "{} twice", token);
    }
    // No new errors.
    let before = error_codes(INITIAL);
    let after = error_codes(&text);
    prop_assert!(
        after.is_subset(&before),
        "new errors {:?} in:\n{}",
        after,
        text
    );
    // The last writer holds the engine's text.
    let writer = world.session.writer();
    if writer == FILE {
        prop_assert_eq!(&world.disk, &text, "the file on disk");
    } else {
        let editor = world.editors.iter().find(|e| e.id == writer).unwrap();
        prop_assert_eq!(&editor.mirror, &text, "the writer's mirror");
        prop_assert_eq!(&editor.client, &text, "the writer's buffer");
    }
    Ok(world)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_byte_once_every_keystroke_kept_whatever_the_editors_do(
        actions in prop::collection::vec(action(), 1..400),
        profiles in prop::collection::vec(profile(), 3),
    ) {
        run(&actions, &profiles)?;
    }
}

/// A fixed run that Neovim makes drop edits in: typing between every edit it is sent.
#[test]
fn neovim_dropping_stale_edits_loses_nothing() {
    let mut actions = vec![Action::Open(0)];
    for _ in 0..30 {
        actions.extend([
            Action::Stream,
            Action::Pass(120),
            Action::Store,
            Action::Store,
            Action::Type(0, 1),
            Action::ToClient(0),
            Action::Flush(0),
            Action::ToServer(0),
            Action::ToServer(0),
        ]);
    }
    let world = run(&actions, &[Profile::Neovim; 3]).unwrap();
    assert!(
        world.editors[0].dropped > 0,
        "the run made Neovim drop no edit"
    );
}
