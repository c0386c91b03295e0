//! `textDocument/inlayHint`: a preview of the call in each empty tool result placeholder, and
//! the context meter at the end of the last message's role line (docs/context.md).

use flemma_ide::features::inlay_hints::inlay_hints;
use lsp_types::{InlayHint, InlayHintLabel, InlayHintParams};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: InlayHintParams,
) -> HandlerResult<Option<Vec<InlayHint>>> {
    let uri = params.text_document.uri.as_str().to_owned();
    let (mut hints, meter_at, id) = {
        let (open, syntax) = document(session, &params.text_document.uri)?;
        let range = from_proto::range(&open.index, syntax.text(), params.range, session.encoding);
        let position =
            |offset| to_proto::position(&open.index, syntax.text(), offset, session.encoding);
        let hints: Vec<InlayHint> = inlay_hints(syntax, Some(range))
            .into_iter()
            .map(|hint| hint_at(position(hint.offset), hint.label))
            .collect();
        let at = crate::publish::meter_range(syntax).end;
        let meter_at = (range.start <= at && at <= range.end).then(|| position(at));
        (hints, meter_at, open.id.clone())
    };
    // The analysis as last computed (off the main loop): a hint never waits for one.
    if let Some(position) = meter_at
        && let Some(analysis) = session.host.cached_analysis(&id)
        && let Some(meter) = session.backend.context(&uri, &analysis)
    {
        hints.push(hint_at(position, meter.line));
    }
    Ok(Some(hints))
}

fn hint_at(position: lsp_types::Position, label: String) -> InlayHint {
    InlayHint {
        position,
        label: InlayHintLabel::String(label),
        kind: None,
        text_edits: None,
        tooltip: None,
        padding_left: Some(true),
        padding_right: None,
        data: None,
    }
}
