//! `textDocument/documentSymbol`: messages and their tool calls (Helix `space s`).

use lsp_types::{DocumentSymbolParams, DocumentSymbolResponse};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{features_shim, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: DocumentSymbolParams,
) -> HandlerResult<Option<DocumentSymbolResponse>> {
    let doc = document(session, &params.text_document.uri)?;
    let symbols = features_shim::symbols(&doc.doc)
        .into_iter()
        .map(|s| to_proto::symbol(&doc.index, doc.text(), s, session.encoding))
        .collect();
    Ok(Some(DocumentSymbolResponse::Nested(symbols)))
}
