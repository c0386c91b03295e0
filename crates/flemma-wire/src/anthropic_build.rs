//! Anthropic Messages request bodies.

use flemma_conversation::{Part, Role};
use serde_json::{Map, Value, json};

use crate::prepare::{Prepared, ThinkingUse, base64_encode, classify_thinking};
use crate::tools::normalize_tool_id;
use crate::{
    BuildError, CacheRetention, ProviderKind, RequestOptions, Thinking, ThinkingLevel, ThinkingOff,
    WireRequest, encode_tool_name, inject_harness_parameters, sorted_tools,
};

/// The `anthropic-version` sent when the options leave it empty.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";
/// Anthropic's minimum thinking budget.
pub const MIN_THINKING_BUDGET: u32 = 1024;
const MAX_ID_LEN: usize = 64;

/// Thinking budget of a named level (harness.md §6).
pub fn anthropic_level_budget(level: ThinkingLevel) -> u32 {
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => 1024,
        ThinkingLevel::Medium => 2048,
        ThinkingLevel::High => 8192,
        ThinkingLevel::Max => 16384,
    }
}

fn effort(level: ThinkingLevel) -> &'static str {
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        ThinkingLevel::High => "high",
        ThinkingLevel::Max => "max",
    }
}

fn cache_control(retention: CacheRetention) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({"type": "ephemeral"})),
        CacheRetention::Long => Some(json!({"type": "ephemeral", "ttl": "1h"})),
    }
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn attachment_block(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } | Part::TextFile { text, .. } if !text.is_empty() => {
            Some(text_block(text))
        }
        Part::Image { mime, data, .. } => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime, "data": base64_encode(data)},
        })),
        Part::Pdf { data, .. } => Some(json!({
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": base64_encode(data)},
        })),
        _ => None,
    }
}

fn user_blocks(parts: &[Part]) -> Vec<Value> {
    let mut blocks = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert(
                    "tool_use_id".into(),
                    json!(normalize_tool_id(tool_use_id, MAX_ID_LEN)),
                );
                let content: Vec<Value> = content.iter().filter_map(attachment_block).collect();
                if !content.is_empty() {
                    block.insert("content".into(), Value::Array(content));
                }
                if *is_error {
                    block.insert("is_error".into(), json!(true));
                }
                blocks.push(Value::Object(block));
            }
            other => blocks.extend(attachment_block(other)),
        }
    }
    blocks
}

fn assistant_blocks(parts: &[Part]) -> Vec<Value> {
    let mut thinking = Vec::new();
    let mut foreign = Vec::new();
    let mut rest = Vec::new();
    for part in parts {
        match part {
            Part::Thinking {
                text,
                signature,
                redacted,
            } => match classify_thinking(
                ProviderKind::Anthropic,
                text,
                signature.as_ref(),
                *redacted,
            ) {
                ThinkingUse::Native { text, signature } => thinking.push(json!({
                    "type": "thinking", "thinking": text, "signature": signature,
                })),
                ThinkingUse::NativeRedacted { data } => {
                    thinking.push(json!({"type": "redacted_thinking", "data": data}));
                }
                ThinkingUse::ForeignText(text) => foreign.push(text_block(&text)),
                ThinkingUse::Drop => {}
            },
            Part::Text { text } if !text.is_empty() => rest.push(text_block(text)),
            Part::ToolUse {
                id, name, input, ..
            } => {
                let input = if input.is_object() {
                    input.clone()
                } else {
                    json!({})
                };
                rest.push(json!({
                    "type": "tool_use",
                    "id": normalize_tool_id(id, MAX_ID_LEN),
                    "name": encode_tool_name(name),
                    "input": input,
                }));
            }
            _ => {}
        }
    }
    thinking.extend(foreign);
    thinking.extend(rest);
    thinking
}

