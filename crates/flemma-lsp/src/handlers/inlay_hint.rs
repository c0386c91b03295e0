//! `textDocument/inlayHint`: a preview of the call in each empty tool result placeholder.

use flemma_ide::features::inlay_hints::inlay_hints;
use lsp_types::{InlayHint, InlayHintLabel, InlayHintParams};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: InlayHintParams,
) -> HandlerResult<Option<Vec<InlayHint>>> {
    let (open, syntax) = document(session, &params.text_document.uri)?;
    let range = from_proto::range(&open.index, syntax.text(), params.range, session.encoding);
    Ok(Some(
        inlay_hints(syntax, Some(range))
            .into_iter()
            .map(|hint| InlayHint {
                position: to_proto::position(
                    &open.index,
                    syntax.text(),
                    hint.offset,
                    session.encoding,
                ),
                label: InlayHintLabel::String(hint.label),
                kind: None,
                text_edits: None,
                tooltip: None,
                padding_left: Some(true),
                padding_right: None,
                data: None,
            })
            .collect(),
    ))
}
