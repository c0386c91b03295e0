//! `workspace/executeCommand`: the `flemma.*` commands, and the `flemma/*` requests that are
//! the same operations. Both are decoded into `flemma-protocol`'s [`FlemmaRequest`] and handed
//! to the engine ([`Backend::call`](crate::Backend::call)), which answers at once; its edits,
//! events and progress follow. `flemma.trustFolder` alone is the editor's own (not a request).

use flemma_protocol::error::RequestError;
use flemma_protocol::methods::FlemmaRequest;
use lsp_server::ResponseError;
use lsp_types::ExecuteCommandParams;
use serde_json::Value;

use super::HandlerResult;
use crate::backend::RequestDocument;
use crate::commands;
use crate::session::Session;

pub(crate) fn handle(
    session: &mut Session,
    params: ExecuteCommandParams,
) -> HandlerResult<Option<Value>> {
    if params.command == commands::TRUST_FOLDER {
        return trust_folder(session, &params.arguments).map(Some);
    }
    if !commands::commands().contains(&params.command) {
        return Err(response_error(RequestError::invalid_params(format!(
            "unknown command `{}`; flemmad knows {}",
            params.command,
            commands::commands().join(", ")
        ))));
    }
    let request =
        FlemmaRequest::from_command(&params.command, &params.arguments).map_err(response_error)?;
    call(session, request).map(Some)
}

/// `flemma.trustFolder [uri]`, the one command that is not a `flemma/*` request (only the
/// editor's user trusts a folder): the backend trusts the chat's folder, and the session's
/// documents are analysed again with the folders trusted now.
fn trust_folder(session: &mut Session, arguments: &[Value]) -> HandlerResult<Value> {
    let Some(Value::String(argument)) = arguments.first().filter(|_| arguments.len() == 1) else {
        return Err(response_error(RequestError::invalid_params(format!(
            "`{}` takes [uri]: the chat whose folder to trust",
            commands::TRUST_FOLDER
        ))));
    };
    let uri = commands::resolve_document(
        commands::TRUST_FOLDER,
        argument,
        session.documents.keys().map(String::as_str),
        session.root.as_deref(),
        session.base_config.home_dir.as_deref(),
    )
    .map_err(response_error)?;
    let folders = session.backend.trust_folder(&uri).map_err(response_error)?;
    crate::settings::set_trusted_folders(session, folders.clone());
    Ok(serde_json::json!({
        "trusted": folders.iter().map(|f| f.display().to_string()).collect::<Vec<_>>()
    }))
}

/// Resolves the request's document in this session and hands the request to the engine.
pub(crate) fn call(session: &mut Session, request: FlemmaRequest) -> HandlerResult<Value> {
    let uri = commands::resolve_document(
        request.method(),
        request.uri(),
        session.documents.keys().map(String::as_str),
        session.root.as_deref(),
        session.base_config.home_dir.as_deref(),
    )
    .map_err(response_error)?;
    let buffer = session
        .documents
        .get(&uri)
        .and_then(|doc| session.host.document(&doc.id))
        .map(|document| &**document);
    let document = RequestDocument { uri: &uri, buffer };
    let response = session
        .backend
        .call(document, request, &session.outbox)
        .map_err(response_error)?;
    serde_json::to_value(response).map_err(|error| {
        response_error(RequestError::new(
            flemma_protocol::error::codes::INTERNAL_ERROR,
            format!("cannot encode the answer: {error}"),
        ))
    })
}

/// A refusal as the LSP answers it: the same code and message every front end gives.
pub(crate) fn response_error(error: RequestError) -> ResponseError {
    ResponseError {
        code: error.code,
        message: error.message,
        data: None,
    }
}
