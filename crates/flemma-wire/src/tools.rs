//! Tool names, tool schemas with the harness parameters, and tool-call ids across providers.

use serde_json::{Map, Value, json};

use crate::ToolDefinition;

/// The harness parameters (the names are the configuration's, spelled once there).
pub use flemma_config::{BACKGROUND_PARAMETER, SAVE_TO_PARAMETER};
/// The prefix of the synthetic ids flemmad gives Gemini tool calls that came without an id.
pub const SYNTHETIC_ID_PREFIX: &str = "urn:flemma:tool:";

const BACKGROUND_DESCRIPTION: &str = "Set to true to run this tool in the background: you get a \
job id at once and the result arrives later. Only do this when you have other useful work to do \
meanwhile and no upcoming decision depends on the result; otherwise leave it unset.";
const SAVE_TO_DESCRIPTION: &str = "A file path to write the full output to instead of the \
conversation (you then receive a short preview and the path). Use it for large outputs or when \
the output must live at a specific path.";

/// The argument string of a tool call for the OpenAI-style APIs: the provider's own string when
/// the file kept it (replayed verbatim, for prompt-cache stability), else the parsed input.
pub fn call_arguments(input: &Value, raw_input: &str) -> String {
    if raw_input.trim().is_empty() {
        input.to_string()
    } else {
        raw_input.to_owned()
    }
}

/// The longest tool name the providers accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_WIRE_NAME: usize = 64;

/// Encodes a dotted tool name for the wire: `.` (and the legacy `:`) become `__`. A name that
/// would not come back as itself (`docs.get__x`), holds other characters, or is longer than
/// [`MAX_WIRE_NAME`] becomes a stable shortened form ending in `_` and 8 hex digits of its hash;
/// a [`ToolNames`] of the offered tools decodes it.
pub fn encode_tool_name(name: &str) -> String {
    let plain = name.replace(['.', ':'], "__");
    let fits = !plain.is_empty()
        && plain.len() <= MAX_WIRE_NAME
        && plain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits && decode_tool_name(&plain) == name.replace(':', ".") {
        return plain;
    }
    let hash = format!("{:08x}", fnv1a(name.as_bytes()) & 0xffff_ffff);
    let prefix: String = plain
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_WIRE_NAME - hash.len() - 1)
        .collect();
    format!("{prefix}_{hash}")
}

/// Decodes a wire tool name: `__` becomes `.`, and `:` is accepted as `.`.
pub fn decode_tool_name(wire: &str) -> String {
    wire.replace("__", ".").replace(':', ".")
}

/// The wire names of the tools offered in a request, so the tool calls of the reply decode to
/// exactly those names (also the shortened and the non-round-tripping ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    by_wire: std::collections::HashMap<String, String>,
}

impl ToolNames {
    /// The table of `names`.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            by_wire: names
                .into_iter()
                .map(|name| (encode_tool_name(name), name.to_string()))
                .collect(),
        }
    }

    /// The table of the tools of a request.
    pub fn of(tools: &[ToolDefinition]) -> Self {
        Self::new(tools.iter().map(|tool| tool.name.as_str()))
    }

    /// The tool name of a wire name: an offered tool's exact name, else [`decode_tool_name`].
    pub fn decode(&self, wire: &str) -> String {
        self.by_wire
            .get(wire)
            .cloned()
            .unwrap_or_else(|| decode_tool_name(wire))
    }
}

