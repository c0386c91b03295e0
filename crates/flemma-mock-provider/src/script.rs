//! The script language of the mock: scripted turns and what they contain.
//!
//! A [`Turn`] is format-neutral: the same turn is rendered as an Anthropic, OpenAI Responses,
//! Chat Completions, Gemini or Vertex reply depending on the endpoint that receives the request.
//! Every type derives `Serialize`/`Deserialize`, so the control API (`POST /_mock/turns`) and
//! `--script` files use exactly the same JSON, e.g.
//! `[{"steps":[{"text":"Hi"},{"tool_call":{"name":"bash","input":{"cmd":"ls"}}}]}]`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One scripted model answer, consumed (FIFO) by the next generation request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Turn {
    /// Content rendered in order, in the wire format of the request's endpoint.
    pub steps: Vec<Step>,
    /// Why the model stopped. Default: [`MockStop::ToolUse`] when a tool call is present,
    /// [`MockStop::EndTurn`] otherwise.
    pub stop: Option<MockStop>,
    /// Token counts to report. Default: rough estimates (request bytes / 4, words of output).
    pub usage: Option<MockUsage>,
    /// An error to produce before or after the first byte.
    pub failure: Option<Failure>,
    /// Pace the response body at this many bytes per second (`0` means unpaced).
    pub bytes_per_sec: Option<u64>,
    /// Keep the connection open this many milliseconds after the last event before ending the
    /// body (a server that does not close the stream after its terminal event).
    pub hold_open_ms: Option<u64>,
    /// Go silent this many milliseconds once half of the body's events are sent, before the
    /// rest (a model that stalls in the middle of its answer); ends early when the client goes
    /// away.
    pub stall_ms: Option<u64>,
    /// Anthropic only: pad `data:` JSON with runs of spaces before the final `}`, like the
    /// real API does.
    pub anthropic_padding: bool,
    /// Anthropic only: send the older `message_delta.usage` shape that carries only
    /// `output_tokens` (instead of repeating the input and cache counts).
    pub anthropic_legacy_usage: bool,
    /// Send the first event whose bytes hold this text malformed (its JSON cut short: the last
    /// `}` removed), as a broken proxy or server would; the rest of the stream as scripted.
    /// In every streaming format.
    pub malformed_event: Option<String>,
}

/// In a tool call's input, stands for the last background job id of the request
/// ([`Turn::with_last_job_id`]).
pub const LAST_JOB_ID: &str = "$LAST_JOB_ID";

fn last_job_id(text: &str) -> Option<&str> {
    text.match_indices("job_")
        .filter_map(|(at, _)| text.get(at..at + 12))
        .filter(|id| id[4..].bytes().all(|b| b.is_ascii_alphanumeric()))
        .last()
}

fn replace_in(value: &mut Value, job: &str) {
    match value {
        Value::String(text) if text.contains(LAST_JOB_ID) => *text = text.replace(LAST_JOB_ID, job),
        Value::Array(items) => items.iter_mut().for_each(|item| replace_in(item, job)),
        Value::Object(map) => map.values_mut().for_each(|item| replace_in(item, job)),
        _ => {}
    }
}

/// One piece of a scripted answer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Visible answer text (split into several deltas by words).
    Text(String),
    /// Reasoning text with its opaque signature (Anthropic `signature_delta`, Responses
    /// `encrypted_content`, Gemini `thoughtSignature`; Chat Completions has no signature).
    Thinking {
        /// The reasoning text (may be empty).
        text: String,
        /// The opaque signature string.
        signature: String,
    },
    /// Anthropic `redacted_thinking` data (Responses: a reasoning item with only
    /// `encrypted_content`; not rendered for Chat Completions and Gemini).
    RedactedThinking(String),
    /// A tool call. `id: None` generates a provider-style id.
    ToolCall {
        /// Tool name.
        name: String,
        /// Call id; generated in the provider's style when absent.
        #[serde(default)]
        id: Option<String>,
        /// Arguments (a JSON object).
        #[serde(default)]
        input: Value,
    },
}

/// Why the scripted model stopped.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MockStop {
    /// Normal end of the answer.
    EndTurn,
    /// The model asks for tool results.
    ToolUse,
    /// The output token limit was hit.
    MaxTokens,
    /// The model refused; the string is the explanation.
    Refusal(String),
    /// A stop sequence was matched (the request's first `stop_sequences`/`stop` entry is
    /// reported when there is one).
    StopSequence,
}

