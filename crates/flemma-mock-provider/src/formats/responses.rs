//! OpenAI Responses API (`POST /v1/responses`).

use bytes::Bytes;
use serde_json::{Value, json};

use super::chat::{common_headers, obfuscation, obfuscation_wanted};
use super::{
    Reply, RequestContext, arguments_json, split_arguments, split_deltas, sse_frame, unix_now,
};
use crate::ids;
use crate::script::{MidStreamError, MockStop, MockUsage, Step, Turn};

/// Writes `event: response.*` frames with a `sequence_number` counting from 0.
struct EventWriter {
    frames: Vec<Bytes>,
    sequence: u64,
    obfuscate: bool,
}

impl EventWriter {
    fn push(&mut self, mut data: Value) {
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string();
        if let (true, Some(delta)) = (self.obfuscate, data.get("delta").and_then(Value::as_str)) {
            data["obfuscation"] = json!(obfuscation(delta));
        }
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.frames.push(sse_frame(Some(&kind), &data.to_string()));
    }
}

fn usage_object(usage: &MockUsage) -> Value {
    let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let output = usage.output_tokens + usage.thinking_tokens;
    let mut input_details = json!({"cached_tokens": usage.cache_read_tokens});
    if usage.cache_write_tokens > 0 {
        input_details["cache_write_tokens"] = json!(usage.cache_write_tokens);
    }
    json!({
        "input_tokens": input, "input_tokens_details": input_details,
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": usage.thinking_tokens},
        "total_tokens": input + output
    })
}

/// The Response object, echoing the request parameters like the real API.
fn response_object(id: &str, created: u64, ctx: &RequestContext<'_>) -> Value {
    let body = ctx.body;
    let echo = |key: &str, default: Value| body.get(key).cloned().unwrap_or(default);
    json!({
        "id": id, "object": "response", "created_at": created, "status": "in_progress",
        "background": false, "completed_at": null, "error": null, "incomplete_details": null,
        "instructions": echo("instructions", Value::Null),
        "max_output_tokens": echo("max_output_tokens", Value::Null),
        "model": ctx.model, "output": [],
        "parallel_tool_calls": echo("parallel_tool_calls", json!(true)),
        "previous_response_id": echo("previous_response_id", Value::Null),
        "reasoning": echo("reasoning", json!({"effort": null, "summary": null})),
        "store": echo("store", json!(true)),
        "temperature": echo("temperature", json!(1.0)),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": echo("tool_choice", json!("auto")),
        "tools": echo("tools", json!([])),
        "top_p": echo("top_p", json!(1.0)),
        "truncation": "disabled", "usage": null, "metadata": echo("metadata", json!({}))
    })
}

/// Whether the request asked for `reasoning.encrypted_content` (only then does the real API
/// return the signature-like blob).
fn wants_encrypted_content(body: &Value) -> bool {
    body.get("include")
        .and_then(Value::as_array)
        .is_some_and(|items| items.iter().any(|i| i == "reasoning.encrypted_content"))
}

/// The shorter, different blob the real API puts in `output_item.added`.
fn partial_blob(signature: &str) -> String {
    let half: String = signature
        .chars()
        .take(signature.chars().count() / 2)
        .collect();
    format!("{half}PARTIAL")
}

