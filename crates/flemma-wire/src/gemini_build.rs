//! Gemini API and Vertex AI `streamGenerateContent` request bodies.

use flemma_conversation::{Part, Role};
use serde_json::{Map, Value, json};

use crate::prepare::{Prepared, ThinkingUse, base64_encode, classify_thinking};
use crate::tools::{SYNTHETIC_ID_PREFIX, name_from_synthetic_id};
use crate::{
    BuildError, ProviderKind, RequestOptions, Thinking, ThinkingLevel, encode_tool_name,
    inject_harness_parameters, sorted_tools,
};

/// `thinkingBudget` of a named level (Gemini 2.5 models).
pub fn gemini_level_budget(level: ThinkingLevel) -> i32 {
    match level {
        ThinkingLevel::Minimal => 512,
        ThinkingLevel::Low => 1024,
        ThinkingLevel::Medium => 4096,
        ThinkingLevel::High => 16384,
        ThinkingLevel::Max => 24576,
    }
}

/// `thinkingLevel` of a named level (Gemini 3 models).
pub fn gemini_level_name(level: ThinkingLevel) -> &'static str {
    match level {
        ThinkingLevel::Minimal => "MINIMAL",
        ThinkingLevel::Low => "LOW",
        ThinkingLevel::Medium => "MEDIUM",
        ThinkingLevel::High | ThinkingLevel::Max => "HIGH",
    }
}

/// The model id without a `models/` prefix.
pub(crate) fn model_id(model: &str) -> &str {
    model.strip_prefix("models/").unwrap_or(model)
}

fn uses_thinking_levels(model: &str) -> bool {
    model_id(model).starts_with("gemini-3")
}

/// Whether a tool-use id came from Gemini (sent back as `id`). Synthetic `urn:flemma:tool:` ids
/// and ids in another provider's style (`toolu_…`, `call_…`, `fc_…`) are not sent.
pub fn is_gemini_call_id(id: &str) -> bool {
    !(id.is_empty()
        || id.starts_with(SYNTHETIC_ID_PREFIX)
        || id.starts_with("toolu_")
        || id.starts_with("srvtoolu_")
        || id.starts_with("call_")
        || id.starts_with("fc_"))
}

fn inline_data(mime: &str, data: &[u8]) -> Value {
    json!({"inlineData": {"mimeType": mime, "data": base64_encode(data)}})
}

fn content_part(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text } | Part::TextFile { text, .. } if !text.is_empty() => {
            Some(json!({"text": text}))
        }
        Part::Image { mime, data, .. } => Some(inline_data(mime, data)),
        Part::Pdf { data, .. } => Some(inline_data("application/pdf", data)),
        _ => None,
    }
}

fn user_parts(prepared: &Prepared, parts: &[Part]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut attachments = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let name = prepared
                    .tool_names
                    .get(tool_use_id)
                    .cloned()
                    .or_else(|| name_from_synthetic_id(tool_use_id))
                    .unwrap_or_else(|| "tool".to_string());
                let key = if *is_error { "error" } else { "output" };
                let mut response = Map::new();
                response.insert(key.into(), json!(Part::joined_text(content)));
                let mut call = Map::new();
                if is_gemini_call_id(tool_use_id) {
                    call.insert("id".into(), json!(tool_use_id));
                }
                call.insert("name".into(), json!(encode_tool_name(&name)));
                call.insert("response".into(), Value::Object(response));
                out.push(json!({"functionResponse": call}));
                attachments.extend(
                    content
                        .iter()
                        .filter(|p| matches!(p, Part::Image { .. } | Part::Pdf { .. }))
                        .filter_map(content_part),
                );
            }
            other => attachments.extend(content_part(other)),
        }
    }
    out.extend(attachments);
    out
}

fn model_parts(kind: ProviderKind, parts: &[Part]) -> Vec<Value> {
    let mut signature: Option<String> = None;
    let mut out: Vec<Value> = Vec::new();
    for part in parts {
        if let Part::Thinking {
            text,
            signature: sig,
            redacted,
        } = part
        {
            match classify_thinking(kind, text, sig.as_ref(), *redacted) {
                ThinkingUse::Native { signature: s, .. } => {
                    signature.get_or_insert(s);
                }
                ThinkingUse::ForeignText(text) => out.push(json!({"text": text})),
                ThinkingUse::NativeRedacted { .. } | ThinkingUse::Drop => {}
            }
        }
    }
    let mut first_call: Option<usize> = None;
    let mut last_text: Option<usize> = None;
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => {
                last_text = Some(out.len());
                out.push(json!({"text": text}));
            }
            Part::ToolUse {
                id, name, input, ..
            } => {
                let mut call = Map::new();
                if is_gemini_call_id(id) {
                    call.insert("id".into(), json!(id));
                }
                let name = name_from_synthetic_id(id)
                    .filter(|_| name.is_empty())
                    .unwrap_or_else(|| name.clone());
                call.insert("name".into(), json!(encode_tool_name(&name)));
                let args = if input.is_object() {
                    input.clone()
                } else {
                    json!({})
                };
                call.insert("args".into(), args);
                first_call.get_or_insert(out.len());
                out.push(json!({"functionCall": call}));
            }
            _ => {}
        }
    }
    if let Some(signature) = signature {
        match first_call.or(last_text) {
            Some(position) => {
                if let Some(Value::Object(part)) = out.get_mut(position) {
                    part.insert("thoughtSignature".into(), json!(signature));
                }
            }
            None => out.push(json!({"text": "", "thoughtSignature": signature})),
        }
    }
    out
}

