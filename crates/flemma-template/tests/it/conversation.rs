//! File references, tool results and their statuses, job results, thinking, abort markers and
//! synthetic results.

use crate::common;

use common::{TestHost, assert_clean, blocking, covered, roles, text_of};
use flemma_conversation::{Part, Role, ThinkingSignature};
use flemma_syntax::Severity;
use flemma_template::Category;
use serde_json::json;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const PDF: &[u8] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n";

#[test]
fn file_references_become_attachments() {
    let host = TestHost::new();
    host.write("notes/sprint 12.md", "# Sprint 12\n");
    host.write("artifacts/failure.png", PNG);
    host.write("specs/v1.pdf", PDF);
    host.write("patches/fix.lua", "print('x')\n");
    host.write("home/todo.txt", "buy milk\n");
    let evaluation = host.eval(
        "@You:\nRead @./notes/sprint%2012.md, OCR @./artifacts/failure.png. Compare @./specs/v1.pdf and critique @./patches/fix.lua;type=text/x-lua and @~/todo.txt\n",
    );
    assert_clean(&evaluation);
    let parts = &evaluation.conversation.messages[0].parts;
    let attachments: Vec<&Part> = parts
        .iter()
        .filter(|p| !matches!(p, Part::Text { .. }))
        .collect();
    assert_eq!(attachments.len(), 5, "{parts:#?}");
    assert_eq!(
        attachments[0],
        &Part::TextFile {
            mime: "text/markdown".into(),
            text: "# Sprint 12\n".into(),
            path: "./notes/sprint%2012.md".into()
        }
    );
    assert_eq!(
        attachments[1],
        &Part::Image {
            mime: "image/png".into(),
            data: PNG.to_vec(),
            path: "./artifacts/failure.png".into()
        }
    );
    assert_eq!(
        attachments[2],
        &Part::Pdf {
            data: PDF.to_vec(),
            path: "./specs/v1.pdf".into()
        }
    );
    assert!(matches!(attachments[3], Part::TextFile { mime, .. } if mime == "text/x-lua"));
    assert!(matches!(attachments[4], Part::TextFile { text, .. } if text == "buy milk\n"));
    assert_eq!(parts[0], Part::text("Read "));
    assert_eq!(parts[2], Part::text(", OCR "));
}

#[test]
fn magic_bytes_win_over_the_extension() {
    let host = TestHost::new();
    host.write("really-a-png.txt", PNG);
    let evaluation = host.eval("@You:\nsee @./really-a-png.txt\n");
    assert_clean(&evaluation);
    assert!(
        matches!(&evaluation.conversation.messages[0].parts[1], Part::Image { mime, .. } if mime == "image/png")
    );
}

#[test]
fn missing_or_unsupported_files_warn_and_keep_the_text() {
    let host = TestHost::new();
    host.write("archive.zip", b"PK\x03\x04rest");
    let text = "@You:\nsee @./missing.md and @./archive.zip.\n";
    let evaluation = host.eval(text);
    assert_eq!(
        text_of(&evaluation, 0),
        "see @./missing.md and @./archive.zip."
    );
    assert_eq!(
        evaluation.diagnostics.len(),
        2,
        "{:#?}",
        evaluation.diagnostics
    );
    for diagnostic in &evaluation.diagnostics {
        assert_eq!(diagnostic.category, Category::FileReference);
        assert_eq!(diagnostic.severity, Severity::Warning);
        assert!(!diagnostic.blocking);
    }
    assert_eq!(covered(text, &evaluation.diagnostics[0]), "@./missing.md");
    assert!(
        evaluation.diagnostics[1]
            .message
            .contains("unsupported type")
    );
}

fn tool_chat(result_header_suffix: &str, fence_content: &str) -> String {
    format!(
        "@You:\nrun it\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{{\"command\":\"make test\"}}\n```\n\n@You:\n**Tool Result:** `toolu_1`{result_header_suffix}\n```\n{fence_content}```\n"
    )
}

fn only_result(evaluation: &flemma_template::Evaluation) -> (String, bool) {
    let message = evaluation.conversation.messages.last().expect("a message");
    match &message.parts[..] {
        [
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            },
        ] => {
            assert_eq!(tool_use_id, "toolu_1");
            (Part::joined_text(content), *is_error)
        }
        other => panic!("expected one tool result, got {other:#?}"),
    }
}

