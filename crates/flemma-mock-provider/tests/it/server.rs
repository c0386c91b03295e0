//! Failures, authentication, recording, echo mode, pacing and the control API.

use crate::common;

use std::time::{Duration, Instant};

use common::{client, get, post};
use flemma_mock_provider::{Failure, MockConfig, MockProvider, Turn, WireFormat};
use serde_json::{Value, json};

const VERSION: &[(&str, &str)] = &[("anthropic-version", "2023-06-01")];

fn anthropic_body() -> Value {
    json!({"model": "claude-x", "max_tokens": 10, "stream": true,
           "messages": [{"role": "user", "content": "ping me"}]})
}

fn chat_body() -> Value {
    json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "ping me"}]})
}

#[tokio::test]
async fn http_failures_use_each_providers_error_body() {
    let mock = MockProvider::start().await.unwrap();
    let url = format!("{}/v1/messages", mock.base_url());
    mock.push(Turn::failing(Failure::Http {
        status: 529,
        retry_after: None,
        retry_after_ms: None,
    }));
    let answer = post(&url, VERSION, &anthropic_body()).await;
    assert_eq!(answer.status, 529);
    assert_eq!(answer.header("x-should-retry"), Some("true"));
    let body = answer.json();
    assert_eq!(body["type"], "error");
    assert_eq!(
        body["error"],
        json!({"type": "overloaded_error", "message": "Overloaded"})
    );
    assert_eq!(
        Some(body["request_id"].as_str().unwrap()),
        answer.header("request-id")
    );

    mock.push(Turn::failing(Failure::Http {
        status: 429,
        retry_after: Some("17".into()),
        retry_after_ms: Some(17000),
    }));
    let answer = post(&url, VERSION, &anthropic_body()).await;
    assert_eq!(answer.status, 429);
    assert_eq!(answer.header("retry-after"), Some("17"));
    assert_eq!(answer.header("retry-after-ms"), Some("17000"));
    assert_eq!(
        answer.header("anthropic-ratelimit-requests-remaining"),
        Some("0")
    );
    assert_eq!(answer.json()["error"]["type"], "rate_limit_error");

    let chat_url = format!("{}/v1/chat/completions", mock.base_url());
    mock.push(Turn::failing(Failure::Http {
        status: 429,
        retry_after: Some("2".into()),
        retry_after_ms: None,
    }));
    let answer = post(&chat_url, &[], &chat_body()).await;
    assert_eq!(answer.status, 429);
    assert_eq!(answer.header("retry-after"), Some("2"));
    let error = &answer.json()["error"];
    assert_eq!(error["code"], "rate_limit_exceeded");
    assert!(error.get("param").is_some() && error.get("type").is_some());

    mock.push(Turn::failing(Failure::Html { status: 502 }));
    let answer = post(&chat_url, &[], &chat_body()).await;
    assert_eq!(answer.status, 502);
    assert_eq!(answer.header("content-type"), Some("text/html"));
    assert!(answer.text.contains("<h1>502 Bad Gateway</h1>"));

    mock.push(Turn::text("x").failure(Failure::ErrorAfterSteps));
    let answer = post(&url, VERSION, &anthropic_body()).await;
    let events = common::events(&answer.text, "\n\n");
    let last = events.last().unwrap();
    assert_eq!(last.name.as_deref(), Some("error"));
    assert_eq!(last.json()["error"]["type"], "overloaded_error");
    assert!(
        events
            .iter()
            .all(|e| e.name.as_deref() != Some("message_stop"))
    );
}

#[tokio::test]
async fn keys_are_checked_the_way_each_api_expects() {
    let mock = MockProvider::start_with(MockConfig {
        require_key: Some("good".into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    mock.push(Turn::text("one"));
    mock.push(Turn::text("two"));
    let base = mock.base_url();

    let answer = post(
        &format!("{base}/v1/messages"),
        &[("x-api-key", "bad"), VERSION[0]],
        &anthropic_body(),
    )
    .await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["type"], "authentication_error");
    let answer = post(
        &format!("{base}/v1/messages"),
        &[("x-api-key", "good"), VERSION[0]],
        &anthropic_body(),
    )
    .await;
    assert_eq!(answer.status, 200);

    let answer = post(&format!("{base}/v1/chat/completions"), &[], &chat_body()).await;
    assert_eq!(answer.status, 401);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("You didn't provide an API key")
    );
    let answer = post(
        &format!("{base}/v1/responses"),
        &[("authorization", "Bearer sk-wrong-key-123456")],
        &chat_body(),
    )
    .await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["code"], "invalid_api_key");

    // Gemini answers a bad key with 400 API_KEY_INVALID, like the real API.
    let gemini = format!("{base}/v1beta/models/g:streamGenerateContent?alt=sse");
    let answer = post(
        &gemini,
        &[("x-goog-api-key", "bad")],
        &json!({"contents": []}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["details"][0]["reason"],
        "API_KEY_INVALID"
    );
    let answer = post(&format!("{gemini}&key=good"), &[], &json!({"contents": []})).await;
    assert_eq!(answer.status, 200);

    let vertex =
        format!("{base}/v1/projects/p/locations/global/publishers/google/models/g:countTokens");
    let answer = post(&vertex, &[("x-goog-api-key", "good")], &json!({})).await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["status"], "UNAUTHENTICATED");
    assert_eq!(mock.queued(), 0);

    // A scripted Unauthorized failure answers 401 whatever the key.
    mock.push(Turn::failing(Failure::Unauthorized));
    let answer = post(
        &format!("{base}/v1/messages"),
        &[("x-api-key", "good"), VERSION[0]],
        &anthropic_body(),
    )
    .await;
    assert_eq!(answer.status, 401);
}

