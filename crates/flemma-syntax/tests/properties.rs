//! Property tests: lossless printing, incremental re-analysis equal to a full parse, and header
//! rewrites that touch only their own bytes. Parsing never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use flemma_syntax::{Document, Status, TextEdit, TextRange, apply_edits, parse};
use proptest::prelude::*;

/// Pieces that exercise every construct of the format, mixed with noise.
fn chat_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("@You:\n".to_owned()),
        Just("@Assistant:\n".to_owned()),
        Just("@System:\n".to_owned()),
        Just("@Note:\n".to_owned()),
        Just("@You: inline\n".to_owned()),
        Just("```\n".to_owned()),
        Just("````json\n".to_owned()),
        Just("```rhai\n".to_owned()),
        Just("**Tool Use:** `bash` (`t1`)\n".to_owned()),
        Just("**Tool Use:** `a:b` (`t2`)\n".to_owned()),
        Just("**Tool Result:** `t1` (pending)\n".to_owned()),
        Just("**Tool Result:** `t2` (status=approved x='a b')\n".to_owned()),
        Just("**Job Result:** `job_abcdefgh`\n".to_owned()),
        Just("<thinking>\n".to_owned()),
        Just("<thinking anthropic:signature=\"s\">\n".to_owned()),
        Just("<thinking openai:signature=\"s\"/>\n".to_owned()),
        Just("<thinking redacted>\n".to_owned()),
        Just("</thinking>\n".to_owned()),
        Just("<!-- flemma:aborted: stop -->\n".to_owned()),
        Just("{\"command\":\"ls\"}\n".to_owned()),
        Just("{{ x }}".to_owned()),
        Just("{{- \"}}\" -}}".to_owned()),
        Just("{% if a { %}".to_owned()),
        Just("{% } %}".to_owned()),
        Just("@./file.txt;type=text/plain ".to_owned()),
        Just("\r\n".to_owned()),
        Just("\n".to_owned()),
        Just("日本語 😀".to_owned()),
        "[ -~]{0,12}",
        "\\PC{0,6}",
    ]
}

fn chat_text() -> impl Strategy<Value = String> {
    prop::collection::vec(chat_piece(), 0..40).prop_map(|pieces| pieces.concat())
}

fn char_boundaries(text: &str) -> Vec<usize> {
    let mut b: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    b.push(text.len());
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn printing_is_lossless(text in chat_text()) {
        prop_assert_eq!(parse(text.as_str()).print(), text);
    }

    #[test]
    fn printing_is_lossless_on_arbitrary_strings(text in any::<String>()) {
        prop_assert_eq!(parse(text.as_str()).print(), text);
    }

    #[test]
    fn appending_chunks_equals_one_parse(text in chat_text(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12)) {
        let bounds = char_boundaries(&text);
        let mut points: Vec<usize> = cuts.iter().map(|i| bounds[i.index(bounds.len())]).collect();
        points.push(0);
        points.push(text.len());
        points.sort_unstable();
        points.dedup();
        let mut doc = Document::parse("");
        for pair in points.windows(2) {
            doc.append(&text[pair[0]..pair[1]]);
        }
        prop_assert_eq!(doc, parse(text.as_str()));
    }

    #[test]
    fn any_edit_equals_a_full_parse(text in chat_text(), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>(), insert in chat_text()) {
        let bounds = char_boundaries(&text);
        let (mut start, mut end) = (bounds[a.index(bounds.len())], bounds[b.index(bounds.len())]);
        if start > end { std::mem::swap(&mut start, &mut end); }
        let insert: String = insert.chars().take(30).collect();
        let edit = TextEdit::replace(TextRange::new(start, end), insert);
        let mut doc = parse(text.as_str());
        doc.edit(&edit);
        let (expected, _) = apply_edits(&text, &[edit]);
        prop_assert_eq!(doc, parse(expected));
    }

    #[test]
    fn status_rewrites_change_only_the_header(text in chat_text(), picks in prop::collection::vec((0usize..2, 0usize..7), 1..4)) {
        let statuses = [None, Some(Status::Pending), Some(Status::Approved), Some(Status::Rejected), Some(Status::Denied), Some(Status::Aborted), Some(Status::Error)];
        let mut current = text.clone();
        for (id, status) in picks {
            let id = ["t1", "t2"][id];
            let doc = parse(current.as_str());
            let Some(edit) = doc.set_tool_result_status(id, statuses[status]) else { continue };
            let (_, _, before) = doc.tool_result(id).unwrap();
            let header = before.header;
            prop_assert!(edit.range.start >= header.start && edit.range.end <= header.end);
            let (next, applied) = apply_edits(&current, std::slice::from_ref(&edit));
            prop_assert_eq!(applied, 1);
            // Bytes outside the edited range are untouched.
            prop_assert_eq!(&next[..edit.range.start], &current[..edit.range.start]);
            prop_assert_eq!(&next[edit.range.start + edit.new_text.len()..], &current[edit.range.end..]);
            let reparsed = parse(next.as_str());
            let (_, _, after) = reparsed.tool_result(id).unwrap();
            prop_assert_eq!(after.suffix.as_ref().and_then(|s| s.status()), statuses[status]);
            let meta_before: Vec<_> = before.suffix.iter().flat_map(|s| s.meta().map(|(k, v)| (k.to_owned(), v))).collect();
            let meta_after: Vec<_> = after.suffix.iter().flat_map(|s| s.meta().map(|(k, v)| (k.to_owned(), v))).collect();
            prop_assert_eq!(meta_before, meta_after);
            current = next;
        }
    }
}
