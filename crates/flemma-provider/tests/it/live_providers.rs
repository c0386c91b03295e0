//! The HTTP edge against the mock provider, over real HTTP on 127.0.0.1, for every provider:
//! text, thinking with signatures, parallel tool calls, tool results sent back, cache-stable
//! replays, every error case, retries on a paused clock, cancellation, counting and listing.

use std::sync::Arc;
use std::time::Duration;

use flemma_conversation::{Message, Part, Role};
use flemma_mock_provider::{Failure, MockConfig, MockProvider, MockStop, MockUsage, Turn};
use flemma_provider::credentials::{CredentialEnvironment, CredentialResolver, ResolverOptions};
use flemma_provider::explain::ProviderError;
use flemma_provider::http::{ClientConfig, ClientEvent, Endpoint, ProviderClient, StreamSummary};
use flemma_provider::render::{ReplyOutcome, ReplyRenderer};
use flemma_provider::retry::RetryPolicy;
use flemma_provider::{
    Conversation, ProviderKind, RequestOptions, StopReason, StreamEvent, Thinking, ThinkingLevel,
};
use flemma_syntax::write::{ABORT_MARKER, PROVIDER_ERROR_ABORT_PREFIX, canonical_json};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "test-key-0123456789";

/// The providers tested. Moonshot is the Chat Completions format with its own defaults; it
/// runs in the basic tests only.
const KINDS: [ProviderKind; 5] = [
    ProviderKind::Anthropic,
    ProviderKind::OpenAi,
    ProviderKind::OpenAiCompatible,
    ProviderKind::Gemini,
    ProviderKind::Vertex,
];

fn credential_environment() -> CredentialEnvironment {
    CredentialEnvironment::from_vars([
        ("PATH", "/nonexistent-flemma-test-path"),
        ("ANTHROPIC_API_KEY", KEY),
        ("OPENAI_API_KEY", KEY),
        ("OPENAI_COMPATIBLE_API_KEY", KEY),
        ("GEMINI_API_KEY", KEY),
        ("VERTEX_ACCESS_TOKEN", KEY),
        ("MOONSHOT_API_KEY", KEY),
    ])
}

fn client_with(retry: RetryPolicy, environment: CredentialEnvironment) -> ProviderClient {
    let resolver = CredentialResolver::new(environment, ResolverOptions::default());
    ProviderClient::new(
        ClientConfig {
            retry,
            ..ClientConfig::default()
        },
        Arc::new(resolver),
    )
    .expect("client builds")
}

fn client() -> ProviderClient {
    client_with(RetryPolicy::default(), credential_environment())
}

fn endpoint(kind: ProviderKind, mock: &MockProvider) -> Endpoint {
    let base = mock.base_url();
    match kind {
        ProviderKind::OpenAi | ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
            Endpoint::new(format!("{base}/v1"))
        }
        ProviderKind::Codex => Endpoint::new(format!("{base}/backend-api/codex")),
        _ => Endpoint::new(base),
    }
}

fn options(kind: ProviderKind) -> RequestOptions {
    let model = match kind {
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::OpenAi => "gpt-5",
        ProviderKind::OpenAiCompatible => "llama3.2",
        ProviderKind::Moonshot => "kimi-k2",
        ProviderKind::Gemini | ProviderKind::Vertex => "gemini-2.5-flash",
        ProviderKind::Codex => "gpt-5.5",
    };
    RequestOptions {
        model: model.to_string(),
        max_tokens: 4096,
        thinking: Thinking::Level(ThinkingLevel::Low),
        anthropic_version: "2023-06-01".to_string(),
        vertex_project: Some("flemma-test".to_string()),
        vertex_location: "us-central1".to_string(),
        ..RequestOptions::default()
    }
}

fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        parts: vec![Part::text(text)].into(),
        span: None,
    }
}

fn conversation(text: &str) -> Conversation {
    Conversation {
        system: vec![Part::text("Be brief.")],
        messages: vec![user(text)],
    }
}

/// One streamed reply: what the observer saw, the outcome, and the rendered `.chat` text.
struct Reply {
    client_events: Vec<ClientEvent>,
    events: Vec<StreamEvent>,
    result: Result<StreamSummary, ProviderError>,
    rendered: String,
    /// Established connections to the mock when the observer cancelled.
    connections_at_cancel: Option<usize>,
}

impl Reply {
    fn summary(&self) -> &StreamSummary {
        match &self.result {
            Ok(summary) => summary,
            Err(error) => panic!("expected success, got: {error}"),
        }
    }

