//! `workspace/executeCommand`: the `flemma.*` commands. Returns at once: approve and reject
//! send a versioned `workspace/applyEdit` and are done; engine commands go to the backend.

use flemma_protocol::methods::{FlemmaRequest, ToolIdsResult};
use flemma_syntax::{Document, TextEdit};
use lsp_server::ErrorCode;
use lsp_types::ExecuteCommandParams;
use lsp_types::request::ApplyWorkspaceEdit;
use serde_json::Value;

use super::{HandlerResult, error};
use crate::commands::{self, Command};
use crate::session::{ResponseHandler, Session};
use crate::to_proto;

/// How often a refused approve/reject edit is rebuilt on the latest text and sent again.
const EDIT_ATTEMPTS: u8 = 5;

pub(crate) fn handle(
    session: &mut Session,
    params: ExecuteCommandParams,
) -> HandlerResult<Option<Value>> {
    let root = session.root.clone();
    let home = session.base_config.home_dir.clone();
    let command = commands::parse(&params.command, &params.arguments, |arg| {
        commands::resolve_document(
            arg,
            session.documents.keys().map(String::as_str),
            root.as_deref(),
            home.as_deref(),
        )
    })
    .map_err(|message| error(ErrorCode::InvalidParams, message))?;
    run(session, command)
}

/// A `flemma/*` request: the same code as its command.
pub(crate) fn handle_request(
    session: &mut Session,
    request: FlemmaRequest,
) -> HandlerResult<Option<Value>> {
    let root = session.root.clone();
    let home = session.base_config.home_dir.clone();
    let command = commands::from_request(request, |arg| {
        commands::resolve_document(
            arg,
            session.documents.keys().map(String::as_str),
            root.as_deref(),
            home.as_deref(),
        )
    })
    .map_err(|message| error(ErrorCode::InvalidParams, message))?;
    run(session, command)
}

/// Runs a command: engine commands go to the backend (which answers at once); approve, reject
/// and approve-all edit the placeholders through a versioned `workspace/applyEdit`.
fn run(session: &mut Session, command: Command) -> HandlerResult<Option<Value>> {
    match command {
        Command::TrustFolder { uri } => {
            let folders = session
                .backend
                .trust_folder(&uri)
                .map_err(|e| error(ErrorCode::RequestFailed, e.to_string()))?;
            crate::settings::set_trusted_folders(session, folders.clone());
            Ok(Some(serde_json::json!({
                "trusted": folders.iter().map(|f| f.display().to_string()).collect::<Vec<_>>()
            })))
        }
        Command::Engine(command) => session
            .backend
            .command(command, &session.outbox)
            .map(Some)
            .map_err(|e| error(ErrorCode::RequestFailed, e.to_string())),
        local => {
            // Checked on the mirror first, whoever makes the edit: a call that is not pending
            // is refused at once, with the reason.
            let tool_ids = match session.documents.get(local.uri()) {
                Some(doc) => {
                    placeholder_edits(session.syntax(doc), &local)
                        .map_err(|message| error(ErrorCode::InvalidParams, message))?
                        .0
                }
                // Not open here (a file on disk): the engine checks it.
                None => match &local {
                    Command::Approve { tool_id, .. } | Command::Reject { tool_id, .. } => {
                        vec![tool_id.clone()]
                    }
                    _ => Vec::new(),
                },
            };
            let outbox = session.outbox.clone();
            if let Some(decision) = decision_of(&local)
                && let Some(taken) = session.backend.tool_decision(decision, &outbox)
            {
                taken.map_err(|e| error(ErrorCode::RequestFailed, e.to_string()))?;
                let result = serde_json::to_value(ToolIdsResult { tool_ids })
                    .map_err(|e| error(ErrorCode::InternalError, e.to_string()))?;
                return Ok(Some(result));
            }
            let can_edit = session
                .capabilities
                .workspace
                .as_ref()
                .and_then(|w| w.apply_edit)
                .unwrap_or(false);
            if !can_edit {
                return Err(error(
                    ErrorCode::RequestFailed,
                    "this editor does not accept edits from the server (no workspace/applyEdit); edit the placeholder's status by hand",
                ));
            }
            let tool_ids = send_edit(session, local, 1)?;
            let result = serde_json::to_value(ToolIdsResult { tool_ids })
                .map_err(|e| error(ErrorCode::InternalError, e.to_string()))?;
            Ok(Some(result))
        }
    }
}