#[test]
fn tool_result_statuses_follow_the_table() {
    let host = TestHost::new();
    let cases = [
        ("", "ok\n", "ok", false),
        (" (error)", "exit 2\n", "exit 2", true),
        (" (denied)", "", "The tool was denied by a policy.", true),
        (
            " (rejected)",
            "",
            "This tool has been rejected by the user.",
            true,
        ),
        (
            " (rejected)",
            "User feedback: just run make test-unit\n",
            "User feedback: just run make test-unit",
            true,
        ),
        (" (aborted)", "", "Response interrupted by the user.", true),
        (
            " (pending)",
            "I ran it myself: fine\n",
            "I ran it myself: fine",
            false,
        ),
        (" (status=error sandbox=false)", "boom\n", "boom", true),
    ];
    for (suffix, content, expected, is_error) in cases {
        let evaluation = host.eval(&tool_chat(suffix, content));
        assert_clean(&evaluation);
        assert_eq!(
            only_result(&evaluation),
            (expected.to_string(), is_error),
            "{suffix} {content:?}"
        );
    }
}

#[test]
fn unresolved_placeholders_block() {
    let host = TestHost::new();
    for (suffix, message) in [
        (
            " (pending)",
            "tool `toolu_1` is waiting for approval: approve or reject it",
        ),
        (
            " (approved)",
            "tool `toolu_1` is approved but has not run yet: it runs once no call waits for approval (or paste its output into the fence and remove `approved`)",
        ),
    ] {
        let text = tool_chat(suffix, "");
        let evaluation = host.eval(&text);
        let errors = blocking(&evaluation);
        assert_eq!(errors.len(), 1, "{suffix}: {:#?}", evaluation.diagnostics);
        assert_eq!(errors[0].category, Category::Tool);
        assert_eq!(errors[0].message, message);
        assert_eq!(
            errors[0].severity,
            Severity::Hint,
            "the flow, not a mistake"
        );
        assert!(covered(&text, errors[0]).starts_with("**Tool Result:**"));
    }
    let evaluation = host.eval(&tool_chat(" (approved)", "typed text\n"));
    assert_eq!(blocking(&evaluation).len(), 1);
}

#[test]
fn tool_uses_thinking_and_abort_markers() {
    // chat-format §7.3: Gemini ids, redacted thinking, abort marker.
    let host = TestHost::new();
    let evaluation = host.eval(concat!(
        "@You:\nWhat is 15 multiplied by 7?\n\n@Assistant:\n",
        "**Tool Use:** `calculator` (`urn:flemma:tool:calculator:678a1b2c0001`)\n```json\n{\"expression\":\"15 * 7\"}\n```\n\n",
        "<thinking vertex:signature=\"c2lnLTEyMw==\">\nI'll use the calculator.\n</thinking>\n\n",
        "@You:\n**Tool Result:** `urn:flemma:tool:calculator:678a1b2c0001`\n```\n105\n```\n\n",
        "@Assistant:\nThe answer is 105.\n\n<thinking redacted>\nEmwKAhgBEgy3va3pzix\n</thinking>\n\n",
        "@You:\nNow explain it in Bulgarian.\n\n@Assistant:\nРазбира се, 15 по 7\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n\n@You:\n\n",
    ));
    assert_clean(&evaluation);
    assert_eq!(
        roles(&evaluation),
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ]
    );
    let messages = &evaluation.conversation.messages;
    assert_eq!(
        messages[1].parts,
        vec![
            Part::ToolUse {
                id: "urn:flemma:tool:calculator:678a1b2c0001".into(),
                name: "calculator".into(),
                input: json!({"expression": "15 * 7"}),
                raw_input: "{\"expression\":\"15 * 7\"}".into(),
            },
            Part::Thinking {
                text: "I'll use the calculator.".into(),
                signature: Some(ThinkingSignature {
                    provider: "vertex".into(),
                    value: "c2lnLTEyMw==".into()
                }),
                redacted: false,
            },
        ]
    );
    assert_eq!(
        messages[3].parts[1],
        Part::Thinking {
            text: "EmwKAhgBEgy3va3pzix".into(),
            signature: None,
            redacted: true
        }
    );
    assert_eq!(
        text_of(&evaluation, 5),
        "Разбира се, 15 по 7\n\n<!-- flemma:aborted: Response interrupted by the user. -->"
    );
}

