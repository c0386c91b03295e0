//! The recorded streams of providers.md (and composed edge cases) through the real decoders.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use base64::Engine as _;
use flemma_wire::{ProviderKind, StreamEvent, TRUNCATED_STREAM_MESSAGE, decoder};
use proptest::prelude::*;
use serde_json::{Value, json};

const FIXTURES: &[(&str, ProviderKind)] = &[
    ("anthropic_text", ProviderKind::Anthropic),
    ("anthropic_thinking", ProviderKind::Anthropic),
    ("anthropic_tools", ProviderKind::Anthropic),
    ("composed_anthropic_redacted_error", ProviderKind::Anthropic),
    ("composed_anthropic_refusal", ProviderKind::Anthropic),
    ("responses_text", ProviderKind::OpenAi),
    ("responses_reasoning_partial", ProviderKind::OpenAi),
    ("responses_tools", ProviderKind::OpenAi),
    ("composed_responses_reasoning_call", ProviderKind::OpenAi),
    ("composed_responses_failed", ProviderKind::OpenAi),
    ("composed_responses_incomplete", ProviderKind::OpenAi),
    ("composed_responses_error_event", ProviderKind::OpenAi),
    ("chat_text", ProviderKind::OpenAiCompatible),
    ("chat_llamacpp_thinking", ProviderKind::OpenAiCompatible),
    ("chat_tools", ProviderKind::OpenAiCompatible),
    ("composed_chat_reasoning_ollama", ProviderKind::Moonshot),
    ("composed_chat_error", ProviderKind::OpenAiCompatible),
    ("gemini_text", ProviderKind::Gemini),
    ("vertex_text", ProviderKind::Vertex),
    ("gemini_thinking", ProviderKind::Gemini),
    ("gemini_parallel", ProviderKind::Gemini),
    ("composed_gemini_bare_error", ProviderKind::Gemini),
    ("composed_gemini_blocked", ProviderKind::Gemini),
    ("composed_gemini_signature_text", ProviderKind::Vertex),
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/streams/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn kind_of(name: &str) -> ProviderKind {
    FIXTURES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
        .unwrap()
}

fn decode_chunks(kind: ProviderKind, bytes: &[u8], splits: &[usize]) -> Vec<StreamEvent> {
    let mut decoder = decoder(kind);
    let mut events = Vec::new();
    let mut start = 0;
    for &split in splits {
        let split = split.clamp(start, bytes.len());
        events.extend(decoder.feed(&bytes[start..split]));
        start = split;
    }
    events.extend(decoder.feed(&bytes[start..]));
    events.extend(decoder.finish());
    events
}

fn decode(name: &str) -> Value {
    let events = decode_chunks(kind_of(name), &fixture(name), &[]);
    serde_json::to_value(events).unwrap()
}

fn usage(input: u64, output: u64, thinking: u64, cache_read: u64, cache_write: u64) -> Value {
    json!({"type": "usage", "usage": {
        "input_tokens": input, "output_tokens": output, "thinking_tokens": thinking,
        "cache_read_tokens": cache_read, "cache_write_tokens": cache_write}})
}

fn text(t: &str) -> Value {
    json!({"type": "text_delta", "text": t})
}

fn thinking(t: &str) -> Value {
    json!({"type": "thinking_delta", "text": t})
}

fn signature(provider: &str, value: &str) -> Value {
    json!({"type": "thinking_signature", "signature": {"provider": provider, "value": value}})
}

fn start(index: usize, id: &str, name: &str) -> Value {
    json!({"type": "tool_call_start", "index": index, "id": id, "name": name})
}

fn args(index: usize, json: &str) -> Value {
    json!({"type": "tool_call_args_delta", "index": index, "json": json})
}

fn end(index: usize, arguments: &str) -> Value {
    json!({"type": "tool_call_end", "index": index, "arguments": arguments})
}

fn stop(reason: Value) -> Value {
    json!({"type": "stop", "reason": reason})
}

fn error(message: &str) -> Value {
    json!({"type": "error", "message": message})
}

fn refusal(reason: &str) -> Value {
    json!({"refusal": {"reason": reason}})
}

#[test]
fn anthropic_plain_text_with_ping_and_cumulative_usage() {
    assert_eq!(
        decode("anthropic_text"),
        json!([
            text("Olá"),
            text("!"),
            usage(16, 12, 0, 0, 0),
            stop(json!("end_turn"))
        ])
    );
}

#[test]
fn anthropic_thinking_skips_empty_delta_and_keeps_signature() {
    assert_eq!(
        decode("anthropic_thinking"),
        json!([
            thinking("The user is asking for"),
            thinking(" weather in Florence."),
            signature("anthropic", "EtYDCkYICxgCKkAVHEWRYo6R...base64..."),
            text("It is 40 °C in Florence."),
            usage(424, 119, 0, 0, 0),
            stop(json!("end_turn")),
        ])
    );
}

#[test]
fn anthropic_parallel_tools_with_empty_first_json_delta() {
    assert_eq!(
        decode("anthropic_tools"),
        json!([
            text("I'll add and multiply 2 and 3."),
            start(0, "toolu_01UYxUYC2zRPY8wiutnF48eP", "add"),
            args(0, "{\"a\": 2"),
            args(0, ", \"b\": 3}"),
            end(0, "{\"a\": 2, \"b\": 3}"),
            start(1, "toolu_01VaRx1jpWCvPhi7L4kywAcd", "multiply"),
            args(1, "{\"a\": 2, \"b\":"),
            args(1, " 3}"),
            end(1, "{\"a\": 2, \"b\": 3}"),
            usage(502, 137, 0, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn anthropic_redacted_padding_and_mid_stream_error() {
    assert_eq!(
        decode("composed_anthropic_redacted_error"),
        json!([
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/"},
            text("Partial"),
            usage(115, 1, 0, 100, 5),
            error("Anthropic stream error: Overloaded (overloaded_error)"),
        ])
    );
}

#[test]
fn anthropic_refusal_with_explanation_and_unknown_event() {
    assert_eq!(
        decode("composed_anthropic_refusal"),
        json!([
            usage(7, 3, 0, 0, 0),
            stop(refusal("This request was declined."))
        ])
    );
}

#[test]
fn anthropic_truncated_stream_is_an_error() {
    let bytes = fixture("anthropic_text");
    let cut = bytes.len() / 2;
    let events =
        serde_json::to_value(decode_chunks(ProviderKind::Anthropic, &bytes[..cut], &[])).unwrap();
    assert_eq!(
        events.as_array().unwrap().last().unwrap(),
        &error(TRUNCATED_STREAM_MESSAGE)
    );
}

#[test]
fn responses_plain_text_ignores_reasoning_without_encrypted_content() {
    assert_eq!(
        decode("responses_text"),
        json!([
            text("Oi"),
            text("!"),
            usage(19, 118, 64, 0, 0),
            stop(json!("end_turn"))
        ])
    );
}

fn reasoning_done_item_signature(fixture_name: &str) -> String {
    // The signature is base64 of the JSON of the `.done` item exactly as received.
    let bytes = fixture(fixture_name);
    let text = String::from_utf8(bytes).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("response.output_item.done") && l.contains("\"reasoning\""))
        .unwrap();
    let event: Value = serde_json::from_str(line.strip_prefix("data: ").unwrap()).unwrap();
    let item = event["item"].to_string();
    assert!(item.contains("FINAL") && !item.contains("PARTIAL"));
    base64::engine::general_purpose::STANDARD.encode(item)
}

#[test]
fn responses_reasoning_signature_uses_the_done_item() {
    let expected = reasoning_done_item_signature("responses_reasoning_partial");
    assert_eq!(
        decode("responses_reasoning_partial"),
        json!([
            thinking("**Getting weather info**\n\nI"),
            thinking(" need to call the weather tool."),
            signature("openai", &expected),
            error(TRUNCATED_STREAM_MESSAGE),
        ])
    );
}

#[test]
fn responses_parallel_calls_without_name_in_done() {
    assert_eq!(
        decode("responses_tools"),
        json!([
            start(0, "call_inViAUr9eV0GDtyOywkCxp59", "add"),
            args(0, "{\"a\":2,"),
            args(0, "\"b\":3}"),
            end(0, "{\"a\":2,\"b\":3}"),
            start(1, "call_Op66UUnzuOoKmgGeFJQJFTUY", "multiply"),
            args(1, "{\"a\":2,\"b\":3}"),
            end(1, "{\"a\":2,\"b\":3}"),
            usage(190, 60, 0, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn responses_reasoning_then_namespaced_call_with_cache_usage() {
    let expected = reasoning_done_item_signature("composed_responses_reasoning_call");
    assert_eq!(
        decode("composed_responses_reasoning_call"),
        json!([
            thinking("Need the weather tool."),
            signature("openai", &expected),
            start(0, "call_w1", "flemma.jobs.status"),
            args(0, "{\"job_id\":\"j1\"}"),
            end(0, "{\"job_id\":\"j1\"}"),
            usage(81, 1035, 832, 64, 2),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn responses_failed_incomplete_and_error_event() {
    assert_eq!(
        decode("composed_responses_failed"),
        json!([error(
            "OpenAI stream error: Rate limit reached for gpt-5.1. Please try again in 11.054s. (rate_limit_exceeded)"
        )])
    );
    assert_eq!(
        decode("composed_responses_incomplete"),
        json!([
            text("Long"),
            usage(5, 9, 0, 0, 0),
            stop(json!("max_tokens"))
        ])
    );
    assert_eq!(
        decode("composed_responses_error_event"),
        json!([error(
            "OpenAI stream error: Something went wrong (server_error)"
        )])
    );
}

#[test]
fn chat_plain_text_with_usage_only_chunk_and_done() {
    assert_eq!(
        decode("chat_text"),
        json!([
            text("Olá"),
            text("!"),
            usage(19, 75, 64, 0, 0),
            stop(json!("end_turn"))
        ])
    );
}

#[test]
fn chat_llamacpp_reasoning_content_and_tool_call() {
    assert_eq!(
        decode("chat_llamacpp_thinking"),
        json!([
            thinking("We need to call weather."),
            start(0, "g2KOIWzn", "weather"),
            args(0, "{\""),
            args(0, "location\":\"Florence, Italy\"}"),
            end(0, "{\"location\":\"Florence, Italy\"}"),
            usage(139, 42, 0, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn chat_parallel_calls_accumulated_by_index() {
    assert_eq!(
        decode("chat_tools"),
        json!([
            start(0, "call_8ElDxJj6u7IUDEwQIrwFbveM", "add"),
            args(0, "{\"a\": 2, "),
            args(0, "\"b\": 3}"),
            start(1, "call_HEZOX3JzspqFubADMNdWn12E", "multiply"),
            args(1, "{\"a\": 2, \"b\": 3}"),
            end(0, "{\"a\": 2, \"b\": 3}"),
            end(1, "{\"a\": 2, \"b\": 3}"),
            usage(190, 379, 320, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn chat_ollama_reasoning_whole_calls_and_no_done() {
    assert_eq!(
        decode("composed_chat_reasoning_ollama"),
        json!([
            thinking("Let me think."),
            start(0, "call_x", "flemma.jobs.status"),
            args(0, "{\"job_id\":\"j\"}"),
            start(1, "call_y", "read"),
            args(1, "{}"),
            end(0, "{\"job_id\":\"j\"}"),
            end(1, "{}"),
            usage(12, 8, 0, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn chat_mid_stream_error_object() {
    assert_eq!(
        decode("composed_chat_error"),
        json!([
            text("Hel"),
            error(
                "stream error from the server: The server had an error while processing your request. Sorry about that!"
            ),
        ])
    );
}

#[test]
fn gemini_single_chunk_with_crlf_separators() {
    assert_eq!(
        decode("gemini_text"),
        json!([
            text("Olá!"),
            usage(11, 23, 21, 0, 0),
            stop(json!("end_turn"))
        ])
    );
}

#[test]
fn vertex_usage_repeated_last_one_wins() {
    assert_eq!(
        decode("vertex_text"),
        json!([
            text("Olá!"),
            text(" (pronounced \"oh-LAH\")"),
            usage(9, 45, 36, 0, 0),
            stop(json!("end_turn")),
        ])
    );
}

#[test]
fn gemini_thought_and_call_without_id_gets_synthetic_id() {
    let events = decode("gemini_thinking");
    let id = events[1]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("urn:flemma:tool:weather:"), "{id}");
    assert_eq!(id.len(), "urn:flemma:tool:weather:".len() + 12);
    assert!(
        id["urn:flemma:tool:weather:".len()..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
    );
    assert_eq!(
        events,
        json!([
            thinking(
                "**Determining the Weather Inquiry**\n\nI'll activate the `weather` tool…\n\n\n"
            ),
            start(0, &id, "weather"),
            args(0, "{\"location\":\"Florence, Italy\"}"),
            end(0, "{\"location\":\"Florence, Italy\"}"),
            signature("vertex", "CiQBvj72+y6VX8BA..."),
            usage(54, 76, 62, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn gemini_synthetic_ids_are_unique_per_call() {
    let bytes = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"read\",\"args\":{}}},{\"functionCall\":{\"name\":\"read\",\"args\":{}}}]},\"finishReason\":\"STOP\"}],\"responseId\":\"x\"}\n\n";
    let events = serde_json::to_value(decode_chunks(ProviderKind::Gemini, bytes, &[])).unwrap();
    let ids: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool_call_start")
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn gemini_parallel_calls_signature_on_first_only() {
    assert_eq!(
        decode("gemini_parallel"),
        json!([
            start(0, "8hd01vsf", "add"),
            args(0, "{\"a\":2,\"b\":3}"),
            end(0, "{\"a\":2,\"b\":3}"),
            signature("vertex", "EsINCr8NAb4+9vve..."),
            start(1, "k0srpqrc", "multiply"),
            args(1, "{\"b\":3,\"a\":2}"),
            end(1, "{\"b\":3,\"a\":2}"),
            usage(157, 470, 438, 0, 0),
            stop(json!("tool_use")),
        ])
    );
}

#[test]
fn gemini_bare_json_error_line() {
    assert_eq!(
        decode("composed_gemini_bare_error"),
        json!([
            text("test"),
            error("Gemini stream error: Error (INTERNAL 500)")
        ])
    );
}

#[test]
fn gemini_prompt_block_and_safety_finish_are_refusals() {
    assert_eq!(
        decode("composed_gemini_blocked"),
        json!([usage(8, 0, 0, 0, 0), stop(refusal("SAFETY"))])
    );
    assert_eq!(
        decode("composed_gemini_signature_text"),
        json!([
            text("Hi"),
            signature("vertex", "EpEBCo4B"),
            usage(4, 4, 3, 2, 0),
            stop(refusal("SAFETY")),
        ])
    );
}

#[test]
fn every_fixture_is_covered_by_the_table() {
    let dir = format!("{}/tests/fixtures/streams", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let stem = name.strip_suffix(".sse").unwrap();
        assert!(
            FIXTURES.iter().any(|(n, _)| *n == stem),
            "{stem} not in FIXTURES"
        );
    }
}

#[test]
fn every_stream_ends_with_exactly_one_stop_or_error() {
    for (name, kind) in FIXTURES {
        let events = decode_chunks(*kind, &fixture(name), &[]);
        let terminals = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Stop { .. } | StreamEvent::Error { .. }))
            .count();
        assert_eq!(terminals, 1, "{name}");
        assert!(
            matches!(
                events.last(),
                Some(StreamEvent::Stop { .. } | StreamEvent::Error { .. })
            ),
            "{name}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_chunking_gives_the_same_events(
        fixture_index in 0..FIXTURES.len(),
        mut splits in proptest::collection::vec(0usize..4000, 0..40),
    ) {
        let (name, kind) = FIXTURES[fixture_index];
        let bytes = fixture(name);
        splits.sort_unstable();
        let whole = decode_chunks(kind, &bytes, &[]);
        let chunked = decode_chunks(kind, &bytes, &splits);
        prop_assert_eq!(whole, chunked);
    }

    #[test]
    fn byte_by_byte_feeding_matches(fixture_index in 0..FIXTURES.len()) {
        let (name, kind) = FIXTURES[fixture_index];
        let bytes = fixture(name);
        let splits: Vec<usize> = (1..bytes.len()).collect();
        prop_assert_eq!(decode_chunks(kind, &bytes, &[]), decode_chunks(kind, &bytes, &splits));
    }
}

#[test]
fn chat_calls_without_index_are_split_by_id_and_missing_ids_are_generated() {
    let stream = concat!(
        "data: {\"id\":\"r1\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"read\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"id\":\"r1\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"id\":\"r1\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":5,\"function\":{\"name\":\"find\"}}]}}]}\n\n",
        "data: {\"id\":\"r1\",\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let events = serde_json::to_value(decode_chunks(
        ProviderKind::OpenAiCompatible,
        stream.as_bytes(),
        &[],
    ))
    .unwrap();
    let starts: Vec<(&str, &str)> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool_call_start")
        .map(|e| (e["id"].as_str().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert_eq!(starts.len(), 3);
    assert_eq!(starts[0], ("a", "read"));
    assert_eq!(starts[1], ("b", "ls"));
    assert!(starts[2].0.starts_with("call_") && starts[2].1 == "find");
    assert_eq!(
        events.as_array().unwrap().last().unwrap(),
        &stop(json!("tool_use"))
    );
}

#[test]
fn invalid_utf8_is_replaced_not_fatal() {
    let mut stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"a".to_vec();
    stream.push(0xff);
    stream.extend_from_slice(b"b\"}}]}\n\ndata: [DONE]\n\n");
    let events = decode_chunks(ProviderKind::OpenAiCompatible, &stream, &[]);
    assert_eq!(
        serde_json::to_value(events).unwrap(),
        json!([text("a\u{fffd}b"), stop(json!("end_turn"))])
    );
}

/// A stream whose second text delta is cut short (its JSON lacks the closing brace), in the
/// wire format of `kind`, with a third delta and the terminal events after it.
fn stream_with_a_malformed_delta(kind: ProviderKind) -> String {
    let frame = |event: Option<&str>, data: &str| match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    };
    let cut = |data: String| data[..data.len() - 1].to_owned();
    match kind {
        ProviderKind::Anthropic => {
            let delta = |text: &str| {
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}})
                .to_string()
            };
            [
                frame(Some("message_start"), r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#),
                frame(Some("content_block_start"), r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
                frame(Some("content_block_delta"), &delta("Kept")),
                frame(Some("content_block_delta"), &cut(delta(" lost"))),
                frame(Some("content_block_delta"), &delta(" after")),
                frame(Some("content_block_stop"), r#"{"type":"content_block_stop","index":0}"#),
                frame(Some("message_delta"), r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#),
                frame(Some("message_stop"), r#"{"type":"message_stop"}"#),
            ]
            .concat()
        }
        ProviderKind::OpenAi | ProviderKind::Codex => {
            let delta = |text: &str| {
                json!({"type": "response.output_text.delta", "output_index": 0, "delta": text})
                    .to_string()
            };
            [
                frame(Some("response.output_text.delta"), &delta("Kept")),
                frame(Some("response.output_text.delta"), &cut(delta(" lost"))),
                frame(Some("response.output_text.delta"), &delta(" after")),
                frame(Some("response.completed"), r#"{"type":"response.completed","response":{"usage":{"input_tokens":3,"output_tokens":3}}}"#),
            ]
            .concat()
        }
        ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
            let delta = |text: &str| {
                json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
                    .to_string()
            };
            [
                frame(None, &delta("Kept")),
                frame(None, &cut(delta(" lost"))),
                frame(None, &delta(" after")),
                frame(
                    None,
                    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                ),
                frame(None, "[DONE]"),
            ]
            .concat()
        }
        ProviderKind::Gemini | ProviderKind::Vertex => {
            let delta = |text: &str| {
                json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}]})
                    .to_string()
            };
            [
                frame(None, &delta("Kept")),
                frame(None, &cut(delta(" lost"))),
                frame(None, r#"{"candidates":[{"content":{"parts":[{"text":" after"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":3}}"#),
            ]
            .concat()
        }
    }
}

/// A malformed event cuts the reply where it stands, with an error that says so, in every
/// provider's decoder: its text is never lost without a word (issue 27), and nothing after it
/// is taken as part of the reply.
#[test]
fn a_malformed_event_ends_every_stream_with_an_error_that_says_so() {
    for kind in ProviderKind::ALL {
        let bytes = stream_with_a_malformed_delta(kind);
        // Fed whole and byte by byte: the same events.
        let splits: Vec<usize> = (1..bytes.len()).collect();
        for events in [
            decode_chunks(kind, bytes.as_bytes(), &[]),
            decode_chunks(kind, bytes.as_bytes(), &splits),
        ] {
            let texts: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::TextDelta { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(texts, ["Kept"], "{kind:?}: {events:?}");
            let Some(StreamEvent::Error { message }) = events.last() else {
                panic!("{kind:?} ends with an error: {events:?}");
            };
            assert!(
                message.contains("malformed stream event"),
                "{kind:?}: {message}"
            );
            assert!(
                message.contains("lost"),
                "{kind:?}: the event is quoted: {message}"
            );
            assert!(
                !events.iter().any(|e| matches!(e, StreamEvent::Stop { .. })),
                "{kind:?}: {events:?}"
            );
        }
    }
}

/// What a decoder may pass over: an empty `data:` field, and an event of a kind it does not
/// act on in a shape it does not know (a newer API's); an event it acts on in another shape is
/// an error.
#[test]
fn only_events_a_decoder_does_not_act_on_may_be_passed_over() {
    let anthropic = "event: ping\ndata: {\"type\":\"ping\",\"at\":{\"odd\":[1]}}\n\n\
                     event: message_start\ndata:\n\n\
                     event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
                     event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let events = decode_chunks(ProviderKind::Anthropic, anthropic.as_bytes(), &[]);
    assert!(
        matches!(events.last(), Some(StreamEvent::Stop { .. })),
        "{events:?}"
    );
    let responses = "data: {\"type\":\"response.future_thing\",\"delta\":{\"not\":\"a string\"}}\n\n\
                     data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n\
                     data: {\"type\":\"response.completed\",\"response\":{}}\n\n";
    let events = decode_chunks(ProviderKind::OpenAi, responses.as_bytes(), &[]);
    assert!(
        matches!(events.last(), Some(StreamEvent::Stop { .. })),
        "{events:?}"
    );
    // The same shape on an event the decoder acts on: the reply is cut.
    let wrong = "data: {\"type\":\"response.output_text.delta\",\"delta\":{\"text\":\"Hi\"}}\n\n";
    let events = decode_chunks(ProviderKind::OpenAi, wrong.as_bytes(), &[]);
    let Some(StreamEvent::Error { message }) = events.last() else {
        panic!("{events:?}");
    };
    assert!(
        message.contains("a `response.output_text.delta` event not in the expected shape"),
        "{message}"
    );
}
