//! `session/close` and `session/delete` (the chat moved to the trash).

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{DeleteSessionResponse, SessionId};

use super::state::{State, cancel, chat_of, lock, refused};

/// `session/close`: the prompt that runs is cancelled (what it wrote stays in the chat) and
/// the session is forgotten by this connection; its chat stays where it is. Closing a session
/// this connection does not know is not an error.
pub(super) fn close_session(state: &State, session_id: &SessionId) {
    let Some(session) = lock(&state.sessions).remove(&*session_id.0) else {
        return;
    };
    session.gone.cancel();
    if let Some(signal) = lock(&session.running).as_ref() {
        let _ = signal.send(true);
    }
    if let Some(files) = &session.files {
        state.backend.client_gone(&session.path, files);
    }
    tracing::info!(chat = %session.id, "session/close");
}

/// `session/delete`: the session is closed and its chat moved to flemmad's trash (never
/// destroyed); the answer's `_meta.flemma.trashedTo` says where it lies.
pub(super) fn delete_session(
    state: &State,
    session_id: &SessionId,
) -> Result<DeleteSessionResponse, Error> {
    let path = chat_of(session_id)?;
    close_session(state, session_id);
    cancel(&*state.backend, &path);
    let trashed = state.backend.trash_chat(&path).map_err(refused)?;
    tracing::info!(chat = %path.display(), to = %trashed.display(), "session/delete");
    let meta = serde_json::Map::from_iter([(
        "flemma".to_owned(),
        serde_json::json!({"trashedTo": trashed}),
    )]);
    Ok(DeleteSessionResponse::default().meta(meta))
}
