//! What happens to a document, as one closed type ([`EngineEvent`]) that the engine and the
//! engine host produce and every front end reads — `flemmad send`'s progress, the language
//! server's `flemma/event` and `$/progress`, `rpc.sock` subscriptions, the ACP agent — and its
//! one JSON line ([`LifecycleEvent`]): `flemmad send --events` on stdout and the `flemma/event`
//! notification (protocol/events.md).
//!
//! Stable: fields are only ever added. An event's name exists once, in the variant's serde
//! rename; [`EngineEvent::name`] gives it back for messages and tests.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::RateLimits;

/// One event of one document, as a JSON line: `{"name", "uri", "data"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LifecycleEvent {
    /// `request:sending`, `tool:executing`, `tool:approval-required`, `job:completed`, … (the
    /// names and their data are listed in protocol/events.md).
    pub name: String,
    /// The document the event is about (a `file://` URI).
    pub uri: String,
    /// The event's data: an object with camelCase keys (`toolId`, `jobId`, `activeCount`, …).
    pub data: Value,
}

impl LifecycleEvent {
    /// The JSON line of `event` about the document at `uri`.
    pub fn new(uri: impl Into<String>, event: &EngineEvent) -> Self {
        let (name, data) = event.to_parts();
        Self {
            name: name.to_owned(),
            uri: uri.into(),
            data,
        }
    }

    /// The typed event this line holds (`None`: a name this version does not know, or data
    /// that does not fit it).
    pub fn event(&self) -> Option<EngineEvent> {
        EngineEvent::from_parts(&self.name, self.data.clone())
    }
}

