//! `textDocument/hover`: `flemma_ide::features::hover` at the cursor.

use flemma_ide::features::Approvals;
use flemma_ide::features::hover::{self, HoverContext};
use lsp_types::{Hover, HoverContents, HoverParams, MarkupContent, MarkupKind};

use super::{HandlerResult, chat_dir, document, job_states};
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(session: &mut Session, params: HoverParams) -> HandlerResult<Option<Hover>> {
    let position = params.text_document_position_params;
    let (open, syntax) = document(session, &position.text_document.uri)?;
    let offset = from_proto::offset(
        &open.index,
        syntax.text(),
        position.position,
        session.encoding,
    );
    let chat_dir = chat_dir(open);
    let jobs = job_states(syntax);
    // The engine is not wired to the session yet: no approval decisions to show.
    let approvals = Approvals::new();
    let context = HoverContext {
        chat_dir: &chat_dir,
        fs: &session.host.file_system(),
        jobs: &jobs,
        approvals: &approvals,
    };
    let discovered = session.backend.discovered_tools();
    Ok(hover::hover(syntax, offset, &context).map(|hover| Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: with_description(hover.markdown(), &hover.info, &discovered),
        }),
        range: Some(to_proto::range(
            &open.index,
            syntax.text(),
            hover.range,
            session.encoding,
        )),
    }))
}

/// A tool use of a discovered tool (an MCP server's) also shows what the tool does.
fn with_description(
    markdown: String,
    info: &hover::HoverInfo,
    discovered: &[(String, String)],
) -> String {
    let hover::HoverInfo::ToolUse { name, .. } = info else {
        return markdown;
    };
    match discovered.iter().find(|(known, _)| known == name) {
        Some((_, description)) if !description.is_empty() => {
            format!("{markdown}\n{description}\n")
        }
        _ => markdown,
    }
}
