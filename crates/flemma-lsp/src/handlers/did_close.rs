//! `textDocument/didClose`: stop mirroring; the engine's edit in flight is answered and the
//! engine told (it writes the file on disk from now on, unless another editor has it open).

use lsp_types::DidCloseTextDocumentParams;

use super::HandlerResult;
use crate::session::Session;

pub(crate) fn handle(
    session: &mut Session,
    params: DidCloseTextDocumentParams,
) -> HandlerResult<()> {
    let uri = params.text_document.uri;
    // The client's diagnostics of the document are cleared, when it has any.
    let mut shown = false;
    if let Some(doc) = session.documents.remove(uri.as_str()) {
        shown = doc.published.is_some_and(|d| !d.is_empty());
        crate::analysis_worker::closed(session, uri.as_str());
        session.host.remove(&doc.id);
        if let Some(mut edit) = doc.buffer_edit
            && let Some(reply) = edit.reply.take()
        {
            reply.send(crate::backend::BufferAnswer::Closed);
        }
        session.backend.closed(uri.as_str());
        if let Some(token) = doc.engine.progress {
            crate::progress::end_progress(session, token, "the document was closed");
        }
    }
    if shown {
        session.notify::<lsp_types::notification::PublishDiagnostics>(
            lsp_types::PublishDiagnosticsParams {
                uri,
                diagnostics: Vec::new(),
                version: None,
            },
        );
    }
    Ok(())
}
