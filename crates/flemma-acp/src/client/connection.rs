//! One agent's process and the ACP connection to it: started in its own process group, its
//! stdout read line by line (a line that is not JSON is kept as the reason the agent is broken,
//! never handed to the protocol), its stderr's last lines kept, `initialize` answered within
//! the start-up time, and its sessions' notifications and permission requests routed to the
//! run that owns the session.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, Implementation, InitializeRequest,
    NewSessionRequest, PermissionOptionKind, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, TextContent, ToolCallContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use futures::SinkExt as _;
use process_wrap::tokio::ChildWrapper;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::types::{
    AgentCommand, AgentInfo, AgentUpdate, AskEnd, AskEvents, AskOutcome, AskRequest, Entry,
    PermissionAnswer, PermissionQuestion,
};

/// How many of the agent's last stderr lines are kept, and how many a failure names.
const STDERR_LINES: usize = 20;
const STDERR_SHOWN: usize = 5;
/// How long a cancelled run waits for the agent's answer before it gives up on it.
const CANCEL_GRACE: Duration = Duration::from_secs(3);
/// How long a closing agent may take to exit once its input closed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the agent sent about one session.
enum Incoming {
    Update(Box<SessionUpdate>),
    Permission(
        Box<RequestPermissionRequest>,
        oneshot::Sender<RequestPermissionOutcome>,
    ),
}

type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Incoming>>>>;

/// What went wrong with the process itself: its last stderr lines, and a line of its output
/// that was not JSON-RPC.
#[derive(Debug, Default)]
struct Trouble {
    stderr: VecDeque<String>,
    garbage: Option<String>,
    exited: Option<String>,
}

