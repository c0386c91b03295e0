//! Rendering of scripted turns and errors in each provider's wire format.

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod gemini;
pub(crate) mod responses;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::WireFormat;
use crate::script::Turn;

pub(crate) use crate::deltas::split_deltas;

/// Which reasoning delta field Chat Completions streams use for thinking text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatReasoningField {
    /// `delta.reasoning_content` (llama.cpp, DeepSeek, xAI, Z.ai, Moonshot).
    #[default]
    ReasoningContent,
    /// `delta.reasoning` (Ollama, vLLM ≥ 0.11, OpenRouter).
    Reasoning,
}

/// A complete HTTP answer, its body already cut into the frames that are written (and flushed)
/// one by one.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub frames: Vec<Bytes>,
}

impl Reply {
    /// A JSON answer.
    pub fn json(status: u16, headers: Vec<(String, String)>, body: &Value) -> Self {
        let mut all = vec![("content-type".to_string(), "application/json".to_string())];
        all.extend(headers);
        Reply {
            status,
            headers: all,
            frames: vec![Bytes::from(body.to_string())],
        }
    }

    /// A server-sent-events answer.
    pub fn sse(content_type: &str, headers: Vec<(String, String)>, frames: Vec<Bytes>) -> Self {
        let mut all = vec![
            ("content-type".to_string(), content_type.to_string()),
            ("cache-control".to_string(), "no-cache".to_string()),
        ];
        all.extend(headers);
        Reply {
            status: 200,
            headers: all,
            frames,
        }
    }

    /// The same answer with the first frame that holds `needle` malformed: the last `}` of
    /// its JSON removed (a frame is one event).
    pub fn with_malformed_event(mut self, needle: &str) -> Self {
        let found = self
            .frames
            .iter()
            .position(|frame| frame.windows(needle.len()).any(|w| w == needle.as_bytes()));
        if let Some(index) = found {
            let frame = &self.frames[index];
            if let Some(brace) = frame.iter().rposition(|&b| b == b'}') {
                let mut broken = frame[..brace].to_vec();
                broken.extend_from_slice(&frame[brace + 1..]);
                self.frames[index] = Bytes::from(broken);
            }
        }
        self
    }

    /// A proxy's HTML error page.
    pub fn html(status: u16) -> Self {
        let reason = match status {
            502 => "Bad Gateway",
            503 => "Service Temporarily Unavailable",
            504 => "Gateway Time-out",
            500 => "Internal Server Error",
            _ => "Error",
        };
        let page = format!(
            "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n\
             <center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n\
             </body>\r\n</html>\r\n"
        );
        Reply {
            status,
            headers: vec![("content-type".to_string(), "text/html".to_string())],
            frames: vec![Bytes::from(page)],
        }
    }
}

/// What the renderers need to know about the request.
#[derive(Debug)]
pub(crate) struct RequestContext<'a> {
    /// The parsed JSON body (`Null` when it is not JSON).
    pub body: &'a Value,
    /// Size of the raw body, for token estimates.
    pub body_len: usize,
    /// Model name from the body or the path.
    pub model: String,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Chat Completions reasoning field.
    pub chat_reasoning_field: ChatReasoningField,
    /// Gemini only: the request had `alt=sse` (otherwise a JSON array is streamed).
    pub gemini_sse: bool,
    /// Anthropic only: Claude on Vertex (`…/publishers/anthropic/models/{m}:streamRawPredict`).
    pub anthropic_on_vertex: bool,
}

/// Renders `turn` as the answer to a generation request of `format`.
pub(crate) fn render_turn(format: WireFormat, turn: &Turn, ctx: &RequestContext<'_>) -> Reply {
    match format {
        WireFormat::Anthropic => anthropic::render(turn, ctx),
        WireFormat::OpenAiResponses | WireFormat::Codex => responses::render(turn, ctx),
        WireFormat::ChatCompletions => chat::render(turn, ctx),
        WireFormat::Gemini => gemini::render(turn, ctx, false),
        WireFormat::Vertex => gemini::render(turn, ctx, true),
    }
}

