//! Completion: role markers at the start of a line, tool names in a tool use header (from the
//! given list), the agents in an `ask_agent` call's `"agent"` value, `@./` paths through the injected [`FileSystem`], and in the frontmatter option
//! names (`flemma.opt.…` in Rhai, keys of `"flemma"` in JSON) and their values, from the
//! configuration schema.

use std::path::Path;

use flemma_syntax::{Document, FrontmatterLanguage, NodeAt, Role, SegmentKind, TextRange};
use serde_json::Value;

use super::{FileSystem, resolve_path};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    Role,
    Tool,
    Agent,
    Path,
    Option,
    Value,
}

/// One proposal: `insert` replaces `replace` (the partial word before the cursor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionItem {
    pub label: String,
    pub kind: CompletionKind,
    pub replace: TextRange,
    pub insert: String,
    pub detail: Option<String>,
}

/// The inputs completion needs besides the document.
#[derive(Clone, Copy)]
pub struct CompletionContext<'a> {
    pub chat_dir: &'a Path,
    pub fs: &'a dyn FileSystem,
    /// The tools that may be called (names with `.` namespaces).
    pub tools: &'a [String],
    /// The agents `ask_agent` may ask: name and description.
    pub agents: &'a [(String, Option<String>)],
}

impl std::fmt::Debug for CompletionContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionContext")
            .field("chat_dir", &self.chat_dir)
            .field("tools", &self.tools)
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

const ROLES: [&str; 3] = ["You", "Assistant", "System"];

