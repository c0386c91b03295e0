//! Decoder for Gemini API and Vertex AI `streamGenerateContent?alt=sse` streams.

use flemma_conversation::{StopReason, StreamEvent, ThinkingSignature, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::tools::synthetic_tool_id;
use crate::{SseFormat, truncated_error};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    response_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Option<Vec<WirePart>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
    tool_use_prompt_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
    #[serde(default)]
    block_reason_message: Option<String>,
}

#[derive(Debug, Default)]
struct UsageSnapshot {
    prompt: u64,
    candidates: u64,
    thoughts: u64,
    cached: u64,
    tool_prompt: u64,
    seen: bool,
}

impl UsageSnapshot {
    fn apply(&mut self, usage: &UsageMetadata) {
        let fields = [
            (&mut self.prompt, usage.prompt_token_count),
            (&mut self.candidates, usage.candidates_token_count),
            (&mut self.thoughts, usage.thoughts_token_count),
            (&mut self.cached, usage.cached_content_token_count),
            (&mut self.tool_prompt, usage.tool_use_prompt_token_count),
        ];
        let mut any = false;
        for (target, value) in fields {
            if let Some(value) = value {
                *target = value;
                any = true;
            }
        }
        self.seen |= any;
    }

    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.prompt + self.tool_prompt,
            output_tokens: self.candidates + self.thoughts,
            thinking_tokens: self.thoughts,
            cache_read_tokens: self.cached,
            cache_write_tokens: 0,
        }
    }
}

/// Incremental decoder of a Gemini / Vertex SSE stream (with bare JSON error lines).
#[derive(Debug, Default)]
pub(crate) struct GeminiDecoder {
    /// The offered tools, to decode tool-call names exactly.
    pub(crate) names: crate::ToolNames,
    usage: UsageSnapshot,
    tool_count: usize,
    response_id: String,
    finished: bool,
}

fn map_finish_reason(reason: &str, message: Option<String>, called_tools: bool) -> StopReason {
    match reason {
        "STOP" if called_tools => StopReason::ToolUse,
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "LANGUAGE"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => {
            let reason = match message.filter(|m| !m.is_empty()) {
                Some(message) => format!("{reason}: {message}"),
                None => reason.to_string(),
            };
            StopReason::Refusal { reason }
        }
        other => StopReason::Other {
            reason: match message.filter(|m| !m.is_empty()) {
                Some(message) => format!("{other}: {message}"),
                None => other.to_string(),
            },
        },
    }
}

impl GeminiDecoder {
    fn handle_event(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let data = data.trim();
        // Every chunk is acted on: its candidates hold the reply.
        let unreadable = |error: serde_json::Error| {
            crate::unreadable_event(event, data, &error, |_| true)
                .map(|message| format!("Gemini stream error: {message}"))
        };
        if data.starts_with('[') {
            // A JSON array of chunks (a server answering without `alt=sse`).
            match serde_json::from_str::<Vec<Chunk>>(data) {
                Ok(chunks) => {
                    for chunk in chunks {
                        self.chunk(chunk, out);
                    }
                }
                Err(error) => {
                    if let Some(message) = unreadable(error) {
                        self.fail(out, message);
                    }
                }
            }
            return;
        }
        match serde_json::from_str::<Chunk>(data) {
            Ok(chunk) => self.chunk(chunk, out),
            Err(_) if data.starts_with('{') && data.contains("\"error\"") => {
                self.fail(out, format!("Gemini stream error: {data}"));
            }
            Err(error) => {
                if let Some(message) = unreadable(error) {
                    self.fail(out, message);
                }
            }
        }
    }

    fn fail(&mut self, out: &mut Vec<StreamEvent>, message: String) {
        out.push(StreamEvent::Error { message });
        self.finished = true;
    }

    fn chunk(&mut self, chunk: Chunk, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let status = error
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let code = error.get("code").map(Value::to_string).unwrap_or_default();
            let detail = [status, code.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let message = if detail.is_empty() {
                format!("Gemini stream error: {message}")
            } else {
                format!("Gemini stream error: {message} ({detail})")
            };
            self.fail(out, message);
            return;
        }
        if self.response_id.is_empty() {
            if let Some(id) = chunk.response_id {
                self.response_id = id;
            }
        }
        if let Some(usage) = &chunk.usage_metadata {
            self.usage.apply(usage);
        }
        let candidates = chunk.candidates.unwrap_or_default();
        if candidates.is_empty() {
            if let Some(feedback) = chunk.prompt_feedback {
                if let Some(reason) = feedback.block_reason.filter(|r| !r.is_empty()) {
                    let reason = match feedback.block_reason_message {
                        Some(message) if !message.is_empty() => format!("{reason}: {message}"),
                        _ => reason,
                    };
                    self.stop(StopReason::Refusal { reason }, out);
                }
            }
            return;
        }
        // Only the first candidate is used (flemmad never asks for more).
        let Some(candidate) = candidates.into_iter().next() else {
            return;
        };
        for part in candidate.content.and_then(|c| c.parts).unwrap_or_default() {
            self.part(part, out);
        }
        if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
            let reason = map_finish_reason(&reason, candidate.finish_message, self.tool_count > 0);
            self.stop(reason, out);
        }
    }

    fn part(&mut self, part: WirePart, out: &mut Vec<StreamEvent>) {
        if let Some(call) = part.function_call {
            let ordinal = self.tool_count;
            self.tool_count += 1;
            let name = self.names.decode(&call.name);
            let arguments = match call.args {
                Some(args @ Value::Object(_)) => args.to_string(),
                _ => "{}".to_string(),
            };
            let id = match call.id.filter(|id| !id.is_empty()) {
                Some(id) => id,
                None => synthetic_tool_id(
                    &name,
                    &format!("{}:{ordinal}:{arguments}", self.response_id),
                ),
            };
            out.push(StreamEvent::ToolCallStart {
                index: ordinal,
                id,
                name,
            });
            out.push(StreamEvent::ToolCallArgsDelta {
                index: ordinal,
                json: arguments.clone(),
            });
            out.push(StreamEvent::ToolCallEnd {
                index: ordinal,
                arguments,
            });
        } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            if part.thought == Some(true) {
                out.push(StreamEvent::ThinkingDelta { text });
            } else {
                out.push(StreamEvent::TextDelta { text });
            }
        }
        if let Some(signature) = part.thought_signature.filter(|s| !s.is_empty()) {
            out.push(StreamEvent::ThinkingSignature {
                signature: ThinkingSignature {
                    provider: "vertex".into(),
                    value: signature,
                },
            });
        }
    }

    fn stop(&mut self, reason: StopReason, out: &mut Vec<StreamEvent>) {
        if self.usage.seen {
            out.push(StreamEvent::Usage {
                usage: self.usage.usage(),
            });
        }
        out.push(StreamEvent::Stop { reason });
        self.finished = true;
    }
}

impl SseFormat for GeminiDecoder {
    fn handle(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        self.handle_event(event, data, out);
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.finished {
            self.fail(out, truncated_error());
        }
    }
}
