//! The `flemma/*` requests of the language server (protocol/README.md, "Requests").
//!
//! Every request is also an LSP command (`workspace/executeCommand`) with the same parameters in
//! order as positional arguments: `flemma/approve {"uri", "toolId"}` is `flemma.approve [uri,
//! toolId]`. Both reach the same code. A `uri` is a document URI, or a path (absolute, or relative
//! to the workspace root) of a document open in the session.
//!
//! Stable: fields are only ever added. The results of engine requests (`send`, `status`, `jobs`,
//! `usage`, …) are the engine's and documented with it; the session's own answer to `approve`,
//! `reject` and `approveAll` is [`ToolIdsResult`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A request about one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DocumentParams {
    /// The document: a URI, or a path relative to the workspace root.
    pub uri: String,
}

/// A request about one tool call of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallParams {
    pub uri: String,
    /// The tool use id (`toolu_01…`), as in the placeholder's header.
    pub tool_id: String,
}

/// `flemma/reject`: a tool call, and why (the reason becomes the result the model reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RejectParams {
    pub uri: String,
    pub tool_id: String,
    /// Written into the result as `User feedback: <reason>`; without one the status becomes
    /// `rejected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `flemma/switch`: the model the next request of the document uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SwitchParams {
    pub uri: String,
    /// A model name or `provider/model` (as `flemmad models` lists them).
    pub model: String,
}

/// Every `flemma/*` request, as `{"method": …, "params": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum FlemmaRequest {
    /// Send the chat: the engine starts the request and streams the reply into the document.
    #[serde(rename = "flemma/send")]
    Send(DocumentParams),
    /// Cancel the document's running request (the reply ends with the abort marker).
    #[serde(rename = "flemma/cancel")]
    Cancel(DocumentParams),
    /// Approve a pending tool call (its placeholder's status becomes `approved`).
    #[serde(rename = "flemma/approve")]
    Approve(ToolCallParams),
    /// Reject a pending tool call.
    #[serde(rename = "flemma/reject")]
    Reject(RejectParams),
    /// Approve every pending tool call of the document.
    #[serde(rename = "flemma/approveAll")]
    ApproveAll(DocumentParams),
    /// Move a running tool call to the background (its result names the job).
    #[serde(rename = "flemma/background")]
    Background(ToolCallParams),
    /// Execute an approved tool call now.
    #[serde(rename = "flemma/execute")]
    Execute(ToolCallParams),
    /// What the engine is doing for the document.
    #[serde(rename = "flemma/status")]
    Status(DocumentParams),
    /// The background jobs the document started.
    #[serde(rename = "flemma/jobs")]
    Jobs(DocumentParams),
    /// Token usage and cost of the document's requests.
    #[serde(rename = "flemma/usage")]
    Usage(DocumentParams),
    /// Switch the model of the document's next request.
    #[serde(rename = "flemma/switch")]
    Switch(SwitchParams),
}

/// The method names, in the order of [`FlemmaRequest`].
pub const METHODS: &[&str] = &[
    "flemma/send",
    "flemma/cancel",
    "flemma/approve",
    "flemma/reject",
    "flemma/approveAll",
    "flemma/background",
    "flemma/execute",
    "flemma/status",
    "flemma/jobs",
    "flemma/usage",
    "flemma/switch",
];

/// The notification the server sends for engine events (its params are the `event` types).
pub const EVENT_NOTIFICATION: &str = "flemma/event";

/// The LSP command of a method (`flemma/approveAll` → `flemma.approveAll`).
pub fn command_of(method: &str) -> Option<String> {
    method
        .strip_prefix("flemma/")
        .filter(|_| METHODS.contains(&method))
        .map(|name| format!("flemma.{name}"))
}

/// The answer to `approve`, `reject` and `approveAll`: the tool calls whose placeholders the
/// edit changes (the edit itself follows as `workspace/applyEdit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolIdsResult {
    pub tool_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_round_trip_as_method_and_params() {
        let value = serde_json::json!({"method": "flemma/reject",
            "params": {"uri": "talk.chat", "toolId": "t1", "reason": "no"}});
        let request: FlemmaRequest = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            request,
            FlemmaRequest::Reject(RejectParams {
                uri: "talk.chat".into(),
                tool_id: "t1".into(),
                reason: Some("no".into())
            })
        );
        assert_eq!(serde_json::to_value(&request).unwrap(), value);
        let unknown = serde_json::json!({"method": "flemma/send", "params": {"uri": "a", "x": 1}});
        let error = serde_json::from_value::<FlemmaRequest>(unknown).unwrap_err();
        assert!(error.to_string().contains("unknown field `x`"), "{error}");
    }

    #[test]
    fn every_method_has_a_command() {
        for method in METHODS {
            let command = command_of(method).unwrap();
            assert!(command.starts_with("flemma.") && !command.contains('/'));
        }
        assert_eq!(command_of("flemma/nope"), None);
    }
}
