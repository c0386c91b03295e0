//! An asked agent's question, put to the user through the editor: when an agent `ask_agent`
//! asked wants permission for one of its tool calls (`agent:permission-required`), every
//! session that has the chat open asks with `window/showMessageRequest` (`Allow` / `Reject`);
//! the choice is `flemma/approve` or `flemma/reject` with the question's id, as the
//! `flemma.approve` and `flemma.reject` commands would send it. The first answer counts (the
//! engine refuses later ones); a dismissed message leaves the question waiting for those
//! commands.

use flemma_protocol::event::PermissionAsked;
use flemma_protocol::methods::{FlemmaRequest, RejectParams, ToolCallParams};
use serde_json::Value;

use crate::session::{ResponseHandler, Session};

const ALLOW: &str = "Allow";
const REJECT: &str = "Reject";

/// Asks the user about the question `asked` (when this session has `uri` open).
pub(crate) fn ask(session: &mut Session, uri: &str, asked: &PermissionAsked) {
    if !session.documents.contains_key(uri) {
        return;
    }
    let id = asked.permission_id.clone();
    let message = format!(
        "flemma: {} (asked by ask_agent) wants to: {}. Allow it? (`flemma.approve` / `flemma.reject` with `{id}` answer it too)",
        asked.agent, asked.title,
    );
    let actions = [ALLOW, REJECT]
        .into_iter()
        .map(|title| lsp_types::MessageActionItem {
            title: title.to_owned(),
            properties: Default::default(),
        })
        .collect();
    session.request::<lsp_types::request::ShowMessageRequest>(
        lsp_types::ShowMessageRequestParams {
            typ: lsp_types::MessageType::WARNING,
            message,
            actions: Some(actions),
        },
        ResponseHandler::AgentPermission {
            uri: uri.to_owned(),
            id,
        },
    );
}

/// The user chose (`answer`: the action item, or nothing when dismissed): the request that
/// choice is (`flemma/approve` or `flemma/reject` of the question `id`), none when dismissed.
pub(crate) fn decision(uri: &str, id: &str, answer: Option<Value>) -> Option<FlemmaRequest> {
    let chosen = answer
        .and_then(|value| {
            serde_json::from_value::<Option<lsp_types::MessageActionItem>>(value).ok()
        })
        .flatten();
    match chosen.as_ref().map(|item| item.title.as_str()) {
        Some(ALLOW) => Some(FlemmaRequest::Approve(ToolCallParams {
            uri: uri.to_owned(),
            tool_id: id.to_owned(),
        })),
        Some(REJECT) => Some(FlemmaRequest::Reject(RejectParams {
            uri: uri.to_owned(),
            tool_id: id.to_owned(),
            reason: None,
        })),
        _ => None,
    }
}
