//! `textDocument/hover`: the node under the cursor.

use lsp_types::{Hover, HoverContents, HoverParams, MarkupContent, MarkupKind};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{features_shim, from_proto, to_proto};

pub(crate) fn handle(session: &mut Session, params: HoverParams) -> HandlerResult<Option<Hover>> {
    let position = params.text_document_position_params;
    let doc = document(session, &position.text_document.uri)?;
    let offset = from_proto::offset(&doc.index, doc.text(), position.position, session.encoding);
    Ok(features_shim::hover(&doc.doc, offset).map(|hover| Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: hover.markdown,
        }),
        range: Some(to_proto::range(
            &doc.index,
            doc.text(),
            hover.range,
            session.encoding,
        )),
    }))
}