    fn error(&self) -> &ProviderError {
        match &self.result {
            Ok(summary) => panic!("expected an error, got {summary:?}"),
            Err(error) => error,
        }
    }

    fn retries(&self) -> Vec<(u32, Duration, String)> {
        self.client_events
            .iter()
            .filter_map(|event| match event {
                ClientEvent::Retrying {
                    attempt,
                    delay,
                    reason,
                } => Some((*attempt, *delay, reason.clone())),
                _ => None,
            })
            .collect()
    }
}

async fn stream_with(
    client: &ProviderClient,
    kind: ProviderKind,
    conversation: &Conversation,
    mock: &MockProvider,
    cancel: CancellationToken,
    cancel_after_text: bool,
) -> Reply {
    let mut client_events = Vec::new();
    let mut connections_at_cancel = None;
    let port = mock.address().port();
    let result = {
        let trigger = cancel.clone();
        let mut observer = |event: ClientEvent| {
            if cancel_after_text
                && !trigger.is_cancelled()
                && matches!(event, ClientEvent::Event(StreamEvent::TextDelta { .. }))
            {
                connections_at_cancel = Some(established_connections(port));
                trigger.cancel();
            }
            client_events.push(event);
        };
        client
            .stream(
                kind,
                conversation,
                &options(kind),
                &endpoint(kind, mock),
                cancel,
                &mut observer,
            )
            .await
    };
    let events: Vec<StreamEvent> = client_events
        .iter()
        .filter_map(|event| match event {
            ClientEvent::Event(event) => Some(event.clone()),
            _ => None,
        })
        .collect();
    let mut renderer = ReplyRenderer::for_provider(kind, true);
    let mut rendered = String::new();
    for event in &events {
        if let Some(text) = renderer.push(event) {
            rendered.push_str(&text);
        }
    }
    let outcome = match &result {
        Ok(_) => ReplyOutcome::Completed,
        Err(ProviderError::Cancelled) => ReplyOutcome::Interrupted,
        Err(error) => ReplyOutcome::Failed(error.to_string()),
    };
    rendered.push_str(&renderer.finish(outcome));
    Reply {
        client_events,
        events,
        result,
        rendered,
        connections_at_cancel,
    }
}

async fn stream(kind: ProviderKind, conversation: &Conversation, mock: &MockProvider) -> Reply {
    stream_with(
        &client(),
        kind,
        conversation,
        mock,
        CancellationToken::new(),
        false,
    )
    .await
}

/// The assistant message a reply becomes once written to the file and read back: text, tool
/// uses (input as written: verbatim argument strings for OpenAI-style providers, canonical JSON
/// otherwise), thinking at the end.
fn assistant_message(kind: ProviderKind, events: &[StreamEvent]) -> Message {
    let verbatim = matches!(
        kind,
        ProviderKind::OpenAi | ProviderKind::OpenAiCompatible | ProviderKind::Moonshot
    );
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut names = std::collections::BTreeMap::new();
    let mut thinking: Vec<Part> = Vec::new();
    let mut thinking_text = String::new();
    for event in events {
        match event {
            StreamEvent::TextDelta { text: delta } => text.push_str(delta),
            StreamEvent::ToolCallStart { index, id, name } => {
                names.insert(*index, (id.clone(), name.clone()));
            }
            StreamEvent::ToolCallEnd { index, arguments } => {
                if !text.trim().is_empty() {
                    parts.push(Part::text(text.trim().to_string()));
                }
                text.clear();
                let (id, name) = names.remove(index).expect("start before end");
                let input: Value = serde_json::from_str(arguments).unwrap_or(json!({}));
                let raw_input = if verbatim {
                    arguments.clone()
                } else {
                    canonical_json(&input)
                };
                parts.push(Part::ToolUse {
                    id,
                    name: flemma_provider::decode_tool_name(&name),
                    input,
                    raw_input,
                });
            }
            StreamEvent::ThinkingDelta { text: delta } => thinking_text.push_str(delta),
            StreamEvent::ThinkingSignature { signature } => thinking.push(Part::Thinking {
                text: std::mem::take(&mut thinking_text),
                signature: Some(signature.clone()),
                redacted: false,
            }),
            StreamEvent::RedactedThinking { data } => thinking.push(Part::Thinking {
                text: data.clone(),
                signature: None,
                redacted: true,
            }),
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        parts.push(Part::text(text.trim().to_string()));
    }
    if !thinking_text.is_empty() {
        thinking.push(Part::Thinking {
            text: thinking_text,
            signature: None,
            redacted: false,
        });
    }
    parts.extend(thinking);
    Message {
        role: Role::Assistant,
        parts: parts.into(),
        span: None,
    }
}

/// The array of turns in a request body (`messages`, `input` or `contents`).
fn turns(kind: ProviderKind, body: &Value) -> Vec<Value> {
    let key = match kind {
        ProviderKind::Anthropic | ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
            "messages"
        }
        ProviderKind::OpenAi | ProviderKind::Codex => "input",
        ProviderKind::Gemini | ProviderKind::Vertex => "contents",
    };
    body[key].as_array().cloned().unwrap_or_default()
}

