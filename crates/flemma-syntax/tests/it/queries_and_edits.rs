//! Queries (node at a position, message at a line, links between tool uses, results and job
//! results), position conversions in UTF-8 and UTF-16, and the edits of the spec's examples.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use flemma_syntax::{
    Encoding, LineIndex, NodeAt, Position, Role, SegmentKind, Status, apply_edits, parse,
};

const PARALLEL: &str = include_str!("../../../../tests/fixtures/chat/spec_7_2_parallel_tools.chat");
const JOBS: &str = include_str!("../../../../tests/fixtures/chat/background_job.chat");

#[test]
fn rejecting_with_a_reason_matches_the_spec_example() {
    // chat-format.md §7.2: rejecting toolu_01BBB with a reason.
    let doc = parse(PARALLEL);
    let edit = doc
        .resolve_tool_result(
            "toolu_01BBB",
            "User feedback: just run make test-unit",
            true,
            "",
            true,
        )
        .unwrap();
    let out = apply_edits(PARALLEL, &[edit]).unwrap();
    assert!(out.ends_with(
        "**Tool Result:** `toolu_01BBB` (error)\n```\nUser feedback: just run make test-unit\n```\n"
    ));
    // Everything before the rewritten block is untouched.
    let start = PARALLEL.find("**Tool Result:** `toolu_01BBB`").unwrap();
    assert_eq!(&out[..start], &PARALLEL[..start]);
}

#[test]
fn tool_use_result_and_job_result_are_linked_by_id() {
    let doc = parse(JOBS);
    let (_, _, tool_use) = doc.tool_use("toolu_01X").unwrap();
    assert_eq!(tool_use.name, "bash");
    let (message, _, result) = doc.tool_result("toolu_01X").unwrap();
    assert_eq!(message.role, Role::You);
    assert_eq!(
        result.suffix.as_ref().unwrap().get("job"),
        Some(&flemma_syntax::SuffixValue::String("job_k7x2m9qa".into()))
    );
    let (_, _, job) = doc.job_result("job_k7x2m9qa").unwrap();
    assert!(
        doc.slice(job.fence.as_ref().unwrap().content)
            .contains("Finished")
    );
    let (_, _, back) = doc.tool_result_for_job("job_k7x2m9qa").unwrap();
    assert_eq!(back.tool_use_id, "toolu_01X");
    // The hallucinated job result in the assistant message is not a job result.
    assert!(doc.job_result("job_fake0001").is_none());
}

#[test]
fn unresolved_tool_uses_and_placeholders_by_status() {
    let doc = parse(PARALLEL);
    assert!(doc.unresolved_tool_uses().is_empty());
    let pending = doc.placeholders(Some(Status::Pending));
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].2.tool_use_id, "toolu_01BBB");
    assert_eq!(doc.placeholders(None).len(), 1);
    assert!(doc.placeholders(Some(Status::Approved)).is_empty());

    let cut = PARALLEL.find("@You:\n**Tool Result:**").unwrap();
    let doc = parse(&PARALLEL[..cut]);
    let ids: Vec<&str> = doc
        .unresolved_tool_uses()
        .iter()
        .map(|(_, _, t)| t.id.as_str())
        .collect();
    assert_eq!(ids, ["toolu_01AAA", "toolu_01BBB"]);
}

