//! `session/load` (with the replay), `session/resume` (without) and `session/fork` (a copy of the chat).

use std::path::Path;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ForkSessionRequest;
use agent_client_protocol::v1::schema::{
    LoadSessionRequest, ResumeSessionRequest, SessionNotification,
};
use agent_client_protocol::{Client, Error};

use crate::{prompt, replay};

use super::session_new::{chat_name, open};
use super::state::{State, chat_of, cwd_of, invalid, refused};

pub(super) fn load_session(
    state: &State,
    request: LoadSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    let path = chat_of(&request.session_id)?;
    let text = state.backend.read_chat(&path).map_err(refused)?;
    let cwd = cwd_of(request.cwd, &path);
    for update in replay::history(&text, &cwd) {
        cx.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
    }
    let session = open(state, path, cwd, None, false, request.mcp_servers, cx);
    tracing::info!(chat = %session.id, "session/load");
    Ok(())
}

/// `session/resume`: the session again, on this connection, without replaying its history
/// (the client still shows it). The chat must exist.
pub(super) fn resume_session(
    state: &State,
    request: ResumeSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    let path = chat_of(&request.session_id)?;
    state.backend.read_chat(&path).map_err(refused)?;
    let cwd = cwd_of(request.cwd, &path);
    let session = open(state, path, cwd, None, false, request.mcp_servers, cx);
    tracing::info!(chat = %session.id, "session/resume");
    Ok(())
}

/// `session/fork` (unstable): a new session whose chat is a copy of the session's, next to it
/// (its file references and `tools.bash.cwd` keep their meaning), whole or — with
/// `_meta.flemma.messages: N` — its frontmatter and first N messages. A fork may not end with
/// an answer whose tool calls it cuts away from their results (they would run again).
pub(super) fn fork_session(
    state: &State,
    request: ForkSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let original = chat_of(&request.session_id)?;
    let text = state.backend.read_chat(&original).map_err(refused)?;
    let keep = request
        .meta
        .as_ref()
        .and_then(|meta| meta.get("flemma"))
        .and_then(|flemma| flemma.get("messages"));
    let text = match keep {
        None => text,
        Some(count) => {
            let count = count
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| invalid("_meta.flemma.messages must be a count of messages"))?;
            prompt::first_messages(&text, count).map_err(invalid)?
        }
    };
    let folder = original.parent().unwrap_or(Path::new("/"));
    let path = folder.join(chat_name());
    state.backend.create_chat(&path, &text).map_err(refused)?;
    let cwd = cwd_of(request.cwd, &path);
    let session = open(state, path, cwd, None, false, request.mcp_servers, cx);
    tracing::info!(chat = %session.id, from = %original.display(), "session/fork");
    Ok(session.id.clone())
}
