//! `textDocument/definition`: tool use → result → job result → back.

use lsp_types::{GotoDefinitionParams, GotoDefinitionResponse, Location};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{features_shim, from_proto, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: GotoDefinitionParams,
) -> HandlerResult<Option<GotoDefinitionResponse>> {
    let position = params.text_document_position_params;
    let uri = position.text_document.uri;
    let doc = document(session, &uri)?;
    let offset = from_proto::offset(&doc.index, doc.text(), position.position, session.encoding);
    Ok(features_shim::definition(&doc.doc, offset).map(|target| {
        GotoDefinitionResponse::Scalar(Location::new(
            uri.clone(),
            to_proto::range(&doc.index, doc.text(), target, session.encoding),
        ))
    }))
}
