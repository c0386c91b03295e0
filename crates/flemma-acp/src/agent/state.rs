//! The connection's state: its sessions, what the client said it does, the tools allowed always, and the settings last told; shared by every handler.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionId, SessionNotification};
use agent_client_protocol::{Client, Error};
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{
    DocumentParams, FlemmaRequest, FlemmaResponse, RejectParams, ToolCallParams,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    backend::{Backend, Settings, TurnEvent},
    files::ClientFiles,
    modes,
};

/// The agent's state: the backend, the sessions this connection knows, and what the client
/// said at `initialize` it does with files (`fs.readTextFile`, `fs.writeTextFile`).
pub(super) struct State {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(super) client_fs: Mutex<(bool, bool)>,
    /// The client advertised `session.compaction`: compactions are `compaction_update`s.
    pub(super) client_compaction: std::sync::atomic::AtomicBool,
    /// Cancelled when the client's input ends (every session's `gone` with it).
    pub(super) closed: CancellationToken,
    /// The tools the user allowed always, kept by the connection's owner.
    pub(super) allowed: AllowedAlways,
}

/// One session: its chat, its working directory, and the prompt that runs.
pub(super) struct Session {
    pub(super) id: String,
    pub(super) path: PathBuf,
    pub(super) cwd: PathBuf,
    /// The cancel signal of the prompt that runs, if one does.
    pub(super) running: Mutex<Option<watch::Sender<bool>>>,
    /// The client's files, when it reads or writes them.
    pub(super) files: Option<ClientFiles>,
    /// The text `session/new` created the chat with (`None` for a loaded chat).
    pub(super) created: Option<String>,
    /// The title last told to the client (`session_info_update`).
    pub(super) title: Mutex<Option<String>>,
    /// The settings last told to the client (mode, model, thinking level).
    pub(super) settings: Mutex<Option<Settings>>,
    /// The calls the running prompt told the client about, which the tools' file requests
    /// wait for.
    pub(super) announced: Arc<crate::files::Announced>,
    /// The chat as the client last saw it (at new, load, resume, fork, or a prompt's end):
    /// turns added since by another editor are told at the next prompt.
    pub(super) known: Mutex<Option<String>>,
    /// The session was made for another flemmad's `ask_agent`: its prompts are a model's
    /// text, written as text (neither templates nor file references nor structure).
    pub(super) delegated: bool,
    /// Where the chat's events go while this connection's own prompt (or slash command) runs;
    /// otherwise they are another front end's turn, which [`super::follow`] streams live.
    pub(super) own_events: Mutex<Option<tokio::sync::mpsc::UnboundedSender<TurnEvent>>>,
    /// A turn another front end started (an LSP editor's `flemma.send`) runs and is streamed.
    pub(super) other_runs: AtomicBool,
    /// Cancelled when the session is closed, deleted or loaded again, or the client's input
    /// ends: its follower stops.
    pub(super) gone: CancellationToken,
    /// The tools the user allowed always (the connection's owner's table).
    pub(super) allowed: AllowedAlways,
}

/// The tools the user allowed always, by session: for the rest of the session, across the
/// connections its owner serves (a daemon keeps one while an editor reconnects and loads the
/// session again; `flemmad acp` on its own, one per process). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct AllowedAlways(Arc<Mutex<HashMap<String, HashSet<String>>>>);

impl AllowedAlways {
    /// Whether the user allowed `tool` always in `session`.
    pub fn contains(&self, session: &str, tool: &str) -> bool {
        lock(&self.0)
            .get(session)
            .is_some_and(|tools| tools.contains(tool))
    }

    /// The user allowed `tool` always in `session`.
    pub fn allow(&self, session: &str, tool: String) {
        lock(&self.0)
            .entry(session.to_owned())
            .or_default()
            .insert(tool);
    }
}

/// How often, and how many times, a cancel that found nothing running is tried again.
pub(super) const CANCEL_RETRY: std::time::Duration = std::time::Duration::from_millis(50);
pub(super) const CANCEL_TRIES: u32 = 20;

/// The typed `flemma/*` request `request` makes of the chat's URI, through the backend.
pub(super) fn engine(
    backend: &dyn Backend,
    path: &Path,
    request: impl FnOnce(String) -> FlemmaRequest,
) -> Result<FlemmaResponse, RequestError> {
    backend.call(path, request(path.to_string_lossy().into_owned()))
}

/// The ACP error of a refused `flemma/*` request: its code and message as they are.
pub(super) fn refused(error: RequestError) -> Error {
    Error::new(error.code, error.message)
}

/// Cancels what runs for the chat at `path`; `false` when nothing ran.
pub(super) fn cancel(backend: &dyn Backend, path: &Path) -> bool {
    engine(backend, path, |uri| {
        FlemmaRequest::Cancel(DocumentParams { uri })
    })
    .is_ok()
}

