//! `textDocument/didClose`: stop mirroring; a stream into the document ends.

use lsp_types::DidCloseTextDocumentParams;

use super::HandlerResult;
use crate::backend::StreamEnd;
use crate::session::Session;

pub(crate) fn handle(
    session: &mut Session,
    params: DidCloseTextDocumentParams,
) -> HandlerResult<()> {
    let uri = params.text_document.uri;
    if let Some(doc) = session.documents.remove(uri.as_str()) {
        session.host.remove(&doc.id);
        if let Some(mut edit) = doc.buffer_edit
            && let Some(reply) = edit.reply.take()
        {
            reply.send(crate::backend::BufferAnswer::Closed);
        }
        session.backend.closed(uri.as_str());
        if let Some(token) = doc.engine_progress {
            crate::streaming::end_progress(session, token, "the document was closed");
        }
        if let Some(token) = doc.progress {
            crate::streaming::end_progress(session, token, "the document was closed");
        }
        if let Some(writer) = doc.stream {
            // The daemon's disk writer takes over closed documents; until it exists the
            // engine is told what was not written.
            session.backend.stream_ended(
                uri.as_str(),
                StreamEnd::Closed {
                    unwritten: writer.pending().to_owned(),
                },
            );
        }
    }
    session.notify::<lsp_types::notification::PublishDiagnostics>(
        lsp_types::PublishDiagnosticsParams {
            uri,
            diagnostics: Vec::new(),
            version: None,
        },
    );
    Ok(())
}
