//! One file per LSP method. Routing is one `match` on the method; unknown → `MethodNotFound`.
//! A panic in a request handler answers that request with an error; the server goes on.

pub(crate) mod code_action;
pub(crate) mod code_lens;
pub(crate) mod completion;
pub(crate) mod definition;
pub(crate) mod did_change;
pub(crate) mod did_close;
pub(crate) mod did_open;
pub(crate) mod document_symbol;
pub(crate) mod execute_command;
pub(crate) mod folding_range;
pub(crate) mod hover;
pub(crate) mod initialize;
pub(crate) mod inlay_hint;
pub(crate) mod review;
pub(crate) mod semantic_tokens;

use std::panic::{AssertUnwindSafe, catch_unwind};

use lsp_server::{ErrorCode, Notification, Request, Response, ResponseError};
use lsp_types::notification::Notification as _;
use lsp_types::request::Request as _;

use crate::session::{OpenDocument, ResponseHandler, Session};
use crate::tasks;

pub(crate) type HandlerResult<T> = Result<T, ResponseError>;

pub(crate) fn error(code: ErrorCode, message: impl Into<String>) -> ResponseError {
    ResponseError {
        code: code as i32,
        message: message.into(),
        data: None,
    }
}

pub(crate) fn on_request(session: &mut Session, request: Request) {
    use lsp_types::request as r;
    if session.shutdown_requested && request.method != r::Shutdown::METHOD {
        session.respond(Response::new_err(
            request.id,
            ErrorCode::InvalidRequest as i32,
            "the server is shutting down; only `exit` is accepted now".into(),
        ));
        return;
    }
    match request.method.as_str() {
        r::Shutdown::METHOD => {
            session.shutdown_requested = true;
            session.respond(Response::new_ok(request.id, ()));
        }
        r::HoverRequest::METHOD => dispatch::<r::HoverRequest>(session, request, hover::handle),
        r::GotoDefinition::METHOD => {
            dispatch::<r::GotoDefinition>(session, request, definition::handle)
        }
        r::DocumentSymbolRequest::METHOD => {
            dispatch::<r::DocumentSymbolRequest>(session, request, document_symbol::handle)
        }
        r::FoldingRangeRequest::METHOD => {
            dispatch::<r::FoldingRangeRequest>(session, request, folding_range::handle)
        }
        r::InlayHintRequest::METHOD => {
            dispatch::<r::InlayHintRequest>(session, request, inlay_hint::handle)
        }
        r::SemanticTokensFullRequest::METHOD => {
            dispatch::<r::SemanticTokensFullRequest>(session, request, semantic_tokens::handle)
        }
        r::Completion::METHOD => dispatch::<r::Completion>(session, request, completion::handle),
        r::CodeActionRequest::METHOD => {
            dispatch::<r::CodeActionRequest>(session, request, code_action::handle)
        }
        r::CodeLensRequest::METHOD => {
            dispatch::<r::CodeLensRequest>(session, request, code_lens::handle)
        }
        r::ExecuteCommand::METHOD => execute_command(session, request),
        method if method.starts_with("flemma/") => flemma_request(session, request),
        method => {
            let message = format!("flemmad does not implement `{method}`");
            session.respond(Response::new_err(
                request.id,
                ErrorCode::MethodNotFound as i32,
                message,
            ));
        }
    }
}

/// `workspace/executeCommand`, answered as any request; a failure is also told through
/// `window/showMessage`, since Helix 25.07 only logs the error answer of a command (a key bound
/// to `:lsp-workspace-command` seemed to do nothing). A `flemma.*` command is its request,
/// answered as [`flemma_request`] answers it. The parameters are decoded once.
fn execute_command(session: &mut Session, request: Request) {
    type ExecuteCommand = lsp_types::request::ExecuteCommand;
    let method = ExecuteCommand::METHOD;
    let id = request.id;
    // The command's name for the message of a refusal (the parameters may not decode).
    let named = request
        .params
        .get("command")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(method)
        .to_owned();
    let params = match params_of::<ExecuteCommand>(&id, request.params) {
        Ok(params) => params,
        Err(refusal) => {
            responder(session, Some(named))(*refusal);
            return;
        }
    };
    let command = Some(params.command.clone());
    if let Some(decoded) = execute_command::engine_request(&params) {
        return engine_call(session, id, method, command, decoded);
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        execute_command::handle(session, params)
    }));
    responder(session, command)(answer(id, method, outcome));
}

