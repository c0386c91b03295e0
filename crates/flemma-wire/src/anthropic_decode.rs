//! Decoder for the Anthropic Messages stream.

use flemma_conversation::{StopReason, StreamEvent, ThinkingSignature, Usage};
use std::borrow::Cow;

use serde::Deserialize;

use crate::{SseFormat, truncated_error};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: usize,
    #[serde(default)]
    message: Option<MessageStart>,
    #[serde(default)]
    #[serde(borrow)]
    content_block: Option<ContentBlock<'a>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct ContentBlock<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    thinking: String,
    #[serde(default)]
    data: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    input: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    thinking: String,
    #[serde(default)]
    signature: String,
    #[serde(default)]
    partial_json: String,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    stop_details: Option<StopDetails>,
}

#[derive(Deserialize)]
struct StopDetails {
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    explanation: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize, Default)]
struct OutputDetails {
    thinking_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// Running usage values; Anthropic reports cumulative values, later ones overwrite.
#[derive(Debug, Default)]
struct UsageSnapshot {
    input: u64,
    output: u64,
    cache_write: u64,
    cache_read: u64,
    thinking: u64,
}

impl UsageSnapshot {
    fn apply(&mut self, usage: &WireUsage) {
        if let Some(v) = usage.input_tokens {
            self.input = v;
        }
        if let Some(v) = usage.output_tokens {
            self.output = v;
        }
        if let Some(v) = usage.cache_creation_input_tokens {
            self.cache_write = v;
        }
        if let Some(v) = usage.cache_read_input_tokens {
            self.cache_read = v;
        }
        if let Some(v) = usage
            .output_tokens_details
            .as_ref()
            .and_then(|d| d.thinking_tokens)
        {
            self.thinking = v;
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input + self.cache_write + self.cache_read,
            output_tokens: self.output,
            thinking_tokens: self.thinking,
            cache_read_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
        }
    }
}

/// An open `tool_use` block.
#[derive(Debug)]
struct OpenTool {
    block: usize,
    ordinal: usize,
    arguments: String,
    initial_input: Option<String>,
}

/// Incremental decoder of an Anthropic Messages SSE stream.
#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    /// The offered tools, to decode tool-call names exactly.
    pub(crate) names: crate::ToolNames,
    usage: UsageSnapshot,
    saw_usage: bool,
    stop: Option<StopReason>,
    tool: Option<OpenTool>,
    tool_count: usize,
    finished: bool,
}