impl Trouble {
    /// Why the agent is unusable, from what it showed: its garbage, its exit, its stderr.
    fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(garbage) = &self.garbage {
            parts.push(format!(
                "it wrote something that is not ACP (JSON-RPC, one message a line): {garbage:?}"
            ));
        }
        if let Some(exited) = &self.exited {
            parts.push(format!("its process {exited}"));
        }
        let lines: Vec<&str> = self
            .stderr
            .iter()
            .map(|l| l.trim_end())
            .filter(|l| !l.is_empty())
            .collect();
        let shown = &lines[lines.len().saturating_sub(STDERR_SHOWN)..];
        if !shown.is_empty() {
            parts.push(format!("its stderr: {}", shown.join(" | ")));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A started, initialized agent.
pub struct AgentConnection {
    name: String,
    cx: ConnectionTo<Agent>,
    info: AgentInfo,
    routes: Routes,
    pid: Option<u32>,
    trouble: Arc<Mutex<Trouble>>,
    /// Set when the process or the connection ended, or the agent was stopped.
    dead: Arc<AtomicBool>,
    /// Told when the agent wrote something that is not JSON-RPC: the stream can no longer be
    /// trusted, the run stops and the agent is started again on the next call.
    garbled: Arc<tokio::sync::Notify>,
    /// Ends the connection's foreground (the protocol actor then stops).
    stop: Mutex<Option<oneshot::Sender<()>>>,
    child: Arc<tokio::sync::Mutex<Box<dyn ChildWrapper>>>,
}

impl std::fmt::Debug for AgentConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConnection")
            .field("name", &self.name)
            .field("pid", &self.pid)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl AgentConnection {
    /// Starts `command` and runs `initialize` within `startup`. The error says why, with the
    /// agent's last stderr lines and what it wrote that was not ACP.
    pub async fn start(
        command: &AgentCommand,
        startup: Duration,
    ) -> Result<Arc<AgentConnection>, String> {
        let Some(program) = command.argv.first() else {
            return Err("no command to run".into());
        };
        if !command.cwd.is_dir() {
            return Err(format!(
                "its working directory {} does not exist",
                command.cwd.display()
            ));
        }
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&command.argv[1..])
            .current_dir(&command.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in &command.env {
            cmd.env(key, value);
        }
        let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
        wrapped
            .wrap(process_wrap::tokio::ProcessGroup::leader())
            .wrap(process_wrap::tokio::KillOnDrop);
        let mut child = wrapped
            .spawn()
            .map_err(|error| format!("cannot start `{program}`: {error}"))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        ) else {
            let _ = child.start_kill();
            return Err(format!("cannot talk to `{program}`: its pipes are missing"));
        };
        let trouble = Arc::new(Mutex::new(Trouble::default()));
        let dead = Arc::new(AtomicBool::new(false));
        let garbled = Arc::new(tokio::sync::Notify::new());
        let child = Arc::new(tokio::sync::Mutex::new(child));

        // Its stderr: the last lines, for the reason it failed.
        let tail = trouble.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut trouble = lock(&tail);
                if trouble.stderr.len() == STDERR_LINES {
                    trouble.stderr.pop_front();
                }
                trouble.stderr.push_back(line);
            }
        });
        // Its stdout: JSON lines to the protocol; anything else is garbage, kept once.
        let (in_tx, in_rx) = futures::channel::mpsc::unbounded::<std::io::Result<String>>();
        let seen = trouble.clone();
        let ended = dead.clone();
        let garbage_seen = garbled.clone();
        let waiter = child.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    continue;
                }
                if serde_json::from_str::<serde_json::Value>(trimmed).is_err() {
                    let first = {
                        let mut trouble = lock(&seen);
                        let first = trouble.garbage.is_none();
                        if first {
                            trouble.garbage = Some(trimmed.chars().take(120).collect());
                        }
                        first
                    };
                    if first {
                        ended.store(true, Ordering::SeqCst);
                        garbage_seen.notify_one();
                    }
                    continue;
                }
                if in_tx.unbounded_send(Ok(line)).is_err() {
                    break;
                }
            }
            // The output ended: the agent exited (or closed it). Its status, when it has one.
            let status = tokio::time::timeout(Duration::from_millis(500), async {
                waiter.lock().await.wait().await
            })
            .await;
            if let Ok(Ok(status)) = status {
                lock(&seen).exited = Some(match status.code() {
                    Some(code) => format!("exited with status {code}"),
                    None => format!("ended ({status})"),
                });
            } else {
                lock(&seen).exited = Some("closed its output".into());
            }
            ended.store(true, Ordering::SeqCst);
        });
        // Its stdin: one message a line.
        let (out_tx, mut out_rx) = futures::channel::mpsc::unbounded::<String>();
        let mut stdin = stdin;
        tokio::spawn(async move {
            use futures::StreamExt as _;
            while let Some(line) = out_rx.next().await {
                let written = async {
                    stdin.write_all(line.as_bytes()).await?;
                    stdin.write_all(b"\n").await?;
                    stdin.flush().await
                }
                .await;
                if written.is_err() {
                    break;
                }
            }
            let _ = stdin.shutdown().await;
        });
        let outgoing = out_tx.sink_map_err(|_| std::io::Error::other("the agent's input closed"));
        let transport = Lines::new(outgoing, in_rx);

        let routes: Routes = Arc::default();
        let on_update = routes.clone();
        let on_permission = routes.clone();
        let (ready_tx, ready_rx) = oneshot::channel::<ConnectionTo<Agent>>();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let builder = Client
            .v1()
            .name("flemmad")
            .on_receive_notification(
                async move |notification: SessionNotification, _cx: ConnectionTo<Agent>| {
                    let route = lock(&on_update).get(&*notification.session_id.0).cloned();
                    if let Some(route) = route {
                        let _ = route.send(Incoming::Update(Box::new(notification.update)));
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |request: RequestPermissionRequest,
                            responder: Responder<RequestPermissionResponse>,
                            cx: ConnectionTo<Agent>| {
                    let route = lock(&on_permission).get(&*request.session_id.0).cloned();
                    let (answer_tx, answer_rx) = oneshot::channel();
                    match route {
                        Some(route) => {
                            let _ = route.send(Incoming::Permission(Box::new(request), answer_tx));
                        }
                        None => {
                            let _ = answer_tx.send(RequestPermissionOutcome::Cancelled);
                        }
                    }
                    // Answered when the run decides, never awaited here (the connection goes
                    // on meanwhile).
                    cx.spawn(async move {
                        let outcome = answer_rx
                            .await
                            .unwrap_or(RequestPermissionOutcome::Cancelled);
                        responder.respond(RequestPermissionResponse::new(outcome))
                    })
                },
                agent_client_protocol::on_receive_request!(),
            );
        let finished = dead.clone();
        let name = command.name.clone();
        tokio::spawn(async move {
            let result = builder
                .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                    let _ = ready_tx.send(cx);
                    let _ = stop_rx.await;
                    Ok(())
                })
                .await;
            if let Err(error) = result {
                tracing::info!(agent = %name, %error, "the connection to the agent ended");
            }
            finished.store(true, Ordering::SeqCst);
        });
        let fail = |reason: String, child: &Arc<tokio::sync::Mutex<Box<dyn ChildWrapper>>>| {
            if let Ok(mut child) = child.try_lock() {
                let _ = child.start_kill();
            }
            reason
        };
        let cx = ready_rx
            .await
            .map_err(|_| fail("the connection to it could not be set up".into(), &child))?;
        let initialize = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::new())
            .client_info(Implementation::new("flemmad", env!("CARGO_PKG_VERSION")));
        let answer = tokio::time::timeout(startup, cx.send_request(initialize).block_task()).await;
        let info = match answer {
            Ok(Ok(response)) => response
                .agent_info
                .map(|info| AgentInfo {
                    name: Some(info.name),
                    title: info.title,
                    version: Some(info.version),
                })
                .unwrap_or_default(),
            Ok(Err(error)) => {
                // Let the dying words and the exit status arrive.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let why = lock(&trouble).describe();
                return Err(fail(
                    match why {
                        Some(why) => format!("it did not answer `initialize` ({why})"),
                        None => format!("it refused `initialize`: {}", error.message),
                    },
                    &child,
                ));
            }
            Err(_) => {
                let why = lock(&trouble)
                    .describe()
                    .map(|why| format!(" ({why})"))
                    .unwrap_or_default();
                return Err(fail(
                    format!(
                        "it did not answer `initialize` within {} s{why}",
                        startup.as_secs_f64().ceil()
                    ),
                    &child,
                ));
            }
        };
        tracing::info!(agent = %command.name, pid, ?info, "the agent started");
        Ok(Arc::new(AgentConnection {
            name: command.name.clone(),
            cx,
            info,
            routes,
            pid,
            trouble,
            dead,
            garbled,
            stop: Mutex::new(Some(stop_tx)),
            child,
        }))
    }

    pub fn info(&self) -> &AgentInfo {
        &self.info
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the process or the connection ended (it is started again on the next call).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Why the agent broke, from what it showed (its garbage, its exit, its stderr).
    fn trouble(&self) -> Option<String> {
        lock(&self.trouble).describe()
    }

    /// Stops the agent at once (the watchdog, a cancel it did not answer): the next call
    /// starts it again.
    async fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
        let _ = self.child.lock().await.start_kill();
    }

    /// Closes the connection (its input), waits a moment for the agent to exit, then kills its
    /// process group.
    pub async fn close(&self) {
        self.dead.store(true, Ordering::SeqCst);
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
        let mut child = self.child.lock().await;
        let exited = tokio::time::timeout(CLOSE_GRACE, child.wait()).await;
        if exited.is_err() {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(CLOSE_GRACE, child.wait()).await;
        }
    }

    /// Runs one task in a fresh session. See [`super::AgentHub::ask`].
    pub async fn ask(
        &self,
        request: AskRequest,
        events: &dyn AskEvents,
        cancel: CancellationToken,
        started: Instant,
    ) -> AskOutcome {
        let mut run = Run {
            answer: String::new(),
            entries: Vec::new(),
            first_update: None,
            started,
        };
        let outcome = |run: Run, end: AskEnd, session: Option<String>| AskOutcome {
            end,
            answer: run.answer,
            session_id: session,
            events: run.entries,
            info: self.info.clone(),
            first_update: run.first_update,
        };
        let mut new_session = NewSessionRequest::new(request.cwd.clone());
        if let Some(chat) = &request.chat {
            let meta = serde_json::json!({"flemma": {"chat": chat, "delegated": true}});
            if let serde_json::Value::Object(meta) = meta {
                new_session = new_session.meta(meta);
            }
        }
        let created = tokio::select! {
            created = tokio::time::timeout(request.idle_timeout, self.cx.send_request(new_session).block_task()) => created,
            () = cancel.cancelled() => {
                return outcome(run, AskEnd::Broken("cancelled".into()), None);
            }
        };
        let session = match created {
            Ok(Ok(response)) => response.session_id.0.to_string(),
            Ok(Err(error)) => {
                let reason = self
                    .trouble()
                    .unwrap_or_else(|| format!("it refused a new session ({})", error.message));
                return outcome(run, AskEnd::Failed(reason), None);
            }
            Err(_) => {
                self.kill().await;
                let reason = format!(
                    "it did not answer `session/new` within {} s (the watchdog, `parameters.idle_timeout`); it was stopped",
                    request.idle_timeout.as_secs()
                );
                return outcome(run, AskEnd::Failed(reason), None);
            }
        };
        let (route_tx, mut route_rx) = mpsc::unbounded_channel();
        lock(&self.routes).insert(session.clone(), route_tx);
        run.entries.push(Entry::Prompt(request.prompt.clone()));
        let prompt = PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(request.prompt.clone()))],
        );
        let answer = self.cx.send_request(prompt).block_task();
        tokio::pin!(answer);
        let mut deadline = Instant::now() + request.idle_timeout;
        let mut cancelled_at: Option<Instant> = None;
        // A permission the user is deciding: the agent waits, and so does the watchdog.
        let mut deciding: Option<(
            futures::future::BoxFuture<'static, PermissionAnswer>,
            oneshot::Sender<RequestPermissionOutcome>,
            Box<RequestPermissionRequest>,
        )> = None;
        let end = loop {
            let wake = match (cancelled_at, &deciding) {
                (Some(at), _) => at + CANCEL_GRACE,
                (None, Some(_)) => Instant::now() + Duration::from_secs(24 * 3600),
                (None, None) => deadline,
            };
            tokio::select! {
                biased;
                answered = &mut answer => break match answered {
                    Ok(response) => {
                        let stop = serde_json::to_value(response.stop_reason)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_else(|| "end_turn".into());
                        AskEnd::Finished(stop)
                    }
                    Err(error) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let why = self.trouble().unwrap_or_else(|| format!("the agent answered with an error: {}", error.message));
                        AskEnd::Broken(why)
                    }
                },
                incoming = route_rx.recv() => {
                    let Some(incoming) = incoming else { continue };
                    deadline = Instant::now() + request.idle_timeout;
                    match incoming {
                        Incoming::Update(update) => {
                            if let Some(update) = neutral(*update) {
                                run.record(&update);
                                events.update(&update);
                            }
                        }
                        Incoming::Permission(asked, reply) => {
                            let question = question_of(&asked);
                            if cancelled_at.is_some() {
                                let _ = reply.send(RequestPermissionOutcome::Cancelled);
                            } else if let Some((_, earlier, _)) = deciding.take() {
                                // One at a time: an earlier one still undecided is cancelled.
                                let _ = earlier.send(RequestPermissionOutcome::Cancelled);
                                deciding = Some((events.permission(question), reply, asked));
                            } else {
                                deciding = Some((events.permission(question), reply, asked));
                            }
                        }
                    }
                }
                decided = async { match deciding.as_mut() { Some((future, _, _)) => future.await, None => std::future::pending().await } } => {
                    if let Some((_, reply, asked)) = deciding.take() {
                        let title = question_of(&asked).title;
                        run.entries.push(Entry::Permission { title, answer: decided });
                        let _ = reply.send(outcome_for(&asked, decided));
                    }
                    deadline = Instant::now() + request.idle_timeout;
                }
                () = self.garbled.notified() => {
                    self.kill().await;
                    let why = self.trouble().unwrap_or_else(|| "it wrote something that is not ACP".into());
                    break AskEnd::Broken(format!("{why}; it was stopped"));
                }
                () = cancel.cancelled(), if cancelled_at.is_none() => {
                    cancelled_at = Some(Instant::now());
                    if let Some((_, reply, _)) = deciding.take() {
                        let _ = reply.send(RequestPermissionOutcome::Cancelled);
                    }
                    let _ = self.cx.send_notification(CancelNotification::new(session.clone()));
                }
                () = tokio::time::sleep_until(wake.into()) => {
                    if cancelled_at.is_some() {
                        // It did not answer the cancel: stopped, started again next time.
                        self.kill().await;
                        break AskEnd::Broken("cancelled (the agent did not answer `session/cancel` in time and was stopped)".into());
                    }
                    let _ = self.cx.send_notification(CancelNotification::new(session.clone()));
                    self.kill().await;
                    break AskEnd::Broken(format!(
                        "it gave no sign of life for {} s (the watchdog, `parameters.idle_timeout`) and was stopped",
                        request.idle_timeout.as_secs()
                    ));
                }
            }
        };
        // What arrived with the answer (updates sent just before it).
        while let Ok(incoming) = route_rx.try_recv() {
            match incoming {
                Incoming::Update(update) => {
                    if let Some(update) = neutral(*update) {
                        run.record(&update);
                        events.update(&update);
                    }
                }
                Incoming::Permission(_, reply) => {
                    let _ = reply.send(RequestPermissionOutcome::Cancelled);
                }
            }
        }
        lock(&self.routes).remove(&session);
        let end = match end {
            AskEnd::Finished(stop) if cancelled_at.is_some() || stop == "cancelled" => {
                AskEnd::Broken("cancelled".into())
            }
            other => other,
        };
        outcome(run, end, Some(session))
    }
}

