//! OpenAI Responses request bodies (`store: false`, encrypted reasoning round trip).

use base64::Engine as _;
use flemma_conversation::{Part, Role};
use serde_json::{Map, Value, json};

use crate::prepare::{Prepared, ThinkingUse, classify_thinking, data_url, file_name};
use crate::tools::{call_arguments, normalize_tool_id};
use crate::{
    BuildError, CacheRetention, ProviderKind, ReasoningSummary, RequestOptions, Thinking,
    ThinkingLevel, WireRequest, encode_tool_name, inject_harness_parameters, sorted_tools,
};

const MAX_ID_LEN: usize = 64;

/// `reasoning.effort` of a named level (`max` maps to `high`, accepted by every reasoning
/// model; set `openai.reasoning` for `xhigh`).
pub fn openai_level_effort(level: ThinkingLevel) -> &'static str {
    match level {
        ThinkingLevel::Minimal => "minimal",
        ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        ThinkingLevel::High | ThinkingLevel::Max => "high",
    }
}

/// `reasoning.effort` of a token budget.
pub fn openai_budget_effort(budget: u32) -> &'static str {
    match budget {
        0..=1024 => "low",
        1025..=8192 => "medium",
        _ => "high",
    }
}

/// The effort to request, `None` when reasoning is off. The `openai.reasoning` override wins.
pub(crate) fn effort(options: &RequestOptions) -> Option<&'static str> {
    if let Some(effort) = options.openai_reasoning {
        return Some(effort.as_str());
    }
    let level = match options.thinking {
        Thinking::Off | Thinking::Budget(0) => return None,
        Thinking::Level(level) => level,
        Thinking::Budget(budget) if options.reasoning_efforts.is_empty() => {
            return Some(openai_budget_effort(budget));
        }
        Thinking::Budget(budget) => crate::level_for_budget(budget),
    };
    if options.reasoning_efforts.is_empty() {
        Some(openai_level_effort(level))
    } else {
        // The model's own efforts (`xhigh` on GPT-5.2+, `max` on GPT-5.6 Sol, Kimi K3's).
        crate::nearest_effort(level, options.reasoning_efforts)
    }
}

fn user_content(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } | Part::TextFile { text, .. } if !text.is_empty() => {
            Some(json!({"type": "input_text", "text": text}))
        }
        Part::Image { mime, data, .. } => {
            Some(json!({"type": "input_image", "image_url": data_url(mime, data)}))
        }
        Part::Pdf { data, path } => Some(json!({
            "type": "input_file",
            "filename": file_name(path),
            "file_data": data_url("application/pdf", data),
        })),
        _ => None,
    }
}

/// Put before the output of a failed tool call: Responses has no error flag, so the text says it.
pub const TOOL_ERROR_PREFIX: &str = "Error: ";

fn tool_output(content: &[Part], is_error: bool) -> Value {
    let has_attachments = content
        .iter()
        .any(|p| matches!(p, Part::Image { .. } | Part::Pdf { .. }));
    if has_attachments {
        let mut items: Vec<Value> = content.iter().filter_map(user_content).collect();
        if is_error {
            items.insert(
                0,
                json!({"type": "input_text", "text": TOOL_ERROR_PREFIX.trim_end()}),
            );
        }
        Value::Array(items)
    } else if is_error {
        json!(format!("{TOOL_ERROR_PREFIX}{}", Part::joined_text(content)))
    } else {
        json!(Part::joined_text(content))
    }
}

fn push_assistant_text(items: &mut Vec<Value>, text: &str) {
    items.push(json!({"role": "assistant", "content": text}));
}

fn assistant_items(
    kind: ProviderKind,
    parts: &[Part],
    items: &mut Vec<Value>,
    warnings: &mut Vec<String>,
) {
    let mut texts: Vec<String> = Vec::new();
    for part in parts {
        if let Part::Thinking {
            text,
            signature,
            redacted,
        } = part
        {
            match classify_thinking(kind, text, signature.as_ref(), *redacted) {
                ThinkingUse::Native { text, signature } => {
                    match decode_reasoning_item(&signature) {
                        Some(item) => items.push(item),
                        None => {
                            warnings.push(format!(
                                "a {} thinking signature is not a base64 reasoning item; its text was sent as plain context",
                                kind.signature_provider()
                            ));
                            if !text.trim().is_empty() {
                                texts.push(crate::prepare::foreign_thinking_text(&text));
                            }
                        }
                    }
                }
                ThinkingUse::ForeignText(text) => texts.push(text),
                ThinkingUse::NativeRedacted { .. } | ThinkingUse::Drop => {}
            }
        }
    }
    if !texts.is_empty() {
        push_assistant_text(items, &texts.join("\n\n"));
    }
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => push_assistant_text(items, text),
            Part::ToolUse {
                id,
                name,
                input,
                raw_input,
            } => {
                let arguments = call_arguments(input, raw_input);
                items.push(json!({
                    "type": "function_call",
                    "call_id": normalize_tool_id(id, MAX_ID_LEN),
                    "name": encode_tool_name(name),
                    "arguments": arguments,
                }));
            }
            _ => {}
        }
    }
}