#[test]
fn abort_marker_is_dropped_in_a_message_with_tool_uses_and_invalid_input_is_kept_raw() {
    let host = TestHost::new();
    let evaluation = host.eval(concat!(
        "@You:\ngo\n\n@Assistant:\n**Tool Use:** `flemma:jobs.status` (`toolu_9`)\n```json\n{not json\n```\n\n",
        "<!-- flemma:aborted: Response interrupted by the user. -->\n\n@You:\n**Tool Result:** `toolu_9` (aborted)\n```\n```\n",
    ));
    let parts = &evaluation.conversation.messages[1].parts;
    assert_eq!(
        parts,
        &vec![Part::ToolUse {
            id: "toolu_9".into(),
            name: "flemma.jobs.status".into(),
            input: json!({}),
            raw_input: "{not json".into(),
        }]
    );
}

#[test]
fn a_tool_use_without_result_gets_a_synthetic_error() {
    let host = TestHost::new();
    let text = "@You:\ngo\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{}\n```\n**Tool Use:** `read` (`toolu_2`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `toolu_2`\n```\nfile\n```\n\nthanks\n";
    let evaluation = host.eval(text);
    assert_eq!(
        evaluation.diagnostics.len(),
        1,
        "{:#?}",
        evaluation.diagnostics
    );
    assert_eq!(evaluation.diagnostics[0].severity, Severity::Warning);
    assert!(covered(text, &evaluation.diagnostics[0]).contains("toolu_1"));
    let parts = &evaluation.conversation.messages[2].parts;
    assert_eq!(parts.len(), 3, "{parts:#?}");
    assert!(
        matches!(&parts[0], Part::ToolResult { tool_use_id, is_error: false, .. } if tool_use_id == "toolu_2")
    );
    assert_eq!(
        parts[1],
        Part::ToolResult {
            tool_use_id: "toolu_1".into(),
            content: vec![Part::text("No result provided")],
            is_error: true
        }
    );
    assert_eq!(parts[2], Part::text("thanks"));

    // At the end of the file: a new user message carries it.
    let evaluation =
        host.eval("@You:\ngo\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{}\n```\n");
    assert_eq!(
        roles(&evaluation),
        [Role::User, Role::Assistant, Role::User]
    );
}

#[test]
fn read_results_turn_file_references_into_attachments() {
    let host = TestHost::new();
    host.write("img.png", PNG);
    let evaluation = host.eval(concat!(
        "@You:\nlook\n\n@Assistant:\n**Tool Use:** `read` (`toolu_r`)\n```json\n{\"path\":\"img.png\"}\n```\n\n",
        "@You:\n**Tool Result:** `toolu_r`\n```\n@./img.png;type=image/png\n```\n\n",
        "@Assistant:\n**Tool Use:** `bash` (`toolu_b`)\n```json\n{}\n```\n\n",
        "@You:\n**Tool Result:** `toolu_b`\n```\n@./img.png {{ x }}\n```\n",
    ));
    assert_clean(&evaluation);
    let messages = &evaluation.conversation.messages;
    assert_eq!(
        messages[2].parts,
        vec![Part::ToolResult {
            tool_use_id: "toolu_r".into(),
            content: vec![Part::Image {
                mime: "image/png".into(),
                data: PNG.to_vec(),
                path: "./img.png".into()
            }],
            is_error: false,
        }]
    );
    assert_eq!(
        messages[4].parts,
        vec![Part::ToolResult {
            tool_use_id: "toolu_b".into(),
            content: vec![Part::text("@./img.png {{ x }}")],
            is_error: false,
        }]
    );
}

