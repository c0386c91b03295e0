//! The context meter (`flemmad status`, `flemma/status`, the editors' statusline): how much of
//! the model's window the chat's next request fills. Its own file so that the chat's status
//! (`status.rs`) and the engine's (`engine.rs`) both name it without naming each other back.
//!
//! Stable: fields are only ever added.

use schemars::JsonSchema;
use serde::Serialize;

/// The context meter: the input tokens of the chat's next request, the model's window, and
/// what the next request's input costs.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextStatus {
    /// The model the next request goes to.
    pub model: String,
    /// Its input tokens: system prompt, messages, tools' definitions and attachments.
    pub used: u64,
    /// `exact` (the provider's counting endpoint said so) or `estimate` (measured locally).
    pub counted: String,
    /// The model's context window in tokens (the user's `models.<id>.context_window`, else
    /// the catalogue's); absent for a model flemmad does not know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// `used / window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// What the next request's input costs in US dollars at the uncached input price (an
    /// upper bound: cache reads cost less); absent for a model without prices or paid by a
    /// subscription.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cost: Option<f64>,
    /// `context.warn_at`.
    pub warn_at: f64,
    /// `context.compact_at` (absent: `false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_at: Option<f64>,
    /// `ok`, `warn` (past `warn_at`), `full` (it does not fit: the request would be refused),
    /// or `unknown` (no window known).
    pub state: String,
}
