//! A lifecycle event (`harness.md` §9) as one JSON line: `flemmad send --events` on stdout, and
//! the `flemma/event` notification of the language server and the daemon (protocol/events.md).
//!
//! Stable: fields are only ever added.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// One event of one document.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct LifecycleEvent {
    /// `request:sending`, `tool:executing`, `tool:approval-required`, `job:completed`, … (the
    /// names and their data are listed in protocol/events.md).
    pub name: String,
    /// The document the event is about (a `file://` URI).
    pub uri: String,
    /// The event's data: an object with camelCase keys (`toolId`, `jobId`, `activeCount`, …).
    pub data: Value,
}
