//! Gemini API (`/v1beta/models/{m}:streamGenerateContent`) and Vertex AI
//! (`…/publishers/google/models/{m}:streamGenerateContent`).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{KeyProblem, Reply, RequestContext, arguments_object, split_deltas};
use crate::ids;
use crate::script::{MidStreamError, MockStop, MockUsage, Step, Turn};

/// The event separator Google's SSE uses.
const SEPARATOR: &str = "\r\n\r\n";

fn finish_reason(stop: &MockStop) -> &'static str {
    match stop {
        MockStop::EndTurn | MockStop::ToolUse | MockStop::StopSequence => "STOP",
        MockStop::MaxTokens => "MAX_TOKENS",
        MockStop::Refusal(_) => "SAFETY",
    }
}

/// One part of the answer and the output tokens it carries.
struct PlannedPart {
    part: Value,
    is_thought: bool,
    is_call: bool,
}

fn plan_parts(turn: &Turn, vertex: bool) -> Vec<PlannedPart> {
    let mut parts = Vec::new();
    for step in &turn.steps {
        match step {
            Step::Text(text) => {
                for piece in split_deltas(text) {
                    parts.push(PlannedPart {
                        part: json!({"text": piece}),
                        is_thought: false,
                        is_call: false,
                    });
                }
            }
            Step::Thinking { text, .. } => {
                for piece in split_deltas(text) {
                    parts.push(PlannedPart {
                        part: json!({"text": piece, "thought": true}),
                        is_thought: true,
                        is_call: false,
                    });
                }
            }
            // No Gemini equivalent.
            Step::RedactedThinking(_) => {}
            Step::ToolCall { name, id, input } => {
                let mut call = json!({"name": name, "args": arguments_object(input)});
                match id {
                    Some(id) => call["id"] = json!(id),
                    // Gemini 3 on the Gemini API gives calls a short id; Vertex gives none.
                    None if !vertex => call["id"] = json!(ids::lower_alnum(8)),
                    None => {}
                }
                parts.push(PlannedPart {
                    part: json!({"functionCall": call}),
                    is_thought: false,
                    is_call: true,
                });
            }
        }
    }
    // The signature goes on the first functionCall part, or else on the last text part.
    let signature = turn.steps.iter().find_map(|s| match s {
        Step::Thinking { signature, .. } if !signature.is_empty() => Some(signature.clone()),
        _ => None,
    });
    if let Some(signature) = signature {
        let target = parts
            .iter()
            .position(|p| p.is_call)
            .or_else(|| parts.iter().rposition(|p| !p.is_thought && !p.is_call));
        match target {
            Some(index) => parts[index].part["thoughtSignature"] = json!(signature),
            None => parts.push(PlannedPart {
                part: json!({"text": "", "thoughtSignature": signature}),
                is_thought: false,
                is_call: false,
            }),
        }
    }
    parts
}

fn usage_metadata(usage: &MockUsage, candidates: u64, vertex: bool) -> Value {
    let prompt = usage.input_tokens + usage.cache_read_tokens;
    let mut meta = Map::new();
    meta.insert("promptTokenCount".into(), json!(prompt));
    if candidates > 0 {
        meta.insert("candidatesTokenCount".into(), json!(candidates));
    }
    meta.insert(
        "totalTokenCount".into(),
        json!(prompt + candidates + usage.thinking_tokens),
    );
    if usage.cache_read_tokens > 0 {
        meta.insert(
            "cachedContentTokenCount".into(),
            json!(usage.cache_read_tokens),
        );
    }
    if vertex {
        meta.insert("trafficType".into(), json!("ON_DEMAND"));
    }
    meta.insert(
        "promptTokensDetails".into(),
        json!([{"modality": "TEXT", "tokenCount": prompt}]),
    );
    if usage.thinking_tokens > 0 {
        meta.insert("thoughtsTokenCount".into(), json!(usage.thinking_tokens));
    }
    Value::Object(meta)
}