/// Renders a generation answer (SSE when the request said `"stream": true`).
pub(crate) fn render(turn: &Turn, ctx: &RequestContext<'_>) -> Reply {
    let usage = turn.resolved_usage(ctx.body_len);
    let stop = turn.resolved_stop();
    let created = unix_now();
    let id = format!("resp_{}", ids::hex(48));
    let encrypted = wants_encrypted_content(ctx.body);
    let mut response = response_object(&id, created, ctx);
    let mut writer = EventWriter {
        frames: Vec::new(),
        sequence: 0,
        obfuscate: obfuscation_wanted(ctx.body),
    };
    writer.push(json!({"type": "response.created", "response": response}));
    writer.push(json!({"type": "response.in_progress", "response": response}));

    let mut output: Vec<Value> = Vec::new();
    for step in &turn.steps {
        let output_index = output.len();
        let item = match step {
            Step::Thinking { text, signature } => {
                let item_id = format!("rs_{}", ids::hex(48));
                let mut added =
                    json!({"id": item_id, "type": "reasoning", "content": [], "summary": []});
                if encrypted {
                    added["encrypted_content"] = json!(partial_blob(signature));
                }
                writer.push(json!({"type": "response.output_item.added", "item": added,
                                   "output_index": output_index}));
                let mut summary = Vec::new();
                if !text.is_empty() {
                    let part = |t: &str| json!({"type": "summary_text", "text": t});
                    let common = json!({"item_id": item_id, "output_index": output_index,
                                        "summary_index": 0});
                    let with = |kind: &str, extra: Value| {
                        let mut event = json!({"type": kind});
                        if let (Some(event), Some(common), Some(extra)) =
                            (event.as_object_mut(), common.as_object(), extra.as_object())
                        {
                            event.extend(common.clone());
                            event.extend(extra.clone());
                        }
                        event
                    };
                    writer.push(with(
                        "response.reasoning_summary_part.added",
                        json!({"part": part("")}),
                    ));
                    for piece in split_deltas(text) {
                        writer.push(with(
                            "response.reasoning_summary_text.delta",
                            json!({"delta": piece}),
                        ));
                    }
                    writer.push(with(
                        "response.reasoning_summary_text.done",
                        json!({"text": text}),
                    ));
                    writer.push(with(
                        "response.reasoning_summary_part.done",
                        json!({"part": part(text)}),
                    ));
                    summary.push(part(text));
                }
                let mut done =
                    json!({"id": item_id, "type": "reasoning", "content": [], "summary": summary});
                if encrypted {
                    done["encrypted_content"] = json!(signature);
                }
                done
            }
            Step::RedactedThinking(data) => {
                let item_id = format!("rs_{}", ids::hex(48));
                let mut item =
                    json!({"id": item_id, "type": "reasoning", "content": [], "summary": []});
                if encrypted {
                    item["encrypted_content"] = json!(data);
                }
                writer.push(json!({"type": "response.output_item.added", "item": item,
                                   "output_index": output_index}));
                item
            }
            Step::Text(text) => render_message(&mut writer, output_index, "output_text", text),
            Step::ToolCall { name, id, input } => {
                let item_id = format!("fc_{}", ids::hex(48));
                let call_id = id.clone().unwrap_or_else(ids::openai_call_id);
                let arguments = arguments_json(input);
                writer.push(json!({"type": "response.output_item.added", "item": {
                    "id": item_id, "type": "function_call", "status": "in_progress",
                    "arguments": "", "call_id": call_id, "name": name}, "output_index": output_index}));
                for piece in split_arguments(&arguments) {
                    writer.push(json!({"type": "response.function_call_arguments.delta",
                                       "delta": piece, "item_id": item_id, "output_index": output_index}));
                }
                // Real streams omit `name` here although the spec lists it.
                writer.push(json!({"type": "response.function_call_arguments.done",
                                   "arguments": arguments, "item_id": item_id, "output_index": output_index}));
                json!({"id": item_id, "type": "function_call", "status": "completed",
                       "arguments": arguments, "call_id": call_id, "name": name})
            }
        };
        writer.push(json!({"type": "response.output_item.done", "item": item, "output_index": output_index}));
        output.push(item);
    }
    if let MockStop::Refusal(explanation) = &stop {
        let item = render_message(&mut writer, output.len(), "refusal", explanation);
        writer.push(json!({"type": "response.output_item.done", "item": item, "output_index": output.len()}));
        output.push(item);
    }

    let (status, terminal) = match (turn.mid_stream_error(), &stop) {
        (Some(_), _) => ("failed", "response.failed"),
        (None, MockStop::MaxTokens) => ("incomplete", "response.incomplete"),
        (None, _) => ("completed", "response.completed"),
    };
    response["status"] = json!(status);
    response["output"] = json!(output);
    match (turn.mid_stream_error(), &stop) {
        (Some(_), _) => {
            response["error"] = json!({"code": "server_error",
                "message": "An error occurred while processing your request. You can retry your request, or contact us through our help center at help.openai.com if the error persists."});
        }
        (None, MockStop::MaxTokens) => {
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
            response["usage"] = usage_object(&usage);
        }
        (None, _) => {
            response["completed_at"] = json!(unix_now());
            response["usage"] = usage_object(&usage);
        }
    }

    if !ctx.stream {
        if turn.mid_stream_error().is_some() {
            return super::chat::http_error(500, None, None);
        }
        return Reply::json(200, common_headers(), &response);
    }
    if turn.mid_stream_error() == Some(MidStreamError::AlternativeShape) {
        writer.push(json!({"type": "error", "code": "server_error",
                           "message": "Something went wrong", "param": null}));
    } else {
        writer.push(json!({"type": terminal, "response": response}));
    }
    Reply::sse(
        "text/event-stream; charset=utf-8",
        common_headers(),
        writer.frames,
    )
}

/// Streams a message item with one content part (`output_text` or `refusal`).
fn render_message(
    writer: &mut EventWriter,
    output_index: usize,
    part_type: &str,
    text: &str,
) -> Value {
    let item_id = format!("msg_{}", ids::hex(48));
    let (field, delta_event, done_event) = if part_type == "refusal" {
        ("refusal", "response.refusal.delta", "response.refusal.done")
    } else {
        (
            "text",
            "response.output_text.delta",
            "response.output_text.done",
        )
    };
    let part = |t: &str| {
        let mut part = json!({"type": part_type});
        if part_type == "output_text" {
            part["annotations"] = json!([]);
            part["logprobs"] = json!([]);
        }
        part[field] = json!(t);
        part
    };
    writer.push(json!({"type": "response.output_item.added", "item": {
        "id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
        "output_index": output_index}));
    writer.push(
        json!({"type": "response.content_part.added", "content_index": 0, "item_id": item_id,
                       "output_index": output_index, "part": part("")}),
    );
    for piece in split_deltas(text) {
        let mut event = json!({"type": delta_event, "content_index": 0, "delta": piece,
                               "item_id": item_id, "output_index": output_index});
        if part_type == "output_text" {
            event["logprobs"] = json!([]);
        }
        writer.push(event);
    }
    let mut done = json!({"type": done_event, "content_index": 0, "item_id": item_id,
                          "output_index": output_index});
    done[field] = json!(text);
    if part_type == "output_text" {
        done["logprobs"] = json!([]);
    }
    writer.push(done);
    writer.push(
        json!({"type": "response.content_part.done", "content_index": 0, "item_id": item_id,
                       "output_index": output_index, "part": part(text)}),
    );
    json!({"id": item_id, "type": "message", "status": "completed", "content": [part(text)],
           "role": "assistant"})
}

/// `POST /v1/responses/input_tokens`.
pub(crate) fn input_tokens(body_len: usize) -> Reply {
    Reply::json(
        200,
        common_headers(),
        &json!({"object": "response.input_tokens", "input_tokens": super::estimate_tokens(body_len)}),
    )
}