/// Token counts reported by a turn. All fields default to 0.
///
/// `input_tokens` is the uncached input (Anthropic semantics); formats that report total
/// input add `cache_read_tokens` and `cache_write_tokens` to it. `output_tokens` excludes
/// `thinking_tokens`; formats that include reasoning in their output count add them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default)]
pub struct MockUsage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Visible output tokens (text and tool arguments).
    pub output_tokens: u64,
    /// Reasoning tokens.
    pub thinking_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
}

/// A scripted failure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// Answer this HTTP status with the provider's real JSON error body (429 with rate-limit
    /// headers, 529 `overloaded_error`, 500, 503 …; Gemini 429 with `RetryInfo.retryDelay`).
    Http {
        /// HTTP status code.
        status: u16,
        /// `retry-after` header value (seconds); Gemini: `retryDelay` of `"<n>s"`.
        #[serde(default)]
        retry_after: Option<String>,
        /// `retry-after-ms` header value; Gemini: `retryDelay` in seconds with decimals.
        #[serde(default)]
        retry_after_ms: Option<u64>,
    },
    /// An HTML error page, as a proxy in front of the provider would send it.
    Html {
        /// HTTP status code (e.g. 502).
        status: u16,
    },
    /// The provider's real "bad API key" answer.
    Unauthorized,
    /// The provider's real refusal of a prompt longer than the model's context window
    /// (Anthropic 400 `prompt is too long`, OpenAI 400 `context_length_exceeded`, Gemini 400
    /// `INVALID_ARGUMENT` "input token count … exceeds").
    TooLong,
    /// After the steps, the provider's mid-stream error: Anthropic `event: error`
    /// (overloaded), Responses `response.failed`, Chat `data: {"error":…}`, Gemini a bare
    /// JSON error line without `data:`.
    ErrorAfterSteps,
    /// Like [`Failure::ErrorAfterSteps`] with the alternative shape: Responses a generic
    /// `event: error`, Gemini a `data: {"error":…}` event (Anthropic and Chat: same as
    /// `ErrorAfterSteps`).
    ErrorEventAfterSteps,
    /// Cut the TCP connection after this many body bytes (possibly mid-event).
    DisconnectAfterBytes(usize),
}

