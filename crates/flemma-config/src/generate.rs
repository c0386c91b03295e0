//! JSON Schema and Markdown reference, both derived from the schema.

use serde_json::{Map, Value, json};

use crate::schema::{self, ItemKind, KeyRule, Kind, Narrowing, Node, Power};

/// The JSON Schema (draft 2020-12) of `config.toml`, LSP settings and the JSON frontmatter
/// `flemma` object (they share one schema).
pub fn json_schema() -> Value {
    let mut root = node_schema(schema::root(), "");
    if let Value::Object(map) = &mut root {
        let mut head = Map::new();
        head.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        head.insert("title".into(), json!("flemmad configuration"));
        head.extend(std::mem::take(map));
        *map = head;
    }
    root
}

/// The JSON Schema of a ```` ```json ```` frontmatter block: the `flemma` key holds configuration
/// (the same schema as `config.toml`), every other top-level key is a template variable.
pub fn frontmatter_json_schema() -> Value {
    let mut config = node_schema(schema::root(), "");
    if let Value::Object(map) = &mut config {
        map.insert(
            "description".into(),
            json!("Per-file configuration (the frontmatter layer); list values take op-prefixes (+x ^x !x $preset)."),
        );
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "flemmad JSON frontmatter",
        "description": "Top-level keys other than `flemma` become template variables.",
        "type": "object",
        "properties": { "flemma": config },
        "additionalProperties": true,
    })
}

fn node_schema(node: &Node, path: &str) -> Value {
    let child = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let mut out = match &node.kind {
        Kind::Object {
            fields,
            bool_shorthand,
            array_shorthand,
        } => {
            let mut properties = Map::new();
            for field in fields {
                properties.insert(
                    field.name.to_string(),
                    node_schema(&field.node, &child(field.name)),
                );
            }
            for (alias, target) in schema::ALIASES {
                let (parent, name) = alias.rsplit_once('.').unwrap_or(("", alias));
                if parent == path {
                    properties.insert(name.to_owned(), alias_schema(target));
                }
            }
            let mut object = json!({
                "type": "object",
                "properties": properties,
                "additionalProperties": false,
            });
            let required: Vec<&str> = fields
                .iter()
                .filter(|field| field.required)
                .map(|field| field.name)
                .collect();
            if !required.is_empty() {
                object["required"] = json!(required);
            }
            let mut alternatives = vec![object];
            if bool_shorthand.is_some() {
                alternatives.push(json!({"type": "boolean"}));
            }
            if let Some(name) = array_shorthand
                && let Some(field) = node.field(name)
            {
                let mut shorthand = node_schema(&field.node, &child(name));
                if let Value::Object(map) = &mut shorthand {
                    map.remove("description");
                    map.remove("default");
                }
                alternatives.push(shorthand);
            }
            if alternatives.len() == 1 {
                alternatives.remove(0)
            } else {
                json!({"anyOf": alternatives})
            }
        }
        Kind::Map { key, value } => {
            let mut map = json!({
                "type": "object",
                "additionalProperties": node_schema(value, &child("<key>")),
            });
            if *key == KeyRule::Preset {
                map["propertyNames"] = json!({"pattern": "^\\$[a-z][a-z0-9_-]*$"});
            }
            map
        }
        Kind::String => json!({"type": "string"}),
        Kind::Enum(values) => json!({"enum": values}),
        Kind::Integer { min, max } => {
            let mut integer = json!({"type": "integer", "minimum": min});
            if *max != i64::MAX {
                integer["maximum"] = json!(max);
            }
            integer
        }
        Kind::Number { min, max } => {
            let mut number = json!({"type": "number", "minimum": min});
            if max.is_finite() {
                number["maximum"] = json!(max);
            }
            number
        }
        Kind::Bool => json!({"type": "boolean"}),
        Kind::False => json!({"const": false}),
        Kind::Percent => json!({"type": "string", "pattern": "^(100|[1-9][0-9]?)%$"}),
        Kind::List { items, .. } => {
            let item = match items {
                ItemKind::Tool | ItemKind::Approval => json!({
                    "type": "string",
                    "description": "A name, a glob with '*', or '$preset'; prefix '+' append, '^' prepend, '!' remove.",
                }),
                ItemKind::Text => json!({
                    "type": "string",
                    "description": "An item; prefix '+' append, '^' prepend, '!' remove.",
                }),
            };
            json!({"type": "array", "items": item})
        }
        Kind::Records(record) => {
            json!({"type": "array", "items": node_schema(record, path)})
        }
        Kind::Strings => json!({"type": "array", "items": {"type": "string"}}),
        Kind::AnyObject => json!({"type": "object"}),
        Kind::OneOf(alternatives) => {
            let alternatives: Vec<Value> = alternatives
                .iter()
                .map(|alternative| node_schema(alternative, path))
                .collect();
            json!({ "anyOf": alternatives })
        }
    };
    if let Value::Object(map) = &mut out {
        if !node.doc.is_empty() {
            map.insert("description".into(), json!(node.doc));
        }
        if let Some(default) = &node.default {
            map.insert("default".into(), default.clone());
        }
    }
    out
}

