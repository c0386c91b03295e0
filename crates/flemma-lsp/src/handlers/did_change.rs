//! `textDocument/didChange`: apply incremental changes through the analysis host (re-parsing
//! incrementally), show each change to the engine's edit in flight (whether one of them is that
//! edit landing), and schedule diagnostics (debounced: a burst of changes is analysed once).

use std::time::Instant;

use flemma_syntax::{TextEdit, TextRange};
use lsp_server::ErrorCode;
use lsp_types::DidChangeTextDocumentParams;

use super::{HandlerResult, error};
use crate::from_proto;
use crate::session::{DIAGNOSTICS_DEBOUNCE, DIAGNOSTICS_DEBOUNCE_STREAMING, Session};

pub(crate) fn handle(
    session: &mut Session,
    params: DidChangeTextDocumentParams,
) -> HandlerResult<()> {
    let encoding = session.encoding;
    let uri = params.text_document.uri.as_str().to_owned();
    let Some(doc) = session.documents.get_mut(&uri) else {
        return Err(error(
            ErrorCode::InvalidParams,
            format!("a change to {uri}, which is not open; the client must send didOpen first"),
        ));
    };
    for change in params.content_changes {
        let Some(syntax) = session.host.document(&doc.id) else {
            break;
        };
        let range = match change.range {
            Some(range) => from_proto::range(&doc.index, syntax.text(), range, encoding),
            None => TextRange::new(0, syntax.text().len()),
        };
        let edit = TextEdit::replace(range, change.text.as_str());
        if let Some(sent) = doc.buffer_edit.as_mut() {
            tracing::debug!(
                change = ?(edit.range, &edit.new_text),
                sent = ?(sent.check.edit().range, &sent.check.edit().new_text),
                len = syntax.text().len(),
                "a change while an engine edit is in flight"
            );
            sent.check.changed(syntax.text(), &edit);
        }
        if let Err(refused) = session
            .host
            .apply_edits(&doc.id, std::slice::from_ref(&edit))
        {
            return Err(error(
                ErrorCode::InvalidParams,
                format!(
                    "a change to {uri} does not fit the text the server has ({refused}); close and reopen the document to resynchronise"
                ),
            ));
        }
        // The line index follows the edit (a shift of the line starts after it, a scan of the
        // inserted text only; a full-text change is a replacement of the whole range), instead
        // of a pass over the whole text on every keystroke.
        doc.index.apply_edit(range, &change.text);
        if let Some(syntax) = session.host.document(&doc.id)
            && doc.index.text_len() != syntax.text().len()
        {
            doc.index = syntax.line_index();
        }
    }
    doc.version = params.text_document.version;
    if let Some(sent) = doc.buffer_edit.as_mut() {
        sent.check.batch_ended();
    }
    crate::tasks::settle_buffer_edit(session, &uri);
    let Some(doc) = session.documents.get_mut(&uri) else {
        return Ok(());
    };
    if doc.diagnostics_at.is_none() {
        let debounce = if doc.engine.busy() {
            DIAGNOSTICS_DEBOUNCE_STREAMING
        } else {
            DIAGNOSTICS_DEBOUNCE
        };
        doc.diagnostics_at = Some(Instant::now() + debounce);
    }
    Ok(())
}