#[test]
fn node_at_position_and_message_at_line() {
    let doc = parse(PARALLEL);
    let index = doc.line_index();
    // Line 6 is the first tool use header.
    match doc.node_at_position(
        &index,
        Position {
            line: 6,
            character: 3,
        },
        Encoding::Utf16,
    ) {
        Some(NodeAt::Segment(message, segment)) => {
            assert_eq!(message.role, Role::Assistant);
            assert!(matches!(&segment.kind, SegmentKind::ToolUse(t) if t.id == "toolu_01AAA"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(doc.node_at(0), Some(NodeAt::RoleLine(_))));
    assert_eq!(doc.message_at_line(&index, 17).unwrap().role, Role::You);
    assert_eq!(
        doc.message_at_line(&index, 4).unwrap().role,
        Role::Assistant
    );
}

#[test]
fn positions_convert_in_utf8_and_utf16() {
    let text = "@You:\na😀b é\r\nlast";
    let index = LineIndex::new(text);
    let b = text.find('b').unwrap();
    assert_eq!(
        index.position(text, b, Encoding::Utf8),
        Position {
            line: 1,
            character: 5
        }
    );
    assert_eq!(
        index.position(text, b, Encoding::Utf16),
        Position {
            line: 1,
            character: 3
        }
    );
    assert_eq!(
        index.offset(
            text,
            Position {
                line: 1,
                character: 3
            },
            Encoding::Utf16
        ),
        b
    );
    assert_eq!(
        index.offset(
            text,
            Position {
                line: 1,
                character: 5
            },
            Encoding::Utf8
        ),
        b
    );
    // Inside a surrogate pair rounds down to the character start; past the end clamps before
    // the line break (including a CR).
    let emoji = text.find('😀').unwrap();
    assert_eq!(
        index.offset(
            text,
            Position {
                line: 1,
                character: 2
            },
            Encoding::Utf16
        ),
        emoji
    );
    let crlf = text.find('\r').unwrap();
    assert_eq!(
        index.offset(
            text,
            Position {
                line: 1,
                character: 99
            },
            Encoding::Utf16
        ),
        crlf
    );
    assert_eq!(
        index.offset(
            text,
            Position {
                line: 9,
                character: 0
            },
            Encoding::Utf8
        ),
        text.len()
    );
    for offset in 0..=text.len() {
        // Offsets inside a character or between the CR and LF of a line break have no position.
        if !text.is_char_boundary(offset) || (offset > 0 && text.as_bytes()[offset - 1] == b'\r') {
            continue;
        }
        for encoding in [Encoding::Utf8, Encoding::Utf16] {
            let p = index.position(text, offset, encoding);
            assert_eq!(
                index.offset(text, p, encoding),
                offset,
                "{offset} {encoding:?}"
            );
        }
    }
}

#[test]
fn crlf_is_preserved_by_edits() {
    let text = "@You:\r\n**Tool Result:** `t1` (pending)\r\n```\r\n```\r\n";
    let doc = parse(text);
    let edit = doc
        .set_tool_result_status("t1", Some(Status::Approved))
        .unwrap();
    let out = apply_edits(text, &[edit]).unwrap();
    assert_eq!(
        out,
        "@You:\r\n**Tool Result:** `t1` (approved)\r\n```\r\n```\r\n"
    );
}

#[test]
fn a_broken_tool_use_does_not_hide_the_next_one() {
    let text = "@Assistant:\n**Tool Use:** `a` (`1`)\n```json\n{oops\n```\n**Tool Use:** `b` (`2`)\n```json\n{}\n```\n";
    let doc = parse(text);
    let uses: Vec<_> = doc.messages()[0]
        .tool_uses()
        .map(|(_, t)| (t.id.clone(), t.input_is_valid))
        .collect();
    assert_eq!(uses, [("1".to_owned(), false), ("2".to_owned(), true)]);
}

fn assert_no_lone_line_feed(text: &str) {
    for (i, _) in text.match_indices('\n') {
        assert!(
            i > 0 && text.as_bytes()[i - 1] == b'\r',
            "lone \\n at byte {i} of {text:?}"
        );
    }
}

const CRLF_CHAT: &str = r#"@You: please list the channels
@Assistant: Sure.
**Tool Use:** `slack:list` (`t1`)
```json
{"limit": 5}
```

@You:
**Tool Result:** `t1` (pending)
```
```
"#;

#[test]
fn every_edit_kind_keeps_a_crlf_document_crlf() {
    let text = CRLF_CHAT.replace('\n', "\r\n");
    let doc = parse(text.as_str());
    assert_eq!(doc.line_ending(), flemma_syntax::LineEnding::CrLf);
    let edits = [
        doc.set_tool_result_status("t1", Some(Status::Approved))
            .unwrap(),
        doc.resolve_tool_result("t1", "general\nrandom\n", false, "", false)
            .unwrap(),
        doc.append_assistant_start(),
        doc.append_you_prompt(),
    ];
    for edit in edits {
        let out = apply_edits(&text, &[edit]).unwrap();
        assert_no_lone_line_feed(&out);
    }
    let fmt: Vec<_> = doc.format_edits().into_iter().map(|(e, _)| e).collect();
    let out = apply_edits(&text, &fmt).unwrap();
    assert_no_lone_line_feed(&out);
    assert!(out.starts_with("@You:\r\nplease list the channels\r\n@Assistant:\r\nSure.\r\n"));
    assert!(out.contains("`slack.list`"));
}

#[test]
fn fmt_splits_a_crlf_inline_marker_into_crlf_lines() {
    let text = "@You: hi\r\n";
    let doc = parse(text);
    let edits: Vec<_> = doc.format_edits().into_iter().map(|(e, _)| e).collect();
    assert_eq!(apply_edits(text, &edits).unwrap(), "@You:\r\nhi\r\n");
}

#[test]
fn an_lf_document_stays_lf() {
    let doc = parse(CRLF_CHAT);
    assert_eq!(doc.line_ending(), flemma_syntax::LineEnding::Lf);
    assert_eq!(doc.append_you_prompt().new_text, "\n@You:\n\n");
}

/// A legacy file: the tool use is plain text of the `@You:` message until the inline
/// `@Assistant:` marker is split, and only then is its `slack:list` name seen.
const LEGACY: &str = r#"@You: list the channels
@Assistant: Here they are.
**Tool Use:** `slack:list` (`t1`)
```json
{}
```
@You: **Tool Result:** `t1`
```
general
```
"#;

#[test]
fn fmt_reaches_its_fixed_point_in_one_pass() {
    let doc = parse(LEGACY);
    let changes = doc.format_edits();
    let edits: Vec<_> = changes.iter().map(|(e, _)| e.clone()).collect();
    let out = apply_edits(LEGACY, &edits).unwrap();
    assert_eq!(
        out,
        r#"@You:
list the channels
@Assistant:
Here they are.
**Tool Use:** `slack.list` (`t1`)
```json
{}
```
@You:
**Tool Result:** `t1`
```
general
```
"#
    );
    assert!(
        parse(out.as_str()).format_edits().is_empty(),
        "{:?}",
        parse(out.as_str()).format_edits()
    );
    assert!(changes.iter().any(|(_, d)| d.contains("slack.list")));
}
