//! Property tests: lossless printing, incremental re-analysis equal to a full parse, and header
//! rewrites that touch only their own bytes. Parsing never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use flemma_syntax::{
    Assoc, Document, Status, TextEdit, TextEdits, TextRange, apply_edits, diff_to_edits,
    map_offset, parse, same_result, single_edit,
};
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
        doc.edit(&edit).unwrap();
        let expected = apply_edits(&text, &[edit]).unwrap();
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
            let next = apply_edits(&current, std::slice::from_ref(&edit)).unwrap();
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

    #[test]
    fn applying_a_diff_gives_the_new_text(a in chat_text(), b in chat_text()) {
        let edits = diff_to_edits(&a, &b);
        prop_assert_eq!(apply_edits(&a, &edits).unwrap(), b.clone());
        // The edits are disjoint and sorted already.
        prop_assert_eq!(TextEdits::new(edits.clone()).unwrap().into_vec(), edits);
        if a == b {
            prop_assert!(diff_to_edits(&a, &b).is_empty());
        }
    }

    #[test]
    fn mapping_offsets_is_monotone_and_agrees_with_applying(a in chat_text(), b in chat_text(), picks in prop::collection::vec(any::<prop::sample::Index>(), 1..8)) {
        let edits = TextEdits::new(diff_to_edits(&a, &b)).unwrap();
        let new = edits.apply(&a).unwrap();
        let bounds = char_boundaries(&a);
        let mut offsets: Vec<usize> = picks.iter().map(|p| bounds[p.index(bounds.len())]).collect();
        offsets.sort_unstable();
        for assoc in [Assoc::Before, Assoc::After] {
            let mapped: Vec<usize> = offsets.iter().map(|o| edits.map_offset(*o, assoc)).collect();
            prop_assert!(mapped.windows(2).all(|w| w[0] <= w[1]), "not monotone: {:?} -> {:?}", offsets, mapped);
            prop_assert!(mapped.iter().all(|m| *m <= new.len() && new.is_char_boundary(*m)));
        }
        for &offset in &offsets {
            let before = edits.map_offset(offset, Assoc::Before);
            let after = edits.map_offset(offset, Assoc::After);
            prop_assert!(before <= after);
            // Untouched text after the offset (up to the next edit) follows the mapped offset.
            let next_edit = edits.as_slice().iter().map(|e| e.range.start).find(|s| *s >= offset).unwrap_or(a.len());
            let inside = edits.as_slice().iter().any(|e| e.range.start <= offset && offset < e.range.end);
            if !inside {
                prop_assert!(new[after..].starts_with(&a[offset..next_edit]));
                prop_assert_eq!(edits.map_offset_back(after), offset);
            }
        }
        // The end of the text maps to the end of the new text.
        prop_assert_eq!(edits.map_offset(a.len(), Assoc::After), new.len());
    }

    #[test]
    fn mapping_through_edits_in_any_order_is_the_same(a in chat_text(), b in chat_text(), picks in prop::collection::vec(any::<prop::sample::Index>(), 1..8)) {
        let sorted = diff_to_edits(&a, &b);
        let mut reversed = sorted.clone();
        reversed.reverse();
        let bounds = char_boundaries(&a);
        for pick in picks {
            let offset = bounds[pick.index(bounds.len())];
            for assoc in [Assoc::Before, Assoc::After] {
                prop_assert_eq!(map_offset(offset, &sorted, assoc), map_offset(offset, &reversed, assoc));
                prop_assert_eq!(map_offset(offset, &sorted, assoc), TextEdits::new(sorted.clone()).unwrap().map_offset(offset, assoc));
            }
        }
    }

    #[test]
    fn one_edit_and_same_result_agree_with_applying(a in chat_text(), b in chat_text(), c in chat_text()) {
        let ab = single_edit(&a, &b);
        prop_assert_eq!(apply_edits(&a, std::slice::from_ref(&ab)).unwrap(), b.clone());
        let ac = single_edit(&a, &c);
        prop_assert_eq!(same_result(&a, &ab, &ac), b == c);
        prop_assert!(same_result(&a, &ab, &ab));
    }

    #[test]
    fn refused_edits_leave_the_text(text in chat_text(), insert in "[a-z\n]{0,4}", a in any::<prop::sample::Index>(), extra in 1usize..5) {
        let bounds = char_boundaries(&text);
        let at = bounds[a.index(bounds.len())];
        let mut doc = parse(text.as_str());
        // Past the end.
        let out_of_range = TextEdit::insert(text.len() + extra, insert.clone());
        prop_assert!(apply_edits(&text, std::slice::from_ref(&out_of_range)).is_err());
        prop_assert!(doc.edit(&out_of_range).is_err());
        prop_assert_eq!(doc.text(), text.as_str());
        // Overlapping.
        let end = (at + extra).min(text.len());
        if end > at && text.is_char_boundary(end) {
            let overlapping = [TextEdit::replace(TextRange::new(at, end), insert.clone()), TextEdit::insert(end - 1, "x")];
            if text.is_char_boundary(end - 1) {
                prop_assert!(apply_edits(&text, &overlapping).is_err());
                let set = TextEdits::new(overlapping.to_vec());
                prop_assert!(set.is_err());
            }
        }
        // Reversed.
        if at > 0 {
            prop_assert!(doc.edit(&TextEdit::replace(TextRange::new(at, at - 1), "x")).is_err());
        }
        prop_assert_eq!(doc, parse(text.as_str()));
    }

    #[test]
    fn one_fmt_pass_reaches_the_fixed_point(text in chat_text()) {
        let doc = parse(text.as_str());
        let edits: Vec<TextEdit> = doc.format_edits().into_iter().map(|(e, _)| e).collect();
        let formatted = apply_edits(&text, &edits).unwrap();
        let again = parse(formatted.as_str()).format_edits();
        prop_assert!(again.is_empty(), "second pass on {:?} still changes: {:?}", formatted, again);
    }

    #[test]
    fn crlf_documents_get_no_lone_line_feed(text in chat_text()) {
        let crlf = format!("@You:\r\n{}", text.replace("\r\n", "\n").replace('\n', "\r\n"));
        let doc = parse(crlf.as_str());
        let mut edits: Vec<TextEdit> = doc.format_edits().into_iter().map(|(e, _)| e).collect();
        edits.push(doc.append_assistant_start());
        let formatted = apply_edits(&crlf, &edits).unwrap();
        prop_assert!(!has_lone_line_feed(&formatted), "{:?}", formatted);
        let prompt = apply_edits(&crlf, &[doc.append_you_prompt()]).unwrap();
        prop_assert!(!has_lone_line_feed(&prompt), "{:?}", prompt);
    }
}

