//! The port through which the shell's tool registry and approval chain answer the engine.

use serde_json::Value;

/// What the approval chain decided for one call, and the resolver that made it: the chain's
/// own types (`flemma_protocol::approval`).
pub use flemma_protocol::approval::{Decision, Verdict};

/// What the engine needs to know about a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolInfo {
    /// May run as a background job.
    pub is_async: bool,
    /// Never runs in the background (`flemma.jobs.status`).
    pub disables_background: bool,
}

/// Implemented by the shell (from `flemma-tools`).
pub trait ToolPolicy: Send + Sync {
    fn decide(&self, name: &str, input: &Value) -> Decision;
    /// `None`: no such tool (the call gets an error result naming it).
    fn capabilities(&self, name: &str) -> Option<ToolInfo>;
    /// Whether `input` fits the tool's schema, checked before anyone is asked to approve the
    /// call: `Err` says what does not fit, and the call gets that as its error result at once.
    fn check(&self, name: &str, input: &Value) -> Result<(), String>;
}

/// The harness tool the engine answers itself, and the harness parameter that sends a call to
/// the background (one name each, the configuration's).
pub use flemma_config::{BACKGROUND_PARAMETER, JOBS_STATUS_TOOL};