/// The completions at `offset` (empty when nothing fits).
pub fn completions(
    doc: &Document,
    offset: usize,
    context: &CompletionContext<'_>,
) -> Vec<CompletionItem> {
    let text = doc.text();
    if offset > text.len() || !text.is_char_boundary(offset) {
        return Vec::new();
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &text[line_start..offset];
    match doc.node_at(offset) {
        Some(NodeAt::Frontmatter(frontmatter)) => {
            if offset < frontmatter.code.start || offset > frontmatter.code.end {
                return Vec::new();
            }
            match frontmatter.language {
                FrontmatterLanguage::Rhai => rhai_options(prefix, offset),
                FrontmatterLanguage::Json => json_options(prefix, offset),
                _ => Vec::new(),
            }
        }
        node => {
            if let Some(items) = role_markers(prefix, offset) {
                return items;
            }
            if let Some(partial) = prefix.strip_prefix("**Tool Use:** `") {
                if !partial.contains('`') {
                    return tool_names(partial, offset, context.tools);
                }
            }
            if let Some(NodeAt::Segment(_, segment)) = node
                && let SegmentKind::ToolUse(tool_use) = &segment.kind
                && tool_use.name == flemma_config::ASK_AGENT_TOOL
                && tool_use
                    .fence
                    .as_ref()
                    .is_some_and(|f| f.content.start <= offset && offset <= f.content.end)
            {
                return agent_names(&text[..offset], offset, context.agents);
            }
            let templated = match node {
                Some(NodeAt::Segment(message, _)) | Some(NodeAt::RoleLine(message)) => {
                    message.role.is_templated()
                }
                _ => doc.messages().last().is_some_and(|m| m.role == Role::You),
            };
            if templated {
                return paths(prefix, offset, context);
            }
            Vec::new()
        }
    }
}

/// `@`, `@Ass` at the start of a line → role lines.
fn role_markers(prefix: &str, offset: usize) -> Option<Vec<CompletionItem>> {
    let partial = prefix.strip_prefix('@')?;
    if !partial.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some(
        ROLES
            .iter()
            .filter(|role| role.starts_with(partial))
            .map(|role| CompletionItem {
                label: format!("@{role}:"),
                kind: CompletionKind::Role,
                replace: TextRange::new(offset - prefix.len(), offset),
                insert: format!("@{role}:"),
                detail: None,
            })
            .collect(),
    )
}

fn tool_names(partial: &str, offset: usize, tools: &[String]) -> Vec<CompletionItem> {
    tools
        .iter()
        .filter(|name| name.starts_with(partial))
        .map(|name| CompletionItem {
            label: name.clone(),
            kind: CompletionKind::Tool,
            replace: TextRange::new(offset - partial.len(), offset),
            insert: name.clone(),
            detail: None,
        })
        .collect()
}

/// `{"agent": "he` in an `ask_agent` call's input → the agents starting with `he`.
fn agent_names(
    before: &str,
    offset: usize,
    agents: &[(String, Option<String>)],
) -> Vec<CompletionItem> {
    let Some(key) = before.rfind("\"agent\"") else {
        return Vec::new();
    };
    let rest = before[key + "\"agent\"".len()..].trim_start();
    let Some(value) = rest.strip_prefix(':').map(str::trim_start) else {
        return Vec::new();
    };
    let Some(partial) = value.strip_prefix('"') else {
        return Vec::new();
    };
    if partial.contains('"') {
        return Vec::new();
    }
    agents
        .iter()
        .filter(|(name, _)| name.starts_with(partial))
        .map(|(name, description)| CompletionItem {
            label: name.clone(),
            kind: CompletionKind::Agent,
            replace: TextRange::new(offset - partial.len(), offset),
            insert: name.clone(),
            detail: description.clone(),
        })
        .collect()
}

/// `@./dir/pa` → the entries of `dir` starting with `pa`.
fn paths(prefix: &str, offset: usize, context: &CompletionContext<'_>) -> Vec<CompletionItem> {
    let Some(at) = prefix.rfind("@") else {
        return Vec::new();
    };
    let written = &prefix[at + 1..];
    if !(written.starts_with("./") || written.starts_with("../") || written.starts_with("~/"))
        || written.contains(char::is_whitespace)
    {
        return Vec::new();
    }
    let (dir, partial) = match written.rfind('/') {
        Some(slash) => (&written[..=slash], &written[slash + 1..]),
        None => return Vec::new(),
    };
    let dir_path = resolve_path(dir, context.chat_dir, context.fs);
    context
        .fs
        .list(&dir_path)
        .into_iter()
        .filter(|(name, _)| name.starts_with(partial) && !name.starts_with('.'))
        .map(|(name, is_dir)| {
            let insert = if is_dir { format!("{name}/") } else { name };
            CompletionItem {
                label: insert.clone(),
                kind: CompletionKind::Path,
                replace: TextRange::new(offset - partial.len(), offset),
                insert,
                detail: Some(if is_dir { "directory" } else { "file" }.to_owned()),
            }
        })
        .collect()
}

/// `flemma.opt.par` → option names; `flemma.opt.thinking = "l` → values.
fn rhai_options(prefix: &str, offset: usize) -> Vec<CompletionItem> {
    let Some(start) = prefix.find("flemma.opt.") else {
        return Vec::new();
    };
    let after = &prefix[start + "flemma.opt.".len()..];
    let schema = flemma_config::json_schema();
    if let Some(eq) = after.find('=') {
        let Ok(schema_path) = flemma_config::opt_path(after[..eq].trim()) else {
            return Vec::new();
        };
        let path: Vec<&str> = schema_path.split('.').collect();
        let value = after[eq + 1..].trim_start();
        let (quoted, partial) = match value.strip_prefix(['"', '\'']) {
            Some(rest) => (true, rest),
            None => (false, value),
        };
        if partial.contains(['"', '\'', ' ', ';']) {
            return Vec::new();
        }
        return option_values(&schema, &path, partial, quoted, offset);
    }
    if !after
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return Vec::new();
    }
    let (table, partial) = match after.rfind('.') {
        Some(dot) => (&after[..dot], &after[dot + 1..]),
        None => ("", after),
    };
    if table.is_empty() {
        return frontmatter_top_level_names(&schema, partial, offset);
    }
    let Ok(schema_path) = flemma_config::opt_path(table) else {
        return Vec::new();
    };
    let path: Vec<&str> = schema_path.split('.').collect();
    option_names(&schema, &path, partial, offset)
}

