//! Lifecycle event names (`harness.md` §9, seed `004`) and the shape of their data (camelCase
//! keys, as every JSON form of flemmad).

use serde_json::{Value, json};

use crate::types::{Effect, Event};

pub const REQUEST_SENDING: &str = "request:sending";
pub const REQUEST_FINISHED: &str = "request:finished";
/// The model started composing a tool call (its arguments stream until
/// [`REQUEST_COMPOSED`]): progress says `Composing a tool call`.
pub const REQUEST_COMPOSING: &str = "request:composing";
/// The tool call the model was composing is complete.
pub const REQUEST_COMPOSED: &str = "request:composed";
/// What a running tool tells while it works (`ask_agent`: the asked agent's text, thoughts and
/// tool calls). The shell emits it, not the engine.
pub const TOOL_PROGRESS: &str = "tool:progress";
/// An asked agent asks permission for one of its own tool calls, and the user decides
/// (`flemma/approve` or `flemma/reject` with the `permissionId`). The shell emits it.
pub const AGENT_PERMISSION_REQUIRED: &str = "agent:permission-required";
/// That permission was decided (or its run ended first). The shell emits it.
pub const AGENT_PERMISSION_RESOLVED: &str = "agent:permission-resolved";
pub const TOOL_EXECUTING: &str = "tool:executing";
pub const TOOL_COMPLETED: &str = "tool:completed";
pub const TOOL_APPROVAL_REQUIRED: &str = "tool:approval-required";
/// An untrusted chat's call waits for approval although its text said otherwise.
pub const TOOL_UNCONFIRMED: &str = "tool:unconfirmed";
pub const JOB_SUBMITTED: &str = "job:submitted";
pub const JOB_COMPLETED: &str = "job:completed";
pub const CONVERSATION_IDLE: &str = "conversation:idle";
pub const AUTOPILOT_RESUME_SCHEDULED: &str = "autopilot:resume-scheduled";
pub const AUTOPILOT_RESUME_CANCELLED: &str = "autopilot:resume-cancelled";
pub const AUTOPILOT_RESUMED: &str = "autopilot:resumed";
pub const USAGE_UPDATED: &str = "usage:updated";
/// The subscription's rate limits, as a response reported them (`rateLimits`).
pub const RATE_LIMITS_UPDATED: &str = "rate-limits:updated";
pub const DOCUMENT_RECOVERED: &str = "document:recovered";

pub fn emit(out: &mut Vec<Effect>, name: &'static str, data: Value) {
    out.push(Effect::Emit(Event { name, data }));
}

pub fn empty() -> Value {
    json!({})
}
