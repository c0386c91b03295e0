//! Chat Completions request bodies (OpenAI-compatible servers and the Moonshot preset).

use flemma_conversation::{Part, Role};
use serde_json::{Map, Value, json};

use crate::prepare::{
    Prepared, ThinkingUse, classify_thinking, data_url, unsupported_attachment_text,
};
use crate::responses_build::effort;
use crate::tools::{call_arguments, normalize_tool_id};
use crate::{
    ProviderKind, RequestOptions, Thinking, ThinkingOff, encode_tool_name,
    inject_harness_parameters, sorted_tools,
};

/// OpenAI limits tool call ids to 40 characters on Chat Completions.
const MAX_ID_LEN: usize = 40;

fn user_content(
    kind: ProviderKind,
    part: &Part,
    in_tool_result: bool,
    warnings: &mut Vec<String>,
) -> Option<Value> {
    match part {
        Part::Text { text } | Part::TextFile { text, .. } if !text.is_empty() => {
            Some(json!({"type": "text", "text": text}))
        }
        Part::Image { mime, data, path } => {
            if in_tool_result {
                warnings.push(format!(
                    "images in tool results are not supported by {}; {path} sent as text",
                    kind.name()
                ));
                Some(
                    json!({"type": "text", "text": unsupported_attachment_text(path, "images in tool results are", kind.name())}),
                )
            } else {
                Some(json!({"type": "image_url", "image_url": {"url": data_url(mime, data)}}))
            }
        }
        Part::Pdf { path, .. } => {
            warnings.push(format!(
                "PDF attachments are not supported by {}; {path} sent as text",
                kind.name()
            ));
            Some(
                json!({"type": "text", "text": unsupported_attachment_text(path, "PDF attachments are", kind.name())}),
            )
        }
        _ => None,
    }
}

/// Plain string content when every entry is text, the list form otherwise.
fn simplify(content: Vec<Value>) -> Value {
    if content
        .iter()
        .all(|c| c.get("type").and_then(Value::as_str) == Some("text"))
    {
        let text: Vec<&str> = content
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect();
        json!(text.join("\n\n"))
    } else {
        Value::Array(content)
    }
}

fn assistant_message(kind: ProviderKind, parts: &[Part]) -> Option<Value> {
    let mut texts: Vec<String> = Vec::new();
    for part in parts {
        if let Part::Thinking {
            text,
            signature,
            redacted,
        } = part
        {
            if let ThinkingUse::ForeignText(text) =
                classify_thinking(kind, text, signature.as_ref(), *redacted)
            {
                texts.push(text);
            }
        }
    }
    let mut calls = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => texts.push(text.clone()),
            Part::ToolUse {
                id,
                name,
                input,
                raw_input,
            } => {
                let arguments = call_arguments(input, raw_input);
                calls.push(json!({
                    "id": normalize_tool_id(id, MAX_ID_LEN),
                    "type": "function",
                    "function": {"name": encode_tool_name(name), "arguments": arguments},
                }));
            }
            _ => {}
        }
    }
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if texts.is_empty() {
            Value::Null
        } else {
            json!(texts.join("\n\n"))
        },
    );
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

/// The body as a JSON map.
pub(crate) fn body(
    kind: ProviderKind,
    prepared: &Prepared,
    options: &RequestOptions,
    warnings: &mut Vec<String>,
) -> Map<String, Value> {
    let mut messages: Vec<Value> = Vec::new();
    if !prepared.system.is_empty() {
        messages.push(json!({"role": "system", "content": prepared.system}));
    }
    for turn in &prepared.turns {
        match turn.role {
            Role::User => {
                let mut content = Vec::new();
                for part in &turn.parts {
                    match part {
                        Part::ToolResult {
                            tool_use_id,
                            content: result,
                            ..
                        } => {
                            let result: Vec<Value> = result
                                .iter()
                                .filter_map(|p| user_content(kind, p, true, warnings))
                                .collect();
                            messages.push(json!({
                                "role": "tool",
                                "tool_call_id": normalize_tool_id(tool_use_id, MAX_ID_LEN),
                                "content": simplify(result),
                            }));
                        }
                        other => content.extend(user_content(kind, other, false, warnings)),
                    }
                }
                if !content.is_empty() {
                    messages.push(json!({"role": "user", "content": simplify(content)}));
                }
            }
            Role::Assistant => messages.extend(assistant_message(kind, &turn.parts)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("messages".into(), Value::Array(messages));
    let tools: Vec<Value> = sorted_tools(&options.tools)
        .into_iter()
        .map(|tool| {
            let mut function = Map::new();
            function.insert("name".into(), json!(encode_tool_name(&tool.name)));
            function.insert("description".into(), json!(tool.description));
            function.insert("parameters".into(), inject_harness_parameters(tool));
            if tool.strict {
                function.insert("strict".into(), json!(true));
            }
            json!({"type": "function", "function": function})
        })
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("max_tokens".into(), json!(options.max_tokens));
    if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    match kind {
        ProviderKind::OpenAiCompatible => {
            if let Some(effort) = effort(options) {
                body.insert("reasoning_effort".into(), json!(effort));
            }
        }
        // Moonshot's per-model shapes: Kimi K3 takes a top-level `reasoning_effort` (it always
        // thinks); K2.5/K2.6 think unless told `thinking: {"type": "disabled"}`.
        ProviderKind::Moonshot => {
            if !options.reasoning_efforts.is_empty() {
                if let Some(effort) = effort(options) {
                    body.insert("reasoning_effort".into(), json!(effort));
                }
            }
            let off = matches!(options.thinking, Thinking::Off | Thinking::Budget(0))
                && options.openai_reasoning.is_none();
            if off && options.thinking_off == ThinkingOff::Disable {
                body.insert("thinking".into(), json!({"type": "disabled"}));
            }
        }
        _ => {}
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    body
}

/// Headers besides authentication.
pub(crate) fn headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}