/// The names right after `flemma.opt.`: the schema's top-level tables and options, plus the
/// parameters the frontmatter may name directly (`thinking` for `parameters.thinking`).
fn frontmatter_top_level_names(
    schema: &Value,
    partial: &str,
    offset: usize,
) -> Vec<CompletionItem> {
    let mut out = option_names(schema, &[], partial, offset);
    for item in option_names(schema, &["parameters"], partial, offset) {
        let aliased = flemma_config::opt_path(&item.label)
            .is_ok_and(|p| p == format!("parameters.{}", item.label));
        if aliased && !out.iter().any(|i| i.label == item.label) {
            out.push(item);
        }
    }
    out
}

/// `  "par` inside the JSON frontmatter → top-level option names of `flemma`.
fn json_options(prefix: &str, offset: usize) -> Vec<CompletionItem> {
    let trimmed = prefix.trim_start();
    let Some(partial) = trimmed.strip_prefix('"') else {
        return Vec::new();
    };
    if !partial
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Vec::new();
    }
    option_names(&flemma_config::json_schema(), &[], partial, offset)
}

/// The schema node at a dotted option path (following `anyOf` alternatives and maps).
fn node_at<'a>(schema: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut node = schema;
    for name in path {
        node = alternatives(node).find_map(|alt| {
            alt.get("properties")
                .and_then(|p| p.get(*name))
                .or_else(|| alt.get("additionalProperties").filter(|a| a.is_object()))
        })?;
    }
    Some(node)
}

/// A node and its `anyOf` alternatives.
fn alternatives(node: &Value) -> impl Iterator<Item = &Value> {
    std::iter::once(node).chain(
        node.get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten(),
    )
}

fn description(node: &Value) -> Option<String> {
    node.get("description")
        .and_then(Value::as_str)
        .map(|d| d.lines().next().unwrap_or("").to_owned())
}

fn option_names(
    schema: &Value,
    path: &[&str],
    partial: &str,
    offset: usize,
) -> Vec<CompletionItem> {
    let Some(node) = node_at(schema, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for alt in alternatives(node) {
        let Some(properties) = alt.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, child) in properties {
            if name.starts_with(partial) && !out.iter().any(|i: &CompletionItem| &i.label == name) {
                out.push(CompletionItem {
                    label: name.clone(),
                    kind: CompletionKind::Option,
                    replace: TextRange::new(offset - partial.len(), offset),
                    insert: name.clone(),
                    detail: description(child),
                });
            }
        }
    }
    out
}