/// Declares a closed list of events: each variant, its data and its name — written once,
/// here, in one line per event. Adding an event is one line in [`EngineEvent`]'s list (and the
/// data type when it has new data); every front end then serialises it with the rest.
macro_rules! events {
    ($(#[$enum_doc:meta])* $enum:ident { $($(#[$doc:meta])* $variant:ident($data:ty) = $name:literal,)* }) => {
        $(#[$enum_doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "name", content = "data")]
        pub enum $enum {
            $($(#[$doc])* #[serde(rename = $name)] $variant($data),)*
        }

        impl $enum {
            /// Every event's name, in the order of the list.
            pub const NAMES: &'static [&'static str] = &[$($name,)*];

            /// The event's name (`tool:executing`, …).
            pub fn name(&self) -> &'static str {
                match self {
                    $($enum::$variant(_) => $name,)*
                }
            }

            /// The name and the data object, as the JSON line carries them.
            pub fn to_parts(&self) -> (&'static str, Value) {
                let data = match serde_json::to_value(self) {
                    Ok(Value::Object(mut object)) => object.remove("data").unwrap_or_default(),
                    _ => Value::Null,
                };
                (self.name(), data)
            }

            /// The event named `name` with `data` (`None` when the name is unknown or the data
            /// does not fit).
            pub fn from_parts(name: &str, data: Value) -> Option<Self> {
                serde_json::from_value(serde_json::json!({"name": name, "data": data})).ok()
            }
        }
    };
}

events! {
    /// Everything that happens to a document, with its data (protocol/events.md).
    EngineEvent {
        /// A request goes to the provider.
        RequestSending(RequestSending) = "request:sending",
        /// The model started composing a tool call (its arguments stream until
        /// [`EngineEvent::RequestComposed`]): progress says `Composing a tool call`.
        RequestComposing(ComposingCall) = "request:composing",
        /// The tool call the model was composing is complete.
        RequestComposed(ComposingCall) = "request:composed",
        /// A request ended (its usage and cost).
        RequestFinished(RequestFinished) = "request:finished",
        /// Reply text as it streams (only `rpc.sock` subscribers and the ACP agent get it:
        /// editors see it in their buffer).
        RequestText(StreamedText) = "request:text",
        /// Thinking text as it streams (like [`EngineEvent::RequestText`]).
        RequestThinking(StreamedText) = "request:thinking",
        /// The document's totals after a request.
        UsageUpdated(UsageUpdated) = "usage:updated",
        /// A subscription's windows, as a response reported them.
        RateLimitsUpdated(RateLimitsUpdated) = "rate-limits:updated",
        /// A foreground tool starts.
        ToolExecuting(ToolRef) = "tool:executing",
        /// What a running tool tells while it works (`ask_agent`: the asked agent's text,
        /// thoughts and tool calls). The shell emits it, not the engine.
        ToolProgress(OfCall<AgentProgress>) = "tool:progress",
        /// A tool's output was written.
        ToolCompleted(ToolCompleted) = "tool:completed",
        /// A call that did not run got its final result: rejected or denied before it ran,
        /// or aborted.
        ToolDeclined(ToolDeclined) = "tool:declined",
        /// Calls wait for the user's approval.
        ToolApprovalRequired(ApprovalRequired) = "tool:approval-required",
        /// An untrusted chat's call waits for approval although its text said otherwise.
        ToolUnconfirmed(ToolUnconfirmed) = "tool:unconfirmed",
        /// An asked agent asks permission for one of its own tool calls, and the user decides
        /// (`flemma/approve` or `flemma/reject` with the `permissionId`). The shell emits it.
        AgentPermissionRequired(OfCall<PermissionAsked>) = "agent:permission-required",
        /// That permission was decided (or its run ended first). The shell emits it.
        AgentPermissionResolved(OfCall<PermissionResolved>) = "agent:permission-resolved",
        /// A call runs as a background job.
        JobSubmitted(JobSubmitted) = "job:submitted",
        /// A background job's result was delivered.
        JobCompleted(JobCompleted) = "job:completed",
        /// The model answered without calls: the conversation waits for the user.
        ConversationIdle(Empty) = "conversation:idle",
        /// Autopilot goes on after a delay.
        AutopilotResumeScheduled(ResumeScheduled) = "autopilot:resume-scheduled",
        /// An edit cancelled the scheduled resume.
        AutopilotResumeCancelled(Empty) = "autopilot:resume-cancelled",
        /// Autopilot goes on.
        AutopilotResumed(Empty) = "autopilot:resumed",
        /// What a start found of an earlier process's work (orphaned jobs, a cut reply,
        /// interrupted calls).
        DocumentRecovered(DocumentRecovered) = "document:recovered",
        /// `flemma/switch` changed the document's runtime layer.
        ConfigUpdated(ConfigUpdated) = "config:updated",
        /// What an untrusted chat's frontmatter set that was ignored (once per send).
        TrustIgnored(TrustIgnored) = "trust:ignored",
        /// A driver's setup is done (before anything is sent): where its requests go, the
        /// model's and the tools' warnings and the chat's diagnostics; or, when the chat's
        /// errors block it, those errors (`engine:stopped` follows).
        EngineSetup(EngineSetup) = "engine:setup",
        /// The engine host's driver for the document ended, after its last write.
        EngineStopped(EngineStopped) = "engine:stopped",
        /// A message the document's driver tells the user that is not an error (a retry, a
        /// warning about a request, a refused input, a write that failed). Editors are told it
        /// as a message, not as this event (the language server shows it once); `rpc.sock`
        /// subscribers, `flemmad send` and the in-process followers get this event.
        EngineNotice(EngineNotice) = "engine:notice",
        /// The chat was compacted (docs/context.md): its older turns became a summary in it,
        /// kept whole in an archive.
        ContextCompacted(ContextCompacted) = "context:compacted",
        /// A compaction asked for by hand (`flemma/compact`), or its undo
        /// (`flemma/compactUndo`), did not happen; the chat is unchanged.
        ContextCompactionFailed(CompactionFailed) = "context:compaction-failed",
        /// A compaction was undone (`flemma/compactUndo`): its summary became the turns it
        /// replaced again, exactly as they were.
        ContextRestored(ContextRestored) = "context:restored",
        /// The chat was cut back to before a call (`flemma/rewind` with `chat`): the cut part
        /// is kept whole as an archive (docs/review.md).
        ChatRewound(ChatRewound) = "chat:rewound",
        /// A cut asked for by `flemma/rewind` did not happen; the chat is unchanged.
        ChatRewindFailed(CompactionFailed) = "chat:rewind-failed",
    }
}

events! {
    /// What happens to the daemon itself (no document): `rpc.sock` subscribers get these
    /// beside the documents' [`EngineEvent`]s (docs/rpc.md).
    DaemonEvent {
        /// An LSP session connected.
        SessionOpened(SessionOpened) = "session:opened",
        /// An LSP session ended.
        SessionClosed(SessionClosed) = "session:closed",
        /// A subscriber fell behind and its oldest events were dropped.
        EventsDropped(EventsDropped) = "events:dropped",
    }
}

impl EngineEvent {
    /// Whether this is streamed text (reply or thinking), which only some receivers want.
    pub fn is_streamed_text(&self) -> bool {
        matches!(
            self,
            EngineEvent::RequestText(_) | EngineEvent::RequestThinking(_)
        )
    }
}

/// An event without data (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Empty {}

/// Tokens of one request or a document's requests together (snake_case, as the events have
/// always carried them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub thinking_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestSending {
    /// Counts from 1 in each process.
    pub request_id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A tool call the model composes in a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComposingCall {
    pub request_id: u64,
    pub tool_id: String,
    pub tool_name: String,
    /// The call's input, once its arguments are complete (`request:composed`; `{}` when they
    /// are not a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RequestStatus {
    Completed,
    Cancelled,
    Errored,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestFinished {
    pub request_id: u64,
    pub status: RequestStatus,
    /// What the request used and cost; absent when the engine cancelled it itself (`reason`).
    #[serde(flatten)]
    pub accounted: Option<Accounted>,
    /// Why a request was cancelled by the engine itself (`the reply being written was
    /// deleted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a finished request used and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accounted {
    pub usage: TokenUsage,
    /// US dollars, when the model's prices are known (`null` otherwise, or a subscription).
    pub cost_usd: Option<f64>,
    /// US dollars the prompt cache saved, when the prices are known.
    pub cache_saved_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamedText {
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageUpdated {
    /// The document's totals.
    pub usage: TokenUsage,
    pub requests: u64,
    pub cost_usd: Option<f64>,
    pub cache_saved_usd: Option<f64>,
    /// The rate limits last reported, or `null`.
    pub rate_limits: Option<RateLimits>,
    /// Input and output of the request that just finished: what the model had in context.
    pub context_tokens: u64,
    /// The model's context window, `null` when unknown.
    pub context_window: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitsUpdated {
    pub rate_limits: RateLimits,
}

/// A tool call named by its id and tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRef {
    pub tool_id: String,
    pub tool_name: String,
    /// The call's input as the tool gets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// What a running call tells (`data`), with the call's id and tool after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OfCall<T> {
    #[serde(flatten)]
    pub data: T,
    pub tool_id: String,
    pub tool_name: String,
}

/// What a running call tells, before the call's id and tool are added (a tool's reporter).
#[derive(Debug, Clone, PartialEq)]
pub enum CallNews {
    Progress(AgentProgress),
    PermissionAsked(PermissionAsked),
    PermissionResolved(PermissionResolved),
}

impl CallNews {
    /// The event of the call `tool_id` of the tool `tool_name`.
    pub fn of_call(self, tool_id: &str, tool_name: &str) -> EngineEvent {
        fn of<T>(data: T, tool_id: &str, tool_name: &str) -> OfCall<T> {
            OfCall {
                data,
                tool_id: tool_id.to_owned(),
                tool_name: tool_name.to_owned(),
            }
        }
        match self {
            CallNews::Progress(p) => EngineEvent::ToolProgress(of(p, tool_id, tool_name)),
            CallNews::PermissionAsked(p) => {
                EngineEvent::AgentPermissionRequired(of(p, tool_id, tool_name))
            }
            CallNews::PermissionResolved(p) => {
                EngineEvent::AgentPermissionResolved(of(p, tool_id, tool_name))
            }
        }
    }
}

/// An asked agent's progress (`tool:progress`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentProgress {
    #[serde(flatten)]
    pub update: ProgressUpdate,
    /// The asked agent's name.
    pub agent: String,
    /// One line saying what it does, for progress displays.
    pub message: String,
}

/// What an asked agent did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProgressUpdate {
    Text {
        text: String,
    },
    Thought {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCall {
        child_tool_id: String,
        title: String,
        tool_kind: String,
        status: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallUpdate {
        child_tool_id: String,
        title: Option<String>,
        status: Option<String>,
        text: Option<String>,
    },
    Plan {
        text: String,
    },
}

/// A permission an asked agent asks for (`agent:permission-required`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionAsked {
    pub agent: String,
    /// What approves or rejects it (`flemma/approve` with this as `toolId`).
    pub permission_id: String,
    pub title: String,
    pub kind: Option<String>,
    pub input: Option<Value>,
}

/// How an asked agent's permission was decided (`agent:permission-resolved`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionResolved {
    pub agent: String,
    pub permission_id: String,
    pub decision: PermissionDecision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PermissionDecision {
    Allowed,
    Rejected,
    /// Its run ended before anyone answered.
    Cancelled,
}

/// How a tool's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Success,
    Error,
}

impl ToolStatus {
    /// As the event writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
        }
    }
}

/// Where a finished tool's output went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Written {
    /// Into its result block.
    Result,
    /// Right below its result block, which holds text the user typed.
    BelowUserText,
    /// Into a new result block: the user removed the block while the tool ran.
    Restored,
    /// Nowhere: the user removed the turn that called the tool while it ran.
    Dropped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCompleted {
    pub tool_id: String,
    pub tool_name: String,
    pub status: ToolStatus,
    pub written: Written,
    /// The output written (as the model gets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// How a call that did not run was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Declined {
    /// The user rejected it.
    Rejected,
    /// A policy denied it.
    Denied,
    /// A cancel (or the user) aborted it.
    Aborted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolDeclined {
    pub tool_id: String,
    pub tool_name: String,
    pub status: Declined,
    /// The result written, as the model gets it.
    pub output: String,
}

/// A call waiting for the user's approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingTool {
    pub tool_id: String,
    pub tool_name: String,
    pub input: Value,
    /// The URN of the resolver whose decision asked for approval.
    pub resolver: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRequired {
    pub tools: Vec<PendingTool>,
}

/// Why a call waits for approval although its text said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Unconfirmed {
    /// An untrusted chat's `(approved)` flemmad did not see given.
    ApprovedOnArrival,
    /// An untrusted chat's call without a result that did not come from the model.
    NotFromModel,
    /// An `(approved)` that appeared while a tool of the chat ran.
    ApprovedWhileAToolRan,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolUnconfirmed {
    pub tool_id: String,
    pub tool_name: String,
    pub reason: Unconfirmed,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSubmitted {
    pub job_id: String,
    pub tool_id: String,
    pub tool_name: String,
    /// Background jobs running now.
    pub active_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCompleted {
    pub job_id: String,
    pub tool_id: String,
    pub tool_name: String,
    pub success: bool,
    pub active_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeScheduled {
    pub delay_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentRecovered {
    /// Job ids found running by a process that is gone.
    pub orphans: Vec<String>,
    pub count: usize,
    /// A reply cut off by a killed process (or a failed write) was closed with its marker.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut_reply: bool,
    /// Calls that were running when the process ended, which wait for approval again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupted: Vec<String>,
}

/// A provider and model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigUpdated {
    /// `runtime`.
    pub layer: String,
    /// What `flemma/switch` set.
    pub provider: String,
    pub model: String,
    /// What the next request uses.
    pub next: ModelRef,
    /// The frontmatter sets the provider or model, which wins over the switch.
    pub frontmatter_wins: bool,
}

/// An option an untrusted chat's frontmatter set that was ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IgnoredOption {
    pub path: String,
    pub value: String,
    pub allowed: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrustIgnored {
    /// Why the chat is untrusted.
    pub reason: String,
    /// The `flemmad trust DIR` command that trusts it.
    pub trust: String,
    pub options: Vec<IgnoredOption>,
}

/// Why the engine's work on a document stopped, as `engine:stopped` and `flemma/status` name
/// it (the engine's `StopReason` without its data; `Error` also when a driver could not start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StopLabel {
    /// Nothing left to do.
    Idle,
    /// A call waits for the user.
    AwaitingApproval,
    /// Autopilot is off: one step done.
    StepDone,
    /// Autopilot ran its maximum of turns.
    MaxTurns,
    /// The request or a tool failed.
    Error,
    /// The model refused to answer.
    Refused,
    /// The user cancelled.
    Cancelled,
    /// An approved call holds text the user typed: not run.
    UserContentInApproved,
}

impl StopLabel {
    /// The label as `engine:stopped` and `flemma/status` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            StopLabel::Idle => "idle",
            StopLabel::AwaitingApproval => "awaiting-approval",
            StopLabel::StepDone => "step-done",
            StopLabel::MaxTurns => "max-turns",
            StopLabel::Error => "error",
            StopLabel::Refused => "refused",
            StopLabel::Cancelled => "cancelled",
            StopLabel::UserContentInApproved => "user-content-in-approved",
        }
    }
}

impl std::fmt::Display for StopLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a driver's setup went (`engine:setup`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineSetup {
    /// Where the requests go (`anthropic`, …) and the model; absent when the chat's errors
    /// block the driver (`blocking` then holds them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model's and the tools' warnings, one line each.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The chat's diagnostics of severity warning or worse, in the order found.
    #[serde(default)]
    pub diagnostics: Vec<SetupDiagnostic>,
    /// Why nothing runs: the errors that block the chat, or why a send has nothing to send.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocking: Vec<SetupDiagnostic>,
}

/// A diagnostic of the chat, placed as its file shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetupDiagnostic {
    /// `error`, `warning`, `information` or `hint`.
    pub severity: String,
    pub message: String,
    /// A further suggestion (the option the user probably meant, the edit that fixes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// What kind of diagnostic it is (`template-tool`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Where it starts in the chat, 1-based (the column counts UTF-8 bytes).
    pub line: u64,
    pub column: u64,
    /// The included file it is in, and the 1-based line there when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_in_file: Option<u64>,
    /// It is about the included file itself, not the place in the chat that includes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_document: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EngineStopped {
    pub reason: StopLabel,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A driver's message for the user ([`EngineEvent::EngineNotice`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EngineNotice {
    /// One line, as `flemmad send` prints it (`warning: …` for a warning).
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompacted {
    /// How many messages the summary replaced.
    pub messages: u64,
    /// The archive that holds them whole.
    pub archive: String,
    /// The model that wrote the summary.
    pub model: String,
    /// The estimated input tokens of the next request before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Made by autopilot at `context.compact_at` (else asked for by hand).
    pub automatic: bool,
    /// The summary the model wrote, as it is in the chat's summary message (after its first
    /// lines, which name the archive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextRestored {
    /// How many messages came back.
    pub messages: u64,
    /// The archive they came from (removed once the file holds them; kept while only an
    /// editor's buffer does).
    pub archive: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatRewound {
    /// The call the chat went back before.
    pub tool_id: String,
    /// The 1-based line the cut began at.
    pub line: u64,
    /// How many messages went.
    pub messages: u64,
    /// Where the whole chat as it was is kept (`flemmad rewind FILE --undo-chat`).
    pub archive: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompactionFailed {
    /// Why (the chat is unchanged).
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionOpened {
    /// The connection's id.
    pub session: u64,
    /// The client's pid.
    pub peer_pid: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionClosed {
    pub session: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventsDropped {
    pub count: u64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The JSON of every event is what protocol/events.md has always said (names and keys).
    #[test]
    fn events_keep_their_json() {
        let cases = [
            (
                EngineEvent::ToolExecuting(ToolRef {
                    tool_id: "t1".into(),
                    tool_name: "bash".into(),
                    input: None,
                }),
                r#"{"name":"tool:executing","data":{"toolId":"t1","toolName":"bash"}}"#,
            ),
            (
                EngineEvent::ConversationIdle(Empty {}),
                r#"{"name":"conversation:idle","data":{}}"#,
            ),
            (
                EngineEvent::DocumentRecovered(DocumentRecovered {
                    orphans: vec![],
                    count: 0,
                    cut_reply: true,
                    interrupted: vec![],
                }),
                r#"{"name":"document:recovered","data":{"orphans":[],"count":0,"cutReply":true}}"#,
            ),
            (
                EngineEvent::EngineStopped(EngineStopped {
                    reason: StopLabel::AwaitingApproval,
                    message: None,
                }),
                r#"{"name":"engine:stopped","data":{"reason":"awaiting-approval"}}"#,
            ),
            (
                EngineEvent::ToolCompleted(ToolCompleted {
                    tool_id: "t1".into(),
                    tool_name: "bash".into(),
                    status: ToolStatus::Success,
                    written: Written::BelowUserText,
                    output: None,
                }),
                r#"{"name":"tool:completed","data":{"toolId":"t1","toolName":"bash","status":"success","written":"below-user-text"}}"#,
            ),
        ];
        let more = [
            (
                EngineEvent::RequestFinished(RequestFinished {
                    request_id: 2,
                    status: RequestStatus::Cancelled,
                    accounted: None,
                    reason: Some("the reply being written was deleted".into()),
                }),
                r#"{"name":"request:finished","data":{"requestId":2,"status":"cancelled","reason":"the reply being written was deleted"}}"#,
            ),
            (
                EngineEvent::RequestFinished(RequestFinished {
                    request_id: 1,
                    status: RequestStatus::Completed,
                    accounted: Some(Accounted {
                        usage: TokenUsage::default(),
                        cost_usd: None,
                        cache_saved_usd: Some(0.5),
                    }),
                    reason: None,
                }),
                r#"{"name":"request:finished","data":{"requestId":1,"status":"completed","usage":{"input_tokens":0,"output_tokens":0,"thinking_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0},"costUsd":null,"cacheSavedUsd":0.5}}"#,
            ),
            (
                CallNews::Progress(AgentProgress {
                    update: ProgressUpdate::ToolCallUpdate {
                        child_tool_id: "c1".into(),
                        title: None,
                        status: Some("completed".into()),
                        text: None,
                    },
                    agent: "helper".into(),
                    message: "helper: done".into(),
                })
                .of_call("t1", "ask_agent"),
                r#"{"name":"tool:progress","data":{"kind":"tool_call_update","childToolId":"c1","title":null,"status":"completed","text":null,"agent":"helper","message":"helper: done","toolId":"t1","toolName":"ask_agent"}}"#,
            ),
            (
                CallNews::PermissionResolved(PermissionResolved {
                    agent: "helper".into(),
                    permission_id: "t1.perm-1".into(),
                    decision: PermissionDecision::Cancelled,
                })
                .of_call("t1", "ask_agent"),
                r#"{"name":"agent:permission-resolved","data":{"agent":"helper","permissionId":"t1.perm-1","decision":"cancelled","toolId":"t1","toolName":"ask_agent"}}"#,
            ),
            (
                EngineEvent::EngineSetup(EngineSetup {
                    provider: Some("anthropic".into()),
                    model: Some("claude-sonnet-4-5".into()),
                    warnings: vec!["w".into()],
                    diagnostics: vec![SetupDiagnostic {
                        severity: "warning".into(),
                        message: "undefined variable".into(),
                        hint: None,
                        code: Some("template-undefined".into()),
                        line: 5,
                        column: 7,
                        file: Some("/p/part.md".into()),
                        line_in_file: Some(2),
                        outside_document: false,
                    }],
                    blocking: vec![],
                }),
                r#"{"name":"engine:setup","data":{"provider":"anthropic","model":"claude-sonnet-4-5","warnings":["w"],"diagnostics":[{"severity":"warning","message":"undefined variable","code":"template-undefined","line":5,"column":7,"file":"/p/part.md","lineInFile":2}]}}"#,
            ),
            (
                EngineEvent::DocumentRecovered(DocumentRecovered {
                    orphans: vec![],
                    count: 0,
                    cut_reply: false,
                    interrupted: vec!["t9".into()],
                }),
                r#"{"name":"document:recovered","data":{"orphans":[],"count":0,"interrupted":["t9"]}}"#,
            ),
            (
                EngineEvent::EngineNotice(EngineNotice {
                    message: "warning: thinking budget 8192 lowered to 4095".into(),
                }),
                r#"{"name":"engine:notice","data":{"message":"warning: thinking budget 8192 lowered to 4095"}}"#,
            ),
        ];
        for (event, json) in cases.into_iter().chain(more) {
            assert_eq!(serde_json::to_string(&event).unwrap(), json);
            let (name, data) = event.to_parts();
            assert_eq!(name, event.name());
            assert_eq!(EngineEvent::from_parts(name, data), Some(event));
        }
        assert_eq!(EngineEvent::from_parts("no:such", Value::Null), None);
    }

    /// Every name is written once and is distinct, in both lists.
    #[test]
    fn names_are_distinct() {
        let mut names: Vec<&str> = EngineEvent::NAMES
            .iter()
            .chain(DaemonEvent::NAMES)
            .copied()
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
    }
}
