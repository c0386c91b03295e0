//! Every feature is total: at any offset of any chat-like text (past the end, inside a
//! character) it answers or returns nothing, and never panics; the ranges it returns lie in the
//! text on character boundaries.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use flemma_syntax::TextRange;
use proptest::prelude::*;

use super::fixture::MemoryFs;
use super::{Approvals, JobState, code_actions, completion, definition, folding, hover};
use super::{highlights, inlay_hints, symbols};

fn chat_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("@You:\n".to_owned()),
        Just("@Assistant:\n".to_owned()),
        Just("@System:\n".to_owned()),
        Just("@You: inline\n".to_owned()),
        Just("@".to_owned()),
        Just("```\n".to_owned()),
        Just("```rhai\n".to_owned()),
        Just("```lua\n".to_owned()),
        Just("```json\n".to_owned()),
        Just("flemma.opt.thinking = \"".to_owned()),
        Just("flemma.opt.".to_owned()),
        Just("**Tool Use:** `bash` (`t1`)\n".to_owned()),
        Just("**Tool Use:** `".to_owned()),
        Just("{\"command\":\"ls\",\"label\":\"x\"}\n".to_owned()),
        Just("**Tool Result:** `t1` (pending)\n".to_owned()),
        Just("**Tool Result:** `t1` (approved job=job_abcdefgh)\n".to_owned()),
        Just("**Job Result:** `job_abcdefgh`\n".to_owned()),
        Just("<thinking>\n".to_owned()),
        Just("</thinking>\n".to_owned()),
        Just("{{ include(\"./a.md\") }}".to_owned()),
        Just("{{ include('".to_owned()),
        Just("@./notes.md ".to_owned()),
        Just("@./".to_owned()),
        Just("\r\n".to_owned()),
        Just("\n".to_owned()),
        Just("日本語 😀".to_owned()),
        "[ -~]{0,10}",
    ]
}

fn chat_text() -> impl Strategy<Value = String> {
    prop::collection::vec(chat_piece(), 0..30).prop_map(|p| p.concat())
}

fn check_range(text: &str, range: TextRange) {
    assert!(
        range.start <= range.end && range.end <= text.len(),
        "{range:?}"
    );
    assert!(text.is_char_boundary(range.start) && text.is_char_boundary(range.end));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_feature_is_total(text in chat_text(), offsets in prop::collection::vec(0usize..2000, 1..6)) {
        let doc = flemma_syntax::parse(text.as_str());
        let fs = MemoryFs::new(&["/c/notes.md", "/c/d/"]);
        let approvals = Approvals::new();
        let jobs = |_: &str| Some(JobState::Running);
        let hover_context = hover::HoverContext { chat_dir: Path::new("/c"), fs: &fs, jobs: &jobs, approvals: &approvals };
        let tools = vec!["bash".to_owned()];
        let completion_context = completion::CompletionContext { chat_dir: Path::new("/c"), fs: &fs, tools: &tools, agents: &[] };
        for symbol in symbols::document_symbols(&doc) { check_range(&text, symbol.range); check_range(&text, symbol.selection); }
        for fold in folding::folding_ranges(&doc) { check_range(&text, fold.range); }
        let marked = highlights::highlights(&doc);
        for highlight in &marked { check_range(&text, highlight.range); }
        prop_assert!(marked.windows(2).all(|w| w[0].range.end <= w[1].range.start), "highlights overlap");
        for hint in inlay_hints::inlay_hints(&doc, None) { check_range(&text, TextRange::empty(hint.offset)); }
        let len = text.len().max(1);
        for offset in offsets {
            // Any offset: inside the text (maybe inside a character) or past its end.
            let offset = if offset < 1000 { offset % (len + 3) } else { offset };
            if let Some(found) = hover::hover(&doc, offset, &hover_context) { check_range(&text, found.range); let _ = found.markdown(); }
            if let Some(definition::Definition::InDocument(range)) = definition::definition(&doc, offset, Path::new("/c"), &fs) { check_range(&text, range); }
            for item in completion::completions(&doc, offset, &completion_context) { check_range(&text, item.replace); }
            for action in code_actions::code_actions(&doc, TextRange::empty(offset), code_actions::DocumentState::default()) {
                if let Some(edits) = action.edit {
                    // Every edit an action offers applies cleanly.
                    prop_assert!(flemma_syntax::apply_edits(&text, &edits).is_ok());
                }
            }
        }
    }
}
