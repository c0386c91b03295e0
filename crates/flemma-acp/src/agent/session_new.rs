//! `session/new`: a new chat under the project's sessions folder, and the editor's MCP servers.

use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{McpServer, NewSessionRequest};
use agent_client_protocol::{Client, Error};

use crate::{
    backend::McpServerSpec,
    chats::{new_chat_text, sessions_dir},
};

use super::follow::follow;
use super::state::{Session, State, invalid, refused};

/// The servers flemmad runs, and a line for each it does not (an SSE server: only stdio and
/// streamable HTTP are advertised).
pub(super) fn mcp_specs(servers: Vec<McpServer>) -> (Vec<McpServerSpec>, Vec<String>) {
    let mut unused = Vec::new();
    let specs = servers
        .into_iter()
        .filter_map(|server| match server {
            McpServer::Stdio(stdio) => Some(McpServerSpec::Stdio {
                name: stdio.name,
                command: stdio.command,
                args: stdio.args,
                env: stdio.env.into_iter().map(|v| (v.name, v.value)).collect(),
            }),
            McpServer::Http(http) => Some(McpServerSpec::Http {
                name: http.name,
                url: http.url,
                headers: http
                    .headers
                    .into_iter()
                    .map(|h| (h.name, h.value))
                    .collect(),
            }),
            McpServer::Sse(sse) => {
                unused.push(format!(
                    "the editor's MCP server `{}` is not used: it speaks SSE, and flemmad speaks stdio and streamable HTTP to MCP servers",
                    sse.name
                ));
                None
            }
            _ => {
                unused.push("an MCP server of a transport flemmad does not know is not used".into());
                None
            }
        })
        .collect();
    (specs, unused)
}

/// A fresh chat name: the time and a counter, distinct for every session of the process and
/// (with the pid) of every process.
pub(super) fn chat_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "session-{}-{}-{}.chat",
        now.as_secs(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub(super) fn new_session(
    state: &State,
    request: NewSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let cwd = request.cwd;
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "cwd `{}` is not an absolute path: session/new takes the project's absolute path",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(invalid(format!(
            "cwd `{}` is not a folder: session/new takes the project's folder",
            cwd.display()
        )));
    }
    let asked = crate::delegation::asked_by(request.meta.as_ref()).map_err(invalid)?;
    let delegated = asked.is_some();
    let path = asked.unwrap_or_else(|| sessions_dir(&cwd).join(chat_name()));
    let text = new_chat_text(&path, &cwd);
    state.backend.create_chat(&path, &text).map_err(refused)?;
    let session = open(
        state,
        path,
        cwd,
        Some(text),
        delegated,
        request.mcp_servers,
        cx,
    );
    tracing::info!(chat = %session.id, "session/new");
    Ok(session.id.clone())
}

/// The session on `path` in this connection (new, loaded, resumed or forked): its chat
/// followed (the engine's events of turns other editors start) and the editor's MCP servers
/// started for it.
pub(super) fn open(
    state: &State,
    path: std::path::PathBuf,
    cwd: std::path::PathBuf,
    created: Option<String>,
    delegated: bool,
    servers: Vec<McpServer>,
    cx: &ConnectionTo<Client>,
) -> std::sync::Arc<Session> {
    let session = state.add(path, cwd, created, delegated, cx);
    follow(state, &session, cx);
    mcp(state, &session, servers);
    session
}

fn mcp(state: &State, session: &Session, servers: Vec<McpServer>) {
    if servers.is_empty() {
        return;
    }
    let (specs, mut unused) = mcp_specs(servers);
    unused.extend(state.backend.mcp_servers(&session.path, specs));
    for note in unused {
        tracing::warn!(chat = %session.id, "{note}");
    }
}
