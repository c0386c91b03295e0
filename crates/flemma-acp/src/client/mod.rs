//! flemmad as an ACP **client**: the agents `ask_agent` asks. One child process per agent
//! ([`connection::AgentConnection`]: started on the first call, `initialize`d, reused, a fresh
//! session per task) in the process's [`AgentHub`], keyed by the agent's name and what runs it
//! (a changed entry, or a process that died or was stopped by the watchdog, is started again on
//! the next call). [`AgentHub::ask`] runs one task: `session/new`, `session/prompt`, every
//! `session/update` told to the caller's [`AskEvents`] as a neutral [`AgentUpdate`] (no ACP type
//! leaves this crate), the agent's `session/request_permission` put to the caller, `session/cancel`
//! when the caller cancels, and the watchdog: an agent silent for longer than `idle_timeout`
//! ends the run and is stopped. What it answered and how it ended is an [`AskOutcome`].
//!
//! The agents' processes are started in their own process group (through flemmad's
//! parent-death shim when the binary gives one, as MCP servers are), and killed with it: none
//! outlives flemmad.

pub mod connection;
pub mod transcript;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use connection::AgentConnection;

/// What runs an agent: its name (the configuration's), the argument vector (the program first,
/// as the binary resolved and wrapped it), the variables added to flemmad's environment and the
/// process's working directory.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AgentCommand {
    pub name: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

impl std::fmt::Debug for AgentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment's values may be secrets: only their names are shown.
        let env: Vec<&str> = self.env.iter().map(|(key, _)| key.as_str()).collect();
        f.debug_struct("AgentCommand")
            .field("name", &self.name)
            .field("argv", &self.argv)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// What an agent said about itself at `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentInfo {
    /// `agentInfo.name` (`flemmad` for flemmad itself).
    pub name: Option<String>,
    /// `agentInfo.title`.
    pub title: Option<String>,
    pub version: Option<String>,
}

/// One task for an agent.
#[derive(Debug, Clone)]
pub struct AskRequest {
    /// The session's working directory (the asking chat's).
    pub cwd: PathBuf,
    /// The task's text.
    pub prompt: String,
    /// Where the conversation is kept: flemmad (as an agent) creates its session's chat there
    /// when asked so (`_meta.flemma.chat` of `session/new`); any other agent's conversation is
    /// written there by the caller ([`transcript`]).
    pub chat: Option<PathBuf>,
    /// The watchdog: the longest silence of the agent before the run is stopped.
    pub idle_timeout: Duration,
    /// How long the agent may take to start and answer `initialize`.
    pub startup_timeout: Duration,
}

/// What an agent does while it works, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentUpdate {
    /// Answer text.
    Text(String),
    /// Thinking text.
    Thought(String),
    /// A tool call of the agent's own, announced.
    ToolCall {
        id: String,
        title: String,
        kind: String,
        status: String,
    },
    /// A change of one of its tool calls (a new status, a title, its output as text).
    ToolCallUpdate {
        id: String,
        title: Option<String>,
        status: Option<String>,
        text: Option<String>,
    },
    /// Its plan, one entry a line.
    Plan(String),
}

/// A permission the agent asks for one of its tool calls.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionQuestion {
    /// The agent's id of the call.
    pub tool_call_id: String,
    /// What the call does (the agent's title of it).
    pub title: String,
    pub kind: Option<String>,
    /// The call's input, when the agent sent it.
    pub input: Option<serde_json::Value>,
}

/// How a permission was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Allowed once.
    Allow,
    /// Rejected once.
    Reject,
    /// Nobody answered (the run was cancelled): the agent's request is answered `cancelled`.
    Cancel,
}

/// Where the run's progress goes: every update, and the permissions the agent asks for (the
/// answer may take as long as the user takes; the watchdog waits meanwhile).
pub trait AskEvents: Send + Sync {
    fn update(&self, update: &AgentUpdate);
    fn permission(&self, question: PermissionQuestion) -> BoxFuture<'static, PermissionAnswer>;
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskEnd {
    /// The agent answered the prompt with this stop reason (`end_turn`, `max_tokens`,
    /// `max_turn_requests`, `refusal`, `cancelled`).
    Finished(String),
    /// Nothing was asked: the agent did not start, or refused the session.
    Failed(String),
    /// The run stopped before the agent finished (it crashed, the watchdog, a cancel it did
    /// not answer): why.
    Broken(String),
}

/// What one run gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskOutcome {
    pub end: AskEnd,
    /// The agent's answer text, in order.
    pub answer: String,
    /// The session's id (flemmad's is its chat's path).
    pub session_id: Option<String>,
    /// What happened, in order, for the transcript.
    pub events: Vec<transcript::Entry>,
    pub info: AgentInfo,
    /// When the first update arrived, measured from the call (benchmarks).
    pub first_update: Option<Duration>,
}

