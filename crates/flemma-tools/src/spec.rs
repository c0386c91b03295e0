//! A tool's definition: what the model is told (name, description, input schema) and what the
//! harness needs to know about it (strictness, async, capability tags).

use serde_json::Value;

/// A capability tag. Unknown tags (from custom tools or future versions) are ignored, so parsing
/// yields `None` for them rather than an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// The tool never runs in the background: no `flemma.background` parameter.
    DisablesBackground,
    /// The tool's output cannot be redirected: no `flemma.save_to` parameter.
    DisablesSaveTo,
    /// The sandbox resolver approves the tool when a sandbox backend is active.
    AutoApprovesIfSandboxed,
    /// The tool's output is template text (an attachment reference such as `@./x.png`).
    EmitsTemplate,
    /// The tool reads the conversation that called it (`ask_agent`'s `with_context`): the
    /// shell puts the chat's text in the run context ([`crate::RunContext::conversation`]).
    ReadsConversation,
}

impl Capability {
    /// Every known capability, in a fixed order.
    pub const ALL: [Capability; 5] = [
        Capability::DisablesBackground,
        Capability::DisablesSaveTo,
        Capability::AutoApprovesIfSandboxed,
        Capability::EmitsTemplate,
        Capability::ReadsConversation,
    ];

    /// The tag as written in config and sent to the provider crate.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::DisablesBackground => "disables_background",
            Capability::DisablesSaveTo => "disables_save_to",
            Capability::AutoApprovesIfSandboxed => "auto_approves_if_sandboxed",
            Capability::EmitsTemplate => "emits_template",
            Capability::ReadsConversation => "reads_conversation",
        }
    }

    /// The capability named `tag`, or `None` for an unknown tag (which is ignored).
    pub fn parse(tag: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == tag)
    }

    /// The known capabilities among `tags`, unknown ones dropped, duplicates removed.
    pub fn parse_all<S: AsRef<str>>(tags: &[S]) -> Vec<Capability> {
        let mut out: Vec<Capability> = tags
            .iter()
            .filter_map(|t| Capability::parse(t.as_ref()))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool's definition. Built-ins give theirs from `builtin::<tool>::spec()`; custom tools build
/// one from config. The schema is the tool's own input schema, without the harness parameters
/// (`flemma_wire::tools::inject_harness_parameters` adds those on the wire side).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool name, namespaced with `.` (`flemma.jobs.status`).
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
    /// Strict schema mode: every property required, `additionalProperties: false`, optional
    /// inputs nullable via a type array.
    pub strict: bool,
    /// The tool can run in the background.
    pub is_async: bool,
    /// Capability tags.
    pub capabilities: Vec<Capability>,
}

impl ToolSpec {
    /// Whether the tool has `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// The capability tags as strings, as `flemma_provider::ToolDefinition::capabilities`
    /// expects them.
    pub fn capability_tags(&self) -> Vec<String> {
        self.capabilities
            .iter()
            .map(|c| c.as_str().to_string())
            .collect()
    }
}

/// The `label` property every built-in schema has and requires: a short intent string shown in
/// previews.
pub fn label_property() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "A short phrase (3-8 words) saying what this call is for, shown to the user."
    })
}

/// Builds a strict object schema from `(name, property schema)` pairs: every property is
/// listed in `required` (optional ones must be nullable) and `label` is added first.
pub fn strict_object_schema(properties: Vec<(&str, Value)>) -> Value {
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    props.insert("label".into(), label_property());
    required.push(Value::String("label".into()));
    for (name, schema) in properties {
        props.insert(name.to_string(), schema);
        required.push(Value::String(name.to_string()));
    }
    serde_json::json!({
        "type": "object",
        "properties": Value::Object(props),
        "required": Value::Array(required),
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_capabilities_are_ignored() {
        let caps = Capability::parse_all(&["emits_template", "teleports", "emits_template"]);
        assert_eq!(caps, vec![Capability::EmitsTemplate]);
    }

    #[test]
    fn every_capability_round_trips() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()), Some(c));
        }
    }

    #[test]
    fn strict_schema_requires_label_and_every_property() {
        let schema = strict_object_schema(vec![("path", serde_json::json!({"type": "string"}))]);
        assert_eq!(schema["required"], serde_json::json!(["label", "path"]));
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    }
}
