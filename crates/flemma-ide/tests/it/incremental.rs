//! Incremental re-analysis (the parser's re-parse after an edit, the template cache's reuse of
//! unchanged messages) gives exactly what a cold analysis of the same text gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use flemma_ide::{AnalysisHost, ConfigInput, DocumentId};
use flemma_syntax::{TextEdit, TextRange};
use flemma_template::FsHost;
use proptest::prelude::*;

/// A chat with persisting template variables, an expression error, a file reference, a
/// system prompt, a tool use and its result.
const CHAT: &str = "```rhai\nlet who = \"A\";\n```\n\
@System:\nYou help {{ who }}.\n\n\
@You:\nHello {{ who }}, see @./notes.md\n{% count = 2; %}\n\n\
@Assistant:\nSure.\n\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n\
@You:\n**Tool Result:** `t1`\n```\nok\n```\n\n\
@You:\nCount is {{ count }} and {{ who }} and {{ missing }}.\n\n\
@Note:\nnot sent\n\n\
@Assistant:\nDone é.\n\n\
@You:\nPlain question.\n\n\
@You:\n{% count += 1; %}Now {{ count }}.\n\n\
@Assistant:\nOk.\n\n\
@You:\nLast {{ count + 1 }} for {{ who }}\n";

/// What random edits insert: text, template code that changes variables, broken template
/// syntax, role lines, tool blocks, fences, file references.
const INSERTS: &[&str] = &[
    "x",
    "é",
    "\n",
    "\n\n",
    "{{ who }}",
    "{{ nope }}",
    "{% let who = \"B\"; %}",
    "{% who = \"C\"; %}",
    "{% count = 7; %}",
    "{% let fresh = 1; %}{{ fresh }}",
    "{{",
    "}}",
    "%}",
    "{% ",
    "\n@You:\n",
    "\n@Assistant:\n",
    "\n@System:\nbe {{ who }}\n",
    "\n@Note:\n",
    " @./notes.md ",
    " @./absent.md ",
    "\n**Tool Use:** `bash` (`t9`)\n```json\n{\"command\":\"pwd\"}\n```\n",
    "\n**Tool Result:** `t1`\n```\nagain\n```\n",
    "\n```\n",
    "`t1`",
];

/// One edit: where (a fraction of the text), what to insert, how many bytes to delete.
#[derive(Debug, Clone)]
struct RandomEdit {
    at: f64,
    insert: Option<usize>,
    delete: usize,
}