/// Hands a decoded request to the engine; the answer is sent when the engine gives it (from
/// another thread when it takes long: the main loop does not wait for an evaluation or git).
fn engine_call(
    session: &mut Session,
    id: lsp_server::RequestId,
    method: &str,
    command: Option<String>,
    request: flemma_protocol::methods::FlemmaRequest,
) {
    let respond = responder(session, command.clone());
    let answering = (id.clone(), method.to_owned());
    let answer_with = Box::new(move |result: HandlerResult<serde_json::Value>| {
        respond(answer(answering.0, &answering.1, Ok(result)));
    });
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        execute_command::call_later(session, request, answer_with)
    }));
    // A panic before the engine had the request: its answer says so.
    if let Err(panic) = outcome {
        responder(session, command)(answer::<()>(id, method, Err(panic)));
    }
}

/// Sends the answer to a request from any thread; a failed `command` is also shown.
fn responder(session: &Session, command: Option<String>) -> Box<dyn FnOnce(Response) + Send> {
    let sender = session.sender.clone();
    Box::new(move |response: Response| {
        let failure = response
            .response_result
            .as_ref()
            .err()
            .map(|e| e.message.clone());
        let send = |message| {
            if sender.send(message).is_err() {
                tracing::warn!("the client connection is closed; dropping an answer");
            }
        };
        send(lsp_server::Message::Response(response));
        if let (Some(command), Some(message)) = (command, failure) {
            let message = format!("flemma: `{command}` failed: {message}");
            send(crate::session::shown(
                lsp_types::MessageType::ERROR,
                message,
            ));
        }
    })
}

/// A `flemma/*` request: decoded into `flemma_protocol::methods::FlemmaRequest` (an unknown
/// `flemma/` method is `MethodNotFound`, bad parameters `InvalidParams`, with the messages
/// every front end gives), then handed to the engine as its command is.
fn flemma_request(session: &mut Session, request: Request) {
    let method = request.method;
    match flemma_protocol::methods::FlemmaRequest::decode(&method, request.params) {
        Ok(decoded) => engine_call(session, request.id, &method, None, decoded),
        Err(refused) => session.respond(answer::<()>(
            request.id,
            &method,
            Ok(Err(execute_command::response_error(refused))),
        )),
    }
}

/// Decodes the parameters, runs the handler under `catch_unwind`, and answers.
fn dispatch<R: lsp_types::request::Request>(
    session: &mut Session,
    request: Request,
    handler: fn(&mut Session, R::Params) -> HandlerResult<R::Result>,
) {
    let response = handle::<R>(session, request, handler);
    session.respond(response);
}

/// The answer to a request: its parameters decoded, its handler run under `catch_unwind`.
fn handle<R: lsp_types::request::Request>(
    session: &mut Session,
    request: Request,
    handler: fn(&mut Session, R::Params) -> HandlerResult<R::Result>,
) -> Response {
    let id = request.id;
    let params = match params_of::<R>(&id, request.params) {
        Ok(params) => params,
        Err(refusal) => return *refusal,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| handler(session, params)));
    answer(id, R::METHOD, outcome)
}

/// A request's parameters, or the `InvalidParams` answer that says what is wrong with them.
fn params_of<R: lsp_types::request::Request>(
    id: &lsp_server::RequestId,
    params: serde_json::Value,
) -> Result<R::Params, Box<Response>> {
    serde_json::from_value(params).map_err(|e| {
        Box::new(Response::new_err(
            id.clone(),
            ErrorCode::InvalidParams as i32,
            format!("invalid parameters for `{}`: {e}", R::METHOD),
        ))
    })
}

/// The response to a request, from what its handler did (a panic is an internal error).
fn answer<T: serde::Serialize>(
    id: lsp_server::RequestId,
    method: &str,
    outcome: std::thread::Result<HandlerResult<T>>,
) -> Response {
    match outcome {
        Ok(Ok(result)) => Response::new_ok(id, result),
        Ok(Err(e)) => Response {
            id,
            response_result: Err(e),
        },
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            tracing::error!(method, detail, "a request handler panicked");
            Response::new_err(
                id,
                ErrorCode::InternalError as i32,
                format!(
                    "flemmad failed while handling `{method}` ({detail}); the server keeps running — please report this with the log ($XDG_STATE_HOME/flemma/flemmad.log)"
                ),
            )
        }
    }
}

