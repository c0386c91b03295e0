//! The Chat Completions wire format, over real HTTP.

use crate::common;

use common::{events, post};
use flemma_mock_provider::{
    ChatReasoningField, Failure, MockConfig, MockProvider, MockStop, MockUsage, Turn,
};
use serde_json::{Value, json};

const HEADERS: &[(&str, &str)] = &[("authorization", "Bearer sk-test")];

fn request(include_usage: bool) -> Value {
    json!({"model": "gpt-5", "stream": true,
           "stream_options": {"include_usage": include_usage},
           "messages": [{"role": "user", "content": "hi"}]})
}

async fn stream(mock: &MockProvider, body: &Value) -> (String, Vec<Value>) {
    let answer = post(
        &format!("{}/v1/chat/completions", mock.base_url()),
        HEADERS,
        body,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(
        answer.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let events = events(&answer.text, "\n\n");
    assert!(
        events.iter().all(|e| e.name.is_none()),
        "chat streams have no event: lines"
    );
    let chunks = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| e.json())
        .collect();
    (answer.text, chunks)
}

#[tokio::test]
async fn plain_text_ends_with_usage_chunk_and_done() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Olá mundo!").usage(MockUsage {
        input_tokens: 19,
        output_tokens: 11,
        thinking_tokens: 64,
        ..MockUsage::default()
    }));
    let (text, chunks) = stream(&mock, &request(true)).await;
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": "", "refusal": null})
    );
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Olá mundo!");
    let id = chunks[0]["id"].clone();
    assert!(id.as_str().unwrap().starts_with("chatcmpl-"));
    assert!(
        chunks
            .iter()
            .all(|c| c["id"] == id && c["object"] == "chat.completion.chunk")
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    assert!(finish["usage"].is_null() && finish.get("usage").is_some());
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 19);
    assert_eq!(usage["usage"]["completion_tokens"], 75);
    assert_eq!(
        usage["usage"]["completion_tokens_details"]["reasoning_tokens"],
        64
    );

    // Without include_usage: no usage key at all, no usage chunk.
    mock.push(Turn::text("x"));
    let (_, chunks) = stream(&mock, &request(false)).await;
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn parallel_tool_calls_accumulate_by_index() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .tool_call("add", json!({"a": 2, "b": 3}))
            .tool_call("multiply", json!({"a": 2, "b": 3})),
    );
    let (_, chunks) = stream(&mock, &request(true)).await;
    assert!(chunks[0]["choices"][0]["delta"]["content"].is_null());
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for chunk in &chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if let Some(id) = call["id"].as_str() {
                assert_eq!(index, calls.len());
                assert_eq!(call["function"]["arguments"], "");
                calls.push((
                    id.to_string(),
                    call["function"]["name"].as_str().unwrap().to_string(),
                    String::new(),
                ));
            } else {
                calls[index]
                    .2
                    .push_str(call["function"]["arguments"].as_str().unwrap());
            }
        }
    }
    assert_eq!(calls.len(), 2);
    assert!(calls[0].0.starts_with("call_") && calls[0].0.len() == 29);
    assert_eq!(calls[1].1, "multiply");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        json!({"a": 2, "b": 3})
    );
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[tokio::test]
async fn reasoning_field_is_configurable() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .thinking("We need the tool.", "ignored")
            .and_text("Done"),
    );
    let (_, chunks) = stream(&mock, &request(false)).await;
    let reasoning: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["reasoning_content"].as_str())
        .collect();
    assert_eq!(reasoning, "We need the tool.");

    let ollama = MockProvider::start_with(MockConfig {
        chat_reasoning_field: ChatReasoningField::Reasoning,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    ollama.push(Turn::default().thinking("Hmm", "x").and_text("Done"));
    let (_, chunks) = stream(&ollama, &request(false)).await;
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["delta"]["reasoning"] == "Hmm")
    );
    assert!(
        chunks
            .iter()
            .all(|c| c["choices"][0]["delta"].get("reasoning_content").is_none())
    );
}

#[tokio::test]
async fn mid_stream_error_has_no_done_and_max_tokens_is_length() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("partial answer").failure(Failure::ErrorAfterSteps));
    let (text, chunks) = stream(&mock, &request(true)).await;
    assert!(!text.contains("[DONE]"));
    let last = chunks.last().unwrap();
    assert_eq!(last["error"]["type"], "server_error");
    assert!(last.get("choices").is_none());

    mock.push(Turn::text("cut").stop(MockStop::MaxTokens));
    let (_, chunks) = stream(&mock, &request(false)).await;
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );

    // Non-streaming answer.
    mock.push(Turn::text("whole").tool_call("t", json!({})));
    let mut body = request(false);
    body["stream"] = json!(false);
    let answer = post(
        &format!("{}/v1/chat/completions", mock.base_url()),
        HEADERS,
        &body,
    )
    .await;
    let completion = answer.json();
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["choices"][0]["message"]["content"], "whole");
    assert_eq!(
        completion["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
}