fn random_edit() -> impl Strategy<Value = RandomEdit> {
    (
        0.0..=1.0f64,
        prop::option::of(0..INSERTS.len()),
        prop_oneof![Just(0usize), 1..4usize, 4..40usize],
    )
        .prop_map(|(at, insert, delete)| RandomEdit { at, insert, delete })
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl RandomEdit {
    fn to_text_edit(&self, text: &str) -> TextEdit {
        let start = floor_boundary(text, (self.at * text.len() as f64) as usize);
        let end = floor_boundary(text, start + self.delete).max(start);
        let new_text = self.insert.map_or("", |i| INSERTS[i]);
        TextEdit::replace(TextRange { start, end }, new_text)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn incremental_analysis_equals_a_cold_one(edits in prop::collection::vec(random_edit(), 1..10)) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "the notes\n").unwrap();
        let id = DocumentId::new(dir.path().join("talk.chat"));
        let mut host = AnalysisHost::new(Arc::new(FsHost::default()), ConfigInput::default());
        host.set_text(id.clone(), CHAT);
        host.analysis(&id).unwrap();
        for edit in &edits {
            let text = host.document(&id).unwrap().text().to_owned();
            host.apply_edits(&id, &[edit.to_text_edit(&text)]).unwrap();
            let incremental = host.analysis(&id).unwrap();

            let mut cold_host = AnalysisHost::new(Arc::new(FsHost::default()), ConfigInput::default());
            cold_host.set_text(id.clone(), incremental.document.text());
            let cold = cold_host.analysis(&id).unwrap();
            prop_assert_eq!(&incremental.diagnostics, &cold.diagnostics, "text:\n{}", cold.document.text());
            prop_assert_eq!(
                &incremental.evaluation.conversation,
                &cold.evaluation.conversation,
                "text:\n{}",
                cold.document.text()
            );
            prop_assert_eq!(
                incremental.document.messages(),
                cold.document.messages(),
                "text:\n{}",
                cold.document.text()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A batch whose last edit does not fit changes nothing: the edits before it are undone,
    /// text and tree.
    #[test]
    fn a_refused_batch_leaves_the_document_as_it_was(edits in prop::collection::vec(random_edit(), 1..5)) {
        let dir = tempfile::tempdir().unwrap();
        let id = DocumentId::new(dir.path().join("talk.chat"));
        let mut host = AnalysisHost::new(Arc::new(FsHost::default()), ConfigInput::default());
        host.set_text(id.clone(), CHAT);
        let before = host.document(&id).unwrap().clone();
        // Each edit in the coordinates of the text the earlier ones produced.
        let mut text = CHAT.to_owned();
        let mut batch = Vec::new();
        for edit in &edits {
            let edit = edit.to_text_edit(&text);
            text = flemma_syntax::apply_edits(&text, std::slice::from_ref(&edit)).unwrap();
            batch.push(edit);
        }
        batch.push(TextEdit::insert(text.len() + 1, "beyond the end"));
        prop_assert!(host.apply_edits(&id, &batch).is_err());
        let after = host.document(&id).unwrap();
        prop_assert_eq!(after.text(), before.text());
        prop_assert_eq!(after.messages(), before.messages());
    }
}

/// The reuse the property above relies on really happens: after an edit in the last message
/// only that message is evaluated again.
#[test]
fn an_edit_in_the_last_message_evaluates_only_that_message() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "the notes\n").unwrap();
    let id = DocumentId::new(dir.path().join("talk.chat"));
    let mut host = AnalysisHost::new(Arc::new(FsHost::default()), ConfigInput::default());
    host.set_text(id.clone(), CHAT);
    host.analysis(&id).unwrap();
    let end = CHAT.len() - 1;
    host.apply_edits(&id, &[TextEdit::insert(end, "?")])
        .unwrap();
    let stats = host.analysis(&id).unwrap().evaluation.stats;
    // The message with the file reference is always evaluated again (it reads a file).
    assert_eq!(stats.messages_evaluated, 2, "{stats:?}");
    assert!(stats.messages_reused >= 8, "{stats:?}");
}

/// An edit in the middle that leaves the template variables as they were keeps the messages
/// after it reusable, even though they moved and a message was added before them.
#[test]
fn an_edit_in_the_middle_reuses_the_messages_after_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "the notes\n").unwrap();
    let id = DocumentId::new(dir.path().join("talk.chat"));
    let mut host = AnalysisHost::new(Arc::new(FsHost::default()), ConfigInput::default());
    host.set_text(id.clone(), CHAT);
    host.analysis(&id).unwrap();
    let at = CHAT.find("Plain question.").unwrap();
    host.apply_edits(&id, &[TextEdit::insert(at, "A new one.\n\n@You:\n")])
        .unwrap();
    let analysis = host.analysis(&id).unwrap();
    let stats = analysis.evaluation.stats;
    // `A new one.` (the old message's new text) and the one with the file reference; the
    // `Plain question.` message now after it has its old text and is reused.
    assert_eq!(stats.messages_evaluated, 2, "{stats:?}");
    assert!(stats.messages_reused >= 8, "{stats:?}");
    // The `{{ missing }}` diagnostic before the edit and the later messages' parts are right.
    let missing = analysis
        .diagnostics
        .iter()
        .find(|d| d.message.contains("missing"))
        .expect("the undefined variable is reported");
    assert_eq!(
        analysis.document.slice(missing.range),
        "missing",
        "{missing:?}"
    );
    let mut cold_host = AnalysisHost::new(Arc::new(FsHost::default()), ConfigInput::default());
    cold_host.set_text(id.clone(), analysis.document.text());
    let cold = cold_host.analysis(&id).unwrap();
    assert_eq!(
        analysis.evaluation.conversation,
        cold.evaluation.conversation
    );
    assert_eq!(analysis.diagnostics, cold.diagnostics);
    // The variable set in the first message reaches the last one.
    let last = analysis.evaluation.conversation.messages.last().unwrap();
    assert_eq!(
        flemma_conversation::Part::joined_text(&last.parts),
        "Last 4 for A"
    );
}
