//! `ls`: a directory's entries, directories first (suffixed `/`), recursing to `max_depth`.

use std::path::Path;

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};

pub const NAME: &str = "ls";
pub const DEFAULT_DEPTH: u64 = 1;
pub const MAX_DEPTH: u64 = 10;
pub const DEFAULT_LIMIT: u64 = 500;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "List a directory: directories first (ending in `/`), then files, sorted by \
name; `max_depth` (default 1, at most 10) levels deep; at most `limit` (default 500) entries."
            .into(),
        input_schema: strict_object_schema(vec![
            (
                "path",
                json!({"type": ["string", "null"], "description": "Directory (default: the chat's directory)."}),
            ),
            (
                "max_depth",
                json!({"type": ["integer", "null"], "minimum": 1, "maximum": MAX_DEPTH}),
            ),
            ("limit", json!({"type": ["integer", "null"], "minimum": 1})),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    }
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let shown = input.get("path").and_then(Value::as_str).unwrap_or(".");
    let root = match ctx.readable(shown) {
        Ok(root) => root,
        Err(refused) => return Outcome::error(refused),
    };
    let depth = input
        .get("max_depth")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_DEPTH)
        .clamp(1, MAX_DEPTH);
    let limit = input
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_LIMIT)
        .max(1);
    match std::fs::metadata(&root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Outcome::error(format!(
                "{shown} is a file, not a directory; read it with read"
            ));
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Outcome::error(format!("{shown} does not exist"));
        }
        Err(error) => return Outcome::error(format!("{shown} cannot be listed: {error}")),
    }
    let mut lines = Vec::new();
    let mut truncated = false;
    if let Err(error) = walk(&root, "", depth, limit, &mut lines, &mut truncated) {
        return Outcome::error(format!("{shown} cannot be listed: {error}"));
    }
    if lines.is_empty() {
        return Outcome::ok(format!("{shown} is empty"));
    }
    let mut text = lines.join("\n");
    if truncated {
        text.push_str(&format!(
            "\n[Listing stopped at {limit} entries; pass a larger limit or a subdirectory.]"
        ));
    }
    Outcome::ok(text)
}

fn walk(
    dir: &Path,
    prefix: &str,
    depth: u64,
    limit: u64,
    lines: &mut Vec<String>,
    truncated: &mut bool,
) -> std::io::Result<()> {
    let mut entries: Vec<(bool, String)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| {
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            (is_dir, entry.file_name().to_string_lossy().into_owned())
        })
        .filter(|(_, name)| !name.starts_with(crate::SCRATCH_PREFIX))
        .collect();
    entries.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    for (is_dir, name) in entries {
        if lines.len() as u64 >= limit {
            *truncated = true;
            return Ok(());
        }
        let shown = format!("{prefix}{name}");
        if is_dir {
            lines.push(format!("{shown}/"));
            if depth > 1 {
                // An unreadable subdirectory is listed but not entered.
                let _ = walk(
                    &dir.join(&name),
                    &format!("{shown}/"),
                    depth - 1,
                    limit,
                    lines,
                    truncated,
                );
            }
        } else {
            lines.push(shown);
        }
    }
    Ok(())
}
