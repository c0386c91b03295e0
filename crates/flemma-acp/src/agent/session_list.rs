//! `session/list`: the used chats of a project's sessions folder, newest first.

use std::collections::HashMap;
use std::path::PathBuf;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{ListSessionsRequest, ListSessionsResponse, SessionInfo};

use crate::chats::sessions_dir;

use super::state::{State, invalid, lock};

/// The chats of `cwd`'s sessions folder (without `cwd`, of the folders of the sessions this
/// connection knows), newest first, a page at a time; unused ones are left out.
pub(super) fn list_sessions(
    state: &State,
    request: ListSessionsRequest,
) -> Result<ListSessionsResponse, Error> {
    let cwds: Vec<PathBuf> = match request.cwd {
        Some(cwd) if cwd.is_absolute() => vec![cwd],
        Some(cwd) => {
            return Err(invalid(format!(
                "cwd `{}` is not an absolute path: session/list takes the project's absolute path",
                cwd.display()
            )));
        }
        None => {
            let mut cwds: Vec<PathBuf> = lock(&state.sessions)
                .values()
                .map(|session| session.cwd.clone())
                .collect();
            cwds.sort();
            cwds.dedup();
            cwds
        }
    };
    let mut entries = Vec::new();
    let mut cwd_of = HashMap::new();
    for cwd in cwds {
        for entry in state.backend.chats_in(&sessions_dir(&cwd)) {
            cwd_of.insert(entry.path.clone(), cwd.clone());
            entries.push(entry);
        }
    }
    let (listed, next) = crate::list::page(entries, request.cursor.as_deref(), |path| {
        state.backend.read_chat(path).ok()
    });
    let sessions = listed
        .into_iter()
        .map(|listed| {
            let cwd = cwd_of.get(&listed.path).cloned().unwrap_or_default();
            SessionInfo::new(listed.path.display().to_string(), cwd)
                .title(listed.title)
                .updated_at(listed.updated_at)
        })
        .collect();
    Ok(ListSessionsResponse::new(sessions).next_cursor(next))
}
