//! The results of the engine requests (`flemma/status`, `flemma/jobs`, `flemma/usage`, and
//! what `flemma/send` and the other commands answer): what the engine is doing for one
//! document right now. `flemmad lsp`, `flemmad serve` (LSP and `rpc.sock`) answer with these.
//!
//! Stable: fields are only ever added.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `flemma/status`: what the engine does for a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineStatus {
    /// The document (its absolute path).
    pub path: String,
    /// `idle` (no driver runs), `streaming` (a request streams), `tools` (tools or jobs run),
    /// `working` (a driver runs between those) or `awaiting-approval`.
    pub state: String,
    /// Foreground tool calls running (tool use ids).
    pub running_tools: Vec<String>,
    /// Tool calls waiting for approval (tool use ids).
    pub pending: Vec<String>,
    pub jobs: Vec<EngineJob>,
    pub usage: UsageTotals,
    /// Why the last cycle stopped (`idle`, `awaiting-approval`, `cancelled`, `error: …`), when one
    /// ran in this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop: Option<String>,
    /// The provider and model `flemma/switch` set for the document (its runtime layer), when
    /// it was switched in this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switched: Option<ModelSwitch>,
    /// The mode `flemma/mode` set for the document, when it was set in this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The context meter of the last request the document's engine sent in this process (its
    /// input tokens against the model's window, docs/context.md), when one was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Box<crate::context::ContextStatus>>,
}

/// A provider and model, as `flemma/switch` sets them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelSwitch {
    /// `anthropic`, `openai`, … (the config's `provider` values).
    pub provider: String,
    pub model: String,
}

/// The answer of `flemma/switch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SwitchResult {
    /// What the switch set (the document's runtime layer).
    pub switched: ModelSwitch,
    /// What the document's next request uses: the switch, unless the frontmatter sets the
    /// provider or model (the frontmatter is the higher layer).
    pub next: ModelSwitch,
    /// `true` when the frontmatter overrides the switch, so it has no effect on this chat.
    pub frontmatter_wins: bool,
    /// One line for the user: what the next request uses, and why.
    pub message: String,
}

/// The answer of `flemma/mode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModeResult {
    /// The mode set (the document's runtime layer).
    pub mode: String,
    /// The mode the document's tools run in: the one set, unless the frontmatter sets a
    /// stricter one (a chat may only make its mode stricter).
    pub effective: String,
    /// One line for the user: the mode the tools run in, and why.
    pub message: String,
}

/// The answer of `flemma/proposal`: what a pending `write` or `edit` would change, against the
/// file as it is now (computed when asked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProposalResult {
    /// The call's tool (`write` or `edit`).
    pub tool: String,
    /// The file as the call names it.
    pub shown: String,
    /// The file's absolute path.
    pub path: String,
    /// The file's text now (`null`: it does not exist; the call creates it).
    pub before: Option<String>,
    /// Its text after the call.
    pub after: String,
    /// The change as a unified diff (empty: the call changes nothing).
    pub diff: String,
    /// The diff's hunks, numbered from 1 (what `flemma/approveHunks` names).
    pub hunks: Vec<ProposalHunk>,
}

/// One hunk of a [`ProposalResult`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProposalHunk {
    pub number: u32,
    /// `@@ -a,b +c,d @@`.
    pub header: String,
    /// The hunk's lines, its header first.
    pub diff: String,
}

/// The answer of `flemma/changes`: what the document's tool calls changed in its project's
/// files, call by call, from its checkpoints (docs/review.md); calls that changed nothing are
/// left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangesResult {
    /// In the order the calls ran.
    pub calls: Vec<CallChanges>,
}

/// What one call changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallChanges {
    pub tool_id: String,
    /// The call's tool (`bash`, `write`, …).
    pub tool: String,
    /// The files it changed, in the diff's order.
    pub files: Vec<ChangedFile>,
    /// The change as a unified diff (git's: `diff --git a/… b/…` per file).
    pub diff: String,
}

/// One file a call changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    /// Relative to the project (the new path of a file renamed).
    pub path: String,
    /// The old path of a file renamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Lines added (`null`: a binary file).
    pub added: Option<u64>,
    /// Lines removed (`null`: a binary file).
    pub removed: Option<u64>,
}

