//! Anthropic Messages API (`POST /v1/messages`).

use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    KeyProblem, Reply, RequestContext, arguments_json, arguments_object, first_stop_sequence,
    split_arguments, split_deltas, sse_frame,
};
use crate::ids;
use crate::script::{MockStop, MockUsage, Step, Turn};

const RATE_LIMIT_RESET: &str = "2026-08-21T12:00:17Z";

/// Headers every Anthropic answer carries.
fn common_headers(request_id: &str) -> Vec<(String, String)> {
    vec![
        ("request-id".to_string(), request_id.to_string()),
        (
            "anthropic-organization-id".to_string(),
            "00000000-0000-4000-8000-000000000000".into(),
        ),
    ]
}

fn rate_limit_headers(remaining: u64) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for (kind, limit) in [
        ("requests", 1000u64),
        ("tokens", 480_000),
        ("input-tokens", 400_000),
        ("output-tokens", 80_000),
    ] {
        let left = if remaining == 0 { 0 } else { limit - 1 };
        headers.push((
            format!("anthropic-ratelimit-{kind}-limit"),
            limit.to_string(),
        ));
        headers.push((
            format!("anthropic-ratelimit-{kind}-remaining"),
            left.to_string(),
        ));
        headers.push((
            format!("anthropic-ratelimit-{kind}-reset"),
            RATE_LIMIT_RESET.to_string(),
        ));
    }
    headers
}

/// Writes SSE events, optionally padding the JSON like the real API.
struct EventWriter {
    frames: Vec<Bytes>,
    padding: bool,
}

impl EventWriter {
    fn push(&mut self, event: &str, data: Value) {
        let mut text = data.to_string();
        if self.padding {
            // Vary the run length like the recordings do (some events have none).
            let spaces = (self.frames.len() % 4) * 3;
            if let Some(pos) = text.rfind('}') {
                text.insert_str(pos, &" ".repeat(spaces));
            }
        }
        self.frames.push(sse_frame(Some(event), &text));
    }

    fn ping(&mut self) {
        self.frames
            .push(sse_frame(Some("ping"), r#"{"type": "ping"}"#));
    }
}

fn stop_reason(stop: &MockStop) -> &'static str {
    match stop {
        MockStop::EndTurn => "end_turn",
        MockStop::ToolUse => "tool_use",
        MockStop::MaxTokens => "max_tokens",
        MockStop::Refusal(_) => "refusal",
        MockStop::StopSequence => "stop_sequence",
    }
}

fn start_usage(usage: &MockUsage) -> Value {
    let output = usage.output_tokens + usage.thinking_tokens;
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0
        },
        "output_tokens": output.min(4),
        "service_tier": "standard"
    })
}

fn final_usage(usage: &MockUsage, legacy: bool) -> Value {
    let output = usage.output_tokens + usage.thinking_tokens;
    if legacy {
        json!({"output_tokens": output})
    } else {
        json!({
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_read_input_tokens": usage.cache_read_tokens,
            "output_tokens": output
        })
    }
}

/// Renders a generation answer (SSE when the request said `"stream": true`).
pub(crate) fn render(turn: &Turn, ctx: &RequestContext<'_>) -> Reply {
    let request_id = ids::anthropic_request_id();
    let message_id = if ctx.anthropic_on_vertex {
        format!("msg_vrtx_01{}", ids::base62(22))
    } else {
        ids::anthropic_message_id()
    };
    let usage = turn.resolved_usage(ctx.body_len);
    let stop = turn.resolved_stop();
    let stop_sequence = match stop {
        MockStop::StopSequence => Some(
            first_stop_sequence(ctx.body.get("stop_sequences")).unwrap_or_else(|| "END".into()),
        ),
        _ => None,
    };
    let mut delta = json!({"stop_reason": stop_reason(&stop), "stop_sequence": stop_sequence});
    if let MockStop::Refusal(explanation) = &stop {
        delta["stop_details"] =
            json!({"type": "refusal", "category": null, "explanation": explanation});
    }

    let mut writer = EventWriter {
        frames: Vec::new(),
        padding: turn.anthropic_padding,
    };
    let mut content = Vec::new();
    writer.push(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": ctx.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": start_usage(&usage)
        }}),
    );
    for (index, step) in turn.steps.iter().enumerate() {
        // Real streams carry one ping right after the first content_block_start.
        content.push(render_block(&mut writer, index, step, index == 0));
    }

    if !ctx.stream {
        if turn.mid_stream_error().is_some() {
            return http_error(529, None, None);
        }
        let mut message = json!({
            "id": message_id, "type": "message", "role": "assistant", "model": ctx.model,
            "content": content, "stop_reason": stop_reason(&stop),
            "stop_sequence": delta["stop_sequence"].clone(),
            "usage": start_usage(&usage)
        });
        message["usage"]["output_tokens"] = json!(usage.output_tokens + usage.thinking_tokens);
        if let Some(details) = delta.get("stop_details") {
            message["stop_details"] = details.clone();
        }
        let mut headers = common_headers(&request_id);
        headers.extend(rate_limit_headers(1));
        return Reply::json(200, headers, &message);
    }

    if turn.mid_stream_error().is_some() {
        // The stream ends right after the error event: no message_delta, no message_stop.
        writer.frames.push(sse_frame(
            Some("error"),
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
        ));
    } else {
        writer.push(
            "message_delta",
            json!({"type": "message_delta", "delta": delta,
                   "usage": final_usage(&usage, turn.anthropic_legacy_usage)}),
        );
        writer.push("message_stop", json!({"type": "message_stop"}));
    }
    let mut headers = common_headers(&request_id);
    headers.extend(rate_limit_headers(1));
    Reply::sse("text/event-stream; charset=utf-8", headers, writer.frames)
}

