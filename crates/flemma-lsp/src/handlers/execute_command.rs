//! `workspace/executeCommand`: the `flemma.*` commands, and the `flemma/*` requests that are
//! the same operations. Both are decoded into `flemma-protocol`'s [`FlemmaRequest`] and handed
//! to the engine ([`Backend::call_later`](crate::Backend::call_later)), which answers at once or,
//! for work that takes long, from another thread; its edits, events and progress follow. `flemma.trustFolder` alone is the editor's own (not a request).

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
    // A known command that is a request was handed to the engine (`engine_request`): what is
    // left is its arguments' refusal.
    FlemmaRequest::from_command(&params.command, &params.arguments)
        .map(|_| None)
        .map_err(response_error)
}

/// The request a `flemma.*` command is, when it is a known one with good arguments (the rest is
/// answered by [`handle`]).
pub(crate) fn engine_request(params: &ExecuteCommandParams) -> Option<FlemmaRequest> {
    if params.command == commands::TRUST_FOLDER || !commands::commands().contains(&params.command) {
        return None;
    }
    FlemmaRequest::from_command(&params.command, &params.arguments).ok()
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

/// Resolves the request's document in this session and hands the request to the engine, whose
/// answer `respond` is given: at once, or from another thread when it takes long
/// ([`Backend::call_later`](crate::Backend::call_later)).
pub(crate) fn call_later(
    session: &mut Session,
    request: FlemmaRequest,
    respond: Box<dyn FnOnce(HandlerResult<Value>) + Send>,
) {
    let uri = match commands::resolve_document(
        request.method(),
        request.uri(),
        session.documents.keys().map(String::as_str),
        session.root.as_deref(),
        session.base_config.home_dir.as_deref(),
    ) {
        Ok(uri) => uri,
        Err(refused) => return respond(Err(response_error(refused))),
    };
    let buffer = session
        .documents
        .get(&uri)
        .and_then(|doc| session.host.document(&doc.id))
        .map(|document| &**document);
    let document = RequestDocument { uri: &uri, buffer };
    let answer: crate::Answer = Box::new(move |response| {
        respond(response.map_err(response_error).and_then(|response| {
            serde_json::to_value(response).map_err(|error| {
                response_error(RequestError::new(
                    flemma_protocol::error::codes::INTERNAL_ERROR,
                    format!("cannot encode the answer: {error}"),
                ))
            })
        }))
    });
    session
        .backend
        .call_later(document, request, &session.outbox, answer);
}

/// A refusal as the LSP answers it: the same code and message every front end gives.
pub(crate) fn response_error(error: RequestError) -> ResponseError {
    ResponseError {
        code: error.code,
        message: error.message,
        data: None,
    }
}
