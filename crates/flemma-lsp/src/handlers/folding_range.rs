//! `textDocument/foldingRange`: frontmatter, messages, thinking, tool blocks, with what each
//! hides as `collapsedText` for the clients that show it.

use flemma_ide::features::folding::folding_ranges;
use lsp_types::{FoldingRange, FoldingRangeParams};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::to_proto;

pub(crate) fn handle(
    session: &mut Session,
    params: FoldingRangeParams,
) -> HandlerResult<Option<Vec<FoldingRange>>> {
    let collapsed_text = session
        .capabilities
        .text_document
        .as_ref()
        .and_then(|text| text.folding_range.as_ref())
        .and_then(|folding| folding.folding_range.as_ref())
        .and_then(|range| range.collapsed_text)
        .unwrap_or(false);
    let (open, syntax) = document(session, &params.text_document.uri)?;
    Ok(Some(
        folding_ranges(syntax)
            .into_iter()
            .filter_map(|f| to_proto::folding_range(&open.index, f, collapsed_text))
            .collect(),
    ))
}
