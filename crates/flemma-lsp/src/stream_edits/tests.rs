#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;

/// A client owning the document: applies versioned edits only at its current version (both
/// Helix and VS Code refuse stale ones) and reports every change back, like `didChange`.
struct Client {
    text: String,
    version: i32,
    changes: Vec<(TextRange, String)>,
}

impl Client {
    fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            version: 0,
            changes: Vec::new(),
        }
    }

    fn change(&mut self, range: TextRange, new_text: &str) {
        self.text.replace_range(range.start..range.end, new_text);
        self.version += 1;
        self.changes.push((range, new_text.to_owned()));
    }

    fn apply(&mut self, edit: &StreamEdit) -> bool {
        if edit.version != self.version || edit.offset > self.text.len() {
            return false;
        }
        self.change(TextRange::empty(edit.offset), &edit.text);
        true
    }
}

/// Feeds the client's changes to the writer (the server's mirror is the client's text).
fn sync(client: &mut Client, writer: &mut StreamWriter) {
    for (range, text) in client.changes.drain(..) {
        writer.on_change(range, &text);
    }
}

const START: &str = "@You:\nhi\n";
const HEADER: &str = "\n@Assistant:\n";

#[test]
fn writes_header_then_stream_before_the_tail() {
    let mut client = Client::new(START);
    let mut writer = StreamWriter::start(START.len(), HEADER, 1, "\n");
    for chunk in ["Hello", ", world", "\nbye"] {
        writer.push(chunk);
        while let Some(edit) = writer.next_edit(client.version, client.text.len()) {
            let applied = client.apply(&edit);
            sync(&mut client, &mut writer);
            writer.on_answer(applied);
        }
    }
    writer.finish();
    assert_eq!(writer.state(), &StreamState::Done);
    assert_eq!(client.text, "@You:\nhi\n\n@Assistant:\nHello, world\nbye\n");
}

#[test]
fn one_edit_in_flight_until_answered_and_echoed() {
    let mut client = Client::new(START);
    let mut writer = StreamWriter::start(START.len(), HEADER, 1, "");
    let first = writer.next_edit(client.version, client.text.len()).unwrap();
    writer.push("more");
    assert_eq!(writer.next_edit(client.version, client.text.len()), None);
    // VS Code may answer before the echo arrives: still nothing new until the echo.
    writer.on_answer(true);
    assert_eq!(writer.next_edit(client.version, client.text.len()), None);
    client.apply(&first);
    sync(&mut client, &mut writer);
    let second = writer.next_edit(client.version, client.text.len()).unwrap();
    assert_eq!(second.version, 1);
    assert_eq!(second.offset, client.text.len());
    assert_eq!(second.text, "more");
}

#[test]
fn refused_edit_is_rebased_on_the_latest_text() {
    let mut client = Client::new(START);
    let mut writer = StreamWriter::resume(0, START.len());
    writer.push("abc");
    let edit = writer.next_edit(client.version, client.text.len()).unwrap();
    // The user types before the anchor meanwhile: the edit is stale and refused.
    client.change(TextRange::empty(6), "QW");
    sync(&mut client, &mut writer);
    assert!(!client.apply(&edit));
    writer.on_answer(false);
    writer.push("def");
    let retry = writer.next_edit(client.version, client.text.len()).unwrap();
    assert_eq!(retry.text, "abcdef");
    assert_eq!(retry.offset, START.len() + 2);
    assert!(client.apply(&retry));
    assert_eq!(client.text, "@You:\nQWhi\nabcdef");
}

#[test]
fn text_typed_at_the_anchor_stays_after_the_stream() {
    let mut client = Client::new(START);
    let mut writer = StreamWriter::resume(0, START.len());
    client.change(TextRange::empty(START.len()), "QW");
    sync(&mut client, &mut writer);
    writer.push("abc");
    let edit = writer.next_edit(client.version, client.text.len()).unwrap();
    assert!(client.apply(&edit));
    sync(&mut client, &mut writer);
    writer.on_answer(true);
    assert_eq!(client.text, "@You:\nhi\nabcQW");
    assert_eq!(writer.anchor(), START.len() + 3);
}