/// The provider's JSON error body (and headers) for an HTTP status.
pub(crate) fn http_error(
    format: WireFormat,
    status: u16,
    retry_after: Option<&str>,
    retry_after_ms: Option<u64>,
) -> Reply {
    match format {
        WireFormat::Anthropic => anthropic::http_error(status, retry_after, retry_after_ms),
        WireFormat::OpenAiResponses | WireFormat::ChatCompletions | WireFormat::Codex => {
            chat::http_error(status, retry_after, retry_after_ms)
        }
        WireFormat::Gemini | WireFormat::Vertex => {
            gemini::http_error(status, retry_after, retry_after_ms)
        }
    }
}

/// The provider's 400 answer when a generation request lacks something the real API
/// requires (`anthropic-version` header, or `anthropic_version` in the body on Vertex;
/// `model` (in the path on Vertex), `max_tokens`, `messages`, `contents`).
pub(crate) fn validate_generation(
    format: WireFormat,
    body: &Value,
    has_anthropic_version: bool,
    anthropic_on_vertex: bool,
) -> Option<Reply> {
    let missing = |key: &str| body.get(key).is_none_or(Value::is_null);
    match format {
        WireFormat::Anthropic => {
            let message = if !has_anthropic_version && anthropic_on_vertex {
                "anthropic_version: Field required"
            } else if !has_anthropic_version {
                "anthropic-version: header is required"
            } else if missing("model") && !anthropic_on_vertex {
                "model: Field required"
            } else if missing("max_tokens") {
                "max_tokens: Field required"
            } else if missing("messages") {
                "messages: Field required"
            } else {
                return None;
            };
            Some(anthropic::invalid_request(message))
        }
        // The Codex backend's own checks are `crate::chatgpt::refuse_body`.
        WireFormat::Codex => None,
        WireFormat::OpenAiResponses | WireFormat::ChatCompletions => {
            let body = if missing("model") {
                chat::error_body(
                    "you must provide a model parameter",
                    "invalid_request_error",
                    None,
                )
            } else if format == WireFormat::ChatCompletions && missing("messages") {
                let mut body = chat::error_body(
                    "Missing required parameter: 'messages'.",
                    "invalid_request_error",
                    Some("missing_required_parameter"),
                );
                body["error"]["param"] = json!("messages");
                body
            } else {
                return None;
            };
            Some(Reply::json(400, vec![], &body))
        }
        WireFormat::Gemini | WireFormat::Vertex => {
            if !missing("contents") {
                return None;
            }
            Some(Reply::json(
                400,
                vec![],
                &json!({"error": {"code": 400,
                    "message": "* GenerateContentRequest.contents: contents is not specified\n",
                    "status": "INVALID_ARGUMENT"}}),
            ))
        }
    }
}

/// Whose key is checked and how it was (not) presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyProblem {
    /// No key at all.
    Missing,
    /// A key that is not the expected one.
    Invalid,
}

/// The provider's real answer to a missing or wrong key.
pub(crate) fn unauthorized(format: WireFormat, problem: KeyProblem, presented: &str) -> Reply {
    match format {
        WireFormat::Anthropic => anthropic::unauthorized(problem),
        WireFormat::OpenAiResponses | WireFormat::ChatCompletions | WireFormat::Codex => {
            chat::unauthorized(problem, presented)
        }
        WireFormat::Gemini => gemini::unauthorized_gemini(problem),
        WireFormat::Vertex => gemini::unauthorized_vertex(),
    }
}

/// A provider's refusal of a prompt longer than the context window, with the provider's own
/// body (`body_len` gives the token count it names).
pub(crate) fn too_long(format: WireFormat, body_len: usize) -> Reply {
    let tokens = estimate_tokens(body_len);
    let body = match format {
        WireFormat::Anthropic => serde_json::json!({
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": format!("prompt is too long: {tokens} tokens > 200000 maximum")
            },
            "request_id": "req_mock_too_long"
        }),
        WireFormat::OpenAiResponses | WireFormat::ChatCompletions | WireFormat::Codex => {
            serde_json::json!({"error": {
                "message": format!("This model's maximum context length is 128000 tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded"
            }})
        }
        WireFormat::Gemini | WireFormat::Vertex => serde_json::json!({"error": {
            "code": 400,
            "message": format!("The input token count ({tokens}) exceeds the maximum number of tokens allowed (1048576)."),
            "status": "INVALID_ARGUMENT"
        }}),
    };
    Reply::json(400, vec![], &body)
}

