//! The Anthropic Messages wire format, over real HTTP.

use crate::common;

use common::{events, post};
use flemma_mock_provider::{MockProvider, MockStop, MockUsage, Turn, WireFormat};
use serde_json::{Value, json};

const HEADERS: &[(&str, &str)] = &[
    ("x-api-key", "sk-ant-test"),
    ("anthropic-version", "2023-06-01"),
];

fn request(text: &str) -> Value {
    json!({"model": "claude-sonnet-4-20250514", "max_tokens": 1024, "stream": true,
           "messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn plain_text_stream_has_the_real_event_order_and_headers() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Hello there, friend!").usage(MockUsage {
        input_tokens: 16,
        output_tokens: 12,
        ..MockUsage::default()
    }));
    let answer = post(
        &format!("{}/v1/messages", mock.base_url()),
        HEADERS,
        &request("hi"),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert!(answer.header("request-id").unwrap().starts_with("req_"));
    assert!(
        answer
            .header("anthropic-ratelimit-requests-limit")
            .is_some()
    );

    let events = events(&answer.text, "\n\n");
    let names: Vec<&str> = events.iter().map(|e| e.name.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for event in &events {
        // The JSON `type` always equals the SSE event name.
        assert_eq!(event.json()["type"], event.name.as_deref().unwrap());
    }
    let start = events[0].json();
    assert!(
        start["message"]["id"]
            .as_str()
            .unwrap()
            .starts_with("msg_01")
    );
    assert_eq!(start["message"]["model"], "claude-sonnet-4-20250514");
    assert_eq!(start["message"]["usage"]["input_tokens"], 16);
    assert_eq!(events[2].data, r#"{"type": "ping"}"#);
    let text: String = events[3..6]
        .iter()
        .map(|e| e.json()["delta"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Hello there, friend!");
    let delta = events[7].json();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(
        delta["usage"],
        json!({"input_tokens": 16, "cache_creation_input_tokens": 0,
                                       "cache_read_input_tokens": 0, "output_tokens": 12})
    );
    assert!(answer.text.starts_with("event: message_start\ndata: {"));
    mock.shutdown().await;
}

#[tokio::test]
async fn thinking_with_signature_then_text() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .thinking("Let me think.", "EtYDsig==")
            .and_text("Answer."),
    );
    let answer = post(
        &format!("{}/v1/messages", mock.base_url()),
        HEADERS,
        &request("q"),
    )
    .await;
    let events = events(&answer.text, "\n\n");
    let deltas: Vec<Value> = events
        .iter()
        .filter(|e| e.name.as_deref() == Some("content_block_delta"))
        .map(|e| e.json())
        .collect();
    assert_eq!(
        events[1].json()["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(events[2].name.as_deref(), Some("ping"));
    let thinking: Vec<&Value> = deltas.iter().filter(|d| d["index"] == 0).collect();
    let n = thinking.len();
    // ... text deltas, then an empty thinking_delta, then the signature.
    assert_eq!(
        thinking[n - 2]["delta"],
        json!({"type": "thinking_delta", "thinking": ""})
    );
    assert_eq!(
        thinking[n - 1]["delta"],
        json!({"type": "signature_delta", "signature": "EtYDsig=="})
    );
    let joined: String = thinking[..n - 2]
        .iter()
        .map(|d| d["delta"]["thinking"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(joined, "Let me think.");
    assert!(
        deltas
            .iter()
            .any(|d| d["index"] == 1 && d["delta"]["text"] == "Answer.")
    );
}

#[tokio::test]
async fn redacted_thinking_has_no_deltas() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::default().redacted_thinking("EmwKAhgB").and_text("ok"));
    let answer = post(
        &format!("{}/v1/messages", mock.base_url()),
        HEADERS,
        &request("q"),
    )
    .await;
    let events = events(&answer.text, "\n\n");
    assert_eq!(
        events[1].json()["content_block"],
        json!({"type": "redacted_thinking", "data": "EmwKAhgB"})
    );
    assert_eq!(events[2].name.as_deref(), Some("ping"));
    assert_eq!(events[3].name.as_deref(), Some("content_block_stop"));
}

#[tokio::test]
async fn parallel_tool_calls_are_sequential_blocks() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::text("I'll add and multiply.")
            .tool_call("add", json!({"a": 2, "b": 3}))
            .tool_call_with_id("multiply", "toolu_fixed", json!({"a": 2, "b": 3})),
    );
    let answer = post(
        &format!("{}/v1/messages", mock.base_url()),
        HEADERS,
        &request("q"),
    )
    .await;
    let events = events(&answer.text, "\n\n");
    let mut current: Option<u64> = None;
    let mut arguments = vec![String::new(); 3];
    let mut first_partial = Vec::new();
    let mut ids = Vec::new();
    for event in &events {
        let data = event.json();
        match event.name.as_deref().unwrap() {
            "content_block_start" => {
                assert!(current.is_none(), "blocks must not interleave");
                current = data["index"].as_u64();
                if data["content_block"]["type"] == "tool_use" {
                    ids.push(data["content_block"]["id"].as_str().unwrap().to_string());
                    assert_eq!(data["content_block"]["input"], json!({}));
                    first_partial.push(None);
                }
            }
            "content_block_delta" => {
                assert_eq!(data["index"].as_u64(), current);
                if let Some(partial) = data["delta"]["partial_json"].as_str() {
                    let slot = first_partial.last_mut().unwrap();
                    if slot.is_none() {
                        *slot = Some(partial.to_string());
                    }
                    arguments[data["index"].as_u64().unwrap() as usize].push_str(partial);
                }
            }
            "content_block_stop" => current = None,
            _ => {}
        }
    }
    assert_eq!(first_partial, [Some(String::new()), Some(String::new())]);
    assert!(
        ids[0].starts_with("toolu_01") && ids[0].len() == 30,
        "{}",
        ids[0]
    );
    assert_eq!(ids[1], "toolu_fixed");
    for args in &arguments[1..] {
        let parsed: Value = serde_json::from_str(args).unwrap();
        assert_eq!(parsed, json!({"a": 2, "b": 3}));
    }
    let delta = events[events.len() - 2].json();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn padding_refusal_and_legacy_usage() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::text("No.")
            .stop(MockStop::Refusal("not allowed".into()))
            .anthropic_padding(true)
            .anthropic_legacy_usage(true)
            .usage(MockUsage {
                output_tokens: 7,
                thinking_tokens: 3,
                ..MockUsage::default()
            }),
    );
    let answer = post(
        &format!("{}/v1/messages", mock.base_url()),
        HEADERS,
        &request("q"),
    )
    .await;
    assert!(
        answer.text.contains("   }\n\n"),
        "no padding in {}",
        answer.text
    );
    let events = events(&answer.text, "\n\n");
    let delta = events[events.len() - 2].json();
    assert_eq!(delta["delta"]["stop_reason"], "refusal");
    assert_eq!(delta["delta"]["stop_details"]["explanation"], "not allowed");
    assert_eq!(delta["usage"], json!({"output_tokens": 10}));
}

#[tokio::test]
async fn non_streaming_message_count_tokens_and_models() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .thinking("hmm", "sig")
            .and_text("Hi")
            .tool_call("t", json!({"x": 1})),
    );
    let mut body = request("q");
    body["stream"] = json!(false);
    let answer = post(&format!("{}/v1/messages", mock.base_url()), HEADERS, &body).await;
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let message = answer.json();
    assert_eq!(
        message["content"][0],
        json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})
    );
    assert_eq!(message["content"][1], json!({"type": "text", "text": "Hi"}));
    assert_eq!(message["content"][2]["input"], json!({"x": 1}));
    assert_eq!(message["stop_reason"], "tool_use");

    let count = post(
        &format!("{}/v1/messages/count_tokens", mock.base_url()),
        HEADERS,
        &body,
    )
    .await;
    assert!(count.json()["input_tokens"].as_u64().unwrap() > 0);
    let models = common::get(&format!("{}/v1/models", mock.base_url()), HEADERS).await;
    let models = models.json();
    assert_eq!(models["data"][0]["type"], "model");
    assert_eq!(models["has_more"], false);
    let recorded = mock.requests();
    assert_eq!(recorded.len(), 3);
    assert!(recorded.iter().all(|r| r.format == WireFormat::Anthropic));
}

