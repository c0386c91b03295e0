//! OpenAI Chat Completions (`POST /v1/chat/completions`) and the OpenAI error bodies shared
//! with the Responses API.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{
    ChatReasoningField, KeyProblem, Reply, RequestContext, arguments_json, split_arguments,
    split_deltas, sse_frame, unix_now,
};
use crate::ids;
use crate::script::{MockStop, MockUsage, Step, Turn};

/// Whether the request asked for OpenAI's `obfuscation` padding field (on by default).
pub(crate) fn obfuscation_wanted(body: &Value) -> bool {
    body.pointer("/stream_options/include_obfuscation")
        .and_then(Value::as_bool)
        != Some(false)
}

/// A random `obfuscation` value whose length varies with the delta, like the real one.
pub(crate) fn obfuscation(delta: &str) -> String {
    ids::base62(16usize.saturating_sub(delta.len() % 16).max(2))
}

/// Headers of every OpenAI answer.
pub(crate) fn common_headers() -> Vec<(String, String)> {
    vec![
        ("x-request-id".to_string(), format!("req_{}", ids::hex(32))),
        ("openai-processing-ms".to_string(), "112".to_string()),
        (
            "x-ratelimit-limit-requests".to_string(),
            "10000".to_string(),
        ),
        (
            "x-ratelimit-limit-tokens".to_string(),
            "30000000".to_string(),
        ),
        (
            "x-ratelimit-remaining-requests".to_string(),
            "9999".to_string(),
        ),
        (
            "x-ratelimit-remaining-tokens".to_string(),
            "29999000".to_string(),
        ),
        ("x-ratelimit-reset-requests".to_string(), "6ms".to_string()),
        ("x-ratelimit-reset-tokens".to_string(), "0s".to_string()),
    ]
}

fn finish_reason(stop: &MockStop) -> &'static str {
    match stop {
        MockStop::EndTurn | MockStop::StopSequence | MockStop::Refusal(_) => "stop",
        MockStop::ToolUse => "tool_calls",
        MockStop::MaxTokens => "length",
    }
}

fn usage_object(usage: &MockUsage) -> Value {
    let prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let completion = usage.output_tokens + usage.thinking_tokens;
    let mut prompt_details = json!({"cached_tokens": usage.cache_read_tokens, "audio_tokens": 0});
    if usage.cache_write_tokens > 0 {
        prompt_details["cache_write_tokens"] = json!(usage.cache_write_tokens);
    }
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {
            "reasoning_tokens": usage.thinking_tokens, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
        }
    })
}

/// Builds chunks that share id, created and model.
struct ChunkWriter<'a> {
    id: String,
    created: u64,
    model: &'a str,
    include_usage: bool,
    obfuscate: bool,
    frames: Vec<Bytes>,
}

impl ChunkWriter<'_> {
    fn base(&self) -> Map<String, Value> {
        let mut chunk = Map::new();
        chunk.insert("id".into(), json!(self.id));
        chunk.insert("object".into(), json!("chat.completion.chunk"));
        chunk.insert("created".into(), json!(self.created));
        chunk.insert("model".into(), json!(self.model));
        chunk.insert("service_tier".into(), json!("default"));
        chunk.insert("system_fingerprint".into(), Value::Null);
        chunk
    }

    fn push_choice(&mut self, delta: Value, finish: Option<&str>, obfuscation_of: Option<&str>) {
        let mut chunk = self.base();
        chunk.insert(
            "choices".into(),
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
        );
        if self.include_usage {
            chunk.insert("usage".into(), Value::Null);
        }
        if let (true, Some(text)) = (self.obfuscate, obfuscation_of) {
            chunk.insert("obfuscation".into(), json!(obfuscation(text)));
        }
        self.frames
            .push(sse_frame(None, &Value::Object(chunk).to_string()));
    }
}

