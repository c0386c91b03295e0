//! The commands' path through a running daemon (`flemmad serve`): `send`, `approve`, `reject`
//! and `cancel` ask the daemon's engine over `rpc.sock` (docs/rpc.md), then follow the
//! document's events until its cycle stops, showing progress as the in-process `send` does and
//! exiting with the same codes. Each command calls in here first; `None` means no daemon
//! answers and the command asks an engine host started in this process (`cli/local_host`).

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use flemma_engine::PendingCall;
use flemma_protocol::engine::UsageTotals;
use serde_json::{Value, json};

use super::error::{CycleEnd, cycle_end};
use super::progress::{Progress, approval_listing, sending_line, shell_quote, show_setup};
use super::{CliError, Ui};
use crate::engine_driver::Report;
use crate::process_context::ProcessContext;
use flemma_engine::EngineEvent;
use flemma_protocol::event::EngineSetup;

use flemma_protocol::methods::{
    ApproveHunksParams, DocumentParams, EVENT_NOTIFICATION, FlemmaRequest, RejectParams, SUBSCRIBE,
    ToolCallParams,
};

/// How a send through the daemon says it sends (`sending FILE to PROVIDER (MODEL) through the
/// daemon…`).
const THROUGH: &str = " through the daemon";

/// How long a request may wait for its answer.
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What `--detach` says when no daemon runs.
pub const NO_DAEMON_TO_DETACH: &str = "--detach needs a running daemon and none answers; start it with `flemmad serve` (or `systemctl --user start flemmad.socket`), or leave out --detach";

/// A line-delimited JSON-RPC connection to the daemon's `rpc.sock`.
#[derive(Debug)]
pub struct DaemonClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// `flemma/event` params that arrived while waiting for an answer.
    queued: std::collections::VecDeque<Value>,
    /// The process's context (this process's working directory is not the daemon's).
    context: ProcessContext,
}

/// Why talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the daemon refused: {0}")]
    Refused(String),
    #[error("the connection to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon closed the connection (it stopped)")]
    Closed,
    #[error(
        "the daemon did not answer {0} within {secs} s; see its log (`journalctl --user -u flemmad`, ~/.local/state/flemma/flemmad.log), restart it, or run the command with --no-daemon",
        secs = ANSWER_TIMEOUT.as_secs()
    )]
    NoAnswer(String),
}

impl ClientError {
    /// The command's failure (exit 1): a refusal says the daemon's reason as it is.
    pub fn failed(self, command: &str) -> CliError {
        match self {
            ClientError::Refused(message) => CliError::failed(command, message),
            other => CliError::failed(command, other),
        }
    }
}

impl DaemonClient {
    /// Follows the events of the chat at `file` (an unreadable chat says so first, exit 2, as
    /// the in-process commands do); its uri, as the daemon's requests name it.
    pub fn subscribe_chat(&mut self, command: &str, file: &Path) -> Result<String, CliError> {
        crate::fsutil::read_chat(&self.context.dirs, file)
            .map_err(|error| CliError::unreadable(command, &error))?;
        let path = self.context.absolute(file);
        let uri = path.display().to_string();
        self.request(SUBSCRIBE, json!({"uri": uri, "text": false}))
            .map_err(|error| error.failed(command))?;
        Ok(uri)
    }

    /// A connection to the running daemon of the process's `context`, `None` when none
    /// answers.
    pub fn connect(context: &ProcessContext) -> Option<Self> {
        let paths = &context.runtime;
        let stream = crate::daemon::socket::connect_running(paths, &paths.rpc_socket)?;
        let reader = BufReader::new(stream.try_clone().ok()?);
        Some(Self {
            reader,
            writer: stream,
            next_id: 1,
            queued: std::collections::VecDeque::new(),
            context: context.clone(),
        })
    }

    /// Sends an engine request and waits for its answer (events meanwhile are kept for
    /// [`DaemonClient::next_event`]).
    pub fn call(&mut self, request: &FlemmaRequest) -> Result<Value, ClientError> {
        let params = request.params().map_err(std::io::Error::other)?;
        self.request(request.method(), params)
    }