/// Streams one content block; returns its final form (for non-streaming answers).
fn render_block(writer: &mut EventWriter, index: usize, step: &Step, ping: bool) -> Value {
    let start = |writer: &mut EventWriter, block: Value| {
        writer.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        if ping {
            writer.ping();
        }
    };
    let delta_event = |writer: &mut EventWriter, delta: Value| {
        writer.push(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    };
    let block = match step {
        Step::Text(text) => {
            start(writer, json!({"type": "text", "text": ""}));
            for piece in split_deltas(text) {
                delta_event(writer, json!({"type": "text_delta", "text": piece}));
            }
            json!({"type": "text", "text": text})
        }
        Step::Thinking { text, signature } => {
            start(
                writer,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            );
            for piece in split_deltas(text) {
                delta_event(writer, json!({"type": "thinking_delta", "thinking": piece}));
            }
            // Real streams close the thinking text with an empty delta before the signature.
            delta_event(writer, json!({"type": "thinking_delta", "thinking": ""}));
            delta_event(
                writer,
                json!({"type": "signature_delta", "signature": signature}),
            );
            json!({"type": "thinking", "thinking": text, "signature": signature})
        }
        Step::RedactedThinking(data) => {
            start(writer, json!({"type": "redacted_thinking", "data": data}));
            json!({"type": "redacted_thinking", "data": data})
        }
        Step::ToolCall { name, id, input } => {
            let id = id.clone().unwrap_or_else(ids::anthropic_tool_id);
            start(
                writer,
                json!({"type": "tool_use", "id": id, "name": name, "input": {},
                       "caller": {"type": "direct"}}),
            );
            delta_event(
                writer,
                json!({"type": "input_json_delta", "partial_json": ""}),
            );
            for piece in split_arguments(&arguments_json(input)) {
                delta_event(
                    writer,
                    json!({"type": "input_json_delta", "partial_json": piece}),
                );
            }
            json!({"type": "tool_use", "id": id, "name": name, "input": arguments_object(input)})
        }
    };
    writer.push(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    );
    block
}

fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

fn error_message(status: u16) -> &'static str {
    match status {
        400 => "prompt is too long: 205351 tokens > 200000 maximum",
        401 => "invalid x-api-key",
        402 => {
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
        }
        403 => "Your API key does not have permission to use the specified resource.",
        404 => "model: claude-unknown",
        413 => "Request exceeds the maximum allowed number of bytes.",
        429 => {
            "This request would exceed the rate limit for your organization of 80,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."
        }
        504 => "Request timed out",
        529 => "Overloaded",
        _ => "Internal server error",
    }
}

fn error_body(status: u16, message: &str, request_id: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message},
           "request_id": request_id})
}

/// A pre-stream HTTP error with Anthropic's body and retry headers.
pub(crate) fn http_error(
    status: u16,
    retry_after: Option<&str>,
    retry_after_ms: Option<u64>,
) -> Reply {
    let request_id = ids::anthropic_request_id();
    let mut headers = common_headers(&request_id);
    let retryable = matches!(status, 408 | 409 | 429) || status >= 500;
    headers.push(("x-should-retry".to_string(), retryable.to_string()));
    if let Some(seconds) = retry_after {
        headers.push(("retry-after".to_string(), seconds.to_string()));
    }
    if let Some(ms) = retry_after_ms {
        headers.push(("retry-after-ms".to_string(), ms.to_string()));
    }
    if status == 429 {
        headers.extend(rate_limit_headers(0));
    }
    Reply::json(
        status,
        headers,
        &error_body(status, error_message(status), &request_id),
    )
}

/// A 400 `invalid_request_error` with `message`.
pub(crate) fn invalid_request(message: &str) -> Reply {
    let request_id = ids::anthropic_request_id();
    let mut headers = common_headers(&request_id);
    headers.push(("x-should-retry".to_string(), "false".to_string()));
    Reply::json(400, headers, &error_body(400, message, &request_id))
}

/// The 401 answer to a missing or wrong `x-api-key`.
pub(crate) fn unauthorized(problem: KeyProblem) -> Reply {
    let request_id = ids::anthropic_request_id();
    let message = match problem {
        KeyProblem::Missing => "x-api-key header is required",
        KeyProblem::Invalid => "invalid x-api-key",
    };
    let mut headers = common_headers(&request_id);
    headers.push(("x-should-retry".to_string(), "false".to_string()));
    Reply::json(401, headers, &error_body(401, message, &request_id))
}

/// `POST /v1/messages/count_tokens`.
pub(crate) fn count_tokens(body_len: usize) -> Reply {
    Reply::json(
        200,
        vec![],
        &json!({"input_tokens": super::estimate_tokens(body_len)}),
    )
}

/// `GET /v1/models`.
pub(crate) fn models() -> Reply {
    let models = [
        (
            "claude-opus-4-1-20250805",
            "Claude Opus 4.1",
            "2025-08-05T00:00:00Z",
        ),
        (
            "claude-sonnet-4-5-20250929",
            "Claude Sonnet 4.5",
            "2025-09-29T00:00:00Z",
        ),
        (
            "claude-haiku-4-5-20251001",
            "Claude Haiku 4.5",
            "2025-10-01T00:00:00Z",
        ),
    ];
    let data: Vec<Value> = models
        .iter()
        .map(|(id, name, created)| {
            json!({"type": "model", "id": id, "display_name": name, "created_at": created})
        })
        .collect();
    Reply::json(
        200,
        vec![],
        &json!({"data": data, "has_more": false, "first_id": models[0].0,
                "last_id": models[models.len() - 1].0}),
    )
}