/// The decision a local command is, for the engine to take when it runs for the document.
fn decision_of(command: &Command) -> Option<crate::backend::ToolDecision> {
    use crate::backend::ToolDecision;
    Some(match command {
        Command::Approve { uri, tool_id } => ToolDecision::Approve {
            uri: uri.clone(),
            tool_id: tool_id.clone(),
        },
        Command::Reject {
            uri,
            tool_id,
            reason,
        } => ToolDecision::Reject {
            uri: uri.clone(),
            tool_id: tool_id.clone(),
            reason: reason.clone(),
        },
        Command::ApproveAll { uri } => ToolDecision::ApproveAll { uri: uri.clone() },
        Command::Engine(_) | Command::TrustFolder { .. } => return None,
    })
}

/// The client answered the edit of a local command: refused → rebuilt on the latest text.
pub(crate) fn on_edit_answer(session: &mut Session, command: Command, attempts: u8, applied: bool) {
    if applied {
        return;
    }
    if attempts >= EDIT_ATTEMPTS {
        session.show_message(
            lsp_types::MessageType::ERROR,
            format!(
                "flemma: the editor refused the edit of {} {attempts} times; run the command again",
                describe(&command)
            ),
        );
        return;
    }
    if let Err(e) = send_edit(session, command, attempts + 1) {
        // The placeholder may have been resolved meanwhile (by hand): say so.
        session.show_message(
            lsp_types::MessageType::WARNING,
            format!("flemma: {}", e.message),
        );
    }
}

fn describe(command: &Command) -> String {
    match command {
        Command::Approve { tool_id, .. } => format!("approving `{tool_id}`"),
        Command::Reject { tool_id, .. } => format!("rejecting `{tool_id}`"),
        Command::ApproveAll { .. } => "approving every pending tool call".into(),
        Command::TrustFolder { .. } => "trusting the chat's folder".into(),
        Command::Engine(c) => format!("{c:?}"),
    }
}

/// Builds the command's edits on the mirror and sends them as one versioned applyEdit.
/// Returns the tool ids the edit touches.
fn send_edit(session: &mut Session, command: Command, attempt: u8) -> HandlerResult<Vec<String>> {
    let encoding = session.encoding;
    let uri = command.uri().to_owned();
    let Some(doc) = session.documents.get(&uri) else {
        return Err(error(
            ErrorCode::InvalidParams,
            format!("{uri} is no longer open"),
        ));
    };
    let syntax = session.syntax(doc);
    let (tool_ids, edits) = placeholder_edits(syntax, &command)
        .map_err(|message| error(ErrorCode::InvalidParams, message))?;
    let params = lsp_types::ApplyWorkspaceEditParams {
        label: Some(format!("flemma: {}", describe(&command))),
        edit: to_proto::workspace_edit(doc, syntax.text(), &edits, encoding),
    };
    session.request::<ApplyWorkspaceEdit>(
        params,
        ResponseHandler::CommandEdit {
            command,
            attempts: attempt,
        },
    );
    Ok(tool_ids)
}

/// The edits approving or rejecting placeholders, built with `flemma_syntax`'s edits: the
/// status is rewritten and meta kept; a reject with a reason becomes an error result whose
/// fence holds `User feedback: <reason>` (chat-format.md §7.2).
fn placeholder_edits(
    doc: &Document,
    command: &Command,
) -> Result<(Vec<String>, Vec<TextEdit>), String> {
    // One edit builder for every front end (`flemmad approve`/`reject` use it too).
    let failed = |error: flemma_ide::actions::ActionError| error.to_string();
    match command {
        Command::Approve { tool_id, .. } => {
            let edits =
                flemma_ide::actions::approve(doc, std::slice::from_ref(tool_id)).map_err(failed)?;
            Ok((vec![tool_id.clone()], edits))
        }
        Command::Reject {
            tool_id, reason, ..
        } => {
            let edit =
                flemma_ide::actions::reject(doc, tool_id, reason.as_deref()).map_err(failed)?;
            Ok((vec![tool_id.clone()], vec![edit]))
        }
        Command::ApproveAll { .. } => flemma_ide::actions::approve_all(doc).map_err(failed),
        Command::Engine(_) | Command::TrustFolder { .. } => Ok((Vec::new(), Vec::new())),
    }
}