    /// Sends a request of `rpc.sock` itself (`flemma/subscribe`) and waits for its answer.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.writer, "{request}")?;
        self.writer.flush()?;
        // Requests answer at once; a daemon that does not is stuck.
        self.writer.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        loop {
            let message = self.read_message().map_err(|error| match error {
                ClientError::Io(io)
                    if matches!(
                        io.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    ClientError::NoAnswer(method.to_owned())
                }
                other => other,
            })?;
            if message.get("method").is_some() {
                self.queue_event(message);
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                let message = error.get("message").and_then(Value::as_str);
                return Err(ClientError::Refused(
                    message.unwrap_or("no message").to_owned(),
                ));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// The next `flemma/event`'s params (`{name, uri?, data}`).
    pub fn next_event(&mut self) -> Result<Value, ClientError> {
        if let Some(event) = self.queued.pop_front() {
            return Ok(event);
        }
        // Events come when they come (a tool may run for an hour).
        self.writer.set_read_timeout(None)?;
        loop {
            let message = self.read_message()?;
            if message.get("method").and_then(Value::as_str) == Some(EVENT_NOTIFICATION) {
                return Ok(message.get("params").cloned().unwrap_or(Value::Null));
            }
        }
    }

    fn queue_event(&mut self, message: Value) {
        if message.get("method").and_then(Value::as_str) == Some(EVENT_NOTIFICATION) {
            self.queued
                .push_back(message.get("params").cloned().unwrap_or(Value::Null));
        }
    }

    fn read_message(&mut self) -> Result<Value, ClientError> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(ClientError::Closed);
            }
            match serde_json::from_str::<Value>(&line) {
                Ok(message) => return Ok(message),
                Err(_) => tracing::warn!(%line, "the daemon sent a line that is not JSON"),
            }
        }
    }
}

fn daemon_failed(command: &str, error: ClientError) -> CliError {
    CliError::failed(command, error)
}

/// How a followed command shows its progress.
#[derive(Debug, Clone, Copy)]
pub struct Follow {
    pub events: bool,
    pub quiet: bool,
    /// Return once the daemon took the command instead of following it.
    pub detach: bool,
    /// Show the pending calls' changes when the cycle waits for approval (`send --diff`).
    pub diff: bool,
}

impl Follow {
    /// Progress on stderr, no events (`approve`, `reject`).
    pub fn progress(detach: bool) -> Self {
        Self {
            events: false,
            quiet: false,
            detach,
            diff: false,
        }
    }
}

/// What to ask the daemon to do to a document.
#[derive(Debug, Clone)]
pub enum Action {
    Send,
    Approve(Vec<String>),
    ApproveAll,
    Reject {
        tool_id: String,
        reason: Option<String>,
    },
    /// Some hunks of one call approved, the others rejected (`flemma/approveHunks`).
    ApproveHunks {
        tool_id: String,
        hunks: Vec<u32>,
        reason: Option<String>,
    },
}

impl Action {
    /// The engine's requests that carry the action out on the document `uri`, in order (the
    /// daemon's `rpc.sock` and the in-process host take the same ones).
    pub fn requests(&self, uri: &str) -> Vec<FlemmaRequest> {
        let uri = uri.to_owned();
        let document = || DocumentParams { uri: uri.clone() };
        match self {
            Action::Send => vec![FlemmaRequest::Send(document())],
            Action::ApproveAll => vec![FlemmaRequest::ApproveAll(document())],
            Action::Approve(ids) => ids
                .iter()
                .map(|id| {
                    FlemmaRequest::Approve(ToolCallParams {
                        uri: uri.clone(),
                        tool_id: id.clone(),
                    })
                })
                .collect(),
            Action::Reject { tool_id, reason } => vec![FlemmaRequest::Reject(RejectParams {
                uri: uri.clone(),
                tool_id: tool_id.clone(),
                reason: reason.clone(),
            })],
            Action::ApproveHunks {
                tool_id,
                hunks,
                reason,
            } => vec![FlemmaRequest::ApproveHunks(ApproveHunksParams {
                uri: uri.clone(),
                tool_id: tool_id.clone(),
                hunks: hunks.clone(),
                reason: reason.clone(),
            })],
        }
    }
}

/// Runs `action` on `file` through the daemon and follows the document until its cycle stops.
/// `None` when no daemon answers.
pub fn run(
    context: &ProcessContext,
    command: &str,
    file: &Path,
    action: Action,
    follow: Follow,
) -> Option<Result<ExitCode, CliError>> {
    let client = DaemonClient::connect(context)?;
    Some(run_with(client, command, file, action, follow))
}

