//! The OpenAI Responses wire format, over real HTTP.

use crate::common;

use common::{events, post};
use flemma_mock_provider::{Failure, MockProvider, MockStop, MockUsage, Turn};
use serde_json::{Value, json};

const HEADERS: &[(&str, &str)] = &[("authorization", "Bearer sk-test")];

fn request() -> Value {
    json!({"model": "gpt-5", "stream": true, "store": false,
           "include": ["reasoning.encrypted_content"],
           "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]})
}

async fn stream(mock: &MockProvider, body: &Value) -> Vec<common::Event> {
    let answer = post(&format!("{}/v1/responses", mock.base_url()), HEADERS, body).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(
        answer.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert!(
        !answer.text.contains("[DONE]"),
        "Responses streams have no [DONE]"
    );
    let events = events(&answer.text, "\n\n");
    for (index, event) in events.iter().enumerate() {
        let data = event.json();
        assert_eq!(data["type"], event.name.as_deref().expect("event name"));
        assert_eq!(
            data["sequence_number"], index as u64,
            "sequence numbers count from 0"
        );
    }
    events
}

fn names(events: &[common::Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.name.clone().expect("event name"))
        .collect()
}

#[tokio::test]
async fn plain_text_event_order_and_usage() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Oi there!").usage(MockUsage {
        input_tokens: 19,
        output_tokens: 54,
        thinking_tokens: 64,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
    }));
    let events = stream(&mock, &request()).await;
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert!(events[4].json()["obfuscation"].is_string());
    assert_eq!(events[6].json()["text"], "Oi there!");
    let completed = events[9].json();
    assert_eq!(completed["response"]["status"], "completed");
    assert_eq!(completed["response"]["model"], "gpt-5");
    assert_eq!(
        completed["response"]["usage"],
        json!({"input_tokens": 19, "input_tokens_details": {"cached_tokens": 0},
               "output_tokens": 118, "output_tokens_details": {"reasoning_tokens": 64},
               "total_tokens": 137})
    );
    assert_eq!(
        completed["response"]["output"][0]["content"][0]["text"],
        "Oi there!"
    );
}

#[tokio::test]
async fn reasoning_item_carries_encrypted_content_that_changes() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .thinking("**Plan**\n\nI need the tool.", "gAAAAABqFINALBLOB")
            .and_text("ok"),
    );
    let events = stream(&mock, &request()).await;
    let added = events[2].json();
    assert_eq!(added["item"]["type"], "reasoning");
    let partial = added["item"]["encrypted_content"].as_str().unwrap();
    let done = events
        .iter()
        .find(|e| e.name.as_deref() == Some("response.output_item.done"))
        .unwrap()
        .json();
    assert_eq!(done["item"]["encrypted_content"], "gAAAAABqFINALBLOB");
    assert_ne!(partial, "gAAAAABqFINALBLOB");
    assert_eq!(
        done["item"]["summary"][0]["text"],
        "**Plan**\n\nI need the tool."
    );
    let summary: String = events
        .iter()
        .filter(|e| e.name.as_deref() == Some("response.reasoning_summary_text.delta"))
        .map(|e| e.json()["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(summary, "**Plan**\n\nI need the tool.");

    // Without `include: ["reasoning.encrypted_content"]` the real API sends no blob.
    mock.push(Turn::default().thinking("t", "SIG"));
    let mut body = request();
    body.as_object_mut().unwrap().remove("include");
    let events = stream(&mock, &body).await;
    assert!(events[2].json()["item"].get("encrypted_content").is_none());
}

#[tokio::test]
async fn parallel_function_calls() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .tool_call("add", json!({"a": 2, "b": 3}))
            .tool_call("multiply", json!({"a": 2})),
    );
    let events = stream(&mock, &request()).await;
    let added: Vec<Value> = events
        .iter()
        .filter(|e| e.name.as_deref() == Some("response.output_item.added"))
        .map(|e| e.json())
        .collect();
    assert_eq!(added.len(), 2);
    for (index, item) in added.iter().enumerate() {
        assert_eq!(item["output_index"], index as u64);
        assert!(item["item"]["id"].as_str().unwrap().starts_with("fc_"));
        let call_id = item["item"]["call_id"].as_str().unwrap();
        assert!(call_id.starts_with("call_") && call_id.len() == 29);
    }
    let done: Vec<Value> = events
        .iter()
        .filter(|e| e.name.as_deref() == Some("response.function_call_arguments.done"))
        .map(|e| e.json())
        .collect();
    assert!(
        done.iter().all(|d| d.get("name").is_none()),
        "real .done events carry no name"
    );
    let first_args: String = events
        .iter()
        .filter(|e| e.name.as_deref() == Some("response.function_call_arguments.delta"))
        .map(|e| e.json())
        .filter(|d| d["output_index"] == 0)
        .map(|d| d["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&first_args).unwrap(),
        json!({"a": 2, "b": 3})
    );
    assert_eq!(done[0]["arguments"], first_args);
}

#[tokio::test]
async fn failures_incomplete_and_refusal() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("partial").failure(Failure::ErrorAfterSteps));
    let events = stream(&mock, &request()).await;
    let last = events.last().unwrap().json();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(last["response"]["error"]["code"], "server_error");

    mock.push(Turn::text("partial").failure(Failure::ErrorEventAfterSteps));
    let events = stream(&mock, &request()).await;
    let last = events.last().unwrap().json();
    assert_eq!(last["type"], "error");
    assert_eq!(last["code"], "server_error");

    mock.push(Turn::text("cut").stop(MockStop::MaxTokens));
    let events = stream(&mock, &request()).await;
    let last = events.last().unwrap().json();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );

    mock.push(Turn::default().stop(MockStop::Refusal("I can't help with that.".into())));
    let events = stream(&mock, &request()).await;
    assert!(
        events
            .iter()
            .any(|e| e.name.as_deref() == Some("response.refusal.delta"))
    );
    let done = events
        .iter()
        .find(|e| e.name.as_deref() == Some("response.refusal.done"))
        .unwrap();
    assert_eq!(done.json()["refusal"], "I can't help with that.");

    let answer = post(
        &format!("{}/v1/responses/input_tokens", mock.base_url()),
        HEADERS,
        &request(),
    )
    .await;
    assert_eq!(answer.json()["object"], "response.input_tokens");
}