/// Removes `cache_control` from the last content block of a turn.
fn strip_tail_cache_marker(turn: &mut Value) {
    if let Some(last) = turn
        .get_mut("content")
        .and_then(Value::as_array_mut)
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        last.shift_remove("cache_control");
    }
}

fn auth_header(kind: ProviderKind) -> (&'static str, String) {
    match kind {
        ProviderKind::Anthropic => ("x-api-key", KEY.to_string()),
        ProviderKind::Gemini => ("x-goog-api-key", KEY.to_string()),
        _ => ("authorization", format!("Bearer {KEY}")),
    }
}

#[tokio::test]
async fn plain_text_with_auth_checked_by_the_server() {
    let mock = MockProvider::start_with(MockConfig {
        require_key: Some(KEY.to_string()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    for kind in KINDS.into_iter().chain([ProviderKind::Moonshot]) {
        mock.clear_requests();
        mock.push(Turn::text("Olá! How can I help?").usage(MockUsage {
            input_tokens: 16,
            output_tokens: 12,
            ..MockUsage::default()
        }));
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        let summary = reply.summary();
        assert_eq!(reply.rendered, "Olá! How can I help?\n", "{kind:?}");
        assert_eq!(summary.stop, StopReason::EndTurn, "{kind:?}");
        assert!(
            summary.usage.input_tokens >= 16,
            "{kind:?}: {:?}",
            summary.usage
        );
        assert!(
            summary.usage.output_tokens >= 12,
            "{kind:?}: {:?}",
            summary.usage
        );
        assert_eq!(summary.retries, 0);
        assert!(
            reply.client_events.first() == Some(&ClientEvent::FirstByte),
            "{kind:?}"
        );
        let requests = mock.requests();
        assert_eq!(requests.len(), 1, "{kind:?}");
        let (header, value) = auth_header(kind);
        assert_eq!(requests[0].header(header), Some(value.as_str()), "{kind:?}");
        // One content type, once (a strict proxy refuses a repeated one).
        let content_types: Vec<&str> = requests[0]
            .headers
            .iter()
            .filter(|(name, _)| name == "content-type")
            .map(|(_, value)| value.as_str())
            .collect();
        assert_eq!(content_types, ["application/json"], "{kind:?}");
    }
}

#[tokio::test]
async fn thinking_with_signatures_is_written_at_the_end() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS {
        mock.push(
            Turn::default()
                .thinking("The user asks about Florence.", "sig-Ev0BCkYICxgC")
                .and_text("It is 40 °C in Florence."),
        );
        let reply = stream(kind, &conversation("Weather?"), &mock).await;
        reply.summary();
        let text = &reply.rendered;
        assert!(
            text.starts_with("It is 40 °C in Florence.\n\n<thinking"),
            "{kind:?}: {text}"
        );
        match kind {
            ProviderKind::Anthropic => assert!(
                text.contains(
                    "<thinking anthropic:signature=\"sig-Ev0BCkYICxgC\">\nThe user asks about Florence.\n</thinking>\n"
                ),
                "{text}"
            ),
            ProviderKind::OpenAi => {
                assert!(text.contains("<thinking openai:signature=\""), "{text}");
                assert!(text.contains("The user asks about Florence."), "{text}");
            }
            ProviderKind::OpenAiCompatible => assert!(
                text.contains("<thinking>\nThe user asks about Florence.\n</thinking>\n"),
                "{text}"
            ),
            _ => assert!(
                text.contains("<thinking vertex:signature=\"sig-Ev0BCkYICxgC\">"),
                "{kind:?}: {text}"
            ),
        }
    }
}

#[tokio::test]
async fn parallel_tool_calls_results_and_cache_stable_replays() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS {
        mock.clear_requests();
        mock.push(
            Turn::text("I'll add and multiply 2 and 3.")
                .tool_call("add", json!({"b": 3, "a": 2}))
                .tool_call("math.multiply", json!({"a": 2, "b": 3})),
        );
        let first = conversation("Add and multiply 2 and 3.");
        let reply = stream(kind, &first, &mock).await;
        assert_eq!(reply.summary().stop, StopReason::ToolUse, "{kind:?}");
        let text = &reply.rendered;
        assert!(
            text.starts_with("I'll add and multiply 2 and 3.\n\n**Tool Use:** `add` (`"),
            "{kind:?}: {text}"
        );
        assert!(
            text.contains("\n\n**Tool Use:** `math.multiply` (`"),
            "{kind:?}: {text}"
        );
        assert_eq!(text.matches("```json\n").count(), 2, "{text}");
        if kind == ProviderKind::Anthropic || kind == ProviderKind::Gemini {
            assert!(
                text.contains("```json\n{\"a\":2,\"b\":3}\n```"),
                "{kind:?}: {text}"
            );
        }

        // Send the tool results back.
        let assistant = assistant_message(kind, &reply.events);
        let ids: Vec<String> = assistant
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ids.len(), 2, "{kind:?}");
        let results = Message {
            role: Role::User,
            parts: ids
                .iter()
                .zip(["5", "6"])
                .map(|(id, output)| Part::ToolResult {
                    tool_use_id: id.clone(),
                    content: vec![Part::text(output)],
                    is_error: false,
                })
                .collect(),
            span: None,
        };
        let mut second = first.clone();
        second.messages.push(assistant);
        second.messages.push(results);
        mock.push(Turn::text("5 and 6."));
        let reply = stream(kind, &second, &mock).await;
        assert_eq!(reply.rendered, "5 and 6.\n", "{kind:?}");

        // A third request with the same conversation: byte-identical body.
        mock.push(Turn::text("5 and 6."));
        stream(kind, &second, &mock).await.summary();

        let requests = mock.requests();
        assert_eq!(requests.len(), 3, "{kind:?}");
        assert_eq!(requests[1].raw_body, requests[2].raw_body, "{kind:?}");
        // Every turn of the first request is replayed byte for byte in the second (the last one
        // without the Anthropic cache breakpoint, which moves to the new conversation tail).
        for mut turn in turns(kind, &requests[0].body) {
            strip_tail_cache_marker(&mut turn);
            let bytes = serde_json::to_string(&turn).unwrap();
            assert!(
                requests[1].raw_body.contains(&bytes),
                "{kind:?}: {bytes} not replayed in {}",
                requests[1].raw_body
            );
        }
        let body = &requests[1].body;
        let sent = turns(kind, body);
        let results_text = serde_json::to_string(&sent).unwrap();
        match kind {
            ProviderKind::Anthropic => {
                let last = &sent[sent.len() - 1]["content"];
                assert_eq!(last[0]["type"], "tool_result");
                assert_eq!(last[0]["tool_use_id"], ids[0].as_str());
                assert_eq!(last[1]["tool_use_id"], ids[1].as_str());
            }
            ProviderKind::OpenAi => {
                let outputs: Vec<&Value> = sent
                    .iter()
                    .filter(|item| item["type"] == "function_call_output")
                    .collect();
                assert_eq!(outputs.len(), 2, "{results_text}");
                assert_eq!(outputs[0]["call_id"], ids[0].as_str());
                assert_eq!(outputs[1]["output"], "6");
            }
            ProviderKind::OpenAiCompatible => {
                let tools: Vec<&Value> = sent.iter().filter(|m| m["role"] == "tool").collect();
                assert_eq!(tools.len(), 2, "{results_text}");
                assert_eq!(tools[0]["tool_call_id"], ids[0].as_str());
                assert_eq!(tools[1]["content"], "6");
            }
            _ => {
                let last = &sent[sent.len() - 1]["parts"];
                assert_eq!(last[0]["functionResponse"]["name"], "add", "{results_text}");
                assert_eq!(
                    last[1]["functionResponse"]["name"], "math__multiply",
                    "{results_text}"
                );
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn rate_limits_and_overload_are_retried_with_the_servers_delay() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS {
        mock.clear_requests();
        mock.push(Turn::failing(Failure::Http {
            status: 429,
            retry_after: Some("2".to_string()),
            retry_after_ms: None,
        }));
        mock.push(Turn::failing(Failure::Http {
            status: 529,
            retry_after: None,
            retry_after_ms: Some(1500),
        }));
        mock.push(Turn::text("Finally."));
        let started = tokio::time::Instant::now();
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        assert_eq!(reply.rendered, "Finally.\n", "{kind:?}");
        assert_eq!(reply.summary().retries, 2);
        let retries = reply.retries();
        assert_eq!(retries.len(), 2, "{kind:?}");
        assert_eq!(retries[0].0, 1);
        assert_eq!(retries[0].1, Duration::from_secs(2), "{kind:?}");
        assert_eq!(retries[0].2, "HTTP 429");
        assert_eq!(retries[1].0, 2);
        if matches!(kind, ProviderKind::Gemini | ProviderKind::Vertex) {
            // Google sends RetryInfo only with 429: the client's own backoff (2 s, jitter).
            assert!(
                retries[1].1 <= Duration::from_secs(2)
                    && retries[1].1 >= Duration::from_millis(1500),
                "{kind:?}: {:?}",
                retries[1].1
            );
        } else {
            assert_eq!(retries[1].1, Duration::from_millis(1500), "{kind:?}");
        }
        assert_eq!(retries[1].2, "HTTP 529");
        // The waits really happened (on the paused clock).
        let waited: Duration = retries.iter().map(|r| r.1).sum();
        assert!(started.elapsed() >= waited, "{kind:?}");
        assert_eq!(mock.requests().len(), 3, "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn html_502_is_retried_three_times_with_backoff_then_explained() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS {
        mock.clear_requests();
        for _ in 0..4 {
            mock.push(Turn::failing(Failure::Html { status: 502 }));
        }
        let started = tokio::time::Instant::now();
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        let error = reply.error();
        assert!(
            matches!(error, ProviderError::UnexpectedResponse { status: 502, .. }),
            "{kind:?}: {error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("Unexpected API response: 502 <"),
            "{error}"
        );
        let retries = reply.retries();
        let delays: Vec<Duration> = retries.iter().map(|r| r.1).collect();
        assert_eq!(retries.len(), 3, "{kind:?}");
        // Exponential backoff from 1 s with up to 25 % jitter.
        for (delay, nominal) in delays.iter().zip([1u64, 2, 4]) {
            let nominal = Duration::from_secs(nominal);
            assert!(
                *delay <= nominal && *delay >= nominal.mul_f64(0.75),
                "{delays:?}"
            );
        }
        assert!(started.elapsed() >= delays.iter().sum::<Duration>());
        assert_eq!(mock.requests().len(), 4, "{kind:?}");
        assert_eq!(reply.rendered, "");
    }
}

#[tokio::test]
async fn unauthorized_names_the_credential_and_is_not_retried() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS.into_iter().chain([ProviderKind::Moonshot]) {
        mock.clear_requests();
        mock.push(Turn::failing(Failure::Unauthorized));
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        let error = reply.error();
        let expected = match kind {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::OpenAiCompatible => "OPENAI_COMPATIBLE_API_KEY",
            ProviderKind::Gemini => "GEMINI_API_KEY",
            ProviderKind::Moonshot => "MOONSHOT_API_KEY",
            ProviderKind::Vertex => "VERTEX_ACCESS_TOKEN",
            ProviderKind::Codex => "the ChatGPT login",
        };
        let message = error.to_string();
        assert!(
            matches!(error, ProviderError::Authentication { .. }),
            "{kind:?}: {error:?}"
        );
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains(KEY), "{message}");
        assert!(!format!("{error:?}").contains(KEY));
        assert_eq!(mock.requests().len(), 1, "{kind:?}");
    }
}

#[tokio::test]
async fn missing_credentials_list_every_resolver() {
    let mock = MockProvider::start().await.unwrap();
    let empty = CredentialEnvironment::from_vars([("PATH", "/nonexistent-flemma-test-path")]);
    let client = client_with(RetryPolicy::default(), empty);
    let reply = stream_with(
        &client,
        ProviderKind::Anthropic,
        &conversation("Hi"),
        &mock,
        CancellationToken::new(),
        false,
    )
    .await;
    let message = reply.error().to_string();
    assert!(message.contains("ANTHROPIC_API_KEY not set"), "{message}");
    assert!(mock.requests().is_empty());

    // OpenAI-compatible servers may run without a key: no Authorization header is sent.
    mock.push(Turn::text("Local."));
    let reply = stream_with(
        &client,
        ProviderKind::OpenAiCompatible,
        &conversation("Hi"),
        &mock,
        CancellationToken::new(),
        false,
    )
    .await;
    assert_eq!(reply.rendered, "Local.\n");
    assert_eq!(mock.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn errors_after_the_first_byte_are_not_retried() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS {
        mock.clear_requests();
        mock.push(Turn::text("Partial answer").failure(Failure::ErrorAfterSteps));
        mock.push(Turn::text("must not be requested"));
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        let error = reply.error();
        assert!(
            matches!(error, ProviderError::Stream { partial: true, .. }),
            "{kind:?}: {error:?}"
        );
        assert!(error.to_string().contains("may be partial"), "{error}");
        assert_eq!(
            reply.rendered,
            format!(
                "Partial answer\n\n{}\n",
                flemma_syntax::write::provider_error_marker(&error.to_string())
            ),
            "{kind:?}"
        );
        assert!(reply.retries().is_empty());
        assert_eq!(mock.requests().len(), 1, "{kind:?}");
        mock.clear_requests();
        // Drain the unused turn.
        stream(kind, &conversation("Hi"), &mock).await.summary();
    }
}

#[tokio::test]
async fn a_disconnect_mid_stream_says_content_may_be_partial() {
    let mock = MockProvider::start().await.unwrap();
    for kind in KINDS {
        mock.clear_requests();
        mock.push(
            Turn::text("A long answer that is cut off somewhere in the middle of an event.")
                .failure(Failure::DisconnectAfterBytes(700)),
        );
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        let error = reply.error();
        let message = error.to_string();
        assert!(
            matches!(
                error,
                ProviderError::Interrupted { .. } | ProviderError::Stream { .. }
            ),
            "{kind:?}: {error:?}"
        );
        assert!(
            message.contains("partial") || message.contains("truncated"),
            "{kind:?}: {message}"
        );
        assert!(reply.retries().is_empty());
        assert_eq!(mock.requests().len(), 1, "{kind:?}");
    }
}

#[tokio::test]
async fn refusals_and_truncation_are_reported() {
    let mock = MockProvider::start().await.unwrap();
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::Gemini,
    ] {
        mock.push(Turn::text("I can't").stop(MockStop::Refusal("cyber".to_string())));
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        let problem = reply.summary().stop_error();
        assert!(
            matches!(problem, Some(ProviderError::Refusal { .. })),
            "{kind:?}: {:?}",
            reply.summary().stop
        );

        mock.push(Turn::text("Once upon a").stop(MockStop::MaxTokens));
        let reply = stream(kind, &conversation("Hi"), &mock).await;
        assert_eq!(reply.summary().stop, StopReason::MaxTokens, "{kind:?}");
        assert!(
            reply
                .summary()
                .warnings
                .iter()
                .any(|w| w.starts_with("Response truncated")),
            "{kind:?}"
        );
    }
}

/// Established TCP connections that involve `port` (from `/proc/net/tcp*`).
fn established_connections(port: u16) -> usize {
    let port = format!("{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3
                && fields[3] == "01"
                && (fields[1].ends_with(&format!(":{port}"))
                    || fields[2].ends_with(&format!(":{port}")))
        })
        .count()
}

#[tokio::test]
async fn cancellation_mid_stream_closes_the_connection_at_once() {
    for kind in KINDS {
        let mock = MockProvider::start().await.unwrap();
        let long_answer = "word ".repeat(400);
        mock.push(Turn::text(long_answer).bytes_per_sec(2_000));
        let client = client();
        let started = std::time::Instant::now();
        let reply = stream_with(
            &client,
            kind,
            &conversation("Tell me a story"),
            &mock,
            CancellationToken::new(),
            true,
        )
        .await;
        assert!(
            matches!(reply.error(), ProviderError::Cancelled),
            "{kind:?}"
        );
        // Streaming the whole answer at this rate takes well over 10 s.
        assert!(started.elapsed() < Duration::from_secs(5), "{kind:?}");
        assert!(
            reply.rendered.ends_with(&format!("\n\n{ABORT_MARKER}\n")),
            "{}",
            reply.rendered
        );
        let port = mock.address().port();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while established_connections(port) > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if std::path::Path::new("/proc/net/tcp").exists() {
            // The probe sees the streaming connection (both ends) while it is open …
            assert!(reply.connections_at_cancel.unwrap_or(0) >= 1, "{kind:?}");
            // … and none once the client cancelled.
            assert_eq!(
                established_connections(port),
                0,
                "{kind:?}: connection still open"
            );
        }
        mock.shutdown().await;
    }
}

#[tokio::test]
async fn cancellation_during_a_retry_wait_stops_at_once() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::failing(Failure::Http {
        status: 429,
        retry_after: Some("30".to_string()),
        retry_after_ms: None,
    }));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let client = client();
    let started = std::time::Instant::now();
    let mut observer = |event: ClientEvent| {
        if matches!(event, ClientEvent::Retrying { .. }) {
            trigger.cancel();
        }
    };
    let result = client
        .stream(
            ProviderKind::Anthropic,
            &conversation("Hi"),
            &options(ProviderKind::Anthropic),
            &endpoint(ProviderKind::Anthropic, &mock),
            cancel,
            &mut observer,
        )
        .await;
    assert!(matches!(result, Err(ProviderError::Cancelled)));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn counting_tokens_and_listing_models() {
    let mock = MockProvider::start().await.unwrap();
    let client = client();
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::Gemini,
        ProviderKind::Vertex,
    ] {
        let count = client
            .count_tokens(
                kind,
                &conversation("How many tokens is this?"),
                &options(kind),
                &endpoint(kind, &mock),
                CancellationToken::new(),
            )
            .await;
        match count {
            Ok(count) => assert!(count > 0, "{kind:?}"),
            Err(error) => panic!("{kind:?}: {error}"),
        }
    }
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiCompatible,
        ProviderKind::Gemini,
    ] {
        let models = client
            .list_models(
                kind,
                &options(kind),
                &endpoint(kind, &mock),
                CancellationToken::new(),
            )
            .await;
        match models {
            Ok(models) => assert!(!models.is_empty(), "{kind:?}"),
            Err(error) => panic!("{kind:?}: {error}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn connection_errors_before_the_first_byte_are_retried() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client = client();
    let mut events = Vec::new();
    let mut observer = |event: ClientEvent| events.push(event);
    let result = client
        .stream(
            ProviderKind::Anthropic,
            &conversation("Hi"),
            &options(ProviderKind::Anthropic),
            &Endpoint::new(format!("http://127.0.0.1:{port}")),
            CancellationToken::new(),
            &mut observer,
        )
        .await;
    let Err(error) = result else {
        panic!("nothing listens on port {port}")
    };
    assert!(
        matches!(error, ProviderError::Connection { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
    let reasons: Vec<String> = events
        .iter()
        .filter_map(|event| match event {
            ClientEvent::Retrying { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{events:?}");
    assert!(reasons[0].starts_with("connection error"), "{reasons:?}");
}

#[tokio::test]
async fn a_401_fetches_a_fresh_token_and_retries_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("count");
    let gcloud = dir.path().join("gcloud");
    std::fs::write(
        &gcloud,
        format!(
            "#!/bin/sh\necho x >> '{0}'\necho \"ya29.token-$(wc -l < '{0}' | tr -d ' ')\"\n",
            counter.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&gcloud, std::fs::Permissions::from_mode(0o755)).unwrap();
    let environment = CredentialEnvironment::from_vars([(
        "PATH",
        format!("{}:/usr/bin:/bin", dir.path().display()),
    )]);
    let client = client_with(RetryPolicy::default(), environment);
    let mock = MockProvider::start().await.unwrap();
    let kind = ProviderKind::Vertex;
    mock.push(Turn::text("cached token still works"));
    mock.push(Turn::failing(Failure::Unauthorized));
    mock.push(Turn::text("fresh token"));
    // The second send meets the 401, resolves the token again and retries within the send.
    for expected in ["cached token still works\n", "fresh token\n"] {
        let reply = stream_with(
            &client,
            kind,
            &conversation("Hi"),
            &mock,
            CancellationToken::new(),
            false,
        )
        .await;
        assert_eq!(reply.rendered, expected);
    }
    let tokens: Vec<String> = mock
        .requests()
        .iter()
        .map(|request| request.header("authorization").unwrap_or("").to_string())
        .collect();
    assert_eq!(
        tokens,
        [
            "Bearer ya29.token-1",
            "Bearer ya29.token-1",
            "Bearer ya29.token-2"
        ]
    );
}

#[tokio::test]
async fn a_3_mb_reply_streams_and_renders_intact() {
    let mock = MockProvider::start().await.unwrap();
    // 3 000 "words" of 1 KiB: the mock sends one delta per word.
    let word: String = "lorem-ipsum-dolor-sit-amet-ünïcode-"
        .chars()
        .cycle()
        .take(1023)
        .collect();
    let answer = vec![word; 3_000].join(" ");
    for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
        mock.push(Turn::text(answer.clone()));
        let started = std::time::Instant::now();
        let reply = stream(kind, &conversation("Long, please"), &mock).await;
        let elapsed = started.elapsed();
        reply.summary();
        assert_eq!(reply.rendered.len(), answer.len() + 1, "{kind:?}");
        assert!(reply.rendered == format!("{answer}\n"), "{kind:?}");
        eprintln!(
            "{kind:?}: {:.1} MB of text over HTTP, decoded and rendered in {elapsed:?} ({:.0} MB/s, this build's profile)",
            answer.len() as f64 / 1e6,
            answer.len() as f64 / 1e6 / elapsed.as_secs_f64()
        );
    }
}

#[tokio::test]
async fn anthropic_redacted_thinking_follows_the_signed_block() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::default()
            .redacted_thinking("EmwKAhgBEgy3va3pzix")
            .thinking("Checking the weather.", "sig-1")
            .tool_call("weather", json!({"location": "Florence"}))
            .anthropic_padding(true),
    );
    let reply = stream(ProviderKind::Anthropic, &conversation("Weather?"), &mock).await;
    assert_eq!(reply.summary().stop, StopReason::ToolUse);
    let text = &reply.rendered;
    let tool = text.find("**Tool Use:** `weather`").expect(text);
    let signed = text
        .find("<thinking anthropic:signature=\"sig-1\">\nChecking the weather.\n</thinking>\n")
        .expect(text);
    let redacted = text
        .find("<thinking redacted>\nEmwKAhgBEgy3va3pzix\n</thinking>\n")
        .expect(text);
    assert!(tool < signed && signed < redacted, "{text}");
    assert!(
        text.contains("```json\n{\"location\":\"Florence\"}\n```\n\n<thinking"),
        "{text}"
    );
}

/// The watchdog (`idle_timeout`): a provider that goes silent in the middle of its reply is
/// stopped after that much silence, for every wire format, with what arrived kept.
#[tokio::test]
async fn a_stalled_stream_is_ended_by_the_watchdog() {
    let mock = MockProvider::start().await.unwrap();
    let resolver = CredentialResolver::new(credential_environment(), ResolverOptions::default());
    let client = ProviderClient::new(
        ClientConfig {
            idle_timeout: Duration::from_millis(300),
            ..ClientConfig::default()
        },
        Arc::new(resolver),
    )
    .expect("client builds");
    for kind in KINDS {
        mock.push(
            Turn::text("The first words arrive and then nothing more comes at all for a long time")
                .stall(30_000),
        );
        let started = std::time::Instant::now();
        let reply = stream_with(
            &client,
            kind,
            &conversation("Hi"),
            &mock,
            CancellationToken::new(),
            false,
        )
        .await;
        let error = reply.error();
        assert!(
            matches!(error, ProviderError::Silent { .. }),
            "{kind:?}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("sent nothing for 1 s in the middle of the reply"),
            "{message}"
        );
        assert!(message.contains("parameters.idle_timeout"), "{message}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{kind:?}: {:?}",
            started.elapsed()
        );
        assert!(
            reply.rendered.contains("The first")
                && reply.rendered.contains(&format!(
                    "<!-- flemma:aborted: {PROVIDER_ERROR_ABORT_PREFIX} "
                ))
                && reply.rendered.contains("sent nothing for 1 s"),
            "{kind:?}: {}",
            reply.rendered
        );
    }
}

/// A tool call whose streamed arguments repeat one pattern, or pass 256 KB, stops the reply at
/// once, for every wire format, with the seed's error; no call reaches its end.
#[tokio::test]
async fn runaway_tool_arguments_stop_the_reply() {
    let mock = MockProvider::start().await.unwrap();
    let counting: String = (0..50_000).map(|i| format!("{i:06}")).collect();
    for kind in KINDS {
        for (content, said) in [
            (
                "la-di-da ".repeat(5000),
                "its arguments repeat the same pattern (",
            ),
            (counting.clone(), "its arguments passed 256 KB ("),
        ] {
            mock.push(
                Turn::text("Writing it.")
                    .tool_call("write", json!({"path": "x.txt", "content": content})),
            );
            let reply = stream(kind, &conversation("Hi"), &mock).await;
            let message = reply.error().to_string();
            assert!(
                message.contains("[error: the model's tool call ran away: ")
                    && message.contains(said),
                "{kind:?}: {message}"
            );
            assert!(
                message
                    .contains("— generation stopped; rephrase the request, or try another model]"),
                "{message}"
            );
            assert!(
                !reply
                    .events
                    .iter()
                    .any(|e| matches!(e, StreamEvent::ToolCallEnd { .. })),
                "{kind:?}: the call never ends"
            );
            assert!(reply.rendered.contains("Writing it."), "{}", reply.rendered);
        }
    }
}