/// The schema sent to the model for `tool`: its input schema plus the harness parameters
/// `flemma.background` (async tools without `disables_background`) and `flemma.save_to` (tools
/// without `disables_save_to`). For strict tools both are nullable and appended to `required`.
pub fn inject_harness_parameters(tool: &ToolDefinition) -> Value {
    let mut schema = match &tool.input_schema {
        Value::Object(map) => map.clone(),
        _ => {
            let mut map = Map::new();
            map.insert("type".into(), json!("object"));
            map
        }
    };
    let has_capability = |word: &str| tool.capabilities.iter().any(|c| c == word);
    let mut injected: Vec<(&str, &str, &str)> = Vec::new();
    if tool.is_async && !has_capability("disables_background") {
        injected.push((BACKGROUND_PARAMETER, "boolean", BACKGROUND_DESCRIPTION));
    }
    if !has_capability("disables_save_to") {
        injected.push((SAVE_TO_PARAMETER, "string", SAVE_TO_DESCRIPTION));
    }
    if injected.is_empty() {
        return Value::Object(schema);
    }
    if !matches!(schema.get("properties"), Some(Value::Object(_))) {
        schema.insert("properties".into(), Value::Object(Map::new()));
    }
    for (name, kind, description) in &injected {
        let type_value = if tool.strict {
            json!([kind, "null"])
        } else {
            json!(kind)
        };
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            let mut property = Map::new();
            property.insert("type".into(), type_value);
            property.insert("description".into(), json!(description));
            properties.insert((*name).to_string(), Value::Object(property));
        }
    }
    if tool.strict {
        if !matches!(schema.get("required"), Some(Value::Array(_))) {
            schema.insert("required".into(), Value::Array(Vec::new()));
        }
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            for (name, _, _) in &injected {
                if !required.iter().any(|r| r == name) {
                    required.push(json!(name));
                }
            }
        }
    }
    Value::Object(schema)
}

/// 64-bit FNV-1a: a small, stable hash for deterministic id mapping (not for security).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Makes `id` acceptable where ids must match `^[a-zA-Z0-9_-]+$` and be at most `max_len`
/// long. Valid ids are kept; others are mapped deterministically (sanitised prefix plus a hash
/// of the original), so a tool use and its result map to the same id.
pub fn normalize_tool_id(id: &str, max_len: usize) -> String {
    let valid = !id.is_empty()
        && id.len() <= max_len
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        return id.to_string();
    }
    let hash = format!("{:016x}", fnv1a(id.as_bytes()));
    let budget = max_len.saturating_sub(hash.len() + 1).min(24);
    let mut prefix: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(budget)
        .collect();
    if prefix.is_empty() {
        prefix.push_str("id");
    }
    format!("{prefix}_{hash}")
}

/// The tool name encoded in a synthetic `urn:flemma:tool:<name>:<hex>` id.
pub fn name_from_synthetic_id(id: &str) -> Option<String> {
    let rest = id.strip_prefix(SYNTHETIC_ID_PREFIX)?;
    let (name, _hex) = rest.rsplit_once(':')?;
    (!name.is_empty()).then(|| decode_tool_name(name))
}