pub(crate) fn on_notification(session: &mut Session, notification: Notification) {
    use lsp_types::notification as n;
    let method = notification.method.clone();
    let outcome = match method.as_str() {
        n::DidOpenTextDocument::METHOD => notify(session, notification, did_open::handle),
        n::DidChangeTextDocument::METHOD => notify(session, notification, did_change::handle),
        n::DidCloseTextDocument::METHOD => notify(session, notification, did_close::handle),
        n::DidChangeConfiguration::METHOD => {
            crate::settings::did_change_configuration(session, &notification.params);
            Ok(())
        }
        // Nothing to do: the server keeps no state for these.
        n::Initialized::METHOD | n::DidSaveTextDocument::METHOD | n::Cancel::METHOD => Ok(()),
        other => {
            tracing::debug!(method = other, "ignoring an unknown notification");
            Ok(())
        }
    };
    if let Err(e) = outcome {
        tracing::warn!(
            method,
            error = e.message,
            "a notification could not be handled"
        );
        session.show_message(
            lsp_types::MessageType::ERROR,
            format!("flemma: {}", e.message),
        );
    }
}

fn notify<P: serde::de::DeserializeOwned>(
    session: &mut Session,
    notification: Notification,
    handler: fn(&mut Session, P) -> HandlerResult<()>,
) -> HandlerResult<()> {
    let params: P = serde_json::from_value(notification.params).map_err(|e| {
        error(
            ErrorCode::InvalidParams,
            format!("invalid parameters for `{}`: {e}", notification.method),
        )
    })?;
    match catch_unwind(AssertUnwindSafe(|| handler(session, params))) {
        Ok(result) => result,
        Err(_) => Err(error(
            ErrorCode::InternalError,
            format!("flemmad failed while handling `{}`", notification.method),
        )),
    }
}

pub(crate) fn on_response(session: &mut Session, response: lsp_server::Response) {
    let Some(handler) = session.requests.outgoing.complete(response.id.clone()) else {
        tracing::warn!(id = ?response.id, "a response to no request of ours");
        return;
    };
    if let ResponseHandler::AgentPermission { uri, id } = &handler {
        let answer = response.response_result.clone().ok();
        if let Some(request) = crate::agent_permission::decision(uri, id, answer) {
            // A refusal (another front end answered first) is shown, not lost.
            let sender = session.sender.clone();
            let respond = Box::new(move |answer: HandlerResult<serde_json::Value>| {
                if let Err(error) = answer {
                    let message = format!("flemma: {}", error.message);
                    let _ = sender.send(crate::session::shown(
                        lsp_types::MessageType::WARNING,
                        message,
                    ));
                }
            });
            execute_command::call_later(session, request, respond);
        }
        return;
    }
    let applied = response
        .response_result
        .ok()
        .and_then(|r| serde_json::from_value::<lsp_types::ApplyWorkspaceEditResponse>(r).ok())
        .is_some_and(|r| r.applied);
    match handler {
        ResponseHandler::BufferEdit { uri } => tasks::on_buffer_answer(session, &uri, applied),
        ResponseHandler::Ignore | ResponseHandler::AgentPermission { .. } => {}
    }
}

/// The open document a request is about, and its syntax tree.
pub(crate) fn document<'s>(
    session: &'s Session,
    uri: &lsp_types::Uri,
) -> HandlerResult<(&'s OpenDocument, &'s flemma_syntax::Document)> {
    let open = session.documents.get(uri.as_str()).ok_or_else(|| {
        error(
            ErrorCode::InvalidParams,
            format!(
                "{} is not open in this session; open it first (textDocument/didOpen)",
                uri.as_str()
            ),
        )
    })?;
    Ok((open, session.syntax(open)))
}

/// The directory relative paths of a document resolve against.
pub(crate) fn chat_dir(open: &OpenDocument) -> std::path::PathBuf {
    open.id
        .path()
        .parent()
        .map_or_else(|| std::path::PathBuf::from("/"), std::path::Path::to_owned)
}

/// Job states as the text tells them until the engine reports live ones: a job whose
/// `**Job Result:**` is written has completed; of others nothing is known.
pub(crate) fn job_states(
    syntax: &flemma_syntax::Document,
) -> impl Fn(&str) -> Option<flemma_ide::features::JobState> + '_ {
    move |job_id| {
        syntax
            .job_result(job_id)
            .map(|_| flemma_ide::features::JobState::Completed)
    }
}
