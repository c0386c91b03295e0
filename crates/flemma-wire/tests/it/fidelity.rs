//! What the model sent reaches the next request byte for byte: model text and thinking are
//! rendered into a `.chat` file (escaped where they would read as structure), read back through
//! parse + evaluate, and built into the next request.

use std::sync::Arc;

use flemma_conversation::{Part, Role, StreamEvent, ThinkingSignature};
use flemma_template::{EvalOptions, FsHost, evaluate};
use flemma_wire::render::{ReplyOutcome, ReplyRenderer};
use flemma_wire::{CacheRetention, ProviderKind, RequestOptions, Thinking, build_request};
use proptest::prelude::*;
use serde_json::Value;

/// Lines that are structure somewhere (outside fences, inside them, in thinking) or that look
/// like the escape itself, plus ordinary text.
const LINES: &[&str] = &[
    "plain words",
    "@You:",
    "@You: hello there",
    "@Assistant: hi",
    "@System: be terse",
    "@Note: a note",
    "\u{200B}starts with the escape",
    "\u{200B}\u{200B}@You:",
    "\u{200B}@Assistant:",
    "**Tool Use:** `bash` (`toolu_1`)",
    "**Tool Result:** `toolu_1`",
    "<thinking>",
    "</thinking>",
    "<thinking anthropic:signature=\"x\"/>",
    "<!-- flemma:aborted: Response interrupted by the user. -->",
    "{{ not_a_template }}",
    "text then @You: inline",
    "    indented code",
    "",
];

fn model_lines() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        4 => proptest::sample::select(LINES).prop_map(str::to_string),
        1 => proptest::collection::vec(proptest::sample::select(LINES), 0..4)
            .prop_map(|inner| format!("```md\n{}\n```", inner.join("\n"))),
    ];
    proptest::collection::vec(line, 1..8)
        .prop_map(|lines| lines.join("\n"))
        // The renderer drops leading and trailing line breaks of a reply (file layout), so
        // the text under test has none.
        // Text parts are trimmed at message and block boundaries by the conversation builder
        // (layout, not model text), so the text under test neither starts nor ends with spaces.
        .prop_map(|text| text.trim().to_string())
        .prop_filter("non-empty", |text| !text.trim().is_empty())
}

fn chunks(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut boundaries: Vec<usize> = cuts
        .iter()
        .map(|cut| cut % (text.len() + 1))
        .filter(|cut| text.is_char_boundary(*cut))
        .collect();
    boundaries.push(0);
    boundaries.push(text.len());
    boundaries.sort_unstable();
    boundaries.dedup();
    boundaries
        .windows(2)
        .map(|w| text[w[0]..w[1]].to_string())
        .collect()
}

fn rendered_file(text_pieces: &[String], thinking: &str) -> String {
    let mut renderer = ReplyRenderer::for_provider(ProviderKind::Anthropic, true);
    let mut reply = String::new();
    let mut events: Vec<StreamEvent> = vec![StreamEvent::ThinkingDelta {
        text: thinking.to_string(),
    }];
    events.push(StreamEvent::ThinkingSignature {
        signature: ThinkingSignature {
            provider: "anthropic".into(),
            value: "c2lnbmVk".into(),
        },
    });
    events.extend(text_pieces.iter().map(|piece| StreamEvent::TextDelta {
        text: piece.clone(),
    }));
    for event in &events {
        if let Some(text) = renderer.push(event) {
            reply.push_str(&text);
        }
    }
    reply.push_str(&renderer.finish(ReplyOutcome::Completed));
    format!("@You:\nquestion\n@Assistant:\n{reply}\n@You:\nnext\n")
}

fn options() -> RequestOptions {
    RequestOptions {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 4096,
        thinking: Thinking::Budget(2048),
        cache_retention: CacheRetention::None,
        anthropic_version: "2023-06-01".into(),
        ..RequestOptions::default()
    }
}

fn check(text: &str, thinking: &str, cuts: &[usize]) -> Result<(), TestCaseError> {
    let file = rendered_file(&chunks(text, cuts), thinking);
    let doc = flemma_syntax::parse(file.as_str());
    let evaluation = evaluate(&doc, Arc::new(FsHost::default()), &EvalOptions::default());
    let assistant = evaluation
        .conversation
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .ok_or_else(|| TestCaseError::fail(format!("no assistant message in {file:?}")))?;
    let sent_text = Part::joined_text(&assistant.parts);
    prop_assert_eq!(&sent_text, text, "file: {:?}", file);
    let sent_thinking: Vec<&str> = assistant
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Thinking { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    prop_assert_eq!(sent_thinking, vec![thinking], "file: {:?}", file);

    let built = build_request(
        ProviderKind::Anthropic,
        &evaluation.conversation,
        &options(),
    )
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let body: Value = serde_json::from_slice(&built.request.body)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let content = &body["messages"][1]["content"];
    prop_assert_eq!(&content[0]["type"], "thinking", "{}", content);
    prop_assert_eq!(content[0]["thinking"].as_str(), Some(thinking));
    prop_assert_eq!(content[0]["signature"].as_str(), Some("c2lnbmVk"));
    prop_assert_eq!(content[1]["text"].as_str(), Some(text), "{}", content);
    Ok(())
}

#[test]
fn escaped_lines_reach_the_request_as_the_model_sent_them() {
    check(
        "@You: hello there\n\u{200B}mine\n```md\n**Tool Use:** `a` (`b`)\n```",
        "</thinking>\n@Assistant: x\n\u{200B}kept",
        &[3, 20],
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_model_text_and_thinking_reach_the_next_request_byte_identical(
        text in model_lines(),
        thinking in model_lines(),
        cuts in proptest::collection::vec(0usize..400, 0..6),
    ) {
        check(&text, &thinking, &cuts)?;
    }
}
