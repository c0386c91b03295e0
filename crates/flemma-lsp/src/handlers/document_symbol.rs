//! `textDocument/documentSymbol`: frontmatter, messages and their blocks (Helix `space s`).

use flemma_ide::features::symbols::document_symbols;
use lsp_types::{DocumentSymbolParams, DocumentSymbolResponse};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::to_proto;

pub(crate) fn handle(
    session: &mut Session,
    params: DocumentSymbolParams,
) -> HandlerResult<Option<DocumentSymbolResponse>> {
    let (open, syntax) = document(session, &params.text_document.uri)?;
    let symbols = document_symbols(syntax)
        .into_iter()
        .map(|s| to_proto::symbol(&open.index, syntax.text(), s, session.encoding))
        .collect();
    Ok(Some(DocumentSymbolResponse::Nested(symbols)))
}
