//! The Gemini API and Vertex wire formats, over real HTTP.

use crate::common;

use common::{events, post};
use flemma_mock_provider::{Failure, MockProvider, MockUsage, Turn, WireFormat};
use serde_json::{Value, json};

fn request() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
}

fn gemini_url(mock: &MockProvider) -> String {
    format!(
        "{}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        mock.base_url()
    )
}

fn vertex_url(mock: &MockProvider) -> String {
    format!(
        "{}/v1beta1/projects/proj/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        mock.base_url()
    )
}

async fn stream(url: &str, headers: &[(&str, &str)]) -> (String, Vec<Value>) {
    let answer = post(url, headers, &request()).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    let chunks = events(&answer.text, "\r\n\r\n")
        .iter()
        .map(|e| e.json())
        .collect();
    (answer.text, chunks)
}

#[tokio::test]
async fn text_chunks_use_crlf_separators_and_running_usage() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Olá to you").usage(MockUsage {
        input_tokens: 11,
        output_tokens: 6,
        thinking_tokens: 21,
        ..MockUsage::default()
    }));
    let (text, chunks) = stream(&gemini_url(&mock), &[("x-goog-api-key", "k")]).await;
    assert!(text.starts_with("data: {\"candidates\""));
    assert!(!text.contains("event:"));
    assert_eq!(chunks.len(), 3);
    let mut previous = 0;
    for chunk in &chunks {
        let usage = &chunk["usageMetadata"];
        assert_eq!(usage["promptTokenCount"], 11);
        assert_eq!(usage["thoughtsTokenCount"], 21);
        let candidates = usage["candidatesTokenCount"].as_u64().unwrap();
        assert!(candidates >= previous);
        previous = candidates;
        assert_eq!(usage["totalTokenCount"], 11 + candidates + 21);
        assert_eq!(chunk["modelVersion"], "gemini-2.5-flash");
        assert_eq!(chunk["candidates"][0]["content"]["role"], "model");
    }
    assert_eq!(previous, 6);
    let joined: String = chunks
        .iter()
        .map(|c| {
            c["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(joined, "Olá to you");
    assert!(
        chunks[..2]
            .iter()
            .all(|c| c["candidates"][0].get("finishReason").is_none())
    );
    assert_eq!(chunks[2]["candidates"][0]["finishReason"], "STOP");
}

#[tokio::test]
async fn thoughts_and_signature_on_first_parallel_call_only() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .thinking("Determining the tool", "CiQBvj72sig")
            .tool_call("add", json!({"a": 2, "b": 3}))
            .tool_call("multiply", json!({"a": 2, "b": 3})),
    );
    let (_, chunks) = stream(&gemini_url(&mock), &[("x-goog-api-key", "k")]).await;
    let parts: Vec<Value> = chunks
        .iter()
        .map(|c| c["candidates"][0]["content"]["parts"][0].clone())
        .collect();
    assert!(
        parts
            .iter()
            .take_while(|p| p.get("thought").is_some())
            .all(|p| p["thought"] == true)
    );
    let calls: Vec<&Value> = parts
        .iter()
        .filter(|p| p.get("functionCall").is_some())
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["thoughtSignature"], "CiQBvj72sig");
    assert!(calls[1].get("thoughtSignature").is_none());
    for call in &calls {
        let id = call["functionCall"]["id"].as_str().unwrap();
        assert_eq!(id.len(), 8);
        assert!(call["functionCall"]["args"].is_object());
    }
    // Gemini 3 style: an empty text part with the finish reason closes a call turn.
    let last = chunks.last().unwrap();
    assert_eq!(
        last["candidates"][0]["content"]["parts"][0],
        json!({"text": ""})
    );
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
}

#[tokio::test]
async fn signature_on_last_text_part_without_calls() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::default().thinking("t", "SIG").and_text("two words"));
    let (_, chunks) = stream(&gemini_url(&mock), &[("x-goog-api-key", "k")]).await;
    let last = &chunks.last().unwrap()["candidates"][0]["content"]["parts"][0];
    assert_eq!(last["text"], " words");
    assert_eq!(last["thoughtSignature"], "SIG");
}

#[tokio::test]
async fn vertex_has_no_call_ids_and_traffic_type() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Hi there").tool_call("weather", json!({"location": "Florence"})));
    let (_, chunks) = stream(
        &vertex_url(&mock),
        &[("authorization", "Bearer ya29.token")],
    )
    .await;
    assert_eq!(
        chunks[0]["usageMetadata"],
        json!({"trafficType": "ON_DEMAND"})
    );
    assert!(chunks[0].get("createTime").is_some());
    let last = chunks.last().unwrap();
    let call = &last["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "weather");
    assert!(call.get("id").is_none());
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["trafficType"], "ON_DEMAND");
    assert_eq!(mock.requests()[0].format, WireFormat::Vertex);
}

#[tokio::test]
async fn mid_stream_errors_bare_line_and_data_event() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("test").failure(Failure::ErrorAfterSteps));
    let answer = post(&gemini_url(&mock), &[], &request()).await;
    let (data, bare) = answer.text.split_once("\r\n\r\n").unwrap();
    assert!(data.starts_with("data: {"));
    assert!(
        bare.starts_with("{\"error\""),
        "bare JSON line expected, got {bare:?}"
    );
    let error: Value = serde_json::from_str(bare.trim_end()).unwrap();
    assert_eq!(error["error"]["status"], "INTERNAL");

    mock.push(Turn::text("test").failure(Failure::ErrorEventAfterSteps));
    let (_, chunks) = stream(&gemini_url(&mock), &[]).await;
    assert_eq!(chunks.last().unwrap()["error"]["code"], 500);
}

#[tokio::test]
async fn rate_limit_has_retry_info_and_non_sse_variants() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::failing(Failure::Http {
        status: 429,
        retry_after: Some("41".into()),
        retry_after_ms: None,
    }));
    let answer = post(&gemini_url(&mock), &[], &request()).await;
    assert_eq!(answer.status, 429);
    let error = answer.json();
    assert_eq!(error["error"]["status"], "RESOURCE_EXHAUSTED");
    let details = error["error"]["details"].as_array().unwrap();
    assert!(
        details
            .iter()
            .any(|d| d["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
                && d["retryDelay"] == "41s")
    );

    mock.push(Turn::failing(Failure::Http {
        status: 503,
        retry_after: None,
        retry_after_ms: None,
    }));
    let answer = post(&vertex_url(&mock), &[], &request()).await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.json()["error"]["status"], "UNAVAILABLE");

    // Without alt=sse: a JSON array; :generateContent: one object with merged parts.
    mock.push(Turn::text("a b"));
    let url = format!(
        "{}/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        mock.base_url()
    );
    let array = post(&url, &[], &request()).await.json();
    assert_eq!(array.as_array().unwrap().len(), 2);
    mock.push(Turn::text("a b"));
    let url = format!(
        "{}/v1beta/models/gemini-2.5-flash:generateContent",
        mock.base_url()
    );
    let whole = post(&url, &[], &request()).await.json();
    assert_eq!(
        whole["candidates"][0]["content"]["parts"],
        json!([{"text": "a b"}])
    );

    let url = format!(
        "{}/v1beta/models/gemini-2.5-flash:countTokens",
        mock.base_url()
    );
    assert!(
        post(&url, &[], &request()).await.json()["totalTokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    let models = common::get(&format!("{}/v1beta/models", mock.base_url()), &[])
        .await
        .json();
    assert_eq!(models["models"][0]["name"], "models/gemini-2.5-flash");
}