/// Decodes an `openai:` signature: base64 of the JSON of a reasoning output item.
fn decode_reasoning_item(signature: &str) -> Option<Value> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(signature.trim())
        .ok()?;
    let item: Value = serde_json::from_slice(&bytes).ok()?;
    (item.get("type").and_then(Value::as_str) == Some("reasoning")).then_some(item)
}

/// The body as a JSON map.
pub(crate) fn body(
    prepared: &Prepared,
    options: &RequestOptions,
    warnings: &mut Vec<String>,
) -> Map<String, Value> {
    let mut body = common_body(ProviderKind::OpenAi, prepared, options, warnings);
    body.insert("max_output_tokens".into(), json!(options.max_tokens));
    if let (Some(temperature), None) = (options.temperature, effort(options)) {
        body.insert("temperature".into(), json!(temperature));
    }
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    body
}

/// What the Codex backend is told when the chat has no system prompt: it requires
/// `instructions`.
pub const CODEX_DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant.";

/// The body for the Codex backend (a ChatGPT subscription), as the Codex CLI sends it:
/// `instructions` always, `store: false`, every reasoning item back with its encrypted content
/// (the backend keeps nothing), `tool_choice: "auto"` and parallel calls, and none of the
/// parameters it refuses (`max_output_tokens`, `temperature`: the backend sets them).
pub(crate) fn codex_body(
    prepared: &Prepared,
    options: &RequestOptions,
    warnings: &mut Vec<String>,
) -> Map<String, Value> {
    let mut body = common_body(ProviderKind::Codex, prepared, options, warnings);
    if options.temperature.is_some() {
        warnings.push(
            "the Codex backend sets the temperature itself; `temperature` was not sent".into(),
        );
    }
    body.insert("tool_choice".into(), json!("auto"));
    body.insert("parallel_tool_calls".into(), json!(true));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    body
}

/// What OpenAI's and the Codex backend's bodies share: model, instructions, input, tools,
/// reasoning (with encrypted reasoning asked back), the prompt cache key.
fn common_body(
    kind: ProviderKind,
    prepared: &Prepared,
    options: &RequestOptions,
    warnings: &mut Vec<String>,
) -> Map<String, Value> {
    let mut input: Vec<Value> = Vec::new();
    for turn in &prepared.turns {
        match turn.role {
            Role::User => {
                let mut content = Vec::new();
                for part in &turn.parts {
                    match part {
                        Part::ToolResult {
                            tool_use_id,
                            content: result,
                            is_error,
                        } => input.push(json!({
                            "type": "function_call_output",
                            "call_id": normalize_tool_id(tool_use_id, MAX_ID_LEN),
                            "output": tool_output(result, *is_error),
                        })),
                        other => content.extend(user_content(other)),
                    }
                }
                if !content.is_empty() {
                    input.push(json!({"role": "user", "content": content}));
                }
            }
            Role::Assistant => assistant_items(kind, &turn.parts, &mut input, warnings),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    if !prepared.system.is_empty() {
        body.insert("instructions".into(), json!(prepared.system));
    } else if kind == ProviderKind::Codex {
        body.insert("instructions".into(), json!(CODEX_DEFAULT_INSTRUCTIONS));
    }
    body.insert("input".into(), Value::Array(input));
    let tools: Vec<Value> = sorted_tools(&options.tools)
        .into_iter()
        .map(|tool| {
            json!({
                "type": "function",
                "name": encode_tool_name(&tool.name),
                "description": tool.description,
                "parameters": inject_harness_parameters(tool),
                "strict": tool.strict,
            })
        })
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    let effort = effort(options);
    if let Some(effort) = &effort {
        let summary = options
            .openai_reasoning_summary
            .unwrap_or(ReasoningSummary::Auto)
            .as_str();
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": summary}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if let (Some(key), false) = (
        &options.prompt_cache_key,
        options.cache_retention == CacheRetention::None,
    ) {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    body
}

/// Headers besides authentication.
pub(crate) fn headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}

/// The Codex backend's headers besides authentication (the bearer token and
/// `chatgpt-account-id`, added by the edge): a streamed answer, the Responses beta, and who
/// asks (`originator`).
pub(crate) fn codex_headers() -> Vec<(String, String)> {
    [
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
        ("openai-beta", "responses=experimental"),
        ("originator", "flemmad"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value.to_string()))
    .collect()
}

/// The `/responses/input_tokens` request.
pub(crate) fn count_tokens(
    prepared: &Prepared,
    options: &RequestOptions,
) -> Result<WireRequest, BuildError> {
    let mut body = body(prepared, options, &mut Vec::new());
    for key in [
        "stream",
        "store",
        "include",
        "max_output_tokens",
        "temperature",
        "prompt_cache_key",
    ] {
        body.shift_remove(key);
    }
    Ok(WireRequest {
        method: "POST",
        path_and_query: "/responses/input_tokens".into(),
        headers: headers(),
        body: crate::to_bytes(&Value::Object(body))?,
    })
}
