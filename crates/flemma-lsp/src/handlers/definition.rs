//! `textDocument/definition`: tool use → result → job result → back; `@./` references and
//! `include("…")` paths → the file.

use flemma_ide::features::definition::{Definition, definition};
use lsp_types::{GotoDefinitionParams, GotoDefinitionResponse, Location};

use super::{HandlerResult, chat_dir, document};
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: GotoDefinitionParams,
) -> HandlerResult<Option<GotoDefinitionResponse>> {
    let position = params.text_document_position_params;
    let uri = position.text_document.uri;
    let (open, syntax) = document(session, &uri)?;
    let offset = from_proto::offset(
        &open.index,
        syntax.text(),
        position.position,
        session.encoding,
    );
    let target = definition(syntax, offset, &chat_dir(open), &session.host.file_system());
    Ok(target.and_then(|target| {
        let location = match target {
            Definition::InDocument(range) => Location::new(
                uri.clone(),
                to_proto::range(&open.index, syntax.text(), range, session.encoding),
            ),
            Definition::File(path) => {
                Location::new(to_proto::file_uri(&path)?, lsp_types::Range::default())
            }
        };
        Some(GotoDefinitionResponse::Scalar(location))
    }))
}
