//! Decoder for OpenAI Chat Completions streams (OpenAI, Ollama, llama.cpp, vLLM, Moonshot, …).

use flemma_conversation::{StopReason, StreamEvent, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::tools::fnv1a;
use crate::{SseFormat, truncated_error};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<ChoiceDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Default)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Debug)]
struct Call {
    wire_index: usize,
    id: String,
    ordinal: usize,
    arguments: String,
    ended: bool,
}

/// Incremental decoder of a Chat Completions SSE stream.
#[derive(Debug, Default)]
pub(crate) struct ChatDecoder {
    /// The offered tools, to decode tool-call names exactly.
    pub(crate) names: crate::ToolNames,
    calls: Vec<Call>,
    response_id: String,
    usage: Option<Usage>,
    finish: Option<StopReason>,
    refusal: String,
    finished: bool,
}

impl ChatDecoder {
    fn handle_event(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let data = data.trim();
        if data.starts_with("[DONE]") {
            self.complete(out);
            return;
        }
        let chunk = match serde_json::from_str::<Chunk>(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                // Every chunk is acted on: its choices hold the reply.
                if let Some(message) = crate::unreadable_event(event, data, &error, |_| true) {
                    out.push(StreamEvent::Error {
                        message: format!("stream error from the server: {message}"),
                    });
                    self.finished = true;
                }
                return;
            }
        };
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let message = match error.get("message").and_then(Value::as_str) {
                Some(message) => message.to_string(),
                None => error.to_string(),
            };
            out.push(StreamEvent::Error {
                message: format!("stream error from the server: {message}"),
            });
            self.finished = true;
            return;
        }
        if self.response_id.is_empty() {
            if let Some(id) = chunk.id {
                self.response_id = id;
            }
        }
        if let Some(usage) = chunk.usage {
            let prompt = usage.prompt_tokens_details.unwrap_or_default();
            let completion = usage.completion_tokens_details.unwrap_or_default();
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                thinking_tokens: completion.reasoning_tokens.unwrap_or_default(),
                cache_read_tokens: prompt.cached_tokens.unwrap_or_default(),
                cache_write_tokens: prompt.cache_write_tokens.unwrap_or_default(),
            });
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta {
                self.apply_delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.end_calls(out);
                self.finish = Some(self.map_finish(&reason));
            }
        }
    }

    fn apply_delta(&mut self, delta: ChoiceDelta, out: &mut Vec<StreamEvent>) {
        let reasoning = delta
            .reasoning_content
            .filter(|r| !r.is_empty())
            .or(delta.reasoning);
        if let Some(text) = reasoning.filter(|r| !r.is_empty()) {
            out.push(StreamEvent::ThinkingDelta { text });
        }
        if let Some(text) = delta.content.filter(|c| !c.is_empty()) {
            out.push(StreamEvent::TextDelta { text });
        }
        if let Some(text) = delta.refusal.filter(|c| !c.is_empty()) {
            self.refusal.push_str(&text);
            out.push(StreamEvent::TextDelta { text });
        }
        for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let wire_index = call.index.unwrap_or(position);
            let function = call.function.unwrap_or(FunctionDelta {
                name: None,
                arguments: None,
            });
            let incoming_id = call.id.filter(|id| !id.is_empty());
            // Same index and (when the server repeats ids) the same id: a continuation.
            let existing = self.calls.iter().position(|c| {
                c.wire_index == wire_index
                    && !c.ended
                    && incoming_id.as_ref().is_none_or(|id| *id == c.id)
            });
            let slot = match existing {
                Some(slot) => slot,
                None => {
                    let ordinal = self.calls.len();
                    let id = incoming_id.unwrap_or_else(|| {
                        let seed = format!("{}:{ordinal}", self.response_id);
                        format!("call_{:016x}", fnv1a(seed.as_bytes()))
                    });
                    out.push(StreamEvent::ToolCallStart {
                        index: ordinal,
                        id: id.clone(),
                        name: self
                            .names
                            .decode(function.name.as_deref().unwrap_or_default()),
                    });
                    self.calls.push(Call {
                        wire_index,
                        id,
                        ordinal,
                        arguments: String::new(),
                        ended: false,
                    });
                    ordinal
                }
            };
            if let Some(arguments) = function.arguments.filter(|a| !a.is_empty()) {
                let call = &mut self.calls[slot];
                call.arguments.push_str(&arguments);
                out.push(StreamEvent::ToolCallArgsDelta {
                    index: call.ordinal,
                    json: arguments,
                });
            }
        }
    }

    fn map_finish(&mut self, reason: &str) -> StopReason {
        match reason {
            "stop" if !self.refusal.is_empty() => StopReason::Refusal {
                reason: std::mem::take(&mut self.refusal),
            },
            "stop" | "eos" => StopReason::EndTurn,
            "tool_calls" | "function_call" => StopReason::ToolUse,
            "length" => StopReason::MaxTokens,
            "content_filter" => StopReason::Refusal {
                reason: "content_filter".into(),
            },
            other => StopReason::Other {
                reason: other.to_string(),
            },
        }
    }

    fn end_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for call in self.calls.iter_mut().filter(|c| !c.ended) {
            call.ended = true;
            let arguments = if call.arguments.is_empty() {
                "{}".to_string()
            } else {
                std::mem::take(&mut call.arguments)
            };
            out.push(StreamEvent::ToolCallEnd {
                index: call.ordinal,
                arguments,
            });
        }
    }

    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.end_calls(out);
        if let Some(usage) = self.usage.take() {
            out.push(StreamEvent::Usage { usage });
        }
        let reason = match self.finish.take() {
            Some(reason) => reason,
            None if !self.calls.is_empty() => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        out.push(StreamEvent::Stop { reason });
        self.finished = true;
    }
}

impl SseFormat for ChatDecoder {
    fn handle(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        self.handle_event(event, data, out);
    }

    /// A stream that delivered a `finish_reason` but closed without `[DONE]` is accepted as
    /// complete (some servers omit it); without either it is truncated.
    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.finished {
            if self.finish.is_some() {
                self.complete(out);
            } else {
                out.push(StreamEvent::Error {
                    message: truncated_error(),
                });
                self.finished = true;
            }
        }
    }
}