/// The schema of an alias: the option's, described as its alias (no default of its own).
fn alias_schema(target: &str) -> Value {
    let Ok((_, node)) = crate::layer::locate(target) else {
        return json!({});
    };
    let mut out = node_schema(node, target);
    if let Value::Object(map) = &mut out {
        map.remove("default");
        map.insert(
            "description".into(),
            json!(format!(
                "Alias of `{target}` (as in Flemma's schema): setting it sets `{target}`."
            )),
        );
    }
    out
}

/// Marker lines around the generated part of `docs/configuration.md`.
pub const DOCS_BEGIN: &str = "<!-- BEGIN GENERATED OPTION REFERENCE (cargo test -p flemma-config with UPDATE_GENERATED=1) -->";
/// See [`DOCS_BEGIN`].
pub const DOCS_END: &str = "<!-- END GENERATED OPTION REFERENCE -->";

/// The option reference (Markdown) placed between the markers of `docs/configuration.md`.
pub fn options_markdown() -> String {
    const HEADER: &str =
        "| Option | Type | Default | Description | In an untrusted chat |\n|---|---|---|---|---|\n";
    let mut out = String::new();
    let Kind::Object { fields, .. } = &schema::root().kind else {
        return out;
    };
    out.push_str("\n### Top level\n\n");
    out.push_str(HEADER);
    for field in fields.iter().filter(|field| field.node.is_leaf()) {
        row(&mut out, field.name, &field.node);
    }
    for field in fields.iter().filter(|field| !field.node.is_leaf()) {
        out.push_str(&format!("\n### `{}`\n\n{}\n\n", field.name, field.node.doc));
        out.push_str(HEADER);
        rows(&mut out, field.name, &field.node);
    }
    out.push_str(
        "\n### Aliases\n\nFlemma's schema declares these keys as aliases; every layer (config file, editor settings, JSON or Rhai frontmatter) accepts them and sets the option they stand for.\n\n| Alias | Sets |\n|---|---|\n",
    );
    for (alias, target) in schema::ALIASES {
        out.push_str(&format!("| `{alias}` | `{target}` |\n"));
    }
    out
}

fn rows(out: &mut String, prefix: &str, node: &Node) {
    match &node.kind {
        Kind::Object { fields, .. } => {
            for field in fields {
                let path = format!("{prefix}.{}", field.name);
                if field.node.is_leaf() {
                    row(out, &path, &field.node);
                } else {
                    row(out, &path, &field.node);
                    rows(out, &path, &field.node);
                }
            }
        }
        Kind::Map { value, .. } => rows(out, &format!("{prefix}.<key>"), value),
        _ => row(out, prefix, node),
    }
}