/// Renders a generation answer: SSE with `alt=sse`, a streamed JSON array without it, one
/// JSON object for `:generateContent`.
pub(crate) fn render(turn: &Turn, ctx: &RequestContext<'_>, vertex: bool) -> Reply {
    let usage = turn.resolved_usage(ctx.body_len);
    let stop = turn.resolved_stop();
    let response_id = ids::base62(23);
    let create_time = "2026-03-12T18:05:56.457623Z";
    let mut parts = plan_parts(turn, vertex);
    let error = turn.mid_stream_error();

    let chunk = |parts: Vec<Value>, finish: Option<&str>, usage_meta: Value, last_is_call: bool| {
        let mut candidate = Map::new();
        candidate.insert("content".into(), json!({"parts": parts, "role": "model"}));
        if let Some(finish) = finish {
            candidate.insert("finishReason".into(), json!(finish));
        }
        if !vertex {
            candidate.insert("index".into(), json!(0));
        }
        if finish.is_some() && last_is_call && vertex {
            candidate.insert(
                "finishMessage".into(),
                json!("Model generated function call(s)."),
            );
        }
        let mut response = Map::new();
        response.insert("candidates".into(), json!([Value::Object(candidate)]));
        response.insert("usageMetadata".into(), usage_meta);
        response.insert("modelVersion".into(), json!(ctx.model));
        if vertex {
            response.insert("createTime".into(), json!(create_time));
        }
        response.insert("responseId".into(), json!(response_id));
        Value::Object(response)
    };

    if !ctx.stream {
        if error.is_some() {
            return http_error(500, None, None);
        }
        let all: Vec<Value> = merge_parts(parts.into_iter().map(|p| p.part).collect());
        let body = chunk(
            all,
            Some(finish_reason(&stop)),
            usage_metadata(&usage, usage.output_tokens, vertex),
            false,
        );
        return Reply::json(200, vec![], &body);
    }

    // Gemini 3 ends a turn whose last part is a call with an empty text part carrying the
    // finish reason; Vertex (Gemini 2.5 style) puts it on the call chunk itself.
    let ends_with_call = parts.last().is_some_and(|p| p.is_call);
    if parts.is_empty() || (ends_with_call && !vertex) {
        parts.push(PlannedPart {
            part: json!({"text": ""}),
            is_thought: false,
            is_call: false,
        });
    }
    let visible = parts.iter().filter(|p| !p.is_thought).count().max(1) as u64;
    let mut seen_visible = 0u64;
    let count = parts.len();
    let mut chunks = Vec::new();
    for (index, planned) in parts.into_iter().enumerate() {
        if !planned.is_thought {
            seen_visible += 1;
        }
        let candidates = usage.output_tokens * seen_visible / visible;
        let meta = if vertex && index == 0 && count > 1 {
            json!({"trafficType": "ON_DEMAND"})
        } else {
            usage_metadata(&usage, candidates, vertex)
        };
        let is_last = index + 1 == count;
        let finish = if is_last && error.is_none() {
            Some(finish_reason(&stop))
        } else {
            None
        };
        chunks.push(chunk(vec![planned.part], finish, meta, planned.is_call).to_string());
    }

    let error_json = json!({"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}})
        .to_string();
    let headers = vec![("x-goog-request-id".to_string(), ids::hex(16))];
    if !ctx.gemini_sse {
        // Without alt=sse the API streams one JSON array of responses.
        let mut frames: Vec<Bytes> = Vec::new();
        for (index, chunk) in chunks.iter().enumerate() {
            let lead = if index == 0 { "[" } else { ",\r\n" };
            frames.push(Bytes::from(format!("{lead}{chunk}")));
        }
        if error.is_some() {
            frames.push(Bytes::from(format!(",\r\n{error_json}")));
        }
        frames.push(Bytes::from("]"));
        let mut all = vec![(
            "content-type".to_string(),
            "application/json; charset=UTF-8".to_string(),
        )];
        all.extend(headers);
        return Reply {
            status: 200,
            headers: all,
            frames,
        };
    }
    let mut frames: Vec<Bytes> = chunks
        .iter()
        .map(|c| Bytes::from(format!("data: {c}{SEPARATOR}")))
        .collect();
    match error {
        Some(MidStreamError::Standard) => frames.push(Bytes::from(format!("{error_json}\r\n"))),
        Some(MidStreamError::AlternativeShape) => {
            frames.push(Bytes::from(format!("data: {error_json}{SEPARATOR}")));
        }
        None => {}
    }
    Reply::sse("text/event-stream", headers, frames)
}

/// Joins adjacent text parts of the same kind, as a non-streaming answer has them.
fn merge_parts(parts: Vec<Value>) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    for part in parts {
        let joinable = |p: &Value| p.get("text").is_some() && p.get("thoughtSignature").is_none();
        if let Some(last) = merged.last_mut()
            && joinable(last)
            && joinable(&part)
            && last.get("thought") == part.get("thought")
        {
            let text = format!(
                "{}{}",
                last["text"].as_str().unwrap_or_default(),
                part["text"].as_str().unwrap_or_default()
            );
            last["text"] = json!(text);
            continue;
        }
        merged.push(part);
    }
    merged
}

fn rpc_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// A pre-stream HTTP error with Google's body; a 429 carries `RetryInfo.retryDelay` when a
/// retry delay was scripted.
pub(crate) fn http_error(
    status: u16,
    retry_after: Option<&str>,
    retry_after_ms: Option<u64>,
) -> Reply {
    let message = match status {
        400 => "Request contains an invalid argument.",
        403 => "The caller does not have permission",
        404 => {
            "models/gemini-unknown is not found for API version v1beta, or is not supported for generateContent."
        }
        429 => {
            "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
        }
        503 => "The model is overloaded. Please try again later.",
        504 => "Deadline expired before operation could complete.",
        _ => {
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
        }
    };
    let mut error = json!({"code": status, "message": message, "status": rpc_status(status)});
    if status == 429 {
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                            "quotaDimensions": {"model": "gemini-2.5-pro", "location": "global"}}]
        })];
        let delay = match (retry_after_ms, retry_after) {
            (Some(ms), _) => Some(format!("{}s", ms as f64 / 1000.0)),
            (None, Some(seconds)) => Some(format!("{seconds}s")),
            (None, None) => None,
        };
        if let Some(delay) = delay {
            details.push(
                json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}),
            );
        }
        error["details"] = json!(details);
    }
    Reply::json(status, vec![], &json!({"error": error}))
}