/// Options of the hub.
#[derive(Debug, Clone, Default)]
pub struct HubOptions {}

/// The agents of this process.
#[derive(Debug, Default)]
pub struct AgentHub {
    agents: Mutex<HashMap<String, Slot>>,
}

#[derive(Debug, Clone)]
struct Slot {
    command: AgentCommand,
    /// The running connection; the lock is held while it starts, so two calls start one.
    connection: Arc<tokio::sync::Mutex<Option<Arc<AgentConnection>>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AgentHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// The running connection of `command`'s agent, started when there is none (or the one
    /// there died, or runs another command).
    pub async fn connect(
        &self,
        command: &AgentCommand,
        startup: Duration,
    ) -> Result<Arc<AgentConnection>, String> {
        let (slot, replaced) = {
            let mut agents = lock(&self.agents);
            let fresh = || Slot {
                command: command.clone(),
                connection: Arc::default(),
            };
            let slot = agents.entry(command.name.clone()).or_insert_with(fresh);
            let mut replaced = None;
            if slot.command != *command {
                replaced = Some(std::mem::replace(slot, fresh()));
            }
            (slot.clone(), replaced)
        };
        if let Some(old) = replaced
            && let Some(connection) = old.connection.lock().await.take()
        {
            connection.close().await;
        }
        let mut running = slot.connection.lock().await;
        if let Some(connection) = running.as_ref().filter(|c| !c.is_dead()) {
            return Ok(connection.clone());
        }
        if let Some(dead) = running.take() {
            tracing::info!(agent = %command.name, "the agent's process ended; starting it again");
            dead.close().await;
        }
        let connection = AgentConnection::start(command, startup).await?;
        *running = Some(connection.clone());
        Ok(connection)
    }

    /// What the agent of `name` said at `initialize`, when it ran in this process.
    pub fn info(&self, name: &str) -> Option<AgentInfo> {
        let slot = lock(&self.agents).get(name).cloned()?;
        let running = slot.connection.try_lock().ok()?;
        running.as_ref().map(|c| c.info().clone())
    }

    /// The process ids of the agents running now, by name.
    pub fn pids(&self) -> Vec<(String, u32)> {
        let slots: Vec<(String, Slot)> = lock(&self.agents)
            .iter()
            .map(|(name, slot)| (name.clone(), slot.clone()))
            .collect();
        slots
            .into_iter()
            .filter_map(|(name, slot)| {
                let running = slot.connection.try_lock().ok()?;
                let connection = running.as_ref().filter(|c| !c.is_dead())?;
                Some((name, connection.pid()?))
            })
            .collect()
    }

    /// Runs one task on `command`'s agent (started when it is not running). `cancel` sends the
    /// agent `session/cancel`; the outcome then holds what it answered so far.
    pub async fn ask(
        &self,
        command: &AgentCommand,
        request: AskRequest,
        events: &dyn AskEvents,
        cancel: CancellationToken,
    ) -> AskOutcome {
        let started = std::time::Instant::now();
        let connection = tokio::select! {
            connection = self.connect(command, request.startup_timeout) => connection,
            () = cancel.cancelled() => Err("cancelled before it started".to_owned()),
        };
        match connection {
            Ok(connection) => connection.ask(request, events, cancel, started).await,
            Err(reason) => AskOutcome {
                end: AskEnd::Failed(reason),
                answer: String::new(),
                session_id: None,
                events: Vec::new(),
                info: AgentInfo::default(),
                first_update: None,
            },
        }
    }

    /// Stops every agent (stdin closed, then the process group killed).
    pub async fn shutdown(&self) {
        let slots: Vec<Slot> = lock(&self.agents).drain().map(|(_, slot)| slot).collect();
        for slot in slots {
            if let Some(connection) = slot.connection.lock().await.take() {
                connection.close().await;
            }
        }
    }
}