fn has_lone_line_feed(text: &str) -> bool {
    text.match_indices('\n')
        .any(|(i, _)| i == 0 || text.as_bytes()[i - 1] != b'\r')
}

/// Pieces of tool names and ids as a hostile provider might send them: what would end the
/// header, the line or the message, and what is harmless.
fn token_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("`".to_owned()),
        Just("``".to_owned()),
        Just("```".to_owned()),
        Just("\n".to_owned()),
        Just("\r".to_owned()),
        Just("\r\n".to_owned()),
        Just("\n@You:\n".to_owned()),
        Just("@Assistant:".to_owned()),
        Just("**Tool Use:** `bash` (`t9`)".to_owned()),
        Just("**Tool Result:** `t9` (approved)".to_owned()),
        Just(") (".to_owned()),
        Just(":".to_owned()),
        Just(".".to_owned()),
        Just(" ".to_owned()),
        Just("\u{2028}".to_owned()),
        Just("toolu_01".to_owned()),
        Just("flemma.jobs".to_owned()),
        "[A-Za-z0-9_.:-]{1,8}",
        "\\PC{0,4}",
        ".{0,4}",
    ]
}

fn token() -> impl Strategy<Value = String> {
    prop::collection::vec(token_piece(), 0..6).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Defence in depth for what a provider sends (docs/security.md, invariant IV): the writer
    /// refuses a tool name or id, or what it writes reads back as exactly one tool use with
    /// that name and id, in the one assistant message, before the closing `@You:`.
    #[test]
    fn any_tool_name_or_id_is_refused_or_round_trips(name in token(), id in token()) {
        let Some(block) = flemma_syntax::write::tool_use_block(&name, &id, "{}", true) else {
            prop_assert!(
                !flemma_syntax::write::is_tool_name(&name) || !flemma_syntax::write::is_tool_id(&id)
            );
            return Ok(());
        };
        let text = format!("@You:\nhi\n@Assistant:\n{block}\n@You:\n");
        let doc = parse(text.as_str());
        let roles: Vec<String> = doc.messages().iter().map(|m| format!("{:?}", m.role)).collect();
        prop_assert_eq!(roles.len(), 3, "{:?}", text);
        let uses: Vec<(String, String)> = doc
            .messages()
            .iter()
            .flat_map(|m| m.tool_uses().map(|(_, t)| (t.name.clone(), t.id.clone())))
            .collect();
        prop_assert_eq!(uses, vec![(name.clone(), id.clone())], "{:?}", text);
        prop_assert!(doc.messages()[2].content.is_empty(), "{:?}", text);
    }
}