/// A synthetic id `urn:flemma:tool:<name>:<12 hex>` derived from `seed`.
pub fn synthetic_tool_id(name: &str, seed: &str) -> String {
    let hash = fnv1a(format!("{name}\u{0}{seed}").as_bytes());
    format!(
        "{SYNTHETIC_ID_PREFIX}{name}:{:012x}",
        hash & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(strict: bool, is_async: bool, capabilities: &[&str]) -> ToolDefinition {
        ToolDefinition {
            name: "bash".into(),
            description: "Run a command".into(),
            input_schema: json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}),
            strict,
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            is_async,
        }
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(
            encode_tool_name("flemma.jobs.status"),
            "flemma__jobs__status"
        );
        assert_eq!(
            encode_tool_name("slack:channels_list"),
            "slack__channels_list"
        );
        assert_eq!(
            decode_tool_name("flemma__jobs__status"),
            "flemma.jobs.status"
        );
        assert_eq!(decode_tool_name("a:b"), "a.b");
        assert_eq!(decode_tool_name("read_skill"), "read_skill");
    }

    #[test]
    fn names_that_would_not_round_trip_or_fit_get_a_stable_hash() {
        // `docs.get__x` encoded plainly would come back as `docs.get.x`.
        let wire = encode_tool_name("docs.get__x");
        assert!(wire.starts_with("docs__get__x_") && wire.len() == "docs__get__x_".len() + 8);
        assert_eq!(wire, encode_tool_name("docs.get__x"), "stable");
        let long = format!("server.{}", "a_long_tool_name_".repeat(5));
        let long_wire = encode_tool_name(&long);
        assert_eq!(long_wire.len(), MAX_WIRE_NAME);
        assert!(
            long_wire
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        let odd = encode_tool_name("srv.tool/with space");
        assert!(!odd.contains(['/', ' ']), "{odd}");
        let names = ToolNames::new(["docs.get__x", long.as_str(), "srv.tool/with space", "bash"]);
        assert_eq!(names.decode(&wire), "docs.get__x");
        assert_eq!(names.decode(&long_wire), long);
        assert_eq!(names.decode(&odd), "srv.tool/with space");
        assert_eq!(names.decode("bash"), "bash");
        assert_eq!(names.decode("flemma__jobs__status"), "flemma.jobs.status");
        // Names that round-trip keep their plain form.
        assert_eq!(
            encode_tool_name("github.search_issues"),
            "github__search_issues"
        );
    }

    #[test]
    fn a_reply_calling_a_shortened_name_decodes_to_the_offered_tool() {
        let name = "docs.get__x";
        let wire = encode_tool_name(name);
        let body = format!(
            "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"{wire}\",\"input\":{{}}}}}}\n\n"
        );
        let mut decoder = crate::decoder_for(
            crate::ProviderKind::Anthropic,
            ToolNames::new([name, "bash"]),
        );
        let events = decoder.feed(body.as_bytes());
        assert!(
            events.iter().any(|event| matches!(
                event,
                crate::StreamEvent::ToolCallStart { name: decoded, .. } if decoded == name
            )),
            "{events:?}"
        );
    }

    #[test]
    fn strict_async_tool_gets_nullable_required_parameters() {
        let schema = inject_harness_parameters(&tool(true, true, &[]));
        assert_eq!(
            schema["required"],
            json!(["command", "flemma.background", "flemma.save_to"])
        );
        assert_eq!(
            schema["properties"]["flemma.background"]["type"],
            json!(["boolean", "null"])
        );
        assert_eq!(
            schema["properties"]["flemma.save_to"]["type"],
            json!(["string", "null"])
        );
    }

    #[test]
    fn loose_sync_tool_gets_optional_save_to_only() {
        let schema = inject_harness_parameters(&tool(false, false, &[]));
        assert_eq!(schema["required"], json!(["command"]));
        assert!(schema["properties"].get("flemma.background").is_none());
        assert_eq!(
            schema["properties"]["flemma.save_to"]["type"],
            json!("string")
        );
    }

    #[test]
    fn capabilities_disable_injection() {
        let schema = inject_harness_parameters(&tool(
            true,
            true,
            &["disables_background", "disables_save_to"],
        ));
        assert_eq!(schema, tool(true, true, &[]).input_schema);
    }

    #[test]
    fn ids_are_normalised_deterministically() {
        assert_eq!(normalize_tool_id("toolu_01ABC", 64), "toolu_01ABC");
        let mapped = normalize_tool_id("urn:flemma:tool:bash:0123456789ab", 64);
        assert!(
            mapped
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        assert_eq!(
            mapped,
            normalize_tool_id("urn:flemma:tool:bash:0123456789ab", 64)
        );
        assert_ne!(
            mapped,
            normalize_tool_id("urn:flemma:tool:bash:0123456789ac", 64)
        );
        assert!(normalize_tool_id(&"x".repeat(80), 40).len() <= 40);
    }

    #[test]
    fn synthetic_ids_carry_the_name() {
        let id = synthetic_tool_id("flemma.jobs.status", "seed");
        assert!(id.starts_with("urn:flemma:tool:flemma.jobs.status:"));
        assert_eq!(id.len(), "urn:flemma:tool:flemma.jobs.status:".len() + 12);
        assert_eq!(
            name_from_synthetic_id(&id).as_deref(),
            Some("flemma.jobs.status")
        );
        assert_eq!(name_from_synthetic_id("toolu_1"), None);
    }
}
