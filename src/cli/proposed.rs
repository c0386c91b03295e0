//! What the calls waiting for a decision would change: their diffs (`status`, `send --diff`,
//! and the listing of calls waiting for approval through the daemon).

use std::path::Path;

use flemma_syntax::Document;
use serde_json::Value;

use crate::chat;
use crate::process_context::ProcessContext;
use crate::tool_setup::ToolSetup;

/// The input of the call `tool_id` (a JSON object), else null.
pub(super) fn input_of(doc: &Document, tool_id: &str) -> Value {
    doc.tool_use(tool_id)
        .and_then(|(_, _, tool_use)| tool_use.fence.as_ref())
        .and_then(|fence| serde_json::from_str::<Value>(doc.slice(fence.content)).ok())
        .filter(Value::is_object)
        .unwrap_or(Value::Null)
}

/// What a call of `tool` with `input` would change, as a unified diff against the file as it
/// is now (`None`: a tool whose effect cannot be known before it runs).
pub(super) fn proposed_diff(
    tools: &ToolSetup,
    tool: &str,
    input: &Value,
) -> Option<Result<String, String>> {
    flemma_tools::review::proposed_change(tool, input, &tools.ctx)
        .map(|change| change.map(|change| change.unified_diff()))
}

/// The changes the pending calls of `path` would make, when `wanted` (`--diff`).
pub(super) fn diffs(
    wanted: bool,
    path: &Path,
    context: &ProcessContext,
) -> std::collections::HashMap<String, Result<String, String>> {
    if wanted {
        proposed_diffs(path, context)
    } else {
        Default::default()
    }
}

/// The diffs of the unresolved calls of the chat at `file` (`send --diff`), by tool use id;
/// empty when the chat cannot be loaded (the listing then goes without them).
pub(super) fn proposed_diffs(
    file: &Path,
    context: &ProcessContext,
) -> std::collections::HashMap<String, Result<String, String>> {
    let Ok(loaded) = chat::load("send", flemma_ide::Purpose::Inspect, file, context) else {
        return Default::default();
    };
    let Ok(tools) = ToolSetup::for_chat(context, &loaded.analysis, file) else {
        return Default::default();
    };
    let doc = &*loaded.analysis.document;
    unresolved_ids(doc)
        .into_iter()
        .filter_map(|(id, name, _)| {
            let diff = proposed_diff(&tools, &name, &input_of(doc, &id))?;
            Some((id, diff))
        })
        .collect()
}

/// Every unresolved call: its id, tool name and status (`no result` for a use without a
/// result, else its placeholder's status).
pub(super) fn unresolved_ids(doc: &Document) -> Vec<(String, String, String)> {
    let mut ids: Vec<(String, String, String)> = doc
        .unresolved_tool_uses()
        .into_iter()
        .map(|(_, _, tool_use)| {
            let name = tool_use.name.clone();
            (tool_use.id.clone(), name, "no result".to_owned())
        })
        .collect();
    for (_, _, result) in doc.placeholders(None) {
        let name = doc
            .tool_use(&result.tool_use_id)
            .map_or_else(String::new, |(_, _, u)| u.name.clone());
        let status = result
            .suffix
            .as_ref()
            .and_then(|s| s.status())
            .map_or_else(String::new, |s| s.to_string());
        ids.push((result.tool_use_id.clone(), name, status));
    }
    ids
}