/// Renders a generation answer (SSE when the request said `"stream": true`).
pub(crate) fn render(turn: &Turn, ctx: &RequestContext<'_>) -> Reply {
    let usage = turn.resolved_usage(ctx.body_len);
    let stop = turn.resolved_stop();
    let include_usage = ctx
        .body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let mut writer = ChunkWriter {
        id: format!("chatcmpl-{}", ids::base62(29)),
        created: unix_now(),
        model: &ctx.model,
        include_usage,
        obfuscate: obfuscation_wanted(ctx.body),
        frames: Vec::new(),
    };
    let reasoning_key = match ctx.chat_reasoning_field {
        ChatReasoningField::ReasoningContent => "reasoning_content",
        ChatReasoningField::Reasoning => "reasoning",
    };

    // Like the recordings: a text answer opens with `content: ""` and `refusal: null`, a
    // tool-call or reasoning answer with `content: null`.
    let first_delta = if matches!(turn.steps.first(), Some(Step::Text(_)) | None) {
        json!({"role": "assistant", "content": "", "refusal": null})
    } else {
        json!({"role": "assistant", "content": null})
    };
    writer.push_choice(first_delta, None, Some(""));

    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for step in &turn.steps {
        match step {
            Step::Text(body) => {
                for piece in split_deltas(body) {
                    writer.push_choice(json!({"content": piece}), None, Some(&piece));
                }
                text.push_str(body);
            }
            Step::Thinking { text: thought, .. } => {
                for piece in split_deltas(thought) {
                    writer.push_choice(json!({ reasoning_key: piece }), None, Some(&piece));
                }
                reasoning.push_str(thought);
            }
            // Chat Completions has no representation for redacted reasoning.
            Step::RedactedThinking(_) => {}
            Step::ToolCall { name, id, input } => {
                let index = tool_calls.len();
                let id = id.clone().unwrap_or_else(ids::openai_call_id);
                let arguments = arguments_json(input);
                writer.push_choice(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    None,
                    Some(name),
                );
                for piece in split_arguments(&arguments) {
                    writer.push_choice(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        None,
                        Some(&piece),
                    );
                }
                tool_calls.push(json!({"id": id, "type": "function",
                                       "function": {"name": name, "arguments": arguments}}));
            }
        }
    }
    let refusal = match &stop {
        MockStop::Refusal(explanation) => {
            for piece in split_deltas(explanation) {
                writer.push_choice(json!({"refusal": piece}), None, Some(&piece));
            }
            Some(explanation.clone())
        }
        _ => None,
    };

    if !ctx.stream {
        if turn.mid_stream_error().is_some() {
            return http_error(500, None, None);
        }
        let mut message = json!({"role": "assistant",
                                 "content": if text.is_empty() { Value::Null } else { json!(text) },
                                 "refusal": refusal, "annotations": []});
        if !reasoning.is_empty() {
            message[reasoning_key] = json!(reasoning);
        }
        if !tool_calls.is_empty() {
            message["tool_calls"] = json!(tool_calls);
        }
        let body = json!({
            "id": writer.id, "object": "chat.completion", "created": writer.created,
            "model": ctx.model, "choices": [{"index": 0, "message": message, "logprobs": null,
                                             "finish_reason": finish_reason(&stop)}],
            "usage": usage_object(&usage), "service_tier": "default", "system_fingerprint": null
        });
        return Reply::json(200, common_headers(), &body);
    }

    if turn.mid_stream_error().is_some() {
        // One error object, then the stream just ends: no finish_reason, no [DONE].
        writer.frames.push(sse_frame(
            None,
            &json!({"error": {"message": "The server had an error while processing your request. Sorry about that!",
                              "type": "server_error", "param": null, "code": null}})
            .to_string(),
        ));
    } else {
        writer.push_choice(json!({}), Some(finish_reason(&stop)), None);
        if include_usage {
            let mut chunk = writer.base();
            chunk.insert("choices".into(), json!([]));
            chunk.insert("usage".into(), usage_object(&usage));
            writer
                .frames
                .push(sse_frame(None, &Value::Object(chunk).to_string()));
        }
        writer.frames.push(sse_frame(None, "[DONE]"));
    }
    Reply::sse(
        "text/event-stream; charset=utf-8",
        common_headers(),
        writer.frames,
    )
}

/// An OpenAI error body: `{"error":{"message","type","param","code"}}`.
pub(crate) fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// A pre-stream HTTP error with OpenAI's body and retry headers.
pub(crate) fn http_error(
    status: u16,
    retry_after: Option<&str>,
    retry_after_ms: Option<u64>,
) -> Reply {
    let (message, kind, code) = match status {
        400 => (
            "Invalid request: the request body could not be processed.",
            "invalid_request_error",
            None,
        ),
        403 => (
            "You are not allowed to access this resource.",
            "invalid_request_error",
            Some("unsupported_country_region_territory"),
        ),
        404 => (
            "The model `gpt-unknown` does not exist or you do not have access to it.",
            "invalid_request_error",
            Some("model_not_found"),
        ),
        429 => (
            "Rate limit reached for gpt-5 in organization org-mock on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2.5s. Visit https://platform.openai.com/account/rate-limits to learn more.",
            "tokens",
            Some("rate_limit_exceeded"),
        ),
        503 => (
            "The engine is currently overloaded, please try again later.",
            "server_error",
            None,
        ),
        _ => (
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
    };
    let mut headers = vec![("x-request-id".to_string(), format!("req_{}", ids::hex(32)))];
    if let Some(seconds) = retry_after {
        headers.push(("retry-after".to_string(), seconds.to_string()));
    }
    if let Some(ms) = retry_after_ms {
        headers.push(("retry-after-ms".to_string(), ms.to_string()));
    }
    if status == 429 {
        headers.push(("x-ratelimit-limit-tokens".to_string(), "30000".to_string()));
        headers.push(("x-ratelimit-remaining-tokens".to_string(), "0".to_string()));
        headers.push(("x-ratelimit-reset-tokens".to_string(), "2.5s".to_string()));
    }
    Reply::json(status, headers, &error_body(message, kind, code))
}

/// The 401 answer to a missing or wrong bearer key.
pub(crate) fn unauthorized(problem: KeyProblem, presented: &str) -> Reply {
    let body = match problem {
        KeyProblem::Missing => error_body(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            None,
        ),
        KeyProblem::Invalid => error_body(
            &format!(
                "Incorrect API key provided: {}. You can find your API key at https://platform.openai.com/account/api-keys.",
                mask_key(presented)
            ),
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
    };
    Reply::json(
        401,
        vec![("x-request-id".to_string(), format!("req_{}", ids::hex(32)))],
        &body,
    )
}

/// Masks a key like OpenAI does: a short prefix, stars, the last four characters.
fn mask_key(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len());
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}{}{tail}", "*".repeat(chars.len() - 7))
}

/// `GET /v1/models` in the OpenAI shape.
pub(crate) fn models() -> Reply {
    let data: Vec<Value> = [("gpt-5", 1_754_425_777u64), ("gpt-5-mini", 1_754_425_867), ("gpt-4o", 1_715_367_049)]
        .iter()
        .map(|(id, created)| json!({"id": id, "object": "model", "created": created, "owned_by": "system"}))
        .collect();
    Reply::json(
        200,
        common_headers(),
        &json!({"object": "list", "data": data}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_masked() {
        assert_eq!(mask_key("sk-abcdefghijklmnop"), "sk-************mnop");
        assert_eq!(mask_key("short"), "*****");
    }
}
