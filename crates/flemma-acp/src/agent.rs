//! The connection: one handler per ACP method over newline-delimited JSON-RPC, and the turn of
//! one `session/prompt` (write the prompt, run the engine, stream what it does, ask for
//! permissions, answer with the stop reason).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, ContentBlock,
    ContentChunk, DeleteSessionRequest, DeleteSessionResponse, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse,
    PermissionOption, PermissionOptionKind, PromptCapabilities, PromptRequest, PromptResponse,
    RequestPermissionOutcome, RequestPermissionRequest, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities,
    SessionDeleteCapabilities, SessionId, SessionInfo, SessionListCapabilities,
    SessionNotification, SessionResumeCapabilities, SessionUpdate, StopReason, TextContent,
    ToolCallUpdate, ToolCallUpdateFields, UsageUpdate,
};
use agent_client_protocol::v1::schema::{
    CompactionStatus, CompactionUpdate, Diff, ForkSessionRequest, ForkSessionResponse,
    SessionConfigId, SessionForkCapabilities, SessionInfoUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, ToolCallContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo as _, Error, Lines};
use flemma_protocol::event::StopLabel;
use futures::SinkExt as _;
use serde_json::Value;
use tokio::sync::watch;

use crate::modes::Setting;
use crate::{
    Backend, ClientFiles, McpServerSpec, Settings, TurnEvent, modes, new_chat_text, prompt, replay,
    sessions_dir,
};

/// Serves ACP on `input`/`output` (stdin and stdout) until the client closes its side. Lines
/// are read and written on threads of their own (blocking IO), so the runtime needs no
/// standard-stream support.
pub async fn serve(
    backend: Arc<dyn Backend>,
    input: impl std::io::BufRead + Send + 'static,
    mut output: impl std::io::Write + Send + 'static,
) -> Result<(), Error> {
    let (line_tx, line_rx) = futures::channel::mpsc::unbounded::<String>();
    let initializing = Arc::new(Initializing::default());
    // Every line out goes through one writer, so nothing interleaves.
    let answered = initializing.clone();
    let writer = std::thread::Builder::new()
        .name("acp-out".into())
        .spawn(move || {
            for line in futures::executor::block_on_stream(line_rx) {
                let written = output
                    .write_all(line.as_bytes())
                    .and_then(|()| output.write_all(b"\n"))
                    .and_then(|()| output.flush());
                answered.written(&line);
                if written.is_err() {
                    break;
                }
            }
            answered.closed();
        })
        .map_err(Error::into_internal_error)?;
    let (in_tx, in_rx) = futures::channel::mpsc::unbounded::<std::io::Result<String>>();
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let input_closed = closed.clone();
    std::thread::Builder::new()
        .name("acp-in".into())
        .spawn(move || {
            for line in input.lines() {
                let stop = line.is_err();
                if matches!(&line, Ok(text) if text.trim().is_empty()) {
                    continue;
                }
                let initialize = line.as_ref().ok().and_then(|text| initialize_id(text));
                if let Some(id) = &initialize {
                    initializing.expect(id.clone());
                }
                if in_tx.unbounded_send(line).is_err() || stop {
                    break;
                }
                // What follows `initialize` waits for its answer: the SDK refuses a request
                // that arrives before it (a client may send `session/new` right after).
                if initialize.is_some() {
                    initializing.wait();
                }
            }
            // The client is gone: its files are no longer reachable, even while a prompt the
            // engine still runs keeps the connection's tasks alive.
            input_closed.store(true, std::sync::atomic::Ordering::SeqCst);
        })
        .map_err(Error::into_internal_error)?;
    let outgoing = line_tx
        .clone()
        .sink_map_err(|_| std::io::Error::other("the output closed"));
    let state = Arc::new(State {
        backend,
        sessions: Mutex::default(),
        client_fs: Mutex::default(),
        client_compaction: std::sync::atomic::AtomicBool::new(false),
        closed,
    });
    let result = builder(state.clone())
        .connect_to(Lines::new(outgoing, in_rx))
        .await;
    // The client is gone: its sessions' tools use the disk again, and a chat it created but
    // never used is not left behind.
    for session in lock(&state.sessions).values() {
        if let Some(files) = &session.files {
            state.backend.client_gone(&session.path, files);
        }
        if let Some(created) = &session.created {
            match state
                .backend
                .remove_chat_if_unchanged(&session.path, created)
            {
                Ok(true) => tracing::info!(chat = %session.id, "removed the unused session's chat"),
                Ok(false) => {}
                Err(error) => tracing::warn!(chat = %session.id, "{error}"),
            }
        }
    }
    drop(line_tx);
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    result
}

/// The id of an `initialize` request, when `line` is one.
fn initialize_id(line: &str) -> Option<serde_json::Value> {
    if !line.contains("initialize") {
        return None;
    }
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    (message.get("method")? == "initialize").then(|| message.get("id").cloned())?
}

/// The `initialize` request whose answer has not been written yet: the input waits for it.
#[derive(Default)]
struct Initializing {
    waiting_for: Mutex<Option<serde_json::Value>>,
    answered: std::sync::Condvar,
}

impl Initializing {
    /// How long the input waits for the answer at most.
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

    fn expect(&self, id: serde_json::Value) {
        *lock(&self.waiting_for) = Some(id);
    }

