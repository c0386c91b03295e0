//! `textDocument/foldingRange`: frontmatter, messages, thinking, tool blocks.

use flemma_ide::features::folding::folding_ranges;
use lsp_types::{FoldingRange, FoldingRangeParams};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::to_proto;

pub(crate) fn handle(
    session: &mut Session,
    params: FoldingRangeParams,
) -> HandlerResult<Option<Vec<FoldingRange>>> {
    let (open, syntax) = document(session, &params.text_document.uri)?;
    Ok(Some(
        folding_ranges(syntax)
            .into_iter()
            .filter_map(|f| to_proto::folding_range(&open.index, f))
            .collect(),
    ))
}
