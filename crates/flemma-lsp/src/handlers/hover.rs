//! `textDocument/hover`: `flemma_ide::features::hover` at the cursor.

use flemma_ide::features::Approvals;
use flemma_ide::features::hover::{self, HoverContext, HoverInfo};
use lsp_types::{Hover, HoverContents, HoverParams, MarkupContent, MarkupKind};

use super::{HandlerResult, chat_dir, document, job_states};
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(session: &mut Session, params: HoverParams) -> HandlerResult<Option<Hover>> {
    let position = params.text_document_position_params;
    let (found, range, id) = {
        let (open, syntax) = document(session, &position.text_document.uri)?;
        let offset = from_proto::offset(
            &open.index,
            syntax.text(),
            position.position,
            session.encoding,
        );
        let chat_dir = chat_dir(open);
        let jobs = job_states(syntax);
        let approvals = Approvals::new();
        let context = HoverContext {
            chat_dir: &chat_dir,
            fs: &session.host.file_system(),
            jobs: &jobs,
            approvals: &approvals,
        };
        let Some(found) = hover::hover(syntax, offset, &context) else {
            return Ok(None);
        };
        let range = to_proto::range(&open.index, syntax.text(), found.range, session.encoding);
        (found, range, open.id.clone())
    };
    let mut found = found;
    let uri = position.text_document.uri.as_str();
    // The analysis as last computed (off the main loop): hover never waits for one.
    let analysis = session.host.cached_analysis(&id);
    // A tool use shows what the chat's approval chain decides for it (the backend knows the
    // chain; the hover itself is plain data).
    if let HoverInfo::ToolUse {
        name,
        input,
        decision,
        ..
    } = &mut found.info
    {
        let input = serde_json::from_str(input).unwrap_or(serde_json::Value::Null);
        if let Some(analysis) = &analysis {
            *decision = session.backend.approval(uri, analysis, name, &input);
        }
    }
    let discovered = session.backend.discovered_tools();
    let agents = session
        .analyses
        .tools(position.text_document.uri.as_str())
        .map(|known| known.agents)
        .unwrap_or_default();
    let mut markdown = with_agents(
        with_description(found.markdown(), &found.info, &discovered),
        &found.info,
        &agents,
    );
    // An unresolved call (its use, or its placeholder) shows what it would change.
    if let Some(analysis) = &analysis
        && let Some(change) = proposed_change(session, uri, analysis, &found.info)
    {
        markdown.push_str(&change);
    }
    Ok(Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: markdown,
        }),
        range: Some(range),
    }))
}

/// Review before approval: the change an unresolved `write` or `edit` would make, against the
/// file as it is now, as a Markdown section (`None` for a resolved call or another tool).
fn proposed_change(
    session: &mut Session,
    uri: &str,
    analysis: &flemma_ide::Analysis,
    info: &HoverInfo,
) -> Option<String> {
    let id = match info {
        HoverInfo::ToolUse { id, .. } => id.as_str(),
        HoverInfo::ToolResult { tool_use_id, .. } => tool_use_id.as_str(),
        _ => return None,
    };
    let doc = &*analysis.document;
    let unresolved = doc
        .unresolved_tool_uses()
        .iter()
        .any(|(_, _, tool_use)| tool_use.id == id)
        || doc
            .placeholders(None)
            .iter()
            .any(|(_, _, result)| result.tool_use_id == id);
    if !unresolved {
        return None;
    }
    let (_, _, tool_use) = doc.tool_use(id)?;
    let input = tool_use
        .fence
        .as_ref()
        .and_then(|fence| serde_json::from_str(doc.slice(fence.content)).ok())
        .unwrap_or(serde_json::Value::Null);
    let change = session
        .backend
        .proposed_change(uri, analysis, &tool_use.name, &input)?;
    Some(match change {
        Ok(diff) if diff.is_empty() => {
            "\n**Change:** none (the file already has this content)\n".to_owned()
        }
        Ok(diff) => format!(
            "\n**Change** (against the file as it is now):\n\n```diff\n{}```\n",
            diff
        ),
        Err(reason) => format!("\n**Change:** cannot be shown — {reason}\n"),
    })
}

/// An `ask_agent` call also lists the agents the chat may ask, the one it asks first.
fn with_agents(markdown: String, info: &HoverInfo, agents: &[(String, Option<String>)]) -> String {
    let HoverInfo::ToolUse { name, input, .. } = info else {
        return markdown;
    };
    if name != flemma_config::ASK_AGENT_TOOL || agents.is_empty() {
        return markdown;
    }
    let asked = serde_json::from_str::<serde_json::Value>(input)
        .ok()
        .and_then(|v| v.get("agent").and_then(|a| a.as_str()).map(str::to_owned));
    let mut out = format!("{markdown}\nAgents:\n");
    let mut listed: Vec<&(String, Option<String>)> = agents.iter().collect();
    listed.sort_by_key(|(agent, _)| Some(agent) != asked.as_ref());
    for (agent, description) in listed {
        let marker = if Some(agent) == asked.as_ref() {
            " (asked here)"
        } else {
            ""
        };
        match description {
            Some(description) => out.push_str(&format!("- `{agent}`{marker} — {description}\n")),
            None => out.push_str(&format!("- `{agent}`{marker}\n")),
        }
    }
    out
}

/// A tool use of a discovered tool (an MCP server's) also shows what the tool does.
fn with_description(markdown: String, info: &HoverInfo, discovered: &[(String, String)]) -> String {
    let HoverInfo::ToolUse { name, .. } = info else {
        return markdown;
    };
    match discovered.iter().find(|(known, _)| known == name) {
        Some((_, description)) if !description.is_empty() => {
            format!("{markdown}\n{description}\n")
        }
        _ => markdown,
    }
}
