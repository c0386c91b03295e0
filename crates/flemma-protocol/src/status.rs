//! The JSON form of `flemmad status FILE --json` (protocol/status.md): what a chat is
//! configured to do, which tool calls wait, and which jobs it mentions.
//!
//! Stable: fields are only ever added.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

pub use crate::context::ContextStatus;

/// The whole output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ChatStatus {
    /// The chat file as given.
    pub file: String,
    /// The resolved configuration (defaults, config file, frontmatter); null when it does not
    /// resolve.
    pub config: Option<Value>,
    /// For every value not left at its default, the layer that set it (`config file`,
    /// `frontmatter`, …), keyed by dotted path.
    pub config_sources: Map<String, Value>,
    /// The process sandbox: `bwrap (network off)` or `none: <why>`.
    pub sandbox: String,
    /// What the chat's tools may change (`ask`, `default`, `auto-edit`; docs/modes.md), as its
    /// configuration resolves (a daemon's `flemma/mode` shows under `daemon`).
    #[serde(default)]
    pub mode: String,
    /// The tools offered to the model, with what the approval chain decides for a call.
    pub tools: Vec<ToolStatus>,
    /// Every tool use without a final result, in document order.
    pub unresolved: Vec<UnresolvedCall>,
    /// Every background job the file mentions.
    pub jobs: Vec<JobStatus>,
    /// The pid of the `flemmad send` running on this file, when one is.
    pub send_pid: Option<u32>,
    /// What a running daemon's engine is doing with the chat (`flemma/status`: its state —
    /// `idle`, `streaming`, `tools`, `working`, `awaiting-approval` —, running tools, pending
    /// calls, jobs, usage, why its last cycle stopped); null when no daemon answers.
    pub daemon: Option<crate::engine::EngineStatus>,
    /// The MCP servers the chat's configuration defines, each with its state.
    #[serde(default)]
    pub mcp_servers: Vec<McpServerStatus>,
    /// The agents `ask_agent` may ask (`[agents.NAME]` of the user's configuration).
    #[serde(default)]
    pub agents: Vec<AgentStatus>,
    /// Token and cost totals, when known (the file does not record them; a running daemon
    /// does). Null here.
    pub usage: Option<Value>,
    /// The subscription's rate limits (provider `codex`), as the provider last reported them
    /// to a daemon running this chat, else to any send of this user; absent for providers
    /// without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<ObservedRateLimits>,
    /// The next request's input tokens against the model's context window (docs/context.md);
    /// absent when the chat cannot be sent as it stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextStatus>,
}

/// A subscription's rate limits and when they were reported.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedRateLimits {
    /// The provider that reported them (`codex`).
    pub provider: String,
    /// When, in seconds since the Unix epoch (absent when a running daemon reported them:
    /// they are current).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<i64>,
    /// The windows (`primary`: 5 hours; `secondary`: a week).
    pub windows: Vec<crate::engine::RateLimitWindow>,
}

/// One MCP server of the chat.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct McpServerStatus {
    /// The server's tool-name form (its tools are `NAME.TOOL`).
    pub name: String,
    /// What runs: `stdio: COMMAND ARGS (in DIR)` or `http: URL` (no environment or header
    /// values).
    pub transport: String,
    /// `running` or `failed`.
    pub state: String,
    /// Why it is not running (with the last lines of its stderr).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The server process (stdio servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its tools' full names.
    pub tools: Vec<String>,
}

/// One agent `ask_agent` may ask.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentStatus {
    pub name: String,
    /// What runs: `COMMAND ARGS (in DIR; its permission requests: run|ask|refuse)` (no
    /// environment values).
    pub command: String,
    /// What it is for, as the model reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `run`, `ask` or `refuse`: what happens when it asks permission for a tool call.
    pub permissions: String,
}

/// An enabled tool.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolStatus {
    pub name: String,
    pub approval: Approval,
}

/// What the approval chain decides.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Approval {
    /// `approve`, `require_approval` or `deny`.
    pub verdict: String,
    /// The deciding resolver (`urn:flemma:approval:config`, …).
    pub resolver: String,
    /// Why, for `deny`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A tool use without a final result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnresolvedCall {
    pub tool_id: String,
    pub tool_name: String,
    /// `no result` (no placeholder yet), or the placeholder status: `pending`, `approved`,
    /// `rejected`, `denied`, `aborted`.
    pub status: String,
    /// The call's input (null when the fence is not a JSON object).
    pub input: Value,
    /// What the approval chain decides for this call (null: the tool is not enabled).
    pub approval: Option<Approval>,
    /// A `write` or `edit`: what it would change in its file as the file is now, as a unified
    /// diff (empty: no change). Absent for the other tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// A `write` or `edit` whose change cannot be shown: why (the tool's own refusal, such as
    /// an `edit` whose text is no longer in the file; an unreadable file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_error: Option<String>,
}

/// A background job named by a `job=` tool result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub job_id: String,
    pub tool_id: String,
    /// `delivered` (its `**Job Result:**` is in the file), `running` (a send owns the file and
    /// waits for it) or `orphaned` (no process runs it: the next send marks it lost).
    pub state: crate::engine::JobState,
}
