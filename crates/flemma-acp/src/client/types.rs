//! The vocabulary of asking an agent: what runs it, the request, what it tells while it
//! works, the permissions it asks for and how a run ended, with the transcript's entries.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;

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
    pub events: Vec<Entry>,
    pub info: AgentInfo,
    /// When the first update arrived, measured from the call (benchmarks).
    pub first_update: Option<Duration>,
}

/// What happened in one run, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The task as sent.
    Prompt(String),
    Text(String),
    Thought(String),
    ToolCall {
        id: String,
        title: String,
        status: String,
    },
    Permission {
        title: String,
        answer: PermissionAnswer,
    },
}