fn option_values(
    schema: &Value,
    path: &[&str],
    partial: &str,
    quoted: bool,
    offset: usize,
) -> Vec<CompletionItem> {
    let Some(node) = node_at(schema, path) else {
        return Vec::new();
    };
    let mut values: Vec<(String, bool)> = Vec::new();
    for alt in alternatives(node) {
        if let Some(items) = alt.get("enum").and_then(Value::as_array) {
            values.extend(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| (s.to_owned(), true)),
            );
        }
        if alt.get("type").and_then(Value::as_str) == Some("boolean") {
            values.extend([("true".to_owned(), false), ("false".to_owned(), false)]);
        }
        if let Some(Value::Bool(b)) = alt.get("const") {
            values.push((b.to_string(), false));
        }
    }
    let mut out: Vec<CompletionItem> = Vec::new();
    for (value, is_string) in values {
        if !value.starts_with(partial) || (quoted && !is_string) {
            continue;
        }
        if out.iter().any(|i| i.label == value) {
            continue;
        }
        let insert = if is_string && !quoted {
            format!("\"{value}\"")
        } else {
            value.clone()
        };
        out.push(CompletionItem {
            label: value,
            kind: CompletionKind::Value,
            replace: TextRange::new(offset - partial.len(), offset),
            insert,
            detail: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::fixture::{MemoryFs, cursor};

    fn labels(fixture: &str) -> Vec<String> {
        let (text, offset) = cursor(fixture);
        let fs = MemoryFs::new(&[
            "/chats/notes.md",
            "/chats/src/",
            "/chats/src/main.rs",
            "/chats/.hidden",
        ]);
        let tools = vec![
            "bash".to_owned(),
            "read".to_owned(),
            "slack.list".to_owned(),
        ];
        let agents = vec![
            ("helper".to_owned(), Some("Answers questions.".to_owned())),
            ("reviewer".to_owned(), None),
        ];
        let context = CompletionContext {
            chat_dir: Path::new("/chats"),
            fs: &fs,
            tools: &tools,
            agents: &agents,
        };
        let doc = flemma_syntax::parse(text.as_str());
        let items = completions(&doc, offset, &context);
        for item in &items {
            // The replaced range is the partial word right before the cursor.
            assert_eq!(item.replace.end, offset);
            assert!(
                item.insert
                    .trim_start_matches('"')
                    .starts_with(doc.slice(item.replace))
            );
        }
        items.into_iter().map(|i| i.insert).collect()
    }

    #[test]
    fn role_markers_at_line_start() {
        assert_eq!(
            labels("@You:\nhi\n@$0"),
            ["@You:", "@Assistant:", "@System:"]
        );
        assert_eq!(labels("@You:\nhi\n@As$0"), ["@Assistant:"]);
        assert!(labels("@You:\nmail me@As$0").is_empty());
    }

    #[test]
    fn tool_names_in_a_tool_use_header() {
        assert_eq!(labels("@Assistant:\n**Tool Use:** `sl$0"), ["slack.list"]);
    }

    #[test]
    fn agents_in_an_ask_agent_calls_agent_value() {
        let call = |input: &str| {
            format!("@Assistant:\n**Tool Use:** `ask_agent` (`a`)\n```json\n{input}\n```\n")
        };
        assert_eq!(labels(&call(r#"{"agent": "$0"#)), ["helper", "reviewer"]);
        assert_eq!(
            labels(&call(r#"{"prompt": "x", "agent":"re$0"#)),
            ["reviewer"]
        );
        // Not in another key's value, nor in another tool's input.
        assert!(labels(&call(r#"{"agent": "helper", "prompt": "$0"#)).is_empty());
        assert!(
            labels("@Assistant:\n**Tool Use:** `bash` (`a`)\n```json\n{\"agent\": \"$0\n```\n")
                .is_empty()
        );
    }

    #[test]
    fn file_paths_through_the_directory_lister() {
        assert_eq!(labels("@You:\nsee @./$0"), ["notes.md", "src/"]);
        assert_eq!(labels("@You:\nsee @./src/m$0"), ["main.rs"]);
        // Not in assistant text: references are not recognised there.
        assert!(labels("@Assistant:\nsee @./$0").is_empty());
    }

    #[test]
    fn frontmatter_option_names_and_values_from_the_schema() {
        let names = labels("```rhai\nflemma.opt.thi$0\n```\n@You:\nhi\n");
        assert_eq!(names, ["thinking"]);
        let values = labels("```rhai\nflemma.opt.thinking = \"$0\n```\n@You:\nhi\n");
        assert!(values.contains(&"low".to_owned()), "{values:?}");
        assert!(values.contains(&"high".to_owned()), "{values:?}");
        let unquoted = labels("```rhai\nflemma.opt.thinking = l$0\n```\n@You:\nhi\n");
        assert_eq!(unquoted, ["\"low\""]);
        let json = labels("```json\n{\"flemma\": {\n  \"prov$0\n```\n@You:\nhi\n");
        assert_eq!(json, ["provider", "providers"]);
        assert!(labels("```rhai\nflemma.opt.no_such.x$0\n```\n@You:\nhi\n").is_empty());
    }
}