impl AnthropicDecoder {
    fn handle_event(&mut self, sse_event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let event: Event = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(_) if sse_event == "error" => {
                self.fail(out, format!("Anthropic stream error: {}", data.trim()));
                return;
            }
            Err(error) => {
                if let Some(message) =
                    crate::unreadable_event(sse_event, data, &error, |kind| kind != "ping")
                {
                    self.fail(out, format!("Anthropic stream error: {message}"));
                }
                return;
            }
        };
        let kind: &str = if event.kind.is_empty() {
            sse_event
        } else {
            &event.kind
        };
        match kind {
            "message_start" => {
                if let Some(usage) = event.message.as_ref().and_then(|m| m.usage.as_ref()) {
                    self.usage.apply(usage);
                    self.saw_usage = true;
                }
            }
            "content_block_start" => {
                let Some(block) = event.content_block else {
                    return;
                };
                self.block_start(event.index, block, out);
            }
            "content_block_delta" => {
                let Some(delta) = event.delta else {
                    return;
                };
                self.block_delta(event.index, delta, out);
            }
            "content_block_stop" => self.close_tool(event.index, out),
            "message_delta" => {
                if let Some(usage) = &event.usage {
                    self.usage.apply(usage);
                    self.saw_usage = true;
                }
                if let Some(delta) = event.delta {
                    if let Some(reason) = delta.stop_reason {
                        self.stop = Some(map_stop_reason(&reason, delta.stop_details));
                    }
                }
            }
            "message_stop" => {
                self.close_tool(usize::MAX, out);
                out.push(StreamEvent::Usage {
                    usage: self.usage.usage(),
                });
                out.push(StreamEvent::Stop {
                    reason: self.stop.take().unwrap_or(StopReason::EndTurn),
                });
                self.finished = true;
            }
            "error" => {
                let message = match event.error {
                    Some(error) if !error.message.is_empty() => {
                        format!("{} ({})", error.message, error.kind)
                    }
                    Some(error) => error.kind.to_string(),
                    None => data.trim().to_string(),
                };
                self.fail(out, format!("Anthropic stream error: {message}"));
            }
            _ => {}
        }
    }

    fn fail(&mut self, out: &mut Vec<StreamEvent>, message: String) {
        if self.saw_usage {
            out.push(StreamEvent::Usage {
                usage: self.usage.usage(),
            });
        }
        out.push(StreamEvent::Error { message });
        self.finished = true;
    }

    fn block_start(&mut self, index: usize, block: ContentBlock<'_>, out: &mut Vec<StreamEvent>) {
        match &*block.kind {
            "text" if !block.text.is_empty() => {
                out.push(StreamEvent::TextDelta { text: block.text });
            }
            "thinking" if !block.thinking.is_empty() => {
                out.push(StreamEvent::ThinkingDelta {
                    text: block.thinking,
                });
            }
            "redacted_thinking" => out.push(StreamEvent::RedactedThinking { data: block.data }),
            "tool_use" => {
                self.close_tool(usize::MAX, out);
                let ordinal = self.tool_count;
                self.tool_count += 1;
                out.push(StreamEvent::ToolCallStart {
                    index: ordinal,
                    id: block.id,
                    name: self.names.decode(&block.name),
                });
                let initial_input = block
                    .input
                    .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                    .map(|v| v.to_string());
                self.tool = Some(OpenTool {
                    block: index,
                    ordinal,
                    arguments: String::new(),
                    initial_input,
                });
            }
            _ => {}
        }
    }

    fn block_delta(&mut self, index: usize, delta: Delta<'_>, out: &mut Vec<StreamEvent>) {
        match &*delta.kind {
            "text_delta" if !delta.text.is_empty() => {
                out.push(StreamEvent::TextDelta { text: delta.text });
            }
            "thinking_delta" if !delta.thinking.is_empty() => {
                out.push(StreamEvent::ThinkingDelta {
                    text: delta.thinking,
                });
            }
            "signature_delta" if !delta.signature.is_empty() => {
                out.push(StreamEvent::ThinkingSignature {
                    signature: ThinkingSignature {
                        provider: "anthropic".into(),
                        value: delta.signature,
                    },
                });
            }
            "input_json_delta" if !delta.partial_json.is_empty() => {
                if let Some(tool) = self.tool.as_mut().filter(|t| t.block == index) {
                    tool.arguments.push_str(&delta.partial_json);
                    out.push(StreamEvent::ToolCallArgsDelta {
                        index: tool.ordinal,
                        json: delta.partial_json,
                    });
                }
            }
            _ => {}
        }
    }

    /// Closes the open tool block when `index` is its block (or `usize::MAX`: any).
    fn close_tool(&mut self, index: usize, out: &mut Vec<StreamEvent>) {
        if self
            .tool
            .as_ref()
            .is_some_and(|t| index == usize::MAX || t.block == index)
        {
            if let Some(tool) = self.tool.take() {
                let arguments = if !tool.arguments.is_empty() {
                    tool.arguments
                } else if let Some(input) = tool.initial_input {
                    out.push(StreamEvent::ToolCallArgsDelta {
                        index: tool.ordinal,
                        json: input.clone(),
                    });
                    input
                } else {
                    "{}".to_string()
                };
                out.push(StreamEvent::ToolCallEnd {
                    index: tool.ordinal,
                    arguments,
                });
            }
        }
    }
}

fn map_stop_reason(reason: &str, details: Option<StopDetails>) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        "refusal" => {
            let reason = details
                .and_then(|d| d.explanation.or(d.category))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "refusal".to_string());
            StopReason::Refusal { reason }
        }
        other => StopReason::Other {
            reason: other.to_string(),
        },
    }
}

impl SseFormat for AnthropicDecoder {
    fn handle(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        self.handle_event(event, data, out);
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.finished {
            self.fail(out, truncated_error());
        }
    }
}