/// Approves (`allowed`) or rejects the pending call `tool_id` of the chat at `path`.
pub(super) fn decide(
    backend: &dyn Backend,
    path: &Path,
    tool_id: &str,
    allowed: bool,
) -> Result<FlemmaResponse, RequestError> {
    let tool_id = tool_id.to_owned();
    engine(backend, path, |uri| match allowed {
        true => FlemmaRequest::Approve(ToolCallParams { uri, tool_id }),
        false => FlemmaRequest::Reject(RejectParams {
            uri,
            tool_id,
            reason: None,
        }),
    })
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn invalid(message: impl Into<String>) -> Error {
    Error::new(
        flemma_protocol::error::codes::INVALID_PARAMS,
        message.into(),
    )
}

/// A prompt refused because a turn another front end sent runs in the chat.
pub(super) fn another_turn_runs() -> Error {
    invalid(
        "a turn sent from another editor runs in this chat (its updates stream into this session): wait for it to end, then prompt again; this prompt was not written",
    )
}

pub(super) fn internal(message: impl Into<String>) -> Error {
    Error::new(
        flemma_protocol::error::codes::INTERNAL_ERROR,
        message.into(),
    )
}

impl State {
    pub(super) fn session(&self, id: &SessionId) -> Result<Arc<Session>, Error> {
        lock(&self.sessions).get(&*id.0).cloned().ok_or_else(|| {
            invalid(format!(
                "unknown sessionId `{}`: start a session with session/new, or open a chat with session/load (its sessionId is the chat's absolute path)",
                id.0
            ))
        })
    }

    /// A session of the chat at `path`; its tools use the client's files when it has them.
    /// The caller starts its follower (`follow::follow`) once it is set up.
    pub(super) fn add(
        &self,
        path: PathBuf,
        cwd: PathBuf,
        created: Option<String>,
        delegated: bool,
        cx: &ConnectionTo<Client>,
    ) -> Arc<Session> {
        let id = path.display().to_string();
        let (reads, writes) = *lock(&self.client_fs);
        let announced = Arc::new(crate::files::Announced::default());
        let files = ClientFiles::new(
            cx.clone(),
            SessionId::new(id.clone()),
            reads,
            writes,
            self.closed.clone(),
            announced.clone(),
        );
        if let Some(files) = &files {
            self.backend.client_files(&path, files.clone());
        }
        let session = Arc::new(Session {
            id: id.clone(),
            path,
            cwd,
            running: Mutex::default(),
            files,
            created,
            title: Mutex::new(None),
            settings: Mutex::new(None),
            delegated,
            announced,
            known: Mutex::new(None),
            own_events: Mutex::new(None),
            other_runs: AtomicBool::new(false),
            gone: self.closed.child_token(),
            allowed: self.allowed.clone(),
        });
        *lock(&session.known) = self.backend.read_chat(&session.path).ok();
        // A session loaded again replaces the earlier one (and its files, above).
        if let Some(earlier) = lock(&self.sessions).insert(id, session.clone()) {
            earlier.gone.cancel();
        }
        session
    }
}

/// The chat a `sessionId` names (a session is its chat's absolute path).
pub(super) fn chat_of(session_id: &SessionId) -> Result<PathBuf, Error> {
    let path = PathBuf::from(&*session_id.0);
    if !path.is_absolute() || path.extension().is_none_or(|ext| ext != "chat") {
        return Err(invalid(format!(
            "sessionId `{}` is not the absolute path of a .chat file: flemmad's sessions are chat files",
            session_id.0
        )));
    }
    Ok(path)
}

/// The session's working directory: the client's when absolute, else the chat's folder.
pub(super) fn cwd_of(cwd: PathBuf, chat: &Path) -> PathBuf {
    if cwd.is_absolute() {
        cwd
    } else {
        chat.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

/// The settings of the session `id` for the responses of `session/new`, `load`, `resume` and
/// `fork` (none when its configuration does not resolve: the client then shows no picker),
/// remembered as told.
pub(super) fn session_settings(state: &State, id: &str) -> Option<Settings> {
    let settings = state.backend.settings(Path::new(id)).ok()?;
    if let Some(session) = lock(&state.sessions).get(id) {
        *lock(&session.settings) = Some(settings.clone());
    }
    Some(settings)
}

/// Tells the client the session's settings when they are not what it was last told (the
/// mode's `current_mode_update` only when the mode changed).
pub(super) fn tell_settings(
    session: &Session,
    cx: &ConnectionTo<Client>,
    settings: Settings,
) -> Result<(), Error> {
    let mut told = lock(&session.settings);
    if told.as_ref() == Some(&settings) {
        return Ok(());
    }
    let told_mode = told.as_ref().map(|s| s.mode);
    modes::announce(cx, &session.id, &settings, told_mode)?;
    *told = Some(settings);
    Ok(())
}

/// The session's settings as they are now, told to the client when they changed since it
/// was last told (the chat's frontmatter was edited, another editor switched its model).
pub(super) fn retell_settings(
    backend: &dyn Backend,
    session: &Session,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    match backend.settings(&session.path) {
        Ok(settings) => tell_settings(session, cx, settings),
        Err(error) => {
            tracing::info!(chat = %session.id, %error, "the session's settings are unknown");
            Ok(())
        }
    }
}

/// The slash commands of a session, told once the client knows the session (after the
/// answer that names it).
pub(super) fn announce_commands(cx: &ConnectionTo<Client>, session: &str) -> Result<(), Error> {
    cx.send_notification(SessionNotification::new(
        session.to_owned(),
        crate::commands::available(),
    ))
}
