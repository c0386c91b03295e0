//! Decoder for the OpenAI Responses stream.

use std::collections::HashMap;

use base64::Engine as _;
use flemma_conversation::{StopReason, StreamEvent, ThinkingSignature, Usage};
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::{SseFormat, truncated_error};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    delta: String,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    summary_index: usize,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug)]
struct OpenCall {
    ordinal: usize,
    arguments: String,
    done_arguments: Option<String>,
    ended: bool,
}

/// Incremental decoder of an OpenAI Responses SSE stream (OpenAI's, or the Codex backend's).
#[derive(Debug, Default)]
pub(crate) struct ResponsesDecoder {
    /// The provider word of the reasoning signatures (`openai`; `codex` for the Codex
    /// backend, whose encrypted reasoning goes back there only).
    pub(crate) signature_provider: &'static str,
    /// The offered tools, to decode tool-call names exactly.
    pub(crate) names: crate::ToolNames,
    /// Function calls keyed by output index.
    calls: HashMap<usize, OpenCall>,
    /// Output index of each function call item id (delta events carry both).
    call_items: HashMap<String, usize>,
    tool_count: usize,
    refusal: String,
    finished: bool,
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn u64_field(value: Option<&Value>, key: &str) -> u64 {
    value
        .and_then(|v| v.get(key))
        .and_then(Value::as_u64)
        .unwrap_or_default()
}

fn usage_from(response: &Value) -> Option<Usage> {
    let usage = response.get("usage").filter(|u| u.is_object())?;
    let input_details = usage.get("input_tokens_details");
    let output_details = usage.get("output_tokens_details");
    Some(Usage {
        input_tokens: u64_field(Some(usage), "input_tokens"),
        output_tokens: u64_field(Some(usage), "output_tokens"),
        thinking_tokens: u64_field(output_details, "reasoning_tokens"),
        cache_read_tokens: u64_field(input_details, "cached_tokens"),
        cache_write_tokens: u64_field(input_details, "cache_write_tokens"),
    })
}

fn error_text(error: &Value) -> String {
    let message = str_field(error, "message");
    let code = match error.get("code") {
        Some(Value::String(code)) => code.clone(),
        Some(Value::Number(code)) => code.to_string(),
        _ => str_field(error, "type").to_string(),
    };
    match (message.is_empty(), code.is_empty()) {
        (false, false) => format!("{message} ({code})"),
        (false, true) => message.to_string(),
        (true, false) => code,
        (true, true) => error.to_string(),
    }
}

/// The events the decoder acts on (an unreadable one of these cuts the reply; another kind,
/// in a shape this decoder does not know, is passed over).
fn handles(kind: &str) -> bool {
    matches!(
        kind,
        "response.output_text.delta"
            | "response.refusal.delta"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta"
            | "response.reasoning_summary_part.added"
            | "response.output_item.added"
            | "response.output_item.done"
            | "response.function_call_arguments.delta"
            | "response.function_call_arguments.done"
            | "response.completed"
            | "response.incomplete"
            | "response.failed"
            | "error"
    )
}

impl ResponsesDecoder {
    fn handle_event(&mut self, sse_event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let event = match serde_json::from_str::<Event>(data) {
            Ok(event) => event,
            Err(_) if sse_event == "error" => {
                self.fail(out, data.trim().to_string());
                return;
            }
            Err(error) => {
                if let Some(message) = crate::unreadable_event(sse_event, data, &error, handles) {
                    self.fail(out, message);
                }
                return;
            }
        };
        let kind: Cow<'_, str> = if event.kind.is_empty() {
            Cow::Borrowed(sse_event)
        } else {
            event.kind.clone()
        };
        match &*kind {
            "response.output_text.delta" if !event.delta.is_empty() => {
                out.push(StreamEvent::TextDelta { text: event.delta });
            }
            "response.refusal.delta" if !event.delta.is_empty() => {
                self.refusal.push_str(&event.delta);
                out.push(StreamEvent::TextDelta { text: event.delta });
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta"
                if !event.delta.is_empty() =>
            {
                out.push(StreamEvent::ThinkingDelta { text: event.delta });
            }
            "response.reasoning_summary_part.added" if event.summary_index > 0 => {
                out.push(StreamEvent::ThinkingDelta {
                    text: "\n\n".to_string(),
                });
            }
            "response.output_item.added" => {
                if let (Some(item), Some(output_index)) = (&event.item, event.output_index) {
                    if str_field(item, "type") == "function_call" {
                        self.start_call(output_index, item, out);
                    }
                }
            }
            "response.function_call_arguments.delta" if !event.delta.is_empty() => {
                if let Some(call) = self.call_for(&event) {
                    call.arguments.push_str(&event.delta);
                    let index = call.ordinal;
                    out.push(StreamEvent::ToolCallArgsDelta {
                        index,
                        json: event.delta,
                    });
                }
            }
            "response.function_call_arguments.done" => {
                let arguments = event.arguments.clone();
                if let Some(call) = self.call_for(&event) {
                    call.done_arguments = arguments;
                }
            }
            "response.output_item.done" => {
                if let (Some(item), Some(output_index)) = (event.item, event.output_index) {
                    self.item_done(output_index, item, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or(Value::Null);
                self.end_open_calls(out);
                if let Some(usage) = usage_from(&response) {
                    out.push(StreamEvent::Usage { usage });
                }
                let reason = if kind == "response.incomplete" {
                    let detail = response
                        .get("incomplete_details")
                        .map(|d| str_field(d, "reason"))
                        .unwrap_or_default();
                    match detail {
                        "max_output_tokens" => StopReason::MaxTokens,
                        "content_filter" => StopReason::Refusal {
                            reason: "content_filter".into(),
                        },
                        "" => StopReason::Other {
                            reason: "incomplete".into(),
                        },
                        other => StopReason::Other {
                            reason: other.to_string(),
                        },
                    }
                } else if !self.refusal.is_empty() {
                    StopReason::Refusal {
                        reason: std::mem::take(&mut self.refusal),
                    }
                } else if self.tool_count > 0 {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                out.push(StreamEvent::Stop { reason });
                self.finished = true;
            }
            "response.failed" => {
                let response = event.response.unwrap_or(Value::Null);
                if let Some(usage) = usage_from(&response) {
                    out.push(StreamEvent::Usage { usage });
                }
                let message = match response.get("error").filter(|e| e.is_object()) {
                    Some(error) => error_text(error),
                    None => "the response failed without an error message".to_string(),
                };
                self.fail(out, message);
            }
            "error" => {
                let message = match (&event.error, &event.message) {
                    (Some(error), _) if error.is_object() => error_text(error),
                    (_, Some(message)) => {
                        let code = match &event.code {
                            Some(Value::String(code)) => format!(" ({code})"),
                            _ => String::new(),
                        };
                        format!("{message}{code}")
                    }
                    _ => data.trim().to_string(),
                };
                self.fail(out, message);
            }
            _ => {
                if let Some(error) = event.error.as_ref().filter(|e| e.is_object()) {
                    let message = error_text(error);
                    self.fail(out, message);
                }
            }
        }
    }

    fn fail(&mut self, out: &mut Vec<StreamEvent>, message: String) {
        out.push(StreamEvent::Error {
            message: format!("OpenAI stream error: {message}"),
        });
        self.finished = true;
    }

    fn call_for(&mut self, event: &Event<'_>) -> Option<&mut OpenCall> {
        let index = event.output_index.or_else(|| {
            event
                .item_id
                .as_ref()
                .and_then(|id| self.call_items.get(id).copied())
        })?;
        self.calls.get_mut(&index)
    }

    fn start_call(&mut self, output_index: usize, item: &Value, out: &mut Vec<StreamEvent>) {
        if self.calls.contains_key(&output_index) {
            return;
        }
        let ordinal = self.tool_count;
        self.tool_count += 1;
        let call_id = str_field(item, "call_id");
        let id = if call_id.is_empty() {
            str_field(item, "id")
        } else {
            call_id
        };
        out.push(StreamEvent::ToolCallStart {
            index: ordinal,
            id: id.to_string(),
            name: self.names.decode(str_field(item, "name")),
        });
        if let Some(item_id) = item.get("id").and_then(Value::as_str) {
            self.call_items.insert(item_id.to_string(), output_index);
        }
        self.calls.insert(
            output_index,
            OpenCall {
                ordinal,
                arguments: String::new(),
                done_arguments: None,
                ended: false,
            },
        );
    }

    fn item_done(&mut self, output_index: usize, item: Value, out: &mut Vec<StreamEvent>) {
        match str_field(&item, "type") {
            "function_call" => {
                self.start_call(output_index, &item, out);
                let item_arguments = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(call) = self.calls.get_mut(&output_index) {
                    if call.done_arguments.is_none() {
                        call.done_arguments = item_arguments;
                    }
                    end_call(call, out);
                }
            }
            "reasoning" => {
                let has_encrypted = item
                    .get("encrypted_content")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty());
                if has_encrypted {
                    let json = item.to_string();
                    out.push(StreamEvent::ThinkingSignature {
                        signature: ThinkingSignature {
                            provider: if self.signature_provider.is_empty() {
                                "openai".into()
                            } else {
                                self.signature_provider.into()
                            },
                            value: base64::engine::general_purpose::STANDARD.encode(json),
                        },
                    });
                }
            }
            _ => {}
        }
    }

    fn end_open_calls(&mut self, out: &mut Vec<StreamEvent>) {
        let mut open: Vec<&mut OpenCall> = self.calls.values_mut().filter(|c| !c.ended).collect();
        open.sort_by_key(|c| c.ordinal);
        for call in open {
            end_call(call, out);
        }
    }
}

fn end_call(call: &mut OpenCall, out: &mut Vec<StreamEvent>) {
    if call.ended {
        return;
    }
    call.ended = true;
    let streamed = !call.arguments.is_empty();
    let arguments = match call.done_arguments.take() {
        Some(done) if !done.is_empty() => done,
        _ if !call.arguments.is_empty() => std::mem::take(&mut call.arguments),
        _ => "{}".to_string(),
    };
    if !streamed && arguments != "{}" {
        // Nothing was streamed as deltas: deliver the whole argument string once.
        out.push(StreamEvent::ToolCallArgsDelta {
            index: call.ordinal,
            json: arguments.clone(),
        });
    }
    out.push(StreamEvent::ToolCallEnd {
        index: call.ordinal,
        arguments,
    });
}

impl SseFormat for ResponsesDecoder {
    fn handle(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) {
        self.handle_event(event, data, out);
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.finished {
            out.push(StreamEvent::Error {
                message: truncated_error(),
            });
            self.finished = true;
        }
    }
}
