//! The connection: one handler per ACP method over newline-delimited JSON-RPC, and the turn of
//! one `session/prompt` (write the prompt, run the engine, stream what it does, ask for
//! permissions, answer with the stop reason).

mod follow;
mod session_close;
mod session_list;
mod session_load;
mod session_new;
mod session_prompt;
mod set_config;
mod state;
mod turn;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, McpCapabilities, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities,
    SessionListCapabilities, SessionResumeCapabilities,
};
use agent_client_protocol::v1::schema::{
    ForkSessionRequest, ForkSessionResponse, SessionConfigOption, SessionForkCapabilities,
    SessionModeState, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo as _, Error, Lines};
use futures::SinkExt as _;

use self::session_close::{close_session, delete_session};
use self::session_list::list_sessions;
use self::session_load::{fork_session, load_session, resume_session};
use self::session_new::new_session;
use self::session_prompt::start_prompt;
use self::set_config::set_setting;
pub use self::state::AllowedAlways;
use self::state::{State, announce_commands, lock, session_settings, tell_settings};
use crate::{backend::Backend, modes};

/// Serves ACP on `input`/`output` (stdin and stdout) until the client closes its side. Lines
/// are read and written on threads of their own (blocking IO), so the runtime needs no
/// standard-stream support. `allowed`: the tools the user allowed always, kept by the caller
/// across the connections it serves.
pub async fn serve(
    backend: Arc<dyn Backend>,
    allowed: AllowedAlways,
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
    let closed = tokio_util::sync::CancellationToken::new();
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
            input_closed.cancel();
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
        allowed,
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

/// The answer of `session/new`, `load`, `resume` and `fork` once the session `opened` names
/// is open (or the error that kept it from opening): the session's modes and config options
/// (remembered as told), made into the method's response by `make`; then its slash commands.
fn session_answer<R: agent_client_protocol::JsonRpcResponse>(
    state: &State,
    opened: Result<String, Error>,
    responder: Responder<R>,
    cx: &ConnectionTo<Client>,
    make: impl FnOnce(String, Option<SessionModeState>, Option<Vec<SessionConfigOption>>) -> R,
) -> Result<(), Error> {
    let id = match opened {
        Ok(id) => id,
        Err(error) => return responder.respond_with_error(error),
    };
    let settings = session_settings(state, &id);
    responder.respond(make(
        id.clone(),
        settings.as_ref().map(|s| modes::mode_state(s.mode)),
        settings.as_ref().map(modes::config_options),
    ))?;
    announce_commands(cx, &id)
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
                let opened = new_session(&on_new, request, &cx);
                session_answer(&on_new, opened, responder, &cx, |id, modes, options| {
                    NewSessionResponse::new(id)
                        .modes(modes)
                        .config_options(options)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                let opened = load_session(&on_load, request, &cx).map(|()| id);
                session_answer(&on_load, opened, responder, &cx, |_, modes, options| {
                    LoadSessionResponse::new()
                        .modes(modes)
                        .config_options(options)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest,
                        responder: Responder<ResumeSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let id = request.session_id.0.to_string();
                let opened = resume_session(&on_resume, request, &cx).map(|()| id);
                session_answer(&on_resume, opened, responder, &cx, |_, modes, options| {
                    ResumeSessionResponse::new()
                        .modes(modes)
                        .config_options(options)
                })
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
                let opened = fork_session(&on_fork, request, &cx);
                session_answer(&on_fork, opened, responder, &cx, |id, modes, options| {
                    ForkSessionResponse::new(id)
                        .modes(modes)
                        .config_options(options)
                })
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
