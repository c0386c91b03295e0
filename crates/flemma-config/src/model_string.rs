//! Model strings (Flemma 0.13–0.14): `model = "provider/model;key=value;key=nil"` and
//! `model = "$preset"`.
//!
//! A model string names, in one value, the provider, the model and request parameters:
//!
//! * `claude-sonnet-4-6` — a model of the provider in effect;
//! * `vertex/gemini-2.5-pro` — the provider (a known provider name before the first `/`) and the
//!   model (everything after it, so `openai-compatible/meta-llama/Llama-3` keeps its slash);
//! * `…;project_id=my-project;thinking=low` — parameters, each looked up first in the
//!   provider's own table (`parameters.vertex.project_id`), then among the general parameters
//!   (`parameters.thinking`); a dotted key names a table (`vertex.location`);
//! * `…;temperature=nil` — clears a parameter: lower layers no longer set it, so its default
//!   applies;
//! * `$fast` (optionally `$fast;thinking=low`) — a model preset, `[presets."$fast"]`.
//!
//! This module only parses; `resolve` applies the result to the layer that set `model`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::Provider;
use crate::error::{ConfigError, suggest};
use crate::layer::{ConfigLayer, Entry, ListOp, display_path, locate, validate_value};
use crate::schema::{self, Kind, Node};

/// What one parameter of a model string does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParameterValue {
    /// `key=value`: the value, typed (`true`, `false`, numbers; anything else is a string).
    Set(Value),
    /// `key=nil`: the parameter is cleared.
    Clear,
}

/// A parsed model string.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ModelString {
    /// `$name` when the string refers to a preset.
    pub preset: Option<String>,
    /// The provider named before `/`.
    pub provider: Option<Provider>,
    /// The model id (without provider and parameters); `None` for a preset.
    pub model: Option<String>,
    /// `key=value` parameters in order.
    pub parameters: Vec<(String, ParameterValue)>,
}

impl ModelString {
    /// Whether the string is a plain model id (nothing for `resolve` to expand).
    pub fn is_plain(&self) -> bool {
        self.preset.is_none() && self.provider.is_none() && self.parameters.is_empty()
    }
}

