//! `textDocument/didOpen`: start mirroring the client's buffer.

use lsp_types::DidOpenTextDocumentParams;

use super::{HandlerResult, publish_diagnostics};
use crate::session::{OpenDocument, Session};

pub(crate) fn handle(
    session: &mut Session,
    params: DidOpenTextDocumentParams,
) -> HandlerResult<()> {
    let item = params.text_document;
    let key = item.uri.as_str().to_owned();
    session.documents.insert(
        key.clone(),
        OpenDocument::new(item.uri, item.version, item.text),
    );
    publish_diagnostics(session, &key);
    Ok(())
}
