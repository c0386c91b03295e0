//! The seam between the agent and the engine: what the agent asks of the rest of flemmad
//! ([`Backend`]), what it is told while a prompt runs ([`TurnEvent`]), and the session
//! settings the client's pickers show.

use std::path::{Path, PathBuf};

use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

use crate::files::ClientFiles;
use crate::{delegation, list};

/// What happens to a chat while a prompt runs, as the backend tells it.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// Reply text as it streams in.
    Text(String),
    /// Thinking text as it streams in.
    Thinking(String),
    /// The model composed a tool call (its block is in the chat now): its tool and input.
    ToolComposed {
        tool_id: String,
        name: String,
        input: serde_json::Value,
    },
    /// A tool started running, with the input it got.
    ToolStarted {
        tool_id: String,
        name: String,
        input: Option<serde_json::Value>,
    },
    /// A call got its final result: the output written (the model's text), and whether it
    /// failed (an error, or a call that did not run: rejected, denied, aborted).
    ToolFinished {
        tool_id: String,
        name: String,
        output: String,
        failed: bool,
    },
    /// A call went to the background as the job `job_id`: its result comes later.
    ToolInBackground {
        tool_id: String,
        name: String,
        job_id: String,
    },
    /// Calls wait for approval: each one's id, tool and input.
    ApprovalRequired(Vec<PendingCall>),
    /// A request finished: the tokens in context (`used`) of the model's context window
    /// (`size`), the session's cost when known, and what else the engine tells (the cache,
    /// a subscription's rate limits), for the client's `_meta`.
    Usage {
        used: u64,
        size: u64,
        cost_usd: Option<f64>,
        meta: serde_json::Map<String, serde_json::Value>,
    },
    /// An agent a call of `ask_agent` asked did something (text, a tool call…).
    AgentProgress(delegation::Progress),
    /// An agent a call of `ask_agent` asked wants permission for one of its tool calls.
    AgentPermission(delegation::Permission),
    /// The chat was compacted before a request (its older turns summarised): what to tell the
    /// user, the summary the model wrote (when the engine told it), and the compaction's facts
    /// for the client's `_meta` (messages, archive, model, tokens before and after).
    Compacted {
        notice: String,
        summary: Option<String>,
        meta: serde_json::Map<String, serde_json::Value>,
    },
    /// A compaction failed (the chat is unchanged): why.
    CompactionFailed(String),
    /// The engine stopped (with a message for errors and refusals).
    Stopped {
        reason: flemma_protocol::event::StopLabel,
        message: Option<String>,
    },
}

/// A call waiting for the user's approval.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub tool_id: String,
    pub name: String,
    pub input: serde_json::Value,
}

/// One value a session setting may take (a model, a thought level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// What selects it (`anthropic/claude-sonnet-4-5`, `$fast`, `high`).
    pub value: String,
    /// What the user sees.
    pub name: String,
    pub description: Option<String>,
}

/// A session setting's choices, `current` among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picker {
    pub current: String,
    pub choices: Vec<Choice>,
}

impl Picker {
    pub fn has(&self, value: &str) -> bool {
        self.choices.iter().any(|choice| choice.value == value)
    }
}

/// What a session's next prompt runs with, as the client's pickers show it: the mode
/// (docs/modes.md), the model (`None` when the configuration does not resolve) and the
/// thinking level (`None` for a model that does not think).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub mode: flemma_config::Mode,
    pub model: Option<Picker>,
    pub thought_level: Option<Picker>,
}

/// An MCP server the editor gives a session (`mcpServers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerSpec {
    Stdio {
        name: String,
        command: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        name: String,
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl McpServerSpec {
    pub fn name(&self) -> &str {
        match self {
            McpServerSpec::Stdio { name, .. } | McpServerSpec::Http { name, .. } => name,
        }
    }
}

/// What a pending `write` or `edit` would do to its file as the file is now (review before
/// approval): shown as the permission request's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedFile {
    pub path: PathBuf,
    /// The file's text now (`None`: the call creates it).
    pub before: Option<String>,
    pub after: String,
}