pub fn run_with(
    mut client: DaemonClient,
    command: &str,
    file: &Path,
    action: Action,
    follow: Follow,
) -> Result<ExitCode, CliError> {
    // An unreadable chat says so (exit 2) as the in-process command does.
    crate::fsutil::read_chat(&client.context.dirs, file)
        .map_err(|error| CliError::unreadable(command, &error))?;
    // The daemon's working directory is not ours: the document by its absolute path.
    let path = client.context.absolute(file);
    let uri = path.display().to_string();
    if !follow.detach {
        client
            .request(SUBSCRIBE, json!({"uri": uri, "text": !follow.quiet}))
            .map_err(|error| daemon_failed(command, error))?;
    }
    let document = || DocumentParams { uri: uri.clone() };
    let requests = action.requests(&uri);
    for request in &requests {
        client
            .call(request)
            .map_err(|error| daemon_failed(command, error))?;
    }
    let file_arg = shell_quote(&file.display().to_string());
    if follow.detach {
        Ui::new(command).note(format!(
            "the daemon took it; follow it with `flemmad events`, see where it is with `flemmad status {file_arg}`, stop it with `flemmad cancel {file_arg}`"
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let ui = Ui::root();
    let started = Instant::now();
    cancel_on_ctrl_c(&client.context, command, &uri);
    let mut progress = Progress::new(
        ui.clone(),
        flemma_protocol::document::path_to_uri(&path),
        follow.events,
        follow.quiet,
    );
    let send = matches!(action, Action::Send);
    if send {
        // Until `engine:setup` names the provider and model (a daemon of an older version
        // does not).
        progress.announce_on_first_request(sending_line(file, &EngineSetup::default(), THROUGH));
    }
    let mut pending: Vec<PendingCall> = Vec::new();
    let mut asked = Vec::new();
    // How the following ended: the engine stopped, or an asked agent's question waits.
    let ended = loop {
        let event = client.next_event().map_err(|error| match error {
            ClientError::Closed => CliError::failed(
                command,
                format!(
                    "the daemon stopped before the cycle ended; what it wrote is in the file: run `flemmad send {file_arg}` again"
                ),
            ),
            other => daemon_failed(command, other),
        })?;
        // Decoded once, here: a line this version does not know (the daemon's own events, a
        // newer daemon's) is not followed.
        let Some(event) = decode_event(&event) else {
            continue;
        };
        match &event {
            EngineEvent::EngineStopped(stopped) => break Some(stopped.clone()),
            EngineEvent::RequestText(streamed) => {
                progress.show(Report::Text(streamed.text.clone()));
                continue;
            }
            // Shown as the in-process send shows it, and a refusal ends the send as it ends
            // there (the daemon's driver stops by itself).
            EngineEvent::EngineSetup(setup) if send => {
                let shown = show_setup(&ui, file, setup, follow.quiet);
                progress.announce_on_first_request(sending_line(file, setup, THROUGH));
                if let Err(refused) = shown {
                    progress.show(Report::Event(event));
                    return Err(refused);
                }
            }
            EngineEvent::ToolApprovalRequired(required) => pending = pending_calls(required),
            // An asked agent's question waits in the daemon: the command stops here (exit 3).
            EngineEvent::AgentPermissionRequired(question) => {
                asked.push(super::questions::pending_of(&path, question));
                break None;
            }
            EngineEvent::ToolUnconfirmed(unconfirmed) if !follow.quiet => {
                ui.warn(&unconfirmed.message);
            }
            EngineEvent::TrustIgnored(ignored) if !follow.quiet => {
                for option in &ignored.options {
                    ui.warn(&option.message);
                }
            }
            _ => {}
        }
        if shown_in_progress(&event) {
            progress.show(Report::Event(event));
        }
    };
    ui.stderr("\n");
    let usage: UsageTotals = client
        .call(&FlemmaRequest::Usage(document()))
        .ok()
        .and_then(|usage| serde_json::from_value(usage).ok())
        .unwrap_or_default();
    let summary = super::progress::summary(started.elapsed(), &usage);
    let Some(stopped) = ended else {
        ui.stderr(&super::questions::listing(file, &asked, &summary, true));
        return Ok(CycleEnd::AwaitingApproval.exit_code());
    };
    let end = cycle_end(command, &stopped)?;
    match end {
        CycleEnd::Done => ui.note(format_args!("done in {summary}")),
        CycleEnd::AwaitingApproval => {
            if pending.is_empty() {
                pending = pending_from_status(&mut client, &uri);
            }
            // The user's default configuration, as ever here (not `--config`).
            let mut context = client.context.clone();
            context.explicit_config = None;
            let diffs = super::proposed::diffs(follow.diff, file, &context);
            ui.stderr(&approval_listing(file, &pending, &summary, &diffs));
        }
    }
    Ok(end.exit_code())
}

/// The event of a `flemma/event` notification's params (`{name, uri, data}`).
pub(super) fn decode_event(params: &Value) -> Option<EngineEvent> {
    let name = params.get("name").and_then(Value::as_str)?;
    EngineEvent::from_parts(name, params.get("data").cloned().unwrap_or(Value::Null))
}

/// Whether the progress display (and `--events`) gets the event, as the in-process `send`
/// shows it: not the streamed text and the stop (followed above), nor what only the language
/// server and subscribers see.
fn shown_in_progress(event: &EngineEvent) -> bool {
    !matches!(
        event,
        EngineEvent::RequestText(_)
            | EngineEvent::RequestThinking(_)
            | EngineEvent::EngineStopped(_)
            | EngineEvent::AgentPermissionRequired(_)
            | EngineEvent::AgentPermissionResolved(_)
            | EngineEvent::ConfigUpdated(_)
            | EngineEvent::RateLimitsUpdated(_)
    )
}

/// The calls of a `tool:approval-required` event.
pub(super) fn pending_calls(
    required: &flemma_protocol::event::ApprovalRequired,
) -> Vec<PendingCall> {
    required
        .tools
        .iter()
        .map(|call| PendingCall {
            tool_id: call.tool_id.clone(),
            tool_name: call.tool_name.clone(),
            input: call.input.clone(),
            resolver: call.resolver.clone(),
        })
        .collect()
}

/// A pending call known only by its id (`flemma/status` names no more).
pub(super) fn unnamed_call(tool_id: String) -> PendingCall {
    PendingCall {
        tool_id,
        tool_name: "?".into(),
        input: Value::Null,
        resolver: "the approval chain".into(),
    }
}

/// The pending calls the daemon knows of, when no event named them.
fn pending_from_status(client: &mut DaemonClient, uri: &str) -> Vec<PendingCall> {
    let status = client
        .call(&FlemmaRequest::Status(DocumentParams {
            uri: uri.to_owned(),
        }))
        .unwrap_or(Value::Null);
    status
        .get("pending")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(|id| unnamed_call(id.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// On Ctrl-C, cancels the document's cycle through the daemon (the follower then sees it stop
/// with `cancelled`, exit 130). When nothing runs any more, exits 130 at once.
fn cancel_on_ctrl_c(context: &ProcessContext, command: &str, uri: &str) {
    let context = context.clone();
    let command = command.to_owned();
    let uri = uri.to_owned();
    let spawned = std::thread::Builder::new()
        .name("ctrl-c".into())
        .spawn(move || {
            let Ok(runtime) = crate::runtime::get() else {
                return;
            };
            if runtime.block_on(tokio::signal::ctrl_c()).is_err() {
                return;
            }
            let cancelled = DaemonClient::connect(&context)
                .ok_or(ClientError::Closed)
                .and_then(|mut client| {
                    client.call(&FlemmaRequest::Cancel(DocumentParams { uri: uri.clone() }))
                });
            if let Err(error) = cancelled {
                let ui = Ui::new(&command);
                ui.stderr("\n");
                ui.note(format_args!("interrupted ({error})"));
                std::process::exit(130);
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot watch for Ctrl-C; it will not cancel through the daemon");
    }
}

/// `flemmad cancel FILE` through the daemon: `None` when no daemon answers.
pub fn cancel(context: &ProcessContext, file: &Path) -> Option<Result<(), CliError>> {
    let mut client = DaemonClient::connect(context)?;
    Some((|| {
        let path = context.absolute(file);
        client
            .call(&FlemmaRequest::Cancel(DocumentParams {
                uri: path.display().to_string(),
            }))
            .map_err(|error| daemon_failed("cancel", error))?;
        Ui::new("cancel").note(format_args!(
            "cancelled what ran for {}; what had started is marked `aborted` in the file",
            file.display()
        ));
        Ok(())
    })())
}

/// The engine's status of `file` in the running daemon: `None` when no daemon answers (or it
/// does not know the document).
pub fn engine_status(
    context: &ProcessContext,
    file: &Path,
) -> Option<flemma_protocol::engine::EngineStatus> {
    let mut client = DaemonClient::connect(context)?;
    let path = context.absolute(file);
    let status = client
        .call(&FlemmaRequest::Status(DocumentParams {
            uri: path.display().to_string(),
        }))
        .ok()?;
    serde_json::from_value(status).ok()
}