    /// A line was written: the answer when it is a response with the awaited id.
    fn written(&self, line: &str) {
        let mut waiting = lock(&self.waiting_for);
        let Some(id) = waiting.as_ref() else {
            return;
        };
        let answers = serde_json::from_str::<serde_json::Value>(line).is_ok_and(|message| {
            message.get("id") == Some(id)
                && (message.get("result").is_some() || message.get("error").is_some())
        });
        if answers {
            *waiting = None;
            self.answered.notify_all();
        }
    }

    /// The output closed: nobody waits any more.
    fn closed(&self) {
        *lock(&self.waiting_for) = None;
        self.answered.notify_all();
    }

    fn wait(&self) {
        let waiting = lock(&self.waiting_for);
        let _ = self
            .answered
            .wait_timeout_while(waiting, Self::LIMIT, |waiting| waiting.is_some());
    }
}

/// The agent's state: the backend, the sessions this connection knows, and what the client
/// said at `initialize` it does with files (`fs.readTextFile`, `fs.writeTextFile`).
struct State {
    backend: Arc<dyn Backend>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    client_fs: Mutex<(bool, bool)>,
    /// The client advertised `session.compaction`: compactions are `compaction_update`s.
    client_compaction: std::sync::atomic::AtomicBool,
    /// Set when the client's input ends.
    closed: Arc<std::sync::atomic::AtomicBool>,
}

/// One session: its chat, its working directory, and the prompt that runs.
struct Session {
    id: String,
    path: PathBuf,
    cwd: PathBuf,
    /// The cancel signal of the prompt that runs, if one does.
    running: Mutex<Option<watch::Sender<bool>>>,
    /// The client's files, when it reads or writes them.
    files: Option<ClientFiles>,
    /// The text `session/new` created the chat with (`None` for a loaded chat).
    created: Option<String>,
    /// The title last told to the client (`session_info_update`).
    title: Mutex<Option<String>>,
    /// The settings last told to the client (mode, model, thinking level).
    settings: Mutex<Option<Settings>>,
    /// The calls the running prompt told the client about, which the tools' file requests
    /// wait for.
    announced: Arc<crate::files::Announced>,
    /// The chat as the client last saw it (at new, load, resume, fork, or a prompt's end):
    /// turns added since by another editor are told at the next prompt.
    known: Mutex<Option<String>>,
    /// The session was made for another flemmad's `ask_agent`: its prompts are a model's
    /// text, written as text (neither templates nor file references nor structure).
    delegated: bool,
}

/// The tools the user allowed always, by session: for the rest of the session, across the
/// connections of one process (a daemon keeps them while an editor reconnects and loads the
/// session again).
fn allowed_always_table() -> &'static Mutex<HashMap<String, HashSet<String>>> {
    static TABLE: std::sync::OnceLock<Mutex<HashMap<String, HashSet<String>>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(Default::default)
}

fn always_allowed(session: &str, tool: &str) -> bool {
    lock(allowed_always_table())
        .get(session)
        .is_some_and(|tools| tools.contains(tool))
}

fn allow_always(session: &str, tool: String) {
    lock(allowed_always_table())
        .entry(session.to_owned())
        .or_default()
        .insert(tool);
}

/// How often, and how many times, a cancel that found nothing running is tried again.
const CANCEL_RETRY: std::time::Duration = std::time::Duration::from_millis(50);
const CANCEL_TRIES: u32 = 20;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(-32602, message.into())
}

fn internal(message: impl Into<String>) -> Error {
    Error::new(-32603, message.into())
}

impl State {
    fn session(&self, id: &SessionId) -> Result<Arc<Session>, Error> {
        lock(&self.sessions).get(&*id.0).cloned().ok_or_else(|| {
            invalid(format!(
                "unknown sessionId `{}`: start a session with session/new, or open a chat with session/load (its sessionId is the chat's absolute path)",
                id.0
            ))
        })
    }

    /// A session of the chat at `path`; its tools use the client's files when it has them.
    fn add(
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
        });
        *lock(&session.known) = self.backend.read_chat(&session.path).ok();
        // A session loaded again replaces the earlier one (and its files, above).
        lock(&self.sessions).insert(id, session.clone());
        session
    }
}