/// The seam to the engine: what the agent asks of the rest of flemmad. Every method returns
/// at once; an error is a [`RequestError`]: its JSON-RPC code (bad input, a refusal, flemmad's
/// own failure) and a message for the user, which the client gets as they are.
pub trait Backend: Send + Sync + 'static {
    /// Creates the file `path` (which must not exist) holding `text`, with its folders.
    fn create_chat(&self, path: &Path, text: &str) -> Result<(), RequestError>;
    /// The chat's text.
    fn read_chat(&self, path: &Path) -> Result<String, RequestError>;
    /// The `.chat` files directly in `dir`, with their modification times (none when the
    /// folder does not exist).
    fn chats_in(&self, dir: &Path) -> Vec<list::ChatEntry>;
    /// Removes the chat if it still holds `expected` (a session that was never used); `false`
    /// when it holds something else.
    fn remove_chat_if_unchanged(&self, path: &Path, expected: &str) -> Result<bool, RequestError>;
    /// Replaces the chat's text with `text` if it still is `expected` (atomically); `false`
    /// when someone changed it meanwhile.
    fn replace_chat(&self, path: &Path, expected: &str, text: &str) -> Result<bool, RequestError>;
    /// The events of the chat at `path` from now on.
    fn events(&self, path: &Path) -> tokio::sync::mpsc::UnboundedReceiver<TurnEvent>;
    /// A typed `flemma/*` request about the chat at `path` (send, approve, reject, cancel,
    /// mode, switch, compact…), as every front end makes it: the engine host's one command
    /// path, its typed answer or refusal.
    fn call(&self, path: &Path, request: FlemmaRequest) -> Result<FlemmaResponse, RequestError>;
    /// A slash command of [`crate::commands::COMMANDS`] on the chat at `path` (`argument`: the text
    /// typed after its name): the text to show the user. The chat is not written.
    fn slash_command(
        &self,
        path: &Path,
        command: &str,
        argument: &str,
    ) -> Result<String, RequestError> {
        let _ = (path, argument);
        Err(RequestError::invalid_params(format!(
            "/{command} is not available here"
        )))
    }
    /// The mode the tools of the chat at `path` run in from its next prompt (docs/modes.md).
    fn mode(&self, path: &Path) -> Result<flemma_config::Mode, RequestError> {
        let _ = path;
        Ok(flemma_config::Mode::Default)
    }
    /// The settings of the chat at `path`'s next prompt: its mode, model and thinking level
    /// with their choices.
    fn settings(&self, path: &Path) -> Result<Settings, RequestError> {
        Ok(Settings {
            mode: self.mode(path)?,
            model: None,
            thought_level: None,
        })
    }
    /// The chat's next requests use `model` (`provider/model`, a model of its provider, a
    /// `$preset`), as `flemma.switch` sets it (below its frontmatter); what happened, in a
    /// sentence.
    fn set_model(&self, path: &Path, model: &str) -> Result<String, RequestError> {
        let _ = (path, model);
        Err(RequestError::refused("models are not available here"))
    }
    /// The chat's next requests think at `level` (a value of [`Settings::thought_level`]),
    /// as `set_model` sets a model; what happened, in a sentence.
    fn set_thought_level(&self, path: &Path, level: &str) -> Result<String, RequestError> {
        let _ = (path, level);
        Err(RequestError::refused(
            "thinking levels are not available here",
        ))
    }
    /// `session/delete`: moves the chat at `path` out of its project into flemmad's trash
    /// (never destroyed); returns where it lies now, for the user to restore by moving it back.
    fn trash_chat(&self, path: &Path) -> Result<PathBuf, RequestError>;
    /// What the pending call `tool_id` of the chat at `path` would change in its file, as the
    /// file is now; `None` for a tool whose effect cannot be known before it runs, or when the
    /// change cannot be computed (the permission request then shows the call's input only).
    fn proposed_change(&self, path: &Path, tool_id: &str) -> Option<ProposedFile> {
        let _ = (path, tool_id);
        None
    }
    /// The session's MCP servers become tool sources of the chat at `path` (stdio servers
    /// start in a neutral directory, never the session's project: `docs/security.md`).
    /// Returns one line per server that is not used, and why (a reserved name: `flemma`).
    fn mcp_servers(&self, path: &Path, servers: Vec<McpServerSpec>) -> Vec<String>;
    /// The session's tools read and write files of the chat at `path` through the client
    /// (it advertised `fs.readTextFile` or `fs.writeTextFile`).
    fn client_files(&self, path: &Path, files: ClientFiles);
    /// The connection of `files` ended: the chat's tools use the disk again (unless another
    /// connection gave its own since).
    fn client_gone(&self, path: &Path, files: &ClientFiles);
}
