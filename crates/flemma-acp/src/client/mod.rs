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
pub mod types;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use connection::AgentConnection;
pub use types::{
    AgentCommand, AgentInfo, AgentUpdate, AskEnd, AskEvents, AskOutcome, AskRequest,
    PermissionAnswer, PermissionQuestion,
};

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