#[test]
fn mcp_results_attach_the_images_saved_in_the_chats_store_and_nothing_else() {
    let host = TestHost::new();
    let stored = host.write(".flemma/chat.chat/mcp-demo-image-1.png", PNG);
    let outside = host.write("elsewhere/secret.png", PNG);
    let not_an_image = host.write(
        ".flemma/chat.chat/key.png",
        b"-----BEGIN OPENSSH PRIVATE KEY-----",
    );
    let link = host.path(".flemma/chat.chat/link.png");
    std::os::unix::fs::symlink(&outside, &link).expect("symlink");
    let reference = |path: &std::path::Path| {
        flemma_syntax::write::file_reference(&path.display().to_string(), "image/png")
    };
    let result = format!(
        "[image: image/png, 8B, saved to {}, attached:]\n{}\nothers: {} {} {}",
        stored.display(),
        reference(&stored),
        reference(&outside),
        reference(&not_an_image),
        reference(&link),
    );
    let evaluation = host.eval(&format!(
        "@You:\nlook\n\n@Assistant:\n**Tool Use:** `demo.image` (`toolu_m`)\n```json\n{{}}\n```\n\n\
         @You:\n**Tool Result:** `toolu_m`\n```\n{result}\n```\n\n\
         @Assistant:\n**Tool Use:** `bash` (`toolu_b`)\n```json\n{{}}\n```\n\n\
         @You:\n**Tool Result:** `toolu_b`\n```\n{result}\n```\n"
    ));
    assert_clean(&evaluation);
    let messages = &evaluation.conversation.messages;
    let Part::ToolResult { content, .. } = &messages[2].parts[0] else {
        panic!("a tool result: {:?}", messages[2].parts)
    };
    let images: Vec<_> = content
        .iter()
        .filter_map(|part| match part {
            Part::Image { data, path, .. } => Some((data.clone(), path.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        images,
        vec![(PNG.to_vec(), format!("/{}", stored.display()))],
        "only the image in the store is attached"
    );
    let text: String = content
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    for literal in [
        reference(&outside),
        reference(&not_an_image),
        reference(&link),
    ] {
        assert!(text.contains(&literal), "{literal} stays text: {text}");
    }
    // Another tool's result is sent verbatim, as before.
    assert_eq!(
        messages[4].parts,
        vec![Part::ToolResult {
            tool_use_id: "toolu_b".into(),
            content: vec![Part::text(result)],
            is_error: false,
        }]
    );
}

#[test]
fn job_results_become_text() {
    let host = TestHost::new();
    let evaluation = host.eval(concat!(
        "@You:\nbuild\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{}\n```\n\n",
        "@You:\n**Tool Result:** `toolu_1` (job=job_k7x2m9qa)\n```\nRunning as a background job `job_k7x2m9qa`.\n```\n\n",
        "@Assistant:\nWaiting.\n\n@You:\n**Job Result:** `job_k7x2m9qa`\n```\n    Finished `release` profile\n```\n\n**Job Result:** `job_lost1` (error)\n```\nJob lost: session ended before completion.\n```\n",
    ));
    assert_clean(&evaluation);
    assert_eq!(
        text_of(&evaluation, 4),
        "Job result for job_k7x2m9qa:\n    Finished `release` profile\n\nJob result for job_lost1 (failed):\nJob lost: session ended before completion."
    );
}

#[test]
fn absolute_references_use_a_double_slash() {
    // Seed: `Check the logs at @//var/log/app.log.`
    let host = TestHost::new();
    let log = host.write("var/log/app.log", "started\n");
    let absolute = log.display().to_string();
    let evaluation = host.eval(&format!("@You:\nCheck the logs at @/{absolute}.\n"));
    assert_clean(&evaluation);
    let parts = &evaluation.conversation.messages[0].parts;
    assert!(
        matches!(&parts[1], Part::TextFile { text, .. } if text == "started\n"),
        "{parts:#?}"
    );
    assert_eq!(parts[2], Part::text("."));
}

#[test]
fn a_crlf_chat_reaches_the_provider_with_lf_line_ends() {
    let host = TestHost::new();
    let evaluation = host.eval(
        "@System:\r\nBe brief.\r\nVery.\r\n\r\n@You:\r\nfirst line\r\nsecond {{ 1 + 1 }}\r\n",
    );
    assert_clean(&evaluation);
    assert_eq!(common::system_text(&evaluation), "Be brief.\nVery.");
    assert_eq!(text_of(&evaluation, 0), "first line\nsecond 2");
}

#[test]
fn tool_results_of_a_crlf_chat_reach_the_provider_with_lf_line_ends() {
    let host = TestHost::new();
    let evaluation = host.eval(
        "@You:\r\nrun\r\n\r\n@Assistant:\r\n**Tool Use:** `bash` (`toolu_b`)\r\n```json\r\n{}\r\n```\r\n\r\n@You:\r\n**Tool Result:** `toolu_b`\r\n```\r\na\r\nb\r\n```\r\n",
    );
    assert_clean(&evaluation);
    assert_eq!(
        evaluation.conversation.messages[2].parts,
        vec![Part::ToolResult {
            tool_use_id: "toolu_b".into(),
            content: vec![Part::text("a\nb")],
            is_error: false,
        }]
    );
}
