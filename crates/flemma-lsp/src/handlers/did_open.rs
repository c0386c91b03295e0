//! `textDocument/didOpen`: the document goes into the analysis host; its analysis starts (off
//! the main loop) and its diagnostics follow.

use lsp_types::DidOpenTextDocumentParams;

use super::HandlerResult;
use crate::session::{OpenDocument, Session, document_id};

pub(crate) fn handle(
    session: &mut Session,
    params: DidOpenTextDocumentParams,
) -> HandlerResult<()> {
    let item = params.text_document;
    if let Some(folders) = session.backend.trusted_folders() {
        crate::settings::set_trusted_folders(session, folders);
    }
    let key = item.uri.as_str().to_owned();
    let id = document_id(&key, session.root.as_deref());
    session.host.set_text(id.clone(), item.text);
    let index = session
        .host
        .document(&id)
        .map(|d| d.line_index())
        .unwrap_or_else(|| flemma_syntax::LineIndex::new(""));
    session.documents.insert(
        key.clone(),
        OpenDocument {
            uri: item.uri,
            id,
            version: item.version,
            index,
            diagnostics_at: None,
            engine: Default::default(),
            buffer_edit: None,
            published: None,
        },
    );
    crate::analysis_worker::schedule(session, &key);
    let outbox = session.outbox.clone();
    let text = session
        .documents
        .get(&key)
        .and_then(|doc| session.host.document(&doc.id))
        .map(|d| d.text())
        .unwrap_or_default();
    session.backend.opened(&key, text, &outbox);
    Ok(())
}