/// What a run collected.
struct Run {
    answer: String,
    entries: Vec<Entry>,
    first_update: Option<Duration>,
    started: Instant,
}

impl Run {
    fn record(&mut self, update: &AgentUpdate) {
        if self.first_update.is_none() {
            self.first_update = Some(self.started.elapsed());
        }
        match update {
            AgentUpdate::Text(text) => {
                self.answer.push_str(text);
                match self.entries.last_mut() {
                    Some(Entry::Text(last)) => last.push_str(text),
                    _ => self.entries.push(Entry::Text(text.clone())),
                }
            }
            AgentUpdate::Thought(text) => match self.entries.last_mut() {
                Some(Entry::Thought(last)) => last.push_str(text),
                _ => self.entries.push(Entry::Thought(text.clone())),
            },
            AgentUpdate::ToolCall {
                id, title, status, ..
            } => self.entries.push(Entry::ToolCall {
                id: id.clone(),
                title: title.clone(),
                status: status.clone(),
            }),
            AgentUpdate::ToolCallUpdate {
                id, title, status, ..
            } => {
                for entry in self.entries.iter_mut().rev() {
                    if let Entry::ToolCall {
                        id: known,
                        title: known_title,
                        status: known_status,
                    } = entry
                        && known == id
                    {
                        if let Some(title) = title {
                            known_title.clone_from(title);
                        }
                        if let Some(status) = status {
                            known_status.clone_from(status);
                        }
                        break;
                    }
                }
            }
            AgentUpdate::Plan(_) => {}
        }
    }
}