/// The answer of `flemma/rewind`: what was (with `dryRun`, would be) restored, removed and
/// cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindResult {
    pub dry_run: bool,
    /// Files written back to their content before the call (relative to the project).
    pub restored: Vec<String>,
    /// Files created by the call or a later one, removed.
    pub removed: Vec<String>,
    /// Files changed since the conversation's last call (by you or another program): without
    /// `force` nothing is changed when there are any (`refused`).
    pub changed_since: Vec<String>,
    /// The files were not put back (and the chat not cut) because of `changedSince`.
    pub refused: bool,
    /// Where the chat is (would be) cut, when asked: the cut itself is written through the
    /// document's writer (an editor with the chat open gets an edit); `chat:rewound` or
    /// `chat:rewind-failed` follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatCut>,
    /// One line for the user: what happened.
    pub message: String,
}

/// Where a chat is cut back (`flemma/rewind` with `chat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatCut {
    /// The 1-based line of the `@Assistant:` message that made the call (the first cut).
    pub line: u64,
    /// How many messages go (that one and those after it).
    pub messages: u64,
}

/// A background job the engine started or recovered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineJob {
    pub job_id: String,
    pub tool_id: String,
    pub tool_name: String,
    pub state: JobState,
}

/// Where a background job is in its life. The one job state: the engine's job table,
/// `flemma/jobs`, the `flemma.jobs.status` tool and the hover speak it; its JSON form is the
/// lower-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Running.
    Running,
    /// Finished; its result waits for a delivery point.
    Completed,
    /// Its `**Job Result:**` block was written.
    Delivered,
    /// No process runs it (`flemmad status` of a file no send owns): the next send marks it
    /// lost.
    Orphaned,
    /// The daemon that ran it went away (orphan recovery marks it).
    Lost,
}

impl JobState {
    /// The JSON name (`running`, `completed`, `delivered`, `orphaned`, `lost`).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Delivered => "delivered",
            JobState::Orphaned => "orphaned",
            JobState::Lost => "lost",
        }
    }
}

/// `flemma/jobs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobsResult {
    pub jobs: Vec<EngineJob>,
}

/// `flemma/usage`: token totals of the document's requests in this process, and their cost
/// when the model's prices are known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub thinking_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// US dollars, when the model's prices are known (a subscription has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// US dollars the prompt cache saved (cache reads at the input price minus what they cost,
    /// less the surcharge of cache writes), when the model's prices are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_saved: Option<f64>,
    /// The subscription's rate limits as the last response reported them (`codex`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<RateLimits>,
}

/// A subscription's rate limits as the provider last reported them: each window and how much
/// of it is used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimits {
    /// The windows (`primary`, the shorter one, first).
    pub windows: Vec<RateLimitWindow>,
}

/// One rate-limit window (the Codex backend: `primary` is 5 hours, `secondary` a week).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitWindow {
    /// The provider's name of the window (`primary`, `secondary`).
    pub name: String,
    /// How much of the window is used, in percent (100: spent).
    pub used_percent: f64,
    /// The window's length in minutes (300: five hours, 10080: a week).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_minutes: Option<u64>,
    /// When the window resets, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
}

impl RateLimits {
    /// The window that is spent (used 100 % or more), if one is.
    pub fn spent(&self) -> Option<&RateLimitWindow> {
        self.windows.iter().find(|w| w.used_percent >= 100.0)
    }
}

impl RateLimitWindow {
    /// The window's length in words: `5-hour`, `weekly`, `daily`, `90-minute`, else its name.
    pub fn label(&self) -> String {
        match self.window_minutes {
            Some(10_080) => "weekly".to_owned(),
            Some(1_440) => "daily".to_owned(),
            Some(minutes) if minutes > 0 && minutes % 1_440 == 0 => {
                format!("{}-day", minutes / 1_440)
            }
            Some(minutes) if minutes > 0 && minutes % 60 == 0 => {
                format!("{}-hour", minutes / 60)
            }
            Some(minutes) if minutes > 0 => format!("{minutes}-minute"),
            _ => self.name.clone(),
        }
    }
}

/// What `flemma/send`, `cancel`, `approve`, `reject`, `approveAll`, `background` and
/// `execute` answer: the command was taken (its effects follow as edits, `flemma/event`
/// notifications and `$/progress`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    /// `true`: a driver was started for the document; `false`: one was running and the
    /// command was fed to it.
    pub started: bool,
    /// `approve`, `reject`, `approveAll`: the tool calls whose placeholders the engine edits
    /// (absent for the other commands).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_ids: Vec<String>,
}