/// Parses a model string. Errors say what is wrong and how to write it.
pub(crate) fn parse(text: &str) -> Result<ModelString, String> {
    let text = text.trim();
    let mut pieces = text.split(';');
    let head = pieces.next().unwrap_or_default().trim();
    let mut parsed = ModelString::default();
    if let Some(name) = head.strip_prefix('$') {
        if !crate::layer::is_preset_ref(head) {
            return Err(format!(
                "`{head}` is not a preset name: write `$` and a lowercase name, such as `$fast`"
            ));
        }
        debug_assert!(!name.is_empty());
        parsed.preset = Some(head.to_owned());
    } else {
        let (provider, model) = match head.split_once('/') {
            Some((first, rest)) => match Provider::from_name(first) {
                Some(provider) => (Some(provider), rest),
                None => (None, head),
            },
            None => (None, head),
        };
        if model.is_empty() {
            return Err(match provider {
                Some(provider) => format!(
                    "`{head}` names the provider `{provider}` but no model after `/`; write `{provider}/<model>` or set `provider = \"{provider}\"` alone"
                ),
                None => "the model is empty; name a model such as `claude-sonnet-4-6` or `openai/gpt-5.5`".to_owned(),
            });
        }
        if model.chars().any(char::is_whitespace) {
            return Err(format!(
                "`{model}` contains spaces; a model string is `provider/model;key=value` without spaces"
            ));
        }
        parsed.provider = provider;
        parsed.model = Some(model.to_owned());
    }
    for piece in pieces {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        let Some((key, value)) = piece.split_once('=') else {
            return Err(format!(
                "`{piece}` in the model string is not `key=value`; write parameters as `;thinking=low` (or `;key=nil` to clear one)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
        {
            return Err(format!(
                "`{key}` is not a parameter name; use names such as `thinking`, `temperature` or `project_id`"
            ));
        }
        parsed
            .parameters
            .push((key.to_owned(), parameter_value(value)));
    }
    Ok(parsed)
}

/// `nil` clears; `true`/`false` and numbers are typed; anything else (quotes removed) is a
/// string.
fn parameter_value(text: &str) -> ParameterValue {
    match text {
        "nil" => return ParameterValue::Clear,
        "true" => return ParameterValue::Set(Value::Bool(true)),
        "false" => return ParameterValue::Set(Value::Bool(false)),
        _ => {}
    }
    if let Ok(integer) = text.parse::<i64>() {
        return ParameterValue::Set(Value::from(integer));
    }
    if let Some(number) = text
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .and_then(serde_json::Number::from_f64)
    {
        return ParameterValue::Set(Value::Number(number));
    }
    let unquoted = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    ParameterValue::Set(Value::String(unquoted.to_owned()))
}

/// The table of `parameters` that holds `provider`'s own options.
pub(crate) fn provider_table(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => "anthropic",
        Provider::Openai | Provider::Codex => "openai",
        Provider::OpenaiCompatible | Provider::Moonshot => "openai_compatible",
        Provider::Gemini => "gemini",
        Provider::Vertex => "vertex",
    }
}

// ---- applying model strings to their layers -------------------------------------------------

/// The layers after their model strings were applied, and per layer the parameter paths that
/// its `;key=nil` parameters cleared (lower layers no longer set them).
pub(crate) struct Expansion<'a> {
    pub layers: Vec<Cow<'a, ConfigLayer>>,
    pub clears: Vec<Vec<Vec<String>>>,
}

/// A model preset as the layers define it (the highest layer wins per field).
#[derive(Debug, Default)]
struct PresetDefinition {
    provider: Option<Provider>,
    model: Option<String>,
    /// Paths below `parameters` and their values.
    parameters: BTreeMap<Vec<String>, Value>,
    /// Whether the preset has an `auto_approve` list (it is then spread into
    /// `tools.auto_approve` as `$name`).
    approves: bool,
    /// The `tools` list operations of every layer, in order.
    tools: Vec<ListOp>,
}

fn segments(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

/// Applies the model string of every layer that sets `model` to something other than a plain
/// model id: the provider named in it and the model go to that layer's `provider` and `model`;
/// a preset's fields fill what the layer does not set itself; `;key=value` parameters override
/// the layer's own (`;key=nil` clears the parameter in this and every lower layer).
pub(crate) fn expand<'a>(
    ordered: &[&'a ConfigLayer],
    errors: &mut Vec<ConfigError>,
) -> Expansion<'a> {
    // A preset an untrusted layer (an untrusted chat's frontmatter) defines serves only the
    // untrusted layers: what it brings then lands in them, and resolution judges it there.
    let trusted: Vec<&ConfigLayer> = ordered
        .iter()
        .copied()
        .filter(|layer| layer.is_trusted())
        .collect();
    let trusted_presets = preset_definitions(&trusted);
    let all_presets = preset_definitions(ordered);
    let provider_path = segments(&["provider"]);
    let model_path = segments(&["model"]);
    let provider_of = |layer: &ConfigLayer| match layer.entries.get(&provider_path) {
        Some(Entry::Value(Value::String(name))) => Provider::from_name(name),
        _ => None,
    };
    let top_provider = ordered
        .iter()
        .rev()
        .find_map(|layer| provider_of(layer))
        .unwrap_or(Provider::Anthropic);
    let mut expansion = Expansion {
        layers: Vec::with_capacity(ordered.len()),
        clears: Vec::with_capacity(ordered.len()),
    };
    for layer in ordered {
        let kind = layer.kind();
        let text = match layer.entries.get(&model_path) {
            Some(Entry::Value(Value::String(text))) => text.clone(),
            _ => {
                expansion.layers.push(Cow::Borrowed(*layer));
                expansion.clears.push(Vec::new());
                continue;
            }
        };
        let parsed = match parse(&text) {
            Ok(parsed) if parsed.is_plain() => {
                expansion.layers.push(Cow::Borrowed(*layer));
                expansion.clears.push(Vec::new());
                continue;
            }
            Ok(parsed) => parsed,
            Err(message) => {
                errors.push(
                    ConfigError::new("model", format!("invalid model string '{text}': {message}"))
                        .in_layer(kind),
                );
                expansion.layers.push(Cow::Borrowed(*layer));
                expansion.clears.push(Vec::new());
                continue;
            }
        };
        let mut owned: ConfigLayer = (*layer).clone();
        let mut clears = Vec::new();
        let mut provider = parsed.provider;
        let mut model = parsed.model.clone();
        // Parameters a preset brings: (path below `parameters` or a model-string key, value).
        let mut preset_parameters: Vec<(Vec<String>, Value)> = Vec::new();
        let mut preset_keys: Vec<(String, ParameterValue)> = Vec::new();
        if let Some(name) = &parsed.preset {
            let presets = if layer.is_trusted() {
                &trusted_presets
            } else {
                &all_presets
            };
            let Some(definition) = presets.get(name) else {
                errors.push(
                    ConfigError::new(
                        "model",
                        format!(
                            "model '{text}' names the preset '{name}', which no layer defines; define it under [presets.\"{name}\"] with `provider` and `model`"
                        ),
                    )
                    .with_suggestion(suggest(name, presets.keys().map(String::as_str)))
                    .in_layer(kind),
                );
                expansion.layers.push(Cow::Borrowed(*layer));
                expansion.clears.push(Vec::new());
                continue;
            };
            let inner = match definition.model.as_deref().map(parse) {
                Some(Ok(inner)) if inner.preset.is_none() => Some(inner),
                Some(Ok(_)) => {
                    errors.push(
                        ConfigError::new(
                            format!("presets.\"{name}\".model"),
                            format!("the model of preset '{name}' names another preset; a preset's model is `provider/model` or a model id"),
                        )
                        .in_layer(kind),
                    );
                    None
                }
                Some(Err(message)) => {
                    errors.push(
                        ConfigError::new(
                            format!("presets.\"{name}\".model"),
                            format!("invalid model string in preset '{name}': {message}"),
                        )
                        .in_layer(kind),
                    );
                    None
                }
                None => None,
            };
            if definition.provider.is_none() && inner.is_none() {
                errors.push(
                    ConfigError::new(
                        "model",
                        format!(
                            "preset '{name}' names no provider or model, so `model = \"{name}\"` has nothing to select; give [presets.\"{name}\"] a `provider` and a `model`"
                        ),
                    )
                    .in_layer(kind),
                );
            }
            provider = inner
                .as_ref()
                .and_then(|inner| inner.provider)
                .or(definition.provider);
            model = inner.as_ref().and_then(|inner| inner.model.clone());
            if let Some(inner) = inner {
                preset_keys = inner.parameters;
            }
            preset_parameters.extend(
                definition
                    .parameters
                    .iter()
                    .map(|(path, value)| (path.clone(), value.clone())),
            );
            if definition.approves {
                prepend_ops(
                    &mut owned,
                    &["tools", "auto_approve"],
                    vec![ListOp::Set(vec![name.clone()])],
                );
            }
            if !definition.tools.is_empty() {
                prepend_ops(&mut owned, &["tools", "enabled"], definition.tools.clone());
            }
        }
        let effective = provider
            .or_else(|| provider_of(layer))
            .unwrap_or(top_provider);
        if let Some(provider) = provider {
            owned.entries.insert(
                provider_path.clone(),
                Entry::Value(Value::String(provider.as_str().to_owned())),
            );
        }
        match model {
            Some(model) => {
                owned
                    .entries
                    .insert(model_path.clone(), Entry::Value(Value::String(model)));
            }
            // A preset with a provider only: that provider's default model.
            None => {
                owned.entries.remove(&model_path);
            }
        }
        // A preset fills what the layer does not set itself.
        for (below, value) in preset_parameters {
            let mut path = segments(&["parameters"]);
            path.extend(below);
            owned.entries.entry(path).or_insert(Entry::Value(value));
        }
        for (key, value) in preset_keys {
            if let Some(path) =
                apply_parameter(&mut owned, effective, &text, &key, value, false, errors)
            {
                clears.push(path);
            }
        }
        // The string's own parameters win over the layer's.
        for (key, value) in parsed.parameters {
            if let Some(path) =
                apply_parameter(&mut owned, effective, &text, &key, value, true, errors)
            {
                clears.push(path);
            }
        }
        expansion.layers.push(Cow::Owned(owned));
        expansion.clears.push(clears);
    }
    expansion
}

fn preset_definitions(ordered: &[&ConfigLayer]) -> BTreeMap<String, PresetDefinition> {
    let mut presets: BTreeMap<String, PresetDefinition> = BTreeMap::new();
    for layer in ordered {
        for (path, entry) in &layer.entries {
            let [first, name, field, rest @ ..] = path.as_slice() else {
                continue;
            };
            if first != "presets" {
                continue;
            }
            let definition = presets.entry(name.clone()).or_default();
            match (field.as_str(), entry) {
                ("provider", Entry::Value(Value::String(provider))) => {
                    definition.provider = Provider::from_name(provider);
                }
                ("model", Entry::Value(Value::String(model))) => {
                    definition.model = Some(model.clone());
                }
                ("parameters", Entry::Value(value)) => {
                    definition.parameters.insert(rest.to_vec(), value.clone());
                }
                ("auto_approve", Entry::List(_) | Entry::Function(_)) => definition.approves = true,
                ("tools", Entry::List(ops)) => definition.tools.extend(ops.iter().cloned()),
                _ => {}
            }
        }
    }
    presets
}

/// Puts `ops` before the layer's own operations on the list at `path` (so the layer's own `+x`
/// and `!x` refine them and its own full list replaces them).
fn prepend_ops(layer: &mut ConfigLayer, path: &[&str], ops: Vec<ListOp>) {
    let path = segments(path);
    match layer.entries.get_mut(&path) {
        Some(Entry::List(own)) => {
            let mut combined = ops;
            combined.append(own);
            *own = combined;
        }
        Some(_) => {}
        None => {
            layer.entries.insert(path, Entry::List(ops));
        }
    }
}

/// Applies one `key=value` (or `key=nil`) to `layer`; `overrides` says whether it replaces what
/// the layer sets. Returns the path a `nil` cleared (for the lower layers).
fn apply_parameter(
    layer: &mut ConfigLayer,
    provider: Provider,
    text: &str,
    key: &str,
    value: ParameterValue,
    overrides: bool,
    errors: &mut Vec<ConfigError>,
) -> Option<Vec<String>> {
    let kind = layer.kind();
    let (path, node) = match parameter_path(provider, key) {
        Ok(found) => found,
        Err(error) => {
            errors.push(
                error
                    .with_context(&format!("in model string '{text}'"))
                    .in_layer(kind),
            );
            return None;
        }
    };
    if !overrides && layer.entries.contains_key(&path) {
        return None;
    }
    let display = display_path(&path);
    match value {
        ParameterValue::Set(value) => {
            let value = match (&node.kind, value) {
                // `key=text` for a text list (`anthropic.beta`): one item.
                (Kind::List { .. }, Value::String(item)) => {
                    layer
                        .entries
                        .insert(path, Entry::List(vec![ListOp::Set(vec![item])]));
                    return None;
                }
                (_, value) => value,
            };
            match validate_value(node, &value, &display) {
                Ok(normalized) => {
                    layer.entries.insert(path, Entry::Value(normalized));
                }
                Err(error) => errors.push(
                    error
                        .with_context(&format!("in model string '{text}'"))
                        .in_layer(kind),
                ),
            }
            None
        }
        ParameterValue::Clear => {
            if matches!(node.kind, Kind::List { .. }) {
                layer
                    .entries
                    .insert(path, Entry::List(vec![ListOp::Set(Vec::new())]));
                return None;
            }
            layer.entries.remove(&path);
            Some(path)
        }
    }
}

/// The schema path of a model-string parameter: the provider's own table first
/// (`project_id` → `parameters.vertex.project_id`), then the general parameters
/// (`thinking` → `parameters.thinking`); a dotted key names a table (`vertex.location`).
fn parameter_path(
    provider: Provider,
    key: &str,
) -> Result<(Vec<String>, &'static Node), ConfigError> {
    let table = provider_table(provider);
    let candidates = if key.contains('.') {
        vec![format!("parameters.{key}")]
    } else {
        vec![
            format!("parameters.{table}.{key}"),
            format!("parameters.{key}"),
        ]
    };
    for candidate in &candidates {
        if let Ok((path, node)) = locate(candidate)
            && node.is_leaf()
        {
            return Ok((path, node));
        }
    }
    let names: Vec<String> = schema::leaf_paths()
        .into_iter()
        .filter_map(|(path, _)| {
            let rest = path.strip_prefix("parameters.")?;
            let rest = rest.strip_prefix(&format!("{table}.")).unwrap_or(rest);
            Some(rest.to_owned())
        })
        .collect();
    Err(ConfigError::new(
        "model",
        format!(
            "unknown parameter '{key}' for {provider}; model-string parameters are the `parameters` options (`thinking`, `temperature`, `max_tokens`, …) and the provider's own (`{table}.…`)"
        ),
    )
    .with_suggestion(suggest(key, names.iter().map(String::as_str))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_model_and_parameters() {
        let parsed = parse("vertex/gemini-2.5-pro;project_id=x;thinking=low;temperature=0.2;max_tokens=4000;location=nil").unwrap();
        assert_eq!(parsed.provider, Some(Provider::Vertex));
        assert_eq!(parsed.model.as_deref(), Some("gemini-2.5-pro"));
        assert_eq!(
            parsed.parameters,
            vec![
                ("project_id".into(), ParameterValue::Set(json!("x"))),
                ("thinking".into(), ParameterValue::Set(json!("low"))),
                ("temperature".into(), ParameterValue::Set(json!(0.2))),
                ("max_tokens".into(), ParameterValue::Set(json!(4000))),
                ("location".into(), ParameterValue::Clear),
            ]
        );
    }

    #[test]
    fn only_a_provider_name_before_the_slash_is_a_provider() {
        let parsed = parse("meta-llama/Llama-3.1-8B").unwrap();
        assert_eq!(parsed.provider, None);
        assert_eq!(parsed.model.as_deref(), Some("meta-llama/Llama-3.1-8B"));
        let parsed = parse("openai-compatible/qwen/qwen3:8b").unwrap();
        assert_eq!(parsed.provider, Some(Provider::OpenaiCompatible));
        assert_eq!(parsed.model.as_deref(), Some("qwen/qwen3:8b"));
        assert!(parse("claude-sonnet-4-6").unwrap().is_plain());
    }

    #[test]
    fn presets_and_mistakes() {
        let parsed = parse("$fast;thinking=false").unwrap();
        assert_eq!(parsed.preset.as_deref(), Some("$fast"));
        assert_eq!(
            parsed.parameters,
            vec![("thinking".into(), ParameterValue::Set(json!(false)))]
        );
        assert!(parse("$Fast").unwrap_err().contains("lowercase"));
        assert!(parse("openai/").unwrap_err().contains("no model"));
        assert!(parse("gpt-5.5;thinking").unwrap_err().contains("key=value"));
        assert!(parse("gpt 5").unwrap_err().contains("spaces"));
    }
}
