//! Thinking round trips: a recorded stream is decoded, assembled into the assistant turn the
//! way the `.chat` writer keeps it, and sent back; the provider's native blocks must come back
//! unmodified and in place.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use flemma_conversation::{Conversation, Message, Part, Role, StreamEvent};
use flemma_wire::{ProviderKind, RequestOptions, build_request, decoder};
use serde_json::{Value, json};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/streams/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Assembles decoded events like the writer does: text and tool uses in order, thinking
/// (with its signature) at the end, redacted blocks after it.
fn assemble(kind: ProviderKind, name: &str) -> Message {
    let mut d = decoder(kind);
    let mut events = d.feed(&fixture(name));
    events.extend(d.finish());
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut thinking = String::new();
    let mut signature = None;
    let mut redacted = Vec::new();
    let mut calls: Vec<(String, String)> = Vec::new();
    for event in events {
        match event {
            StreamEvent::TextDelta { text: t } => text.push_str(&t),
            StreamEvent::ThinkingDelta { text: t } => thinking.push_str(&t),
            StreamEvent::ThinkingSignature { signature: s } => {
                signature.get_or_insert(s);
            }
            StreamEvent::RedactedThinking { data } => redacted.push(data),
            StreamEvent::ToolCallStart { id, name, .. } => {
                if !text.is_empty() {
                    parts.push(Part::text(std::mem::take(&mut text)));
                }
                calls.push((id, name));
            }
            StreamEvent::ToolCallEnd { arguments, .. } => {
                let (id, name) = calls.remove(0);
                parts.push(Part::ToolUse {
                    id,
                    name,
                    input: serde_json::from_str(&arguments).unwrap(),
                    raw_input: arguments,
                });
            }
            _ => {}
        }
    }
    if !text.is_empty() {
        parts.push(Part::text(text));
    }
    if !thinking.is_empty() || signature.is_some() {
        parts.push(Part::Thinking {
            text: thinking,
            signature,
            redacted: false,
        });
    }
    for data in redacted {
        parts.push(Part::Thinking {
            text: data,
            signature: None,
            redacted: true,
        });
    }
    Message {
        role: Role::Assistant,
        parts: parts.into(),
        span: None,
    }
}

fn second_request(kind: ProviderKind, assistant: Message) -> Value {
    let results: Vec<Part> = assistant
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolUse { id, .. } => Some(Part::ToolResult {
                tool_use_id: id.clone(),
                content: vec![Part::text("5")],
                is_error: false,
            }),
            _ => None,
        })
        .collect();
    let mut messages = vec![
        Message {
            role: Role::User,
            parts: vec![Part::text("Go")].into(),
            span: None,
        },
        assistant,
    ];
    if !results.is_empty() {
        messages.push(Message {
            role: Role::User,
            parts: results.into(),
            span: None,
        });
    }
    let conversation = Conversation {
        system: vec![],
        messages,
    };
    let options = RequestOptions {
        model: "m".into(),
        max_tokens: 1000,
        cache_retention: flemma_wire::CacheRetention::None,
        ..RequestOptions::default()
    };
    let built = build_request(kind, &conversation, &options).unwrap();
    serde_json::from_slice(&built.request.body).unwrap()
}

#[test]
fn anthropic_signed_thinking_comes_back_first_and_unmodified() {
    let assistant = assemble(ProviderKind::Anthropic, "anthropic_thinking");
    let body = second_request(ProviderKind::Anthropic, assistant);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "The user is asking for weather in Florence.",
             "signature": "EtYDCkYICxgCKkAVHEWRYo6R...base64..."},
            {"type": "text", "text": "It is 40 °C in Florence."},
        ])
    );
}

#[test]
fn anthropic_redacted_thinking_comes_back() {
    let assistant = assemble(ProviderKind::Anthropic, "composed_anthropic_redacted_error");
    let body = second_request(ProviderKind::Anthropic, assistant);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/"},
            {"type": "text", "text": "Partial"},
        ])
    );
}

#[test]
fn openai_reasoning_item_is_put_back_before_the_function_call() {
    let assistant = assemble(ProviderKind::OpenAi, "composed_responses_reasoning_call");
    let body = second_request(ProviderKind::OpenAi, assistant);
    let input = body["input"].as_array().unwrap();
    assert_eq!(
        input[1],
        json!({"id":"rs_017e","type":"reasoning","content":[],"encrypted_content":"gAAAAABqPBJWAIvE...FINAL","summary":[{"type":"summary_text","text":"Need the weather tool."}]})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "call_w1", "name": "flemma__jobs__status", "arguments": "{\"job_id\":\"j1\"}"})
    );
    assert_eq!(input[3]["type"], "function_call_output");
    // The item is replayed byte for byte as it was streamed.
    let text = serde_json::to_string(&body).unwrap();
    let stream = String::from_utf8(fixture("composed_responses_reasoning_call")).unwrap();
    let item_json = r#"{"id":"rs_017e","type":"reasoning","content":[],"encrypted_content":"gAAAAABqPBJWAIvE...FINAL","summary":[{"type":"summary_text","text":"Need the weather tool."}]}"#;
    assert!(stream.contains(item_json) && text.contains(item_json));
}

#[test]
fn gemini_signature_goes_back_on_the_first_call_and_ids_only_when_native() {
    let assistant = assemble(ProviderKind::Gemini, "gemini_parallel");
    let body = second_request(ProviderKind::Gemini, assistant);
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"functionCall": {"id": "8hd01vsf", "name": "add", "args": {"a": 2, "b": 3}}, "thoughtSignature": "EsINCr8NAb4+9vve..."},
            {"functionCall": {"id": "k0srpqrc", "name": "multiply", "args": {"b": 3, "a": 2}}},
        ]})
    );
    assert_eq!(
        body["contents"][2]["parts"][1],
        json!({"functionResponse": {"id": "k0srpqrc", "name": "multiply", "response": {"output": "5"}}})
    );

    // Gemini 2.5: no provider id, the synthetic urn id is not sent and the name is recovered.
    let assistant = assemble(ProviderKind::Gemini, "gemini_thinking");
    let body = second_request(ProviderKind::Gemini, assistant);
    assert_eq!(
        body["contents"][1]["parts"],
        json!([
            {"functionCall": {"name": "weather", "args": {"location": "Florence, Italy"}}, "thoughtSignature": "CiQBvj72+y6VX8BA..."},
        ])
    );
    assert_eq!(
        body["contents"][2]["parts"][0],
        json!({"functionResponse": {"name": "weather", "response": {"output": "5"}}})
    );
}

#[test]
fn gemini_thinking_replayed_to_anthropic_is_foreign_text_with_mapped_ids() {
    let assistant = assemble(ProviderKind::Gemini, "gemini_thinking");
    let body = second_request(ProviderKind::Anthropic, assistant);
    let content = body["messages"][1]["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "text");
    // Plain prose ending with a `---` line (Flemma 0.14), never `<thinking>` tags.
    let text = content[0]["text"].as_str().unwrap();
    assert!(text.starts_with("**Determining"), "{text}");
    assert!(text.ends_with("\n\n---"), "{text}");
    assert!(!text.contains("<thinking>"), "{text}");
    let id = content[1]["id"].as_str().unwrap();
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "{id}"
    );
    assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], id);
}