#[tokio::test]
async fn disconnect_cuts_the_body_mid_event() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::text("a fairly long answer that will not arrive whole")
            .failure(Failure::DisconnectAfterBytes(300)),
    );
    let response = client()
        .post(format!("{}/v1/messages", mock.base_url()))
        .header("anthropic-version", "2023-06-01")
        .json(&anthropic_body())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut response = response;
    let mut received = Vec::new();
    let outcome = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        }
    };
    assert!(
        outcome.is_err(),
        "the body must end with an error, not cleanly"
    );
    assert_eq!(received.len(), 300);
}

#[tokio::test]
async fn slow_streaming_is_paced() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("paced answer with several words in it").bytes_per_sec(4000));
    let started = Instant::now();
    let answer = post(
        &format!("{}/v1/chat/completions", mock.base_url()),
        &[],
        &chat_body(),
    )
    .await;
    let elapsed = started.elapsed();
    let expected = Duration::from_secs_f64(answer.text.len() as f64 / 4000.0);
    assert!(answer.text.ends_with("data: [DONE]\n\n"));
    assert!(
        elapsed + Duration::from_millis(100) >= expected,
        "{elapsed:?} < {expected:?}"
    );
    assert!(
        elapsed < expected * 3 + Duration::from_secs(2),
        "{elapsed:?} too slow"
    );
}

#[tokio::test]
async fn recording_echo_and_empty_queue() {
    let mock = MockProvider::start().await.unwrap();
    let url = format!("{}/v1/chat/completions", mock.base_url());
    let answer = post(&url, &[("authorization", "Bearer abc")], &chat_body()).await;
    assert_eq!(answer.status, 500);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no scripted turn left")
    );
    let recorded = mock.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].method, "POST");
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(recorded[0].format, WireFormat::ChatCompletions);
    assert_eq!(recorded[0].header("Authorization"), Some("Bearer abc"));
    assert_eq!(recorded[0].body["messages"][0]["content"], "ping me");
    assert_eq!(
        serde_json::from_str::<Value>(&recorded[0].raw_body).unwrap(),
        chat_body()
    );
    mock.clear_requests();
    assert!(mock.requests().is_empty());

    let echo = MockProvider::start_with(MockConfig {
        echo_when_empty: true,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let answer = post(
        &format!("{}/v1/chat/completions", echo.base_url()),
        &[],
        &chat_body(),
    )
    .await;
    let text: String = common::events(&answer.text, "\n\n")
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| {
            e.json()["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, "You said: ping me");
}

#[tokio::test]
async fn control_api_pushes_turns_and_lists_requests() {
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let turns = json!([{"steps": [{"text": "scripted-by-control"}]},
                       {"steps": [{"tool_call": {"name": "bash", "input": {"cmd": "ls"}}}]}]);
    let answer = post(&format!("{base}/_mock/turns"), &[], &turns).await;
    assert_eq!(answer.json()["queued"], 2);
    assert_eq!(mock.queued(), 2);
    let answer = post(
        &format!("{base}/_mock/turns"),
        &[],
        &json!({"steps": "nope"}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a JSON array of turns")
    );

    let answer = post(&format!("{base}/v1/messages"), VERSION, &anthropic_body()).await;
    assert!(answer.text.contains("\"text\":\"scripted-by-control\""));
    let listed = get(&format!("{base}/_mock/requests"), &[]).await.json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["format"], "Anthropic");
    assert_eq!(listed[0]["path"], "/v1/messages");
    let deleted = client()
        .delete(format!("{base}/_mock/requests"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert!(mock.requests().is_empty());

    let missing = get(&format!("{base}/v2/unknown"), &[]).await;
    assert_eq!(missing.status, 404);
    assert!(
        missing.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no endpoint")
    );
    mock.shutdown().await;
}

#[tokio::test]
async fn missing_required_parts_get_the_real_400_without_consuming_a_turn() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("kept"));
    let base = mock.base_url();
    let answer = post(&format!("{base}/v1/messages"), &[], &anthropic_body()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "anthropic-version: header is required"
    );
    let answer = post(
        &format!("{base}/v1/messages"),
        VERSION,
        &json!({"model": "c", "messages": []}),
    )
    .await;
    assert_eq!(
        answer.json()["error"]["message"],
        "max_tokens: Field required"
    );
    let answer = post(
        &format!("{base}/v1/chat/completions"),
        &[],
        &json!({"model": "m"}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["code"], "missing_required_parameter");
    let answer = post(&format!("{base}/v1/responses"), &[], &json!({"input": "x"})).await;
    assert_eq!(
        answer.json()["error"]["message"],
        "you must provide a model parameter"
    );
    let gemini = format!("{base}/v1beta/models/g:streamGenerateContent?alt=sse");
    let answer = post(&gemini, &[], &json!({})).await;
    assert_eq!(answer.json()["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(mock.queued(), 1);
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_stream_does_not_disturb_the_server() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("word ".repeat(500)).bytes_per_sec(1000));
    mock.push(Turn::text("next"));
    let url = format!("{}/v1/chat/completions", mock.base_url());
    let mut response = client().post(&url).json(&chat_body()).send().await.unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    drop(response);
    let started = Instant::now();
    let answer = post(&url, &[], &chat_body()).await;
    assert!(answer.text.contains("\"content\":\"next\""));
    assert!(started.elapsed() < Duration::from_secs(2));

    let base = mock.base_url();
    mock.shutdown().await;
    let refused = client().get(format!("{base}/v1/models")).send().await;
    assert!(refused.is_err(), "the server must be gone after shutdown");
}
