//! `textDocument/foldingRange`: frontmatter, messages, thinking, tool blocks.

use lsp_types::{FoldingRange, FoldingRangeParams};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{features_shim, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: FoldingRangeParams,
) -> HandlerResult<Option<Vec<FoldingRange>>> {
    let doc = document(session, &params.text_document.uri)?;
    Ok(Some(
        features_shim::folding(&doc.doc)
            .into_iter()
            .filter_map(|f| to_proto::folding_range(&doc.index, f))
            .collect(),
    ))
}
