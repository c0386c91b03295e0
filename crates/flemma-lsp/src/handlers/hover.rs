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
        // The analysis as last computed (off the main loop): hover never waits for one.
        if let Some(analysis) = session.host.cached_analysis(&id) {
            let uri = position.text_document.uri.as_str();
            *decision = session.backend.approval(uri, &analysis, name, &input);
        }
    }
    let discovered = session.backend.discovered_tools();
    let agents = session
        .analyses
        .tools(position.text_document.uri.as_str())
        .map(|known| known.agents)
        .unwrap_or_default();
    let value = with_agents(
        with_description(found.markdown(), &found.info, &discovered),
        &found.info,
        &agents,
    );
    Ok(Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: Some(range),
    }))
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