/// The Gemini API's answer to a missing key (403) or a wrong key (400 `API_KEY_INVALID`):
/// the real API does not use 401 for API keys.
pub(crate) fn unauthorized_gemini(problem: KeyProblem) -> Reply {
    match problem {
        KeyProblem::Missing => Reply::json(
            403,
            vec![],
            &json!({"error": {"code": 403,
                "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
                "status": "PERMISSION_DENIED"}}),
        ),
        KeyProblem::Invalid => Reply::json(
            400,
            vec![],
            &json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                             "domain": "googleapis.com",
                             "metadata": {"service": "generativelanguage.googleapis.com"}}]}}),
        ),
    }
}

/// Vertex's 401 for a missing or bad OAuth token.
pub(crate) fn unauthorized_vertex() -> Reply {
    Reply::json(
        401,
        vec![(
            "www-authenticate".to_string(),
            "Bearer realm=\"https://accounts.google.com/\"".to_string(),
        )],
        &json!({"error": {"code": 401,
            "message": "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
            "status": "UNAUTHENTICATED"}}),
    )
}

/// `:countTokens`.
pub(crate) fn count_tokens(body_len: usize) -> Reply {
    let tokens = super::estimate_tokens(body_len);
    Reply::json(
        200,
        vec![],
        &json!({"totalTokens": tokens, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}),
    )
}

/// `GET /v1beta/models`.
pub(crate) fn models() -> Reply {
    let generative = ["generateContent", "streamGenerateContent", "countTokens"];
    let models = json!([
        {"name": "models/gemini-2.5-flash", "version": "001", "displayName": "Gemini 2.5 Flash",
         "inputTokenLimit": 1_048_576, "outputTokenLimit": 65_536,
         "supportedGenerationMethods": generative, "thinking": true},
        {"name": "models/gemini-2.5-pro", "version": "2.5", "displayName": "Gemini 2.5 Pro",
         "inputTokenLimit": 1_048_576, "outputTokenLimit": 65_536,
         "supportedGenerationMethods": generative, "thinking": true},
        {"name": "models/text-embedding-004", "version": "004", "displayName": "Text Embedding 004",
         "inputTokenLimit": 2048, "outputTokenLimit": 1,
         "supportedGenerationMethods": ["embedContent"]}
    ]);
    Reply::json(200, vec![], &json!({"models": models}))
}