/// A serialized enum's name (`ToolKind::Read` → `read`).
fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The text of content blocks (other kinds are named).
fn text_of(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::ResourceLink(link) => format!("<{}>", link.uri),
        ContentBlock::Image(_) => "[an image]".into(),
        ContentBlock::Audio(_) => "[audio]".into(),
        _ => "[a resource]".into(),
    }
}

/// An update as the caller sees it (`None` for what a run does not follow).
fn neutral(update: SessionUpdate) -> Option<AgentUpdate> {
    Some(match update {
        SessionUpdate::AgentMessageChunk(chunk) => AgentUpdate::Text(text_of(&chunk.content)),
        SessionUpdate::AgentThoughtChunk(chunk) => AgentUpdate::Thought(text_of(&chunk.content)),
        SessionUpdate::ToolCall(call) => AgentUpdate::ToolCall {
            id: call.tool_call_id.0.to_string(),
            title: call.title,
            kind: name_of(&call.kind),
            status: name_of(&call.status),
        },
        SessionUpdate::ToolCallUpdate(update) => {
            let fields = update.fields;
            let text = fields.content.map(|content| {
                content
                    .iter()
                    .filter_map(|c| match c {
                        ToolCallContent::Content(content) => Some(text_of(&content.content)),
                        ToolCallContent::Diff(diff) => {
                            Some(format!("[a change of {}]", diff.path.display()))
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            AgentUpdate::ToolCallUpdate {
                id: update.tool_call_id.0.to_string(),
                title: fields.title,
                status: fields.status.map(|s| name_of(&s)),
                text,
            }
        }
        SessionUpdate::Plan(plan) => AgentUpdate::Plan(
            plan.entries
                .iter()
                .map(|entry| format!("{} ({})", entry.content, name_of(&entry.status)))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => return None,
    })
}

fn question_of(request: &RequestPermissionRequest) -> PermissionQuestion {
    let fields = &request.tool_call.fields;
    PermissionQuestion {
        tool_call_id: request.tool_call.tool_call_id.0.to_string(),
        title: fields
            .title
            .clone()
            .unwrap_or_else(|| request.tool_call.tool_call_id.0.to_string()),
        kind: fields.kind.as_ref().map(name_of),
        input: fields.raw_input.clone(),
    }
}

/// The option of `request` that says `answer` (allow once before always, reject once before
/// always), else `cancelled`.
fn outcome_for(
    request: &RequestPermissionRequest,
    answer: PermissionAnswer,
) -> RequestPermissionOutcome {
    let kinds: &[PermissionOptionKind] = match answer {
        PermissionAnswer::Allow => &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ],
        PermissionAnswer::Reject => &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ],
        PermissionAnswer::Cancel => &[],
    };
    kinds
        .iter()
        .find_map(|kind| {
            request
                .options
                .iter()
                .find(|option| option.kind == *kind)
                .map(|option| option.option_id.clone())
        })
        .map_or(RequestPermissionOutcome::Cancelled, |id| {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
        })
}