impl Turn {
    /// A turn that answers `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::default().and_text(text)
    }

    /// A turn that fails with `failure` (and has no steps).
    pub fn failing(failure: Failure) -> Self {
        Self::default().failure(failure)
    }

    /// Appends a text step.
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.steps.push(Step::Text(text.into()));
        self
    }

    /// Appends a thinking step with its signature.
    pub fn thinking(mut self, text: impl Into<String>, signature: impl Into<String>) -> Self {
        self.steps.push(Step::Thinking {
            text: text.into(),
            signature: signature.into(),
        });
        self
    }

    /// Appends a redacted-thinking step.
    pub fn redacted_thinking(mut self, data: impl Into<String>) -> Self {
        self.steps.push(Step::RedactedThinking(data.into()));
        self
    }

    /// Appends a tool call with a generated, provider-style id.
    pub fn tool_call(mut self, name: impl Into<String>, input: Value) -> Self {
        self.steps.push(Step::ToolCall {
            name: name.into(),
            id: None,
            input,
        });
        self
    }

    /// Appends a tool call with a fixed id.
    pub fn tool_call_with_id(
        mut self,
        name: impl Into<String>,
        id: impl Into<String>,
        input: Value,
    ) -> Self {
        self.steps.push(Step::ToolCall {
            name: name.into(),
            id: Some(id.into()),
            input,
        });
        self
    }

    /// Replaces [`LAST_JOB_ID`] in the tool-call inputs with the last background job id
    /// (`job_` and 8 letters or digits) the request mentions, as a model would read it from the
    /// conversation; left as written when the request mentions none.
    pub fn with_last_job_id(mut self, request: &str) -> Self {
        let Some(job) = last_job_id(request) else {
            return self;
        };
        for step in &mut self.steps {
            if let Step::ToolCall { input, .. } = step {
                replace_in(input, job);
            }
        }
        self
    }

    /// Keeps the connection open `ms` milliseconds after the last event.
    pub fn hold_open(mut self, ms: u64) -> Self {
        self.hold_open_ms = Some(ms);
        self
    }

    /// Goes silent `ms` milliseconds in the middle of the body.
    pub fn stall(mut self, ms: u64) -> Self {
        self.stall_ms = Some(ms);
        self
    }

    /// Sets the stop reason.
    pub fn stop(mut self, stop: MockStop) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Sets the reported usage.
    pub fn usage(mut self, usage: MockUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the failure.
    pub fn failure(mut self, failure: Failure) -> Self {
        self.failure = Some(failure);
        self
    }

    /// Paces the body at `bytes_per_sec`.
    pub fn bytes_per_sec(mut self, bytes_per_sec: u64) -> Self {
        self.bytes_per_sec = Some(bytes_per_sec);
        self
    }

    /// Turns Anthropic whitespace padding on or off.
    pub fn anthropic_padding(mut self, on: bool) -> Self {
        self.anthropic_padding = on;
        self
    }

    /// Sends the first event that holds `text` (a word of a text step, say) malformed.
    pub fn malformed_event_holding(mut self, text: impl Into<String>) -> Self {
        self.malformed_event = Some(text.into());
        self
    }

    /// Turns the legacy Anthropic `message_delta.usage` shape on or off.
    pub fn anthropic_legacy_usage(mut self, on: bool) -> Self {
        self.anthropic_legacy_usage = on;
        self
    }

    /// The stop reason to report: the scripted one, or the default.
    pub(crate) fn resolved_stop(&self) -> MockStop {
        match &self.stop {
            Some(stop) => stop.clone(),
            None if self
                .steps
                .iter()
                .any(|s| matches!(s, Step::ToolCall { .. })) =>
            {
                MockStop::ToolUse
            }
            None => MockStop::EndTurn,
        }
    }

    /// The usage to report: the scripted one, or estimates from the request and the steps.
    pub(crate) fn resolved_usage(&self, request_bytes: usize) -> MockUsage {
        if let Some(usage) = &self.usage {
            return usage.clone();
        }
        let mut output = 0u64;
        let mut thinking = 0u64;
        for step in &self.steps {
            match step {
                Step::Text(text) => output += crate::deltas::word_count(text),
                Step::Thinking { text, .. } => thinking += crate::deltas::word_count(text),
                Step::RedactedThinking(_) => thinking += 8,
                Step::ToolCall { name, input, .. } => {
                    output += 4 + crate::deltas::word_count(name);
                    output += (input.to_string().len() / 4) as u64;
                }
            }
        }
        MockUsage {
            input_tokens: (request_bytes / 4).max(1) as u64,
            output_tokens: output.max(1),
            thinking_tokens: thinking,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        }
    }

    /// The mid-stream error requested by the failure, if any.
    pub(crate) fn mid_stream_error(&self) -> Option<MidStreamError> {
        match self.failure {
            Some(Failure::ErrorAfterSteps) => Some(MidStreamError::Standard),
            Some(Failure::ErrorEventAfterSteps) => Some(MidStreamError::AlternativeShape),
            _ => None,
        }
    }
}

/// Which shape of mid-stream error to render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MidStreamError {
    /// [`Failure::ErrorAfterSteps`].
    Standard,
    /// [`Failure::ErrorEventAfterSteps`].
    AlternativeShape,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builder_chain_and_json_round_trip() {
        let turn = Turn::text("a").tool_call("bash", json!({"cmd": "ls"}));
        assert_eq!(turn.resolved_stop(), MockStop::ToolUse);
        let text = serde_json::to_string(&turn).unwrap();
        let back: Turn = serde_json::from_str(&text).unwrap();
        assert_eq!(back, turn);
        let from_script: Turn = serde_json::from_value(json!({
            "steps": [{"text": "a"}, {"tool_call": {"name": "bash", "input": {"cmd": "ls"}}}]
        }))
        .unwrap();
        assert_eq!(from_script, turn);
    }

    #[test]
    fn the_demo_script_parses() {
        let turns: Vec<Turn> = serde_json::from_str(include_str!("../scripts/demo.json")).unwrap();
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[0].resolved_stop(), MockStop::ToolUse);
        assert_eq!(
            turns[2].failure,
            Some(Failure::Http {
                status: 529,
                retry_after: None,
                retry_after_ms: None
            })
        );
    }

    #[test]
    fn failure_json_shapes() {
        let failures: Vec<Failure> = serde_json::from_value(json!([
            {"http": {"status": 429, "retry_after": "3"}},
            {"html": {"status": 502}},
            "unauthorized",
            "error_after_steps",
            {"disconnect_after_bytes": 10}
        ]))
        .unwrap();
        assert_eq!(
            failures[0],
            Failure::Http {
                status: 429,
                retry_after: Some("3".into()),
                retry_after_ms: None
            }
        );
        assert_eq!(failures[4], Failure::DisconnectAfterBytes(10));
    }
}
