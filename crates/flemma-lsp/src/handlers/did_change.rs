//! `textDocument/didChange`: apply incremental changes to the mirror (re-parsing incrementally),
//! map the stream's anchor through them, and publish diagnostics.

use flemma_syntax::{TextEdit, TextRange};
use lsp_server::ErrorCode;
use lsp_types::DidChangeTextDocumentParams;

use super::{HandlerResult, error, publish_diagnostics};
use crate::session::Session;
use crate::{from_proto, streaming};

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
        let range = match change.range {
            Some(range) => from_proto::range(&doc.index, doc.doc.text(), range, encoding),
            None => TextRange::new(0, doc.doc.text().len()),
        };
        if let Err(refused) = doc
            .doc
            .edit(&TextEdit::replace(range, change.text.as_str()))
        {
            return Err(error(
                ErrorCode::InvalidParams,
                format!(
                    "a change to {uri} does not fit the text the server has ({refused}); close and reopen the document to resynchronise"
                ),
            ));
        }
        doc.index = doc.doc.line_index();
        if let Some(writer) = doc.stream.as_mut() {
            writer.on_change(range, &change.text);
        }
    }
    doc.version = params.text_document.version;
    publish_diagnostics(session, &uri);
    streaming::after_progress(session, &uri);
    Ok(())
}
