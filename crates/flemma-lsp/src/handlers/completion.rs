//! `textDocument/completion`: role markers, tool names from the resolved configuration, `@./`
//! paths and frontmatter options (`flemma_ide::features::completion`).

use flemma_ide::features::completion::{CompletionContext, completions};
use lsp_types::{CompletionParams, CompletionResponse};

use super::{HandlerResult, chat_dir, document};
use crate::analysis_pool::KnownTools;
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: CompletionParams,
) -> HandlerResult<Option<CompletionResponse>> {
    let position = params.text_document_position;
    let uri = position.text_document.uri;
    // Tool names need the resolved configuration (frontmatter included): those of the last
    // finished analysis (a newer one may still run; completion never waits for it); before
    // the first one, those of the configuration below the frontmatter.
    // MCP items of the list (`github.*`, `!github.x`) are patterns, not names; the names of the
    // MCP tools the process knows come from the backend, less those `tools.mcp.exclude` keeps
    // out of the chat.
    let known = session
        .analyses
        .tools(uri.as_str())
        .or_else(|| {
            flemma_config::resolve(&session.host.config().layers)
                .ok()
                .map(|resolved| KnownTools::of(&resolved))
        })
        .unwrap_or_default();
    let mut tools: Vec<String> = known
        .enabled
        .iter()
        .filter(|name| !flemma_config::is_glob(name) && !name.starts_with('!'))
        .cloned()
        .collect();
    for (name, _) in session.backend.discovered_tools() {
        if !tools.contains(&name) && flemma_config::first_match(&known.mcp_exclude, &name).is_none()
        {
            tools.push(name);
        }
    }
    let (open, syntax) = document(session, &uri)?;
    let offset = from_proto::offset(
        &open.index,
        syntax.text(),
        position.position,
        session.encoding,
    );
    let chat_dir = chat_dir(open);
    let context = CompletionContext {
        chat_dir: &chat_dir,
        fs: &session.host.file_system(),
        tools: &tools,
        agents: &known.agents,
    };
    let items = completions(syntax, offset, &context)
        .into_iter()
        .map(|item| to_proto::completion_item(&open.index, syntax.text(), item, session.encoding))
        .collect();
    Ok(Some(CompletionResponse::Array(items)))
}
