//! `textDocument/semanticTokens/full`: the chat's structure as the parser sees it (role
//! markers, tool blocks with their status, thinking, the frontmatter's fences, templates, file
//! references, the abort marker), so every editor that colours semantic tokens shows it —
//! with standard token types a theme already colours, and modifiers that say which piece it is.

use flemma_ide::features::highlights::highlights;
use lsp_types::{SemanticTokensParams, SemanticTokensResult};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::to_proto;

pub(crate) fn handle(
    session: &mut Session,
    params: SemanticTokensParams,
) -> HandlerResult<Option<SemanticTokensResult>> {
    let (open, syntax) = document(session, &params.text_document.uri)?;
    let tokens = to_proto::semantic_tokens(
        &open.index,
        syntax.text(),
        highlights(syntax),
        session.encoding,
    );
    Ok(Some(SemanticTokensResult::Tokens(tokens)))
}