#[test]
fn deleting_the_block_cancels_the_stream_and_returns_the_unwritten_text() {
    let mut client = Client::new(START);
    let mut writer = StreamWriter::start(START.len(), HEADER, 1, "\n");
    let edit = writer.next_edit(client.version, client.text.len()).unwrap();
    client.apply(&edit);
    sync(&mut client, &mut writer);
    writer.on_answer(true);
    writer.push("partial");
    let edit = writer.next_edit(client.version, client.text.len()).unwrap();
    assert!(client.apply(&edit));
    sync(&mut client, &mut writer);
    writer.on_answer(true);
    writer.push(" rest");
    // The user selects the whole assistant block and deletes it.
    let block = TextRange::new(START.len() + 1, client.text.len());
    client.change(block, "");
    sync(&mut client, &mut writer);
    assert_eq!(
        writer.state(),
        &StreamState::Cancelled {
            unwritten: " rest".into()
        }
    );
    assert_eq!(writer.next_edit(client.version, client.text.len()), None);
}

#[test]
fn a_late_echo_of_an_edit_counts_even_if_answered_false() {
    // VS Code's race (vscode-languageserver-node#1756): the edit got applied although the
    // answer says it was not. The echo proves the text is there: it must not be sent again.
    let mut client = Client::new(START);
    let mut writer = StreamWriter::resume(0, START.len());
    writer.push("abc");
    let edit = writer.next_edit(client.version, client.text.len()).unwrap();
    client.apply(&edit);
    sync(&mut client, &mut writer);
    writer.on_answer(false);
    writer.finish();
    assert_eq!(writer.state(), &StreamState::Done);
    assert_eq!(client.text, "@You:\nhi\nabc");
}

#[test]
fn coalescing_waits_for_a_line_break_or_enough_text() {
    let mut writer = StreamWriter::resume(0, 0);
    writer.push("abc");
    assert!(!writer.flush_now());
    writer.push("d\n");
    assert!(writer.flush_now());
    let mut writer = StreamWriter::resume(0, 0);
    writer.push(&"x".repeat(FLUSH_BYTES));
    assert!(writer.flush_now());
}

#[derive(Debug, Clone)]
enum Step {
    Chunk(String),
    /// The user types keys at a position (a fraction of the text length).
    Type(f64, String),
    /// The client handles queued requests now (else the edit stays in flight a while).
    Deliver,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "[a-z ]{1,6}(\n)?|é|中文|🙂".prop_map(Step::Chunk),
        (0.0..=1.0f64, "[QWK#]{1,3}").prop_map(|(at, keys)| Step::Type(at, keys)),
        Just(Step::Deliver),
    ]
}

proptest! {
    #[test]
    fn no_streamed_byte_or_keystroke_is_lost(steps in proptest::collection::vec(step(), 1..60)) {
        let mut client = Client::new(START);
        let mut writer = StreamWriter::start(START.len(), HEADER, 1, "\n");
        let mut streamed = String::new();
        let mut keys = String::new();
        let mut inflight: Option<StreamEdit> = None;
        for step in steps {
            match step {
                Step::Chunk(chunk) => {
                    streamed.push_str(&chunk);
                    writer.push(&chunk);
                }
                Step::Type(at, typed) => {
                    // Keystrokes land on char boundaries outside the header's role line
                    // (deleting or splitting it is the cancel case, tested above).
                    let mut offset = (client.text.len() as f64 * at) as usize;
                    while !client.text.is_char_boundary(offset) {
                        offset -= 1;
                    }
                    keys.push_str(&typed);
                    client.change(TextRange::empty(offset), &typed);
                    sync(&mut client, &mut writer);
                }
                Step::Deliver => {}
            }
            if let Some(edit) = inflight.take() {
                let applied = client.apply(&edit);
                sync(&mut client, &mut writer);
                writer.on_answer(applied);
            }
            inflight = writer.next_edit(client.version, client.text.len());
        }
        writer.finish();
        for _ in 0..1000 {
            if let Some(edit) = inflight.take() {
                let applied = client.apply(&edit);
                sync(&mut client, &mut writer);
                writer.on_answer(applied);
            }
            inflight = writer.next_edit(client.version, client.text.len());
            if inflight.is_none() {
                break;
            }
        }
        let is_key = |c: char| "QWK#".contains(c);
        prop_assert!(
            writer.state() == &StreamState::Done
                || matches!(writer.state(), StreamState::Cancelled { .. }),
            "state {:?}", writer.state()
        );
        if writer.state() == &StreamState::Done {
            let without_keys: String = client.text.chars().filter(|c| !is_key(*c)).collect();
            prop_assert_eq!(without_keys, format!("{START}{HEADER}{streamed}\n"));
        }
        let typed: String = client.text.chars().filter(|c| is_key(*c)).collect();
        prop_assert_eq!(typed.len(), keys.len());
    }
}
