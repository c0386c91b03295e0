//! What goes into the engine and what comes out.

use flemma_config::Seen;
use flemma_conversation::StreamEvent;
use flemma_syntax::TextEdit;
use serde_json::Value;

/// Milliseconds on the shell's clock (the engine has none).
pub type Millis = u64;

/// One request to a provider, numbered per engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// One timer, numbered per engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(pub u64);

/// What to cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelScope {
    /// The request, every foreground tool, the tools waiting for a slot and the resume timer
    /// (background jobs keep running).
    All,
    /// The request in flight.
    Request,
    /// One running tool or background job (by its tool use id).
    Tool(String),
}

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamOutcome {
    Finished,
    Failed {
        message: String,
        retryable: bool,
    },
    /// The model refused to answer (a provider's refusal or safety stop), said in `message`.
    Refused {
        message: String,
    },
    Cancelled,
}

/// What the shell knows about how the last process that worked on a document ended, for
/// `Input::Load`'s recovery: the text alone cannot tell (docs/engine.md, "Recovery").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The last process was streaming a reply into the document and did not end cleanly. Only
    /// then is a final `@Assistant:` message a reply it left cut off (marked so on load, and
    /// continued by the next advance); without it, a chat that ends with an assistant message
    /// is a finished answer (written by hand, or the closing `@You:` deleted): nothing to send.
    pub reply_streaming: bool,
    /// Why the last writer stopped writing the document, when it knew (its write failed: a
    /// read-only or full disk). The abort marker of a reply it left cut off says so, instead
    /// of "the process writing it ended".
    pub write_failed: Option<String>,
    /// The foreground tool calls the last process started (tool use ids). One whose result is
    /// still an empty `(approved)` placeholder was running when that process ended: it may
    /// have run, fully or in part, so it waits for the user's approval again instead of
    /// running a second time on its own.
    pub started_calls: Vec<String>,
}

/// Everything that happens to a document.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The user or another program changed the text (edits in the engine's current coordinates,
    /// non-overlapping, like one LSP `didChange` or one diff of the file).
    TextChanged {
        edits: Vec<TextEdit>,
    },
    /// The document was opened: close a reply a process left cut off, recover orphaned jobs
    /// and interrupted calls (with what [`crate::Engine::recovering`] was told).
    Load,
    /// Do the next thing (`flemma/send`, `flemmad send`).
    Advance,
    Approve {
        tool_id: String,
    },
    Reject {
        tool_id: String,
        reason: Option<String>,
    },
    ApproveAll,
    /// Move a running foreground tool to the background.
    Background {
        tool_id: String,
    },
    /// Run or resolve one tool now (Alt-Enter).
    Execute {
        tool_id: String,
    },
    Cancel {
        scope: CancelScope,
    },
    Stream {
        request: RequestId,
        event: StreamEvent,
    },
    StreamEnded {
        request: RequestId,
        outcome: StreamOutcome,
    },
    ToolFinished {
        tool_id: String,
        text: String,
        is_error: bool,
    },
    JobFinished {
        job_id: String,
        text: String,
        is_error: bool,
    },
    Timer {
        id: TimerId,
    },
}

/// A lifecycle event (`harness.md` §9): the closed list is `flemma-protocol`'s, serialised only
/// where a front end writes JSON.
pub use flemma_protocol::event::EngineEvent;

/// Why the cycle stopped (so `flemmad send` knows when to exit and with what status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Nothing left to do; the file ends with an empty `@You:` (or the user's text).
    Idle,
    /// A `pending` placeholder waits for the user.
    AwaitingApproval { tool_ids: Vec<String> },
    /// An `approved` placeholder holds text the user typed: it was not run; review it.
    UserContentInApproved { tool_id: String },
    /// Autopilot is off: one advance done.
    StepDone,
    /// Autopilot ran `tools.autopilot.max_turns` turns in a row.
    MaxTurns { message: String },
    /// The request or a tool failed; what happened before stays in the file.
    Error { message: String },
    /// The model refused to answer (the reply ends as a failed one does).
    Refused { message: String },
    /// The user cancelled.
    Cancelled,
}

impl StopReason {
    /// The stop as `engine:stopped` and `flemma/status` name it.
    pub fn label(&self) -> StopLabel {
        match self {
            StopReason::Idle => StopLabel::Idle,
            StopReason::AwaitingApproval { .. } => StopLabel::AwaitingApproval,
            StopReason::StepDone => StopLabel::StepDone,
            StopReason::MaxTurns { .. } => StopLabel::MaxTurns,
            StopReason::Error { .. } => StopLabel::Error,
            StopReason::Refused { .. } => StopLabel::Refused,
            StopReason::Cancelled => StopLabel::Cancelled,
            StopReason::UserContentInApproved { .. } => StopLabel::UserContentInApproved,
        }
    }

    /// What to tell the user about the stop, when there is something.
    pub fn message(&self) -> Option<String> {
        match self {
            StopReason::Idle
            | StopReason::AwaitingApproval { .. }
            | StopReason::StepDone
            | StopReason::Cancelled => None,
            StopReason::MaxTurns { message }
            | StopReason::Error { message }
            | StopReason::Refused { message } => Some(message.clone()),
            StopReason::UserContentInApproved { tool_id } => Some(format!(
                "the approved tool call `{tool_id}` was not run because its result block holds text you typed; review it (delete the text to run the tool, or mark the block as your result) and send again"
            )),
        }
    }
}

pub use flemma_protocol::event::StopLabel;

/// What the shell must do. Effects are performed in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Apply these edits (non-overlapping, in the coordinates of the text before this effect)
    /// to the buffer or file. The engine's own view already has them. If the target refuses or
    /// rebases, feed the difference back as `TextChanged`.
    Edit {
        edits: Vec<TextEdit>,
    },
    /// Evaluate the text as it is when this effect is taken and stream the reply as `Stream`
    /// inputs, then `StreamEnded`. The `@Assistant:` line follows as the next `Edit`.
    StartRequest {
        request: RequestId,
    },
    CancelRequest {
        request: RequestId,
    },
    /// Run a tool (harness parameters such as `flemma.background` already stripped).
    StartTool {
        tool_id: String,
        name: String,
        input: Value,
        background: bool,
        job_id: Option<String>,
    },
    KillTool {
        tool_id: String,
    },
    SetTimer {
        id: TimerId,
        at: Millis,
    },
    CancelTimer {
        id: TimerId,
    },
    Emit(EngineEvent),
    /// The cycle stopped; nothing runs in the foreground.
    Stopped {
        reason: StopReason,
    },
    /// An input could not be applied (unknown tool id, edits outside the text…); nothing
    /// changed. The message says what to do.
    Refused {
        message: String,
    },
    /// An untrusted chat only ([`crate::Engine::untrusted`]): flemmad saw this call happen —
    /// it came from the model in a reply the engine streamed, or it was approved through
    /// flemmad. The shell records it in the chat's call history, so that a later engine of the
    /// chat knows it too.
    Saw {
        seen: Seen,
        tool_id: String,
        name: String,
        input: Value,
    },
}