/// The text of the last user message of a generation request, for echo mode.
pub(crate) fn last_user_text(format: WireFormat, body: &Value) -> String {
    let text = match format {
        WireFormat::Anthropic => last_message_text(body.get("messages"), "role", "user", "content"),
        WireFormat::ChatCompletions => {
            last_message_text(body.get("messages"), "role", "user", "content")
        }
        WireFormat::OpenAiResponses | WireFormat::Codex => match body.get("input") {
            Some(Value::String(text)) => Some(text.clone()),
            other => last_message_text(other, "role", "user", "content"),
        },
        WireFormat::Gemini | WireFormat::Vertex => {
            last_message_text(body.get("contents"), "role", "user", "parts")
        }
    };
    text.unwrap_or_default()
}

fn last_message_text(
    messages: Option<&Value>,
    role_key: &str,
    role: &str,
    content_key: &str,
) -> Option<String> {
    let messages = messages?.as_array()?;
    let message = messages.iter().rev().find(|m| {
        m.get(role_key).and_then(Value::as_str) == Some(role) && has_text(m, content_key)
    })?;
    match message.get(content_key)? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// Whether a message has text content (a user message that only carries tool results is
/// skipped by echo mode).
fn has_text(message: &Value, content_key: &str) -> bool {
    match message.get(content_key) {
        Some(Value::String(_)) => true,
        Some(Value::Array(parts)) => parts.iter().any(|p| p.get("text").is_some()),
        _ => false,
    }
}

/// A rough token count of a request body, for `count_tokens` endpoints and default usage.
pub(crate) fn estimate_tokens(body_len: usize) -> u64 {
    (body_len / 4).max(1) as u64
}

/// Splits serialized tool arguments into pieces of about 12 characters (on char boundaries).
pub(crate) fn split_arguments(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(12)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Tool arguments as a JSON object string (`{}` for a `null` input).
pub(crate) fn arguments_json(input: &Value) -> String {
    match input {
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    }
}

/// Tool arguments as a JSON object (`{}` for a `null` input).
pub(crate) fn arguments_object(input: &Value) -> Value {
    match input {
        Value::Null => json!({}),
        other => other.clone(),
    }
}

/// One SSE event with `\n\n` separator.
pub(crate) fn sse_frame(event: Option<&str>, data: &str) -> Bytes {
    match event {
        Some(name) => Bytes::from(format!("event: {name}\ndata: {data}\n\n")),
        None => Bytes::from(format!("data: {data}\n\n")),
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The first entry of a string-or-array field (`stop_sequences`, `stop`).
pub(crate) fn first_stop_sequence(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items.first().and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_concatenate_to_the_original() {
        for text in [
            "Hello world",
            "  lead and trail  ",
            "one",
            "a\n\nb c",
            "Olá mundo!",
        ] {
            let deltas = split_deltas(text);
            assert_eq!(deltas.concat(), text);
        }
        assert_eq!(
            split_deltas("Hello big world"),
            vec!["Hello", " big", " world"]
        );
        assert!(split_deltas("").is_empty());
    }

    #[test]
    fn arguments_split_on_char_boundaries() {
        let args = r#"{"city":"Zürich, Österreich und mehr"}"#;
        let pieces = split_arguments(args);
        assert!(pieces.len() > 2);
        assert_eq!(pieces.concat(), args);
    }

    #[test]
    fn echo_finds_last_user_text() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "5"}]}
        ]});
        assert_eq!(last_user_text(WireFormat::Anthropic, &body), "second");
        let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        assert_eq!(last_user_text(WireFormat::Gemini, &gemini), "hi");
        let responses = json!({"input": "plain"});
        assert_eq!(
            last_user_text(WireFormat::OpenAiResponses, &responses),
            "plain"
        );
    }
}
