//! The stable JSON of the conversation (`flemmad parse --eval --json`, protocol/eval.md) and of
//! stream events: tags, defaults, base64 attachments, and errors instead of panics on bad input.

use flemma_conversation::{
    Conversation, Message, Part, Parts, Role, SourceSpan, StopReason, StreamEvent,
    ThinkingSignature, Usage,
};
use serde_json::{Value, json};

fn round_trip<T>(value: &T) -> Value
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_value(value).unwrap_or_else(|e| panic!("{e}"));
    let back: T = serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(&back, value);
    json
}

#[test]
fn parts_are_tagged_by_type_in_snake_case() {
    assert_eq!(
        round_trip(&Part::text("hi")),
        json!({"type": "text", "text": "hi"})
    );
    let use_json = round_trip(&Part::ToolUse {
        id: "t1".into(),
        name: "flemma.jobs.status".into(),
        input: json!({"job_id": "job_1"}),
        raw_input: "{\"job_id\":\"job_1\"}".into(),
    });
    assert_eq!(use_json["type"], "tool_use");
    assert_eq!(use_json["raw_input"], "{\"job_id\":\"job_1\"}");
    let result = round_trip(&Part::ToolResult {
        tool_use_id: "t1".into(),
        content: vec![Part::text("running")],
        is_error: true,
    });
    assert_eq!(
        result,
        json!({"type": "tool_result", "tool_use_id": "t1",
               "content": [{"type": "text", "text": "running"}], "is_error": true})
    );
    let file = round_trip(&Part::TextFile {
        mime: "text/plain".into(),
        text: "x".into(),
        path: "./x.txt".into(),
    });
    assert_eq!(file["type"], "text_file");
}

#[test]
fn attachments_are_base64_and_bad_base64_is_an_error() {
    let image = Part::Image {
        mime: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G', 0, 255],
        path: "./a.png".into(),
    };
    let json = round_trip(&image);
    assert_eq!(json["data"], "iVBORwD/");
    let pdf = round_trip(&Part::Pdf {
        data: Vec::new(),
        path: "./empty.pdf".into(),
    });
    assert_eq!(pdf["data"], "");
    let bad = json!({"type": "image", "mime": "image/png", "data": "not base64!", "path": "a"});
    let error = serde_json::from_value::<Part>(bad).unwrap_err();
    assert!(error.to_string().contains("Invalid"), "{error}");
}

#[test]
fn thinking_defaults_to_unsigned_and_not_redacted() {
    let part: Part = serde_json::from_value(json!({"type": "thinking", "text": "hmm"}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        part,
        Part::Thinking {
            text: "hmm".into(),
            signature: None,
            redacted: false
        }
    );
    let signed = round_trip(&Part::Thinking {
        text: "hmm".into(),
        signature: Some(ThinkingSignature {
            provider: "anthropic".into(),
            value: "sig==".into(),
        }),
        redacted: false,
    });
    assert_eq!(
        signed["signature"],
        json!({"provider": "anthropic", "value": "sig=="})
    );
    let unsigned = serde_json::to_value(Part::Thinking {
        text: "x".into(),
        signature: None,
        redacted: true,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(unsigned.get("signature").is_none(), "{unsigned}");
    // A tool result without `is_error` is not an error.
    let result: Part =
        serde_json::from_value(json!({"type": "tool_result", "tool_use_id": "t", "content": []}))
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        result,
        Part::ToolResult {
            is_error: false,
            ..
        }
    ));
}

#[test]
fn a_conversation_keeps_roles_parts_and_spans() {
    let conversation = Conversation {
        system: vec![Part::text("be brief")],
        messages: vec![
            Message {
                role: Role::User,
                parts: Parts::from(vec![Part::text("hi")]),
                span: Some(SourceSpan { start: 0, end: 9 }),
            },
            Message {
                role: Role::Assistant,
                parts: Parts::from(vec![Part::text("hello")]),
                span: None,
            },
        ],
    };
    let json = round_trip(&conversation);
    assert_eq!(json["messages"][0]["role"], "user");
    assert_eq!(json["messages"][0]["span"], json!({"start": 0, "end": 9}));
    assert_eq!(json["messages"][1]["role"], "assistant");
    assert!(json["messages"][1].get("span").is_none(), "{json}");
    let unknown_role = json!({"system": [], "messages": [{"role": "tool", "parts": []}]});
    assert!(serde_json::from_value::<Conversation>(unknown_role).is_err());
}

#[test]
fn stream_events_and_stop_reasons_have_stable_tags() {
    assert_eq!(
        round_trip(&StreamEvent::TextDelta { text: "He".into() }),
        json!({"type": "text_delta", "text": "He"})
    );
    assert_eq!(
        round_trip(&StreamEvent::ToolCallArgsDelta {
            index: 0,
            json: "{\"a\":".into()
        }),
        json!({"type": "tool_call_args_delta", "index": 0, "json": "{\"a\":"})
    );
    assert_eq!(
        round_trip(&StreamEvent::Stop {
            reason: StopReason::EndTurn
        }),
        json!({"type": "stop", "reason": "end_turn"})
    );
    assert_eq!(
        round_trip(&StopReason::Refusal {
            reason: "policy".into()
        }),
        json!({"refusal": {"reason": "policy"}})
    );
    assert_eq!(
        round_trip(&StopReason::ContextWindowExceeded),
        json!("context_window_exceeded")
    );
    let usage = round_trip(&StreamEvent::Usage {
        usage: Usage {
            input_tokens: 3,
            ..Usage::default()
        },
    });
    assert_eq!(usage["usage"]["input_tokens"], 3);
    assert!(serde_json::from_value::<StreamEvent>(json!({"type": "teleport"})).is_err());
}