/// The thinking settings: (`thinking`, `output_config`, thinking on).
fn thinking_settings(
    options: &RequestOptions,
    warnings: &mut Vec<String>,
) -> (Option<Value>, Option<Value>) {
    let adaptive = |level: ThinkingLevel| {
        (
            Some(json!({"type": "adaptive"})),
            Some(json!({"effort": effort(level)})),
        )
    };
    let off = || match options.thinking_off {
        // The model thinks unless told not to (Claude Sonnet 5).
        ThinkingOff::Disable => (Some(json!({"type": "disabled"})), None),
        ThinkingOff::Omit | ThinkingOff::Forced => (None, None),
    };
    if let Some(budget) = options.anthropic_thinking_budget {
        if budget == 0 {
            return off();
        }
        if options.supports_adaptive_thinking {
            // Adaptive models refuse budgets: the budget becomes the nearest effort.
            return adaptive(crate::level_for_budget(budget));
        }
        return (budget_thinking(budget, options.max_tokens, warnings), None);
    }
    match options.thinking {
        Thinking::Off | Thinking::Budget(0) => off(),
        Thinking::Level(level) if options.supports_adaptive_thinking => adaptive(level),
        Thinking::Budget(budget) if options.supports_adaptive_thinking => {
            adaptive(crate::level_for_budget(budget))
        }
        Thinking::Level(level) => (
            budget_thinking(anthropic_level_budget(level), options.max_tokens, warnings),
            None,
        ),
        Thinking::Budget(budget) => (budget_thinking(budget, options.max_tokens, warnings), None),
    }
}

/// `budget_tokens` must be at least 1024 and below `max_tokens`: the budget is raised to the
/// minimum and clamped to `max_tokens - 1`; when that leaves less than the minimum, thinking is
/// turned off with a warning.
fn budget_thinking(budget: u32, max_tokens: u32, warnings: &mut Vec<String>) -> Option<Value> {
    let mut budget = budget.max(MIN_THINKING_BUDGET);
    if budget >= max_tokens {
        let clamped = max_tokens.saturating_sub(1);
        if clamped < MIN_THINKING_BUDGET {
            warnings.push(format!(
                "thinking turned off: max_tokens {max_tokens} leaves no room for Anthropic's minimum thinking budget of {MIN_THINKING_BUDGET}; raise max_tokens to enable it"
            ));
            return None;
        }
        warnings.push(format!(
            "thinking budget {budget} lowered to {clamped} to stay below max_tokens {max_tokens}"
        ));
        budget = clamped;
    }
    Some(json!({"type": "enabled", "budget_tokens": budget}))
}