/// The dummy signature Google documents for function calls that did not come from Gemini 3
/// (history from another model), which Gemini 3 would otherwise reject as unsigned.
pub const FOREIGN_CALL_SIGNATURE: &str = "skip_thought_signature_validator";

/// Gemini 3 validates signatures in the current turn only: when the conversation ends with
/// function responses to a model turn whose calls carry no signature, the first call gets
/// [`FOREIGN_CALL_SIGNATURE`].
fn sign_current_tool_turn(contents: &mut [Value]) {
    let [.., model, last] = contents else {
        return;
    };
    let answers_calls = last["parts"]
        .as_array()
        .is_some_and(|p| p.iter().any(|part| part.get("functionResponse").is_some()));
    if !answers_calls || model["role"] != "model" {
        return;
    }
    let Some(parts) = model.get_mut("parts").and_then(Value::as_array_mut) else {
        return;
    };
    if parts.iter().any(|p| p.get("thoughtSignature").is_some()) {
        return;
    }
    if let Some(Value::Object(call)) = parts.iter_mut().find(|p| p.get("functionCall").is_some()) {
        call.insert("thoughtSignature".into(), json!(FOREIGN_CALL_SIGNATURE));
    }
}

fn thinking_config(options: &RequestOptions) -> Option<Value> {
    if let Some(budget) = options.gemini_thinking_budget {
        return Some(json!({"includeThoughts": budget != 0, "thinkingBudget": budget}));
    }
    let levels = uses_thinking_levels(&options.model);
    // Gemini 3 and the 2.5 Pro models cannot turn thinking off (budget 0 is rejected): "off"
    // leaves the model's default and does not ask for thoughts.
    let always_thinks = levels || model_id(&options.model).contains("-pro");
    match options.thinking {
        Thinking::Off | Thinking::Budget(0) if always_thinks => None,
        Thinking::Off | Thinking::Budget(0) => Some(json!({"thinkingBudget": 0})),
        Thinking::Level(level) if levels => Some(json!({
            "includeThoughts": true, "thinkingLevel": gemini_level_name(level),
        })),
        Thinking::Level(level) => Some(json!({
            "includeThoughts": true, "thinkingBudget": gemini_level_budget(level),
        })),
        Thinking::Budget(budget) => Some(json!({
            "includeThoughts": true,
            "thinkingBudget": i32::try_from(budget).unwrap_or(i32::MAX),
        })),
    }
}

/// The `GenerateContentRequest` body as a JSON map.
pub(crate) fn body(
    kind: ProviderKind,
    prepared: &Prepared,
    options: &RequestOptions,
) -> Map<String, Value> {
    let mut body = Map::new();
    if !prepared.system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": prepared.system}]}),
        );
    }
    let declarations: Vec<Value> = sorted_tools(&options.tools)
        .into_iter()
        .map(|tool| {
            json!({
                "name": encode_tool_name(&tool.name),
                "description": tool.description,
                "parametersJsonSchema": inject_harness_parameters(tool),
            })
        })
        .collect();
    if !declarations.is_empty() {
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mut contents = Vec::new();
    for turn in &prepared.turns {
        let (role, parts) = match turn.role {
            Role::User => ("user", user_parts(prepared, &turn.parts)),
            Role::Assistant => ("model", model_parts(kind, &turn.parts)),
        };
        if !parts.is_empty() {
            contents.push(json!({"role": role, "parts": parts}));
        }
    }
    if uses_thinking_levels(&options.model) {
        sign_current_tool_turn(&mut contents);
    }
    body.insert("contents".into(), Value::Array(contents));
    let mut generation = Map::new();
    generation.insert("maxOutputTokens".into(), json!(options.max_tokens));
    if let Some(temperature) = options.temperature {
        generation.insert("temperature".into(), json!(temperature));
    }
    if let Some(thinking) = thinking_config(options) {
        generation.insert("thinkingConfig".into(), thinking);
    }
    body.insert("generationConfig".into(), Value::Object(generation));
    body
}

/// The model path (`/v1beta/models/{m}` or the Vertex publisher path) without the method.
pub(crate) fn model_path(
    kind: ProviderKind,
    options: &RequestOptions,
) -> Result<String, BuildError> {
    let model = model_id(&options.model);
    if model.is_empty() {
        return Err(BuildError::MissingOption(format!(
            "no model is set for {}: choose one in the frontmatter or the config (model = \"…\")",
            kind.name()
        )));
    }
    if kind == ProviderKind::Vertex {
        let project = options
            .vertex_project
            .as_deref()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                BuildError::MissingOption(
                    "vertex needs a Google Cloud project id: set `parameters.vertex.project_id` in the config (or `flemma.opt.vertex.project_id` in the frontmatter)".into(),
                )
            })?;
        let location = if options.vertex_location.is_empty() {
            "global"
        } else {
            options.vertex_location.as_str()
        };
        Ok(format!(
            "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}"
        ))
    } else {
        Ok(format!("/v1beta/models/{model}"))
    }
}

/// Headers besides authentication.
pub(crate) fn headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}