/// The servers flemmad runs, and a line for each it does not (an SSE server: only stdio and
/// streamable HTTP are advertised).
fn mcp_specs(servers: Vec<McpServer>) -> (Vec<McpServerSpec>, Vec<String>) {
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
fn chat_name() -> String {
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

fn builder(state: Arc<State>) -> impl agent_client_protocol::ConnectTo<Client> {
    let on_initialize = state.clone();
    let on_new = state.clone();
    let on_load = state.clone();
    let on_resume = state.clone();
    let on_close = state.clone();
    let on_delete = state.clone();
    let on_fork = state.clone();
    let on_list = state.clone();
    let on_set_mode = state.clone();
    let on_set_option = state.clone();
    let on_prompt = state.clone();
    let on_cancel = state;
    Agent
        .v1()
        .name("flemmad")
        .on_receive_request(
            async move |request: InitializeRequest,
                        responder: Responder<InitializeResponse>,
                        _cx: ConnectionTo<Client>| {
                let fs = &request.client_capabilities.fs;
                *lock(&on_initialize.client_fs) = (fs.read_text_file, fs.write_text_file);
                let compaction = (request.client_capabilities.session.as_ref())
                    .is_some_and(|session| session.compaction.is_some());
                on_initialize
                    .client_compaction
                    .store(compaction, Ordering::Relaxed);
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .session_capabilities(
                                    SessionCapabilities::new()
                                        .list(SessionListCapabilities::new())
                                        .resume(SessionResumeCapabilities::new())
                                        .close(SessionCloseCapabilities::new())
                                        .delete(SessionDeleteCapabilities::new())
                                        .fork(SessionForkCapabilities::new()),
                                )
                                // Stdio servers always; HTTP (streamable) too; not SSE.
                                .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
                                .prompt_capabilities(
                                    PromptCapabilities::new()
                                        .image(false)
                                        .audio(false)
                                        .embedded_context(true),
                                ),
                        )
                        .agent_info(Implementation::new("flemmad", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                match new_session(&on_new, request, &cx) {
                    Ok(id) => {
                        let settings = session_settings(&on_new, &id);
                        responder.respond(
                            NewSessionResponse::new(id.clone())
                                .modes(settings.as_ref().map(|s| modes::mode_state(s.mode)))
                                .config_options(settings.as_ref().map(modes::config_options)),
                        )?;
                        announce_commands(&cx, &id)
                    }
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                match load_session(&on_load, request, &cx) {
                    Ok(()) => {
                        let settings = session_settings(&on_load, &id);
                        responder.respond(
                            LoadSessionResponse::new()
                                .modes(settings.as_ref().map(|s| modes::mode_state(s.mode)))
                                .config_options(settings.as_ref().map(modes::config_options)),
                        )?;
                        announce_commands(&cx, &id)
                    }
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest,
                        responder: Responder<ResumeSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                match resume_session(&on_resume, request, &cx) {
                    Ok(()) => {
                        let settings = session_settings(&on_resume, &id);
                        responder.respond(
                            ResumeSessionResponse::new()
                                .modes(settings.as_ref().map(|s| modes::mode_state(s.mode)))
                                .config_options(settings.as_ref().map(modes::config_options)),
                        )?;
                        announce_commands(&cx, &id)
                    }
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest,
                        responder: Responder<CloseSessionResponse>,
                        _cx: ConnectionTo<Client>| {
                close_session(&on_close, &request.session_id);
                responder.respond(CloseSessionResponse::default())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: DeleteSessionRequest,
                        responder: Responder<DeleteSessionResponse>,
                        _cx: ConnectionTo<Client>| {
                match delete_session(&on_delete, &request.session_id) {
                    Ok(response) => responder.respond(response),
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ForkSessionRequest,
                        responder: Responder<ForkSessionResponse>,
                        cx: ConnectionTo<Client>| {
                match fork_session(&on_fork, request, &cx) {
                    Ok(id) => {
                        let settings = session_settings(&on_fork, &id);
                        responder.respond(
                            ForkSessionResponse::new(id.clone())
                                .modes(settings.as_ref().map(|s| modes::mode_state(s.mode)))
                                .config_options(settings.as_ref().map(modes::config_options)),
                        )?;
                        announce_commands(&cx, &id)
                    }
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest,
                        responder: Responder<ListSessionsResponse>,
                        _cx: ConnectionTo<Client>| {
                match list_sessions(&on_list, request) {
                    Ok(response) => responder.respond(response),
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        cx: ConnectionTo<Client>| {
                match set_setting(&on_set_mode, &request.session_id, None, &request.mode_id.0) {
                    Ok((session, settings)) => {
                        responder.respond(SetSessionModeResponse::new())?;
                        tell_settings(&session, &cx, settings)
                    }
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        cx: ConnectionTo<Client>| {
                let value = modes::value_text(&request.value).unwrap_or_default();
                match set_setting(
                    &on_set_option,
                    &request.session_id,
                    Some(&request.config_id),
                    &value,
                ) {
                    Ok((session, settings)) => {
                        responder.respond(SetSessionConfigOptionResponse::new(
                            modes::config_options(&settings),
                        ))?;
                        tell_settings(&session, &cx, settings)
                    }
                    Err(error) => responder.respond_with_error(error),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                start_prompt(&on_prompt, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx: ConnectionTo<Client>| {
                if let Ok(session) = on_cancel.session(&notification.session_id)
                    && let Some(signal) = lock(&session.running).as_ref()
                {
                    let _ = signal.send(true);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

fn new_session(
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
    state.backend.create_chat(&path, &text).map_err(internal)?;
    let session = state.add(path, cwd, Some(text), delegated, cx);
    mcp(state, &session, request.mcp_servers);
    tracing::info!(chat = %session.id, "session/new");
    Ok(session.id.clone())
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

/// The chats of `cwd`'s sessions folder (without `cwd`, of the folders of the sessions this
/// connection knows), newest first, a page at a time; unused ones are left out.
fn list_sessions(
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

/// The chat a `sessionId` names (a session is its chat's absolute path).
fn chat_of(session_id: &SessionId) -> Result<PathBuf, Error> {
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
fn cwd_of(cwd: PathBuf, chat: &Path) -> PathBuf {
    if cwd.is_absolute() {
        cwd
    } else {
        chat.parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

fn load_session(
    state: &State,
    request: LoadSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    let path = chat_of(&request.session_id)?;
    let text = state.backend.read_chat(&path).map_err(invalid)?;
    let cwd = cwd_of(request.cwd, &path);
    for update in replay::history(&text, &cwd) {
        cx.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
    }
    let session = state.add(path, cwd, None, false, cx);
    mcp(state, &session, request.mcp_servers);
    tracing::info!(chat = %session.id, "session/load");
    Ok(())
}

/// `session/resume`: the session again, on this connection, without replaying its history
/// (the client still shows it). The chat must exist.
fn resume_session(
    state: &State,
    request: ResumeSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    let path = chat_of(&request.session_id)?;
    state.backend.read_chat(&path).map_err(invalid)?;
    let cwd = cwd_of(request.cwd, &path);
    let session = state.add(path, cwd, None, false, cx);
    mcp(state, &session, request.mcp_servers);
    tracing::info!(chat = %session.id, "session/resume");
    Ok(())
}

/// `session/fork` (unstable): a new session whose chat is a copy of the session's, next to it
/// (its file references and `tools.bash.cwd` keep their meaning), whole or — with
/// `_meta.flemma.messages: N` — its frontmatter and first N messages. A fork may not end with
/// an answer whose tool calls it cuts away from their results (they would run again).
fn fork_session(
    state: &State,
    request: ForkSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let original = chat_of(&request.session_id)?;
    let text = state.backend.read_chat(&original).map_err(invalid)?;
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
    state.backend.create_chat(&path, &text).map_err(internal)?;
    let cwd = cwd_of(request.cwd, &path);
    let session = state.add(path, cwd, None, false, cx);
    mcp(state, &session, request.mcp_servers);
    tracing::info!(chat = %session.id, from = %original.display(), "session/fork");
    Ok(session.id.clone())
}

/// `session/close`: the prompt that runs is cancelled (what it wrote stays in the chat) and
/// the session is forgotten by this connection; its chat stays where it is. Closing a session
/// this connection does not know is not an error.
fn close_session(state: &State, session_id: &SessionId) {
    let Some(session) = lock(&state.sessions).remove(&*session_id.0) else {
        return;
    };
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
fn delete_session(state: &State, session_id: &SessionId) -> Result<DeleteSessionResponse, Error> {
    let path = chat_of(session_id)?;
    close_session(state, session_id);
    state.backend.cancel(&path);
    let trashed = state.backend.trash_chat(&path).map_err(invalid)?;
    tracing::info!(chat = %path.display(), to = %trashed.display(), "session/delete");
    let meta = serde_json::Map::from_iter([(
        "flemma".to_owned(),
        serde_json::json!({"trashedTo": trashed}),
    )]);
    Ok(DeleteSessionResponse::default().meta(meta))
}

/// The settings of the session `id` for the responses of `session/new`, `load`, `resume` and
/// `fork` (none when its configuration does not resolve: the client then shows no picker),
/// remembered as told.
fn session_settings(state: &State, id: &str) -> Option<Settings> {
    let settings = state.backend.settings(Path::new(id)).ok()?;
    if let Some(session) = lock(&state.sessions).get(id) {
        *lock(&session.settings) = Some(settings.clone());
    }
    Some(settings)
}

/// Tells the client the session's settings when they are not what it was last told (the
/// mode's `current_mode_update` only when the mode changed).
fn tell_settings(
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
fn retell_settings(
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

/// `session/set_mode` and `session/set_config_option`: the setting changed (the mode is the
/// one the session's tools will run in: its chat's frontmatter may make it stricter than
/// asked), and the settings as they are now. Not for a delegated session: its prompts come
/// from another model, whose harness must not widen what it may do.
fn set_setting(
    state: &State,
    id: &SessionId,
    config_id: Option<&SessionConfigId>,
    value: &str,
) -> Result<(Arc<Session>, Settings), Error> {
    let session = state.session(id)?;
    if session.delegated {
        return Err(invalid(
            "this session was opened for another agent's ask_agent: its settings are its chat's configuration's, set by flemmad's user",
        ));
    }
    let settings = state.backend.settings(&session.path).ok();
    let setting = modes::requested(config_id.map(|id| &*id.0), value, settings.as_ref())?;
    apply(&*state.backend, &session.path, setting).map_err(invalid)?;
    let settings = state.backend.settings(&session.path).map_err(internal)?;
    Ok((session, settings))
}

/// Changes the setting of the chat at `path`: what happened, in a sentence.
fn apply(backend: &dyn Backend, path: &Path, setting: Setting) -> Result<String, String> {
    match setting {
        Setting::Mode(mode) => backend.set_mode(path, mode).map(|effective| {
            if effective == mode {
                format!("mode: {} — {}", mode.as_str(), mode.description())
            } else {
                format!(
                    "mode: {} asked, but the chat's frontmatter sets the stricter {}, which wins",
                    mode.as_str(),
                    effective.as_str()
                )
            }
        }),
        Setting::Model(model) => backend.set_model(path, &model),
        Setting::ThoughtLevel(level) => backend.set_thought_level(path, &level),
    }
}

/// The slash commands of a session, told once the client knows the session (after the
/// answer that names it).
fn announce_commands(cx: &ConnectionTo<Client>, session: &str) -> Result<(), Error> {
    cx.send_notification(SessionNotification::new(
        session.to_owned(),
        crate::commands::available(),
    ))
}

/// `/model [NAME]` and `/mode [NAME]`: the choices without a name, else the setting changed
/// as its config option changes it (a model may be any `flemma.switch` takes), and the
/// settings told. The text to show.
fn setting_command(
    state: &State,
    session: &Session,
    command: &str,
    argument: &str,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let settings = match state.backend.settings(&session.path) {
        Ok(settings) => settings,
        Err(error) => return Ok(format!("/{command}: {error}")),
    };
    let (picker, what) = match command {
        "mode" => (Some(modes::mode_picker(settings.mode)), "modes"),
        _ => (settings.model.clone(), "models"),
    };
    if argument.is_empty() {
        return Ok(match picker {
            Some(picker) => modes::listing(what, &picker),
            None => format!(
                "/{command}: no {what} to choose: the chat's configuration does not resolve (`flemmad status` says why)"
            ),
        });
    }
    let setting = match command {
        "mode" => modes::requested(Some(modes::MODE_OPTION), argument, Some(&settings)),
        _ => Ok(Setting::Model(argument.to_owned())),
    };
    let answer = match setting.map_err(|e| e.message) {
        Ok(setting) => apply(&*state.backend, &session.path, setting),
        Err(error) => Err(error),
    };
    retell_settings(&*state.backend, session, cx)?;
    Ok(answer.unwrap_or_else(|error| format!("/{command}: {error}")))
}

/// `/compact [focus]` for a client that takes `compaction_update`s: one `in_progress`, then
/// `completed` with the line saying what was compacted (or `failed` with why); the text to
/// show as the command's answer, as for any client.
fn compact_command(
    state: &State,
    session: &Session,
    focus: &str,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let id = compaction_id();
    let tell = |update: CompactionUpdate| {
        cx.send_notification(SessionNotification::new(
            session.id.clone(),
            SessionUpdate::CompactionUpdate(update),
        ))
    };
    tell(CompactionUpdate::new(
        id.clone(),
        CompactionStatus::InProgress,
    ))?;
    match state.backend.slash_command(&session.path, "compact", focus) {
        Ok(text) => {
            tell(
                CompactionUpdate::new(id, CompactionStatus::Completed)
                    .summary(vec![ContentBlock::Text(TextContent::new(text.clone()))]),
            )?;
            Ok(text)
        }
        Err(error) => {
            tell(CompactionUpdate::new(id, CompactionStatus::Failed).error(error.clone()))?;
            Ok(format!("/compact: {error}"))
        }
    }
}

fn start_prompt(
    state: &Arc<State>,
    request: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let session = match state.session(&request.session_id) {
        Ok(session) => session,
        Err(error) => return responder.respond_with_error(error),
    };
    // A slash command is answered here: the model is not asked and the chat not written. Only
    // a user's: a delegated session's prompt is another model's text, which must not rewind
    // files (or do anything else) without the approval its tool calls need.
    if !session.delegated
        && let Some((command, argument)) = crate::commands::parse(&request.prompt)
    {
        let running = lock(&session.running).is_some();
        let answer = if running && command != "status" {
            format!("/{command}: a prompt runs in this session; run it once that prompt has ended")
        } else if matches!(command, "model" | "mode") {
            setting_command(state, &session, command, &argument, &cx)?
        } else if command == "compact" && state.client_compaction.load(Ordering::Relaxed) {
            compact_command(state, &session, &argument, &cx)?
        } else {
            match state
                .backend
                .slash_command(&session.path, command, &argument)
            {
                Ok(text) => text,
                Err(error) => format!("/{command}: {error}"),
            }
        };
        cx.send_notification(SessionNotification::new(
            session.id.clone(),
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                TextContent::new(answer),
            ))),
        ))?;
        return responder.respond(PromptResponse::new(StopReason::EndTurn));
    }
    let text = match prompt::to_chat_text(&request.prompt, &session.path) {
        Ok(text) if session.delegated => flemma_syntax::write::literal_user_text(&text),
        Ok(text) => text,
        Err(error) => return responder.respond_with_error(invalid(error.to_string())),
    };
    let cancel = {
        let mut running = lock(&session.running);
        if running.is_some() {
            return responder.respond_with_error(invalid(
                "a prompt is already running in this session: wait for its answer, or send session/cancel; this prompt was not written",
            ));
        }
        let (sender, receiver) = watch::channel(false);
        *running = Some(sender);
        receiver
    };
    // The chat's frontmatter may have changed its settings since the client was told.
    retell_settings(&*state.backend, &session, &cx)?;
    let backend = state.backend.clone();
    let compaction = state.client_compaction.load(Ordering::Relaxed);
    let task_cx = cx.clone();
    // `$/cancel_request` for this prompt cancels it as `session/cancel` does; the answer is
    // still the prompt's own (`stopReason: cancelled`).
    let request_cancel = responder.cancellation();
    cx.spawn(async move {
        let turn = Turn {
            backend: &*backend,
            session: &session,
            cx: &task_cx,
            cancel,
            cancelled: false,
            announced: HashSet::new(),
            finished: HashSet::new(),
            decided: HashSet::new(),
            calls: HashMap::new(),
            pending: Vec::new(),
            delegations: crate::delegation::Delegations::default(),
            compaction,
        };
        let run = turn.run(&text);
        tokio::pin!(run);
        let mut cancel_asked = false;
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                () = request_cancel.cancelled(), if !cancel_asked => {
                    cancel_asked = true;
                    if let Some(signal) = lock(&session.running).as_ref() {
                        let _ = signal.send(true);
                    }
                }
            }
        };
        *lock(&session.running) = None;
        session.announced.prompt_runs(false);
        *lock(&session.known) = backend.read_chat(&session.path).ok();
        retell_settings(&*backend, &session, &task_cx)?;
        let sent = match result {
            Ok(stop) => responder.respond(PromptResponse::new(stop)),
            Err(error) => responder.respond_with_error(error),
        };
        if let Err(error) = sent {
            tracing::warn!(%error, "could not answer session/prompt");
        }
        Ok(())
    })
}

/// One `session/prompt`.
struct Turn<'a> {
    backend: &'a dyn Backend,
    session: &'a Session,
    cx: &'a ConnectionTo<Client>,
    cancel: watch::Receiver<bool>,
    cancelled: bool,
    /// Tool calls announced (`tool_call`) and finished (their final update sent).
    announced: HashSet<String>,
    finished: HashSet<String>,
    /// Pending calls the user decided on.
    decided: HashSet<String>,
    /// The tool and input of each call the engine told of (for its result's diff).
    calls: HashMap<String, (String, serde_json::Value)>,
    /// The calls that waited for approval when the engine last said so.
    pending: Vec<crate::PendingCall>,
    /// What the agents `ask_agent` calls asked have done so far.
    delegations: crate::delegation::Delegations,
    /// The client takes `compaction_update`s.
    compaction: bool,
}

/// A compaction's id, distinct within the process (and so within every session).
fn compaction_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("compaction-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

enum Decision {
    Continue,
    Cancelled,
}

impl Turn<'_> {
    fn notify(&self, update: SessionUpdate) -> Result<(), Error> {
        let call = match &update {
            SessionUpdate::ToolCall(call) => Some(call.tool_call_id.0.clone()),
            _ => None,
        };
        self.cx
            .send_notification(SessionNotification::new(self.session.id.clone(), update))?;
        // Queued to the client: the call's own file requests may follow it.
        if let Some(id) = call {
            self.session.announced.add(&id);
        }
        Ok(())
    }

    fn read(&self) -> Result<String, Error> {
        self.backend.read_chat(&self.session.path).map_err(internal)
    }

    /// `session_info_update` with the chat's title (the first line of its first question) when
    /// it is not the one the client was last told: after a session's first prompt, and when
    /// the first question was edited since.
    fn tell_title(&self, chat: &str) -> Result<(), Error> {
        let Some(title) = crate::list::title(chat) else {
            return Ok(());
        };
        let mut told = lock(&self.session.title);
        if told.as_deref() == Some(title.as_str()) {
            return Ok(());
        }
        self.notify(SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new().title(title.clone()),
        ))?;
        *told = Some(title);
        Ok(())
    }

    /// Replaces the chat with what `change` makes of it, reading it again when someone wrote
    /// meanwhile (five times at most): the text written, `None` when `change` had nothing to
    /// do, or `failure` when the chat kept changing.
    fn rewrite(
        &self,
        change: impl Fn(&str) -> Option<String>,
        failure: &str,
    ) -> Result<Option<String>, Error> {
        for _ in 0..5 {
            let text = self.read()?;
            let Some(next) = change(&text) else {
                return Ok(None);
            };
            if self
                .backend
                .replace_chat(&self.session.path, &text, &next)
                .map_err(internal)?
            {
                return Ok(Some(next));
            }
        }
        Err(internal(failure))
    }

    /// The turns another editor added to the chat since the client last saw it, told as a
    /// replay (`user_message_chunk`, `agent_message_chunk`, `tool_call`…) before this
    /// prompt's own. A chat changed otherwise (an earlier turn edited) is not told again.
    fn tell_added_turns(&self) -> Result<(), Error> {
        let known = lock(&self.session.known).clone();
        let (Some(known), Ok(now)) = (known, self.read()) else {
            return Ok(());
        };
        if known == now {
            return Ok(());
        }
        let cwd = &self.session.cwd;
        let before = replay::history(&known, cwd);
        let after = replay::history(&now, cwd);
        if after.len() > before.len() && after[..before.len()] == before[..] {
            for update in after.into_iter().skip(before.len()) {
                self.notify(update)?;
            }
        }
        Ok(())
    }

    async fn run(mut self, prompt: &str) -> Result<StopReason, Error> {
        let path = self.session.path.clone();
        self.tell_added_turns()?;
        let mut events = self.backend.events(&path);
        // Write the prompt under the trailing `@You:`.
        let written = self
            .rewrite(
                |text| Some(prompt::with_prompt(text, prompt)),
                "the chat kept changing while the prompt was written; try again",
            )?
            .unwrap_or_default();
        self.tell_title(&written)?;
        // Calls already in the file are history, not this prompt's.
        let doc = flemma_syntax::parse(written);
        self.session.announced.prompt_runs(true);
        for message in doc.messages() {
            for (_, tool) in message.tool_uses() {
                self.announced.insert(tool.id.clone());
                self.session.announced.add(&tool.id);
                if replay::result_fields(&doc, &tool.id, &self.session.cwd).is_some() {
                    self.finished.insert(tool.id.clone());
                }
            }
        }
        self.backend.send(&path).map_err(invalid)?;
        // A cancel that finds nothing running is tried again for a moment: the engine may be
        // about to start (a send or an approval was just handed to it).
        let mut retry = tokio::time::interval(CANCEL_RETRY);
        let mut cancel_tries: Option<u32> = None;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = self.cancel.changed(), if !self.cancelled => {
                    self.cancelled = true;
                    if !self.backend.cancel(&path) {
                        cancel_tries = Some(0);
                        retry.reset();
                    }
                    continue;
                }
                _ = retry.tick(), if cancel_tries.is_some() => {
                    let tries = cancel_tries.unwrap_or_default() + 1;
                    cancel_tries = Some(tries);
                    if self.backend.cancel(&path) {
                        cancel_tries = None;
                    } else if tries >= CANCEL_TRIES {
                        return Ok(StopReason::Cancelled);
                    }
                    continue;
                }
            };
            let Some(event) = event else {
                return Err(internal(
                    "the engine went away; the chat keeps what was written",
                ));
            };
            match event {
                TurnEvent::Text(text) => self.notify(SessionUpdate::AgentMessageChunk(
                    ContentChunk::new(ContentBlock::Text(TextContent::new(text))),
                ))?,
                TurnEvent::Thinking(text) => self.notify(SessionUpdate::AgentThoughtChunk(
                    ContentChunk::new(ContentBlock::Text(TextContent::new(text))),
                ))?,
                TurnEvent::ToolComposed {
                    tool_id,
                    name,
                    input,
                } => self.announce(&tool_id, &name, Some(input))?,
                TurnEvent::ToolStarted {
                    tool_id,
                    name,
                    input,
                } => {
                    // Announced, then in progress, then (a fast tool) its result.
                    self.announce(&tool_id, &name, input)?;
                    if !self.finished.contains(&tool_id) {
                        self.notify(SessionUpdate::ToolCallUpdate(replay::in_progress(&tool_id)))?;
                    }
                }
                TurnEvent::ToolFinished {
                    tool_id,
                    name,
                    output,
                    failed,
                } => {
                    self.announce(&tool_id, &name, None)?;
                    let input = self
                        .calls
                        .get(&tool_id)
                        .map(|(_, input)| input.clone())
                        .unwrap_or_default();
                    let fields =
                        replay::finished(&name, &input, &output, failed, &self.session.cwd);
                    self.finish(tool_id, fields)?;
                }
                TurnEvent::ToolInBackground {
                    tool_id,
                    name,
                    job_id,
                } => {
                    self.announce(&tool_id, &name, None)?;
                    let text = format!(
                        "running in the background as the job `{job_id}`; its result comes in a later turn"
                    );
                    self.finish(
                        tool_id,
                        replay::finished("", &Value::Null, &text, false, &self.session.cwd),
                    )?;
                }
                TurnEvent::ApprovalRequired(calls) => {
                    for call in &calls {
                        self.announce(&call.tool_id, &call.name, Some(call.input.clone()))?;
                    }
                    self.pending = calls;
                }
                // A client that advertised `session.compaction` gets a `compaction_update`
                // (the summary whole: the engine has it only once it is written); another
                // one, a line of the reply's text.
                TurnEvent::Compacted { notice, meta } => {
                    if self.compaction {
                        self.notify(SessionUpdate::CompactionUpdate(
                            CompactionUpdate::new(compaction_id(), CompactionStatus::Completed)
                                .summary(vec![ContentBlock::Text(TextContent::new(notice))])
                                .meta(meta),
                        ))?
                    } else {
                        self.notify(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                            ContentBlock::Text(TextContent::new(format!(
                                "\n\n_flemmad {notice}_\n\n"
                            ))),
                        )))?
                    }
                }
                TurnEvent::CompactionFailed(message) => {
                    if self.compaction {
                        self.notify(SessionUpdate::CompactionUpdate(
                            CompactionUpdate::new(compaction_id(), CompactionStatus::Failed)
                                .error(message),
                        ))?
                    }
                }
                TurnEvent::AgentProgress(progress) => {
                    if self.announced.contains(&progress.tool_id)
                        && let Some(update) = self.delegations.update(&progress)
                    {
                        self.notify(update)?;
                    }
                }
                TurnEvent::AgentPermission(permission) => {
                    let asked = tokio::select! {
                        asked = crate::delegation::ask(self.cx, &self.session.id, &permission) => asked?,
                        _ = self.cancel.changed(), if !self.cancelled => {
                            self.cancelled = true;
                            self.backend.cancel(&path);
                            None
                        }
                    };
                    let id = &permission.permission_id;
                    let outcome = match asked {
                        Some(true) => self.backend.approve(&path, id),
                        Some(false) | None => self.backend.reject(&path, id, None),
                    };
                    if let Err(error) = outcome {
                        tracing::info!(%error, "the asked agent's permission was not answered");
                    }
                }
                TurnEvent::Usage {
                    used,
                    size,
                    cost_usd,
                    meta,
                } => {
                    let cost = cost_usd
                        .map(|amount| agent_client_protocol::v1::schema::Cost::new(amount, "USD"));
                    self.notify(SessionUpdate::UsageUpdate(
                        UsageUpdate::new(used, size).cost(cost).meta(meta),
                    ))?;
                }
                TurnEvent::Stopped { reason, message } => {
                    if self.cancelled || reason == StopLabel::Cancelled {
                        return Ok(StopReason::Cancelled);
                    }
                    match reason {
                        StopLabel::Idle | StopLabel::StepDone => return Ok(StopReason::EndTurn),
                        StopLabel::MaxTurns => return Ok(StopReason::MaxTurnRequests),
                        StopLabel::Refused => return Ok(StopReason::Refusal),
                        StopLabel::AwaitingApproval => match self.ask_permissions().await? {
                            Decision::Continue => {}
                            Decision::Cancelled => return Ok(StopReason::Cancelled),
                        },
                        StopLabel::Error
                        | StopLabel::Cancelled
                        | StopLabel::UserContentInApproved => {
                            return Err(internal(
                                message.unwrap_or_else(|| reason.as_str().to_owned()),
                            ));
                        }
                    }
                }
            }
        }
    }

    /// The final update of the call `id`, unless it had one.
    fn finish(&mut self, id: String, fields: ToolCallUpdateFields) -> Result<(), Error> {
        if !self.finished.insert(id.clone()) {
            return Ok(());
        }
        self.notify(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id, fields,
        )))
    }

    /// Announces the call `id` (`tool_call`) unless it was: with `input` as the engine told it
    /// (`{}` when it did not).
    fn announce(
        &mut self,
        id: &str,
        name: &str,
        input: Option<serde_json::Value>,
    ) -> Result<(), Error> {
        if let Some(input) = input {
            self.calls
                .entry(id.to_owned())
                .or_insert_with(|| (name.to_owned(), input));
        }
        if !self.announced.insert(id.to_owned()) {
            return Ok(());
        }
        let input = self
            .calls
            .get(id)
            .map(|(_, input)| input.clone())
            .unwrap_or_default();
        self.notify(SessionUpdate::ToolCall(replay::call(
            id,
            name,
            input,
            &self.session.cwd,
        )))
    }

    /// Marks the pending calls `ids` aborted in the chat (a cancelled permission request:
    /// they did not run, and the next prompt tells the model so instead of asking again).
    fn abort_calls(&self, ids: &[String]) -> Result<(), Error> {
        self.rewrite(
            |text| prompt::with_calls_aborted(text, ids),
            "the chat kept changing while the cancelled calls were marked aborted; they stay pending",
        )
        .map(drop)
    }

    /// Asks the client about every pending call not decided yet, then approves or rejects
    /// them (the engine goes on once none is pending).
    async fn ask_permissions(&mut self) -> Result<Decision, Error> {
        let pending: Vec<crate::PendingCall> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter(|call| !self.decided.contains(&call.tool_id))
            .collect();
        // Cancelled, none of them runs: all are aborted in the file.
        let asked: Vec<String> = pending.iter().map(|call| call.tool_id.clone()).collect();
        let mut decisions = Vec::new();
        for crate::PendingCall {
            tool_id: id,
            name,
            input,
        } in pending
        {
            if always_allowed(&self.session.id, &name) {
                decisions.push((id, true));
                continue;
            }
            let call = replay::call(&id, &name, input, &self.session.cwd);
            let mut fields = ToolCallUpdateFields::new()
                .title(call.title.clone())
                .kind(call.kind)
                .status(call.status)
                .locations(call.locations.clone())
                .raw_input(call.raw_input.clone());
            // Review before approval: the whole file before and after, for the client's diff.
            if let Some(change) = self.backend.proposed_change(&self.session.path, &id) {
                fields = fields.content(vec![ToolCallContent::Diff(
                    Diff::new(change.path, change.after).old_text(change.before),
                )]);
            }
            let request = RequestPermissionRequest::new(
                self.session.id.clone(),
                ToolCallUpdate::new(id.clone(), fields),
                vec![
                    PermissionOption::new("allow_once", "Allow", PermissionOptionKind::AllowOnce),
                    PermissionOption::new(
                        "allow_always",
                        format!("Always allow `{name}` in this session"),
                        PermissionOptionKind::AllowAlways,
                    ),
                    PermissionOption::new(
                        "reject_once",
                        "Reject",
                        PermissionOptionKind::RejectOnce,
                    ),
                ],
            );
            let answer = tokio::select! {
                answer = self.cx.send_request(request).block_task() => answer?,
                _ = self.cancel.changed(), if !self.cancelled => {
                    self.cancelled = true;
                    self.abort_calls(&asked)?;
                    return Ok(Decision::Cancelled);
                }
            };
            match answer.outcome {
                RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    "allow_once" => decisions.push((id, true)),
                    "allow_always" => {
                        allow_always(&self.session.id, name);
                        decisions.push((id, true));
                    }
                    _ => decisions.push((id, false)),
                },
                _ => {
                    self.abort_calls(&asked)?;
                    return Ok(Decision::Cancelled);
                }
            }
        }
        let path = &self.session.path;
        for (id, allowed) in decisions {
            self.decided.insert(id.clone());
            let outcome = if allowed {
                self.backend.approve(path, &id)
            } else {
                self.backend.reject(path, &id, None)
            };
            outcome.map_err(internal)?;
        }
        Ok(Decision::Continue)
    }
}