/// The body as a JSON map (used by both the message and the token-count requests).
pub(crate) fn body(
    prepared: &Prepared,
    options: &RequestOptions,
    warnings: &mut Vec<String>,
) -> Map<String, Value> {
    let cache = cache_control(options.cache_retention);
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("max_tokens".into(), json!(options.max_tokens));
    if !prepared.system.is_empty() {
        let mut block = Map::new();
        block.insert("type".into(), json!("text"));
        block.insert("text".into(), json!(prepared.system));
        if let Some(cache) = &cache {
            block.insert("cache_control".into(), cache.clone());
        }
        body.insert("system".into(), json!([block]));
    }
    let mut messages: Vec<Value> = Vec::new();
    for turn in &prepared.turns {
        let (role, blocks) = match turn.role {
            Role::User => ("user", user_blocks(&turn.parts)),
            Role::Assistant => ("assistant", assistant_blocks(&turn.parts)),
        };
        if blocks.is_empty() {
            continue;
        }
        messages.push(json!({"role": role, "content": blocks}));
    }
    if let Some(cache) = &cache {
        mark_tail(&mut messages, cache);
    }
    body.insert("messages".into(), Value::Array(messages));
    let tools = sorted_tools(&options.tools);
    if !tools.is_empty() {
        let count = tools.len();
        let tools: Vec<Value> = tools
            .into_iter()
            .enumerate()
            .map(|(i, tool)| {
                let mut entry = Map::new();
                entry.insert("name".into(), json!(encode_tool_name(&tool.name)));
                entry.insert("description".into(), json!(tool.description));
                entry.insert("input_schema".into(), inject_harness_parameters(tool));
                if tool.strict {
                    entry.insert("strict".into(), json!(true));
                }
                if let (Some(cache), true) = (&cache, i + 1 == count) {
                    entry.insert("cache_control".into(), cache.clone());
                }
                Value::Object(entry)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let (mut thinking, mut output_config) = thinking_settings(options, warnings);
    let enabled = |thinking: &Option<Value>| {
        thinking
            .as_ref()
            .is_some_and(|t| t.get("type").and_then(Value::as_str) != Some("disabled"))
    };
    let in_tool_loop_without_thinking = body
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|messages| tool_loop_lacks_thinking(messages));
    if enabled(&thinking) && in_tool_loop_without_thinking {
        warnings.push(
            "thinking turned off for this request: the last assistant turn has tool calls but no Anthropic thinking block (it came from another provider or thinking was off); Anthropic rejects thinking in that case".into(),
        );
        thinking =
            (options.thinking_off == ThinkingOff::Disable).then(|| json!({"type": "disabled"}));
        output_config = None;
    }
    let thinking_on = enabled(&thinking);
    if let Some(thinking) = thinking {
        body.insert("thinking".into(), thinking);
    }
    if let Some(output_config) = output_config {
        body.insert("output_config".into(), output_config);
    }
    if let (Some(temperature), false) = (options.temperature, thinking_on) {
        body.insert("temperature".into(), json!(temperature));
    }
    body.insert("stream".into(), json!(true));
    body
}

/// True when the request continues a tool loop (the last message carries tool results) whose
/// assistant turn does not start with a thinking block: Anthropic rejects thinking then.
fn tool_loop_lacks_thinking(messages: &[Value]) -> bool {
    let block_type = |block: &Value| {
        block
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let [.., assistant, last] = messages else {
        return false;
    };
    let has_results = last["content"].as_array().is_some_and(|c| {
        c.iter()
            .any(|b| block_type(b).as_deref() == Some("tool_result"))
    });
    if !has_results || assistant["role"] != "assistant" {
        return false;
    }
    let first = assistant["content"]
        .as_array()
        .and_then(|c| c.first())
        .and_then(block_type);
    !matches!(first.as_deref(), Some("thinking" | "redacted_thinking"))
}

/// Puts `cache_control` on the last cacheable block of the last message.
fn mark_tail(messages: &mut [Value], cache: &Value) {
    let Some(content) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let cacheable = content.iter_mut().rev().find(|block| {
        !matches!(
            block.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    });
    if let Some(Value::Object(block)) = cacheable {
        block.insert("cache_control".into(), cache.clone());
    }
}

/// Headers besides authentication.
pub(crate) fn headers(options: &RequestOptions) -> Vec<(String, String)> {
    let version = if options.anthropic_version.is_empty() {
        DEFAULT_ANTHROPIC_VERSION
    } else {
        options.anthropic_version.as_str()
    };
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("anthropic-version".to_string(), version.to_string()),
    ];
    if !options.anthropic_beta.is_empty() {
        headers.push((
            "anthropic-beta".to_string(),
            options.anthropic_beta.join(","),
        ));
    }
    headers
}

/// The token-count request: the message body without `max_tokens`, `stream` and `temperature`.
pub(crate) fn count_tokens(
    prepared: &Prepared,
    options: &RequestOptions,
) -> Result<WireRequest, BuildError> {
    let mut body = body(prepared, options, &mut Vec::new());
    for key in ["max_tokens", "stream", "temperature"] {
        body.shift_remove(key);
    }
    Ok(WireRequest {
        method: "POST",
        path_and_query: "/v1/messages/count_tokens".into(),
        headers: headers(options),
        body: crate::to_bytes(&Value::Object(body))?,
    })
}