#[tokio::test]
async fn claude_on_vertex_uses_the_path_model_and_body_version() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Hi from Vertex"));
    let url = format!(
        "{}/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-7-sonnet@20250219:streamRawPredict",
        mock.base_url()
    );
    let body = json!({"anthropic_version": "vertex-2023-10-16", "max_tokens": 100, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let answer = post(&url, &[("authorization", "Bearer ya29.token")], &body).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let events = events(&answer.text, "\n\n");
    let start = events[0].json();
    assert!(
        start["message"]["id"]
            .as_str()
            .unwrap()
            .starts_with("msg_vrtx_01")
    );
    assert_eq!(start["message"]["model"], "claude-3-7-sonnet@20250219");
    assert_eq!(events.last().unwrap().name.as_deref(), Some("message_stop"));

    let mut no_version = body.clone();
    no_version
        .as_object_mut()
        .unwrap()
        .remove("anthropic_version");
    let answer = post(&url, &[], &no_version).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "anthropic_version: Field required"
    );
    assert_eq!(mock.requests()[0].format, WireFormat::Anthropic);
}

#[tokio::test]
async fn stop_sequence_reports_the_requests_sequence() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("1, 2, 3").stop(MockStop::StopSequence));
    let mut body = request("count");
    body["stop_sequences"] = json!(["###", "END"]);
    let answer = post(&format!("{}/v1/messages", mock.base_url()), HEADERS, &body).await;
    let events = events(&answer.text, "\n\n");
    let delta = events[events.len() - 2].json();
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": "###"})
    );
}