fn row(out: &mut String, path: &str, node: &Node) {
    let default = match &node.default {
        Some(value) => format!("`{}`", value).replace('|', "\\|"),
        None if !node.is_leaf() => "".into(),
        None => "unset".into(),
    };
    let mut kind = type_name(node);
    if let Kind::List {
        allows_function: true,
        ..
    } = &node.kind
    {
        kind.push_str(" or function (frontmatter)");
    }
    let doc = if let Kind::Records(record) = &node.kind {
        let Kind::Object { fields, .. } = &record.kind else {
            return;
        };
        let keys: Vec<String> = fields
            .iter()
            .map(|field| {
                format!(
                    "`{}` ({}{}): {}",
                    field.name,
                    type_name(&field.node),
                    if field.required { ", required" } else { "" },
                    field.node.doc
                )
            })
            .collect();
        format!("{} Keys: {}", node.doc, keys.join(" "))
    } else {
        node.doc.to_string()
    };
    out.push_str(&format!(
        "| `{path}` | {} | {default} | {} | {} |\n",
        kind.replace('|', "\\|"),
        doc.replace('|', "\\|"),
        untrusted(path).replace('|', "\\|")
    ));
}

/// What an untrusted chat's frontmatter may do with the option at `path` (the schema's power
/// declaration): empty when the option cannot widen what a chat may do.
fn untrusted(path: &str) -> String {
    let segments: Vec<String> = path.split('.').map(str::to_string).collect();
    match schema::power_of(&segments) {
        Some(Power::Widens(narrowing)) => match narrowing {
            Narrowing::Never => "ignored".to_owned(),
            Narrowing::Only(value) => format!("only `{value}`"),
            Narrowing::Subset => "only removals".to_owned(),
            Narrowing::Check(_, accepted) => format!("only {accepted}"),
            Narrowing::Bound(bound) => bound.column().to_owned(),
        },
        _ => String::new(),
    }
}

fn type_name(node: &Node) -> String {
    match &node.kind {
        Kind::Object { .. } | Kind::Map { .. } => "table".into(),
        Kind::String => "string".into(),
        Kind::Enum(values) => values
            .iter()
            .map(|value| format!("`\"{value}\"`"))
            .collect::<Vec<_>>()
            .join(" | "),
        Kind::Integer { min, max } if *max == i64::MAX => format!("integer ≥ {min}"),
        Kind::Integer { min, max } => format!("integer {min}–{max}"),
        Kind::Number { min, max } if max.is_infinite() => format!("number ≥ {min}"),
        Kind::Number { min, max } => format!("number {min}–{max}"),
        Kind::Bool => "boolean".into(),
        Kind::False => "`false`".into(),
        Kind::Percent => "percentage `\"NN%\"`".into(),
        Kind::List {
            items: ItemKind::Tool,
            ..
        } => "tool list (op-prefix)".into(),
        Kind::List {
            items: ItemKind::Approval,
            ..
        } => "approval list (op-prefix)".into(),
        Kind::List {
            items: ItemKind::Text,
            ..
        } => "string list (op-prefix)".into(),
        Kind::Records(_) => "array of tables".into(),
        Kind::Strings => "array of strings".into(),
        Kind::AnyObject => "JSON object".into(),
        Kind::OneOf(alternatives) => alternatives
            .iter()
            .map(type_name)
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

/// Replaces the generated part of a `docs/configuration.md` text; `None` when a marker is missing.
pub fn splice_docs(document: &str) -> Option<String> {
    let begin = document.find(DOCS_BEGIN)?;
    let end = document.find(DOCS_END)?;
    if end < begin {
        return None;
    }
    let head = &document[..begin + DOCS_BEGIN.len()];
    let tail = &document[end..];
    Some(format!("{head}\n{}\n{tail}", options_markdown()))
}
