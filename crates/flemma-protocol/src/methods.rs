//! The `flemma/*` requests: one typed request per method, decoded once at the edge of every
//! front end and answered by one handler (the engine host's `call`). The language server
//! decodes its `flemma/*` requests with [`FlemmaRequest::decode`] and its `flemma.*` commands
//! with [`FlemmaRequest::from_command`]; `rpc.sock` decodes the params' text of a method of
//! [`METHODS`] straight into its params type with [`FlemmaRequest::decode_text`]; the ACP agent builds the
//! requests it needs. Adding a method is one line in the `requests!` list below (its params
//! type) and one arm in the handler.
//!
//! Every request is also an LSP command (`workspace/executeCommand`) with the same parameters in
//! order as positional arguments: `flemma/approve {"uri", "toolId"}` is `flemma.approve [uri,
//! toolId]`. A `uri` is a document URI, or a path ([`crate::document::document_path`]).
//!
//! Stable: fields are only ever added. The answers are [`FlemmaResponse`]; a refusal is a
//! [`RequestError`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::{
    Accepted, ChangesResult, EngineStatus, JobsResult, ModeResult, ProposalResult, RewindResult,
    SwitchResult, UsageTotals,
};
use crate::error::{RequestError, codes};

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
    /// Written into the result as `User feedback: <reason>`; without one (or a blank one) the
    /// status becomes `rejected`.
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

/// `flemma/mode`: what the document's tools may change (docs/modes.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModeParams {
    pub uri: String,
    /// `ask`, `default` or `auto-edit`.
    pub mode: String,
}

/// `flemma/compact`: the older turns of the document summarised into it (docs/context.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactParams {
    pub uri: String,
    /// Compact through the message holding this line (0-based), keeping the turns after it
    /// ("compact up to here"); without it, all but the last `context.keep` exchanges.
    #[serde(default)]
    pub line: Option<u32>,
    /// What the summary should keep above all.
    #[serde(default)]
    pub focus: Option<String>,
    /// Without `line`: the exchanges kept verbatim at the end (default `context.keep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u32>,
}

/// `flemma/compactUndo`: a compaction put back exactly (docs/context.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactUndoParams {
    pub uri: String,
    /// The summary whose marker (or text) holds this line (0-based); without it, the last
    /// summary of the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// `flemma/reviseProposal`: the new content a pending `write` or `edit` should give its file
/// (the proposal edited as a document), written back into the call's input in the chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviseParams {
    pub uri: String,
    pub tool_id: String,
    /// The file's whole text as the call should leave it.
    pub content: String,
}

/// `flemma/approveHunks`: approve some hunks of a pending `write` or `edit`, reject the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproveHunksParams {
    pub uri: String,
    pub tool_id: String,
    /// The hunks applied, numbered from 1 as `flemma/proposal` lists them; the others are
    /// rejected (the call's result says which).
    pub hunks: Vec<u32>,
    /// Why the other hunks were rejected (the model reads it in the call's result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `flemma/changes`: what the document's tool calls changed in its project's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangesParams {
    pub uri: String,
    /// Only this call's changes; without it, every call's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
}

/// `flemma/rewind`: the project's files put back as they were before a call, and/or the chat
/// cut back to before the answer that made it (docs/review.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindParams {
    pub uri: String,
    /// The call to go back before.
    pub tool_id: String,
    /// Put the files back (default: `true` unless `chat` is `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<bool>,
    /// Cut the chat back (the cut part kept whole as an archive); with `files`, only once the
    /// files were put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<bool>,
    /// Overwrite files changed since the conversation's last call too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// Say what would happen and change nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

impl RewindParams {
    /// Whether the files are put back.
    pub fn rewinds_files(&self) -> bool {
        self.files.unwrap_or(self.chat != Some(true))
    }

    /// Whether the chat is cut back.
    pub fn cuts_chat(&self) -> bool {
        self.chat == Some(true)
    }
}

/// Declares [`FlemmaRequest`] and what is derived from its list: the method names, each
/// request's method and document, and the positional arguments of its command. Every params
/// type has a `uri`.
macro_rules! requests {
    ($( $(#[doc = $doc:literal])* $method:literal => $variant:ident($params:ty), )*) => {
        /// Every `flemma/*` request, as `{"method": …, "params": …}`.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "method", content = "params")]
        pub enum FlemmaRequest {
            $( $(#[doc = $doc])* #[serde(rename = $method)] $variant($params), )*
        }

        /// The method names, in the order of [`FlemmaRequest`].
        pub const METHODS: &[&str] = &[$($method),*];

        /// The method of a request without its params: what a front end compares a method
        /// name with (`rpc.sock`'s `flemma/status` without a document).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $( $variant, )*
        }

        impl Method {
            /// Every method, in the order of [`METHODS`].
            pub const ALL: &[Method] = &[$(Method::$variant),*];

            /// Its name on the wire (`flemma/send`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $method,)*
                }
            }

            /// The method named `name`, if it is one of [`METHODS`].
            pub fn of_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|method| method.name() == name)
            }
        }

        impl FlemmaRequest {
            /// The request's method (`flemma/approve`).
            pub fn method(&self) -> &'static str {
                self.kind().name()
            }

            /// Which method this request is.
            pub fn kind(&self) -> Method {
                match self {
                    $(Self::$variant(_) => Method::$variant,)*
                }
            }

            /// Its params as they go on the wire (the JSON object of its params type).
            pub fn params(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $(Self::$variant(params) => serde_json::to_value(params),)*
                }
            }

            /// The document as the request names it (its `uri` param).
            pub fn uri(&self) -> &str {
                match self {
                    $(Self::$variant(params) => &params.uri,)*
                }
            }

            /// The params of `method` in order, as its command takes them: `[uri, toolId,
            /// reason?]`.
            pub fn arguments(method: &str) -> Option<String> {
                let names: Vec<String> = Self::params_of(method)?
                    .into_iter()
                    .map(|(name, required)| if required { name } else { format!("{name}?") })
                    .collect();
                Some(format!("[{}]", names.join(", ")))
            }

            /// The request of `method` decoded from the JSON text of its params straight into
            /// its params type (no `Value` between): `None` for a method not in [`METHODS`].
            fn from_params_text(
                method: &str,
                text: &str,
            ) -> Option<Result<Self, serde_json::Error>> {
                $(if method == $method {
                    return Some(serde_json::from_str::<$params>(text).map(Self::$variant));
                })*
                None
            }

            /// The params of `method` in order, each with whether it is required.
            fn params_of(method: &str) -> Option<Vec<(String, bool)>> {
                $(if method == $method {
                    return Some(params_in_order(schemars::schema_for!($params)));
                })*
                None
            }
        }
    };
}

requests! {
    /// Send the chat: the engine starts the request and streams the reply into the document.
    "flemma/send" => Send(DocumentParams),
    /// Cancel the document's running request (the reply ends with the abort marker).
    "flemma/cancel" => Cancel(DocumentParams),
    /// Approve a pending tool call (its placeholder's status becomes `approved`).
    "flemma/approve" => Approve(ToolCallParams),
    /// Reject a pending tool call.
    "flemma/reject" => Reject(RejectParams),
    /// Approve every pending tool call of the document.
    "flemma/approveAll" => ApproveAll(DocumentParams),
    /// Move a running tool call to the background (its result names the job).
    "flemma/background" => Background(ToolCallParams),
    /// Execute an approved tool call now.
    "flemma/execute" => Execute(ToolCallParams),
    /// What the engine is doing for the document.
    "flemma/status" => Status(DocumentParams),
    /// The background jobs the document started.
    "flemma/jobs" => Jobs(DocumentParams),
    /// Token usage and cost of the document's requests.
    "flemma/usage" => Usage(DocumentParams),
    /// Switch the model of the document's next request.
    "flemma/switch" => Switch(SwitchParams),
    /// Set what the document's tools may change: `ask`, `default` or `auto-edit`.
    "flemma/mode" => Mode(ModeParams),
    /// Compact the document: its older turns become a summary in it, kept whole in an archive.
    "flemma/compact" => Compact(CompactParams),
    /// What a pending `write` or `edit` would change: its file now and after, the diff and its
    /// numbered hunks (docs/review.md).
    "flemma/proposal" => Proposal(ToolCallParams),
    /// Write new proposed content into a pending `write` or `edit` call's input in the chat.
    "flemma/reviseProposal" => ReviseProposal(ReviseParams),
    /// Approve some hunks of a pending `write` or `edit` and reject the others, with a reason.
    "flemma/approveHunks" => ApproveHunks(ApproveHunksParams),
    /// Undo a compaction: its summary is replaced by the turns its archive holds, exactly.
    "flemma/compactUndo" => CompactUndo(CompactUndoParams),
    /// What the document's tool calls changed in its project's files, call by call.
    "flemma/changes" => Changes(ChangesParams),
    /// Put the project's files back as they were before a call, and/or cut the chat back.
    "flemma/rewind" => Rewind(RewindParams),
}

/// The notification the server sends for engine events (its params are the `event` types).
pub const EVENT_NOTIFICATION: &str = "flemma/event";

/// `rpc.sock`'s own methods (docs/rpc.md), beside the engine's requests: `flemma/ping` answers
/// `"pong"`.
pub const PING: &str = "flemma/ping";
/// `flemma/subscribe {"uri"?, "text"?}`: the connection follows the events (of one document).
pub const SUBSCRIBE: &str = "flemma/subscribe";
/// `flemma/shutdown`: the daemon stops once the answer is written.
pub const SHUTDOWN: &str = "flemma/shutdown";
/// The methods only `rpc.sock` answers.
pub const DAEMON_METHODS: &[&str] = &[PING, SUBSCRIBE, SHUTDOWN];

impl FlemmaRequest {
    /// Decodes a `flemma/*` request: an unknown method is [`codes::METHOD_NOT_FOUND`], params
    /// that do not fit (a missing or unknown field, a wrong type) [`codes::INVALID_PARAMS`]
    /// naming the field and what the method takes.
    pub fn decode(method: &str, params: Value) -> Result<Self, RequestError> {
        if !METHODS.contains(&method) {
            return Err(unknown_method(method));
        }
        if params.is_null() {
            return Err(Self::invalid(method, "they are missing"));
        }
        serde_json::from_value(serde_json::json!({"method": method, "params": params}))
            .map_err(|error| Self::invalid(method, &error.to_string()))
    }

    /// Decodes a `flemma/*` request from the JSON text of its params (`None`: it has none), as
    /// `rpc.sock` reads them: parsed once, into the method's params type. Refuses what
    /// [`FlemmaRequest::decode`] refuses, with the same messages.
    pub fn decode_text(method: &str, params: Option<&str>) -> Result<Self, RequestError> {
        let text = params.map(str::trim).filter(|text| *text != "null");
        let (Some(text), true) = (text, METHODS.contains(&method)) else {
            // What is missing (the method, the params) is said by the one decoder.
            return Self::decode(method, Value::Null);
        };
        match Self::from_params_text(method, text) {
            Some(Ok(request)) => Ok(request),
            Some(Err(error)) => Err(Self::invalid(method, &without_position(&error))),
            None => Err(unknown_method(method)),
        }
    }

    /// Params of `method` that do not fit (`error`: what serde said).
    fn invalid(method: &str, error: &str) -> RequestError {
        let takes = Self::arguments(method)
            .map(|args| args.replace('[', "{").replace(']', "}"))
            .unwrap_or_default();
        RequestError::invalid_params(format!(
            "invalid params for `{method}`: {error}; it takes {takes} (protocol/README.md)"
        ))
    }

    /// Decodes a `flemma.*` command (`workspace/executeCommand`): the params of its method as
    /// positional arguments (`flemma.reject [uri, toolId, reason?]`).
    pub fn from_command(command: &str, arguments: &[Value]) -> Result<Self, RequestError> {
        let method = command
            .strip_prefix("flemma.")
            .map(|name| format!("flemma/{name}"))
            .filter(|method| METHODS.contains(&method.as_str()));
        let (Some(method), Some(usage), Some(params)) = (
            method.as_deref(),
            method.as_deref().and_then(Self::arguments),
            method.as_deref().and_then(Self::params_of),
        ) else {
            return Err(RequestError::invalid_params(format!(
                "unknown command `{command}`; flemmad knows {}",
                commands().collect::<Vec<_>>().join(", ")
            )));
        };
        let refused =
            |why: String| RequestError::invalid_params(format!("`{command}` takes {usage}: {why}"));
        if let Some((position, (name, _))) = params
            .iter()
            .enumerate()
            .find(|(position, (_, required))| *required && *position >= arguments.len())
        {
            return Err(refused(format!(
                "argument {} ({name}) is missing",
                position + 1
            )));
        }
        if arguments.len() > params.len() {
            return Err(refused(format!(
                "{} arguments given, at most {} taken",
                arguments.len(),
                params.len()
            )));
        }
        let params = Value::Array(arguments.to_vec());
        serde_json::from_value(serde_json::json!({"method": method, "params": params}))
            .map_err(|error| refused(error.to_string()))
    }
}

/// The refusal of an unknown `flemma/*` method (the same on every front end).
pub fn unknown_method(method: &str) -> RequestError {
    RequestError::new(
        codes::METHOD_NOT_FOUND,
        format!(
            "flemmad does not implement `{method}`; its flemma/* requests are {} (protocol/README.md; on rpc.sock also flemma/ping, flemma/subscribe and flemma/shutdown, docs/rpc.md)",
            METHODS.join(", ")
        ),
    )
}

/// What serde said, without where in the text (a `Value` decoded says no position: the same
/// message whichever way the params came).
fn without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    match message.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => message,
    }
}

/// A params type's fields in order (from its schema), each with whether it is required.
fn params_in_order(schema: schemars::Schema) -> Vec<(String, bool)> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .keys()
                .map(|name| (name.clone(), required.contains(&name.as_str())))
                .collect()
        })
        .unwrap_or_default()
}

/// The LSP command of a method (`flemma/approveAll` → `flemma.approveAll`).
pub fn command_of(method: &str) -> Option<String> {
    method
        .strip_prefix("flemma/")
        .filter(|_| METHODS.contains(&method))
        .map(|name| format!("flemma.{name}"))
}

/// Every command, in the order of [`METHODS`] (what the language server advertises).
pub fn commands() -> impl Iterator<Item = String> {
    METHODS.iter().filter_map(|method| command_of(method))
}

/// The answer to a [`FlemmaRequest`] (serialized as the inner value).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum FlemmaResponse {
    /// `send`, `cancel`, `approve`, `reject`, `approveAll`, `background`, `execute`,
    /// `reviseProposal`, `approveHunks`.
    Accepted(Accepted),
    Status(EngineStatus),
    Jobs(JobsResult),
    Usage(UsageTotals),
    Switch(SwitchResult),
    Mode(ModeResult),
    Proposal(ProposalResult),
    Changes(ChangesResult),
    Rewind(RewindResult),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_round_trip_as_method_and_params() {
        let value = json!({"method": "flemma/reject",
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
        assert_eq!(request.method(), "flemma/reject");
        assert_eq!(request.uri(), "talk.chat");
        assert_eq!(serde_json::to_value(&request).unwrap(), value);
        assert_eq!(request.kind(), Method::Reject);
        assert_eq!(
            FlemmaRequest::decode(request.method(), request.params().unwrap()).unwrap(),
            request
        );
        let unknown = json!({"method": "flemma/send", "params": {"uri": "a", "x": 1}});
        let error = serde_json::from_value::<FlemmaRequest>(unknown).unwrap_err();
        assert!(error.to_string().contains("unknown field `x`"), "{error}");
    }

    #[test]
    fn every_method_is_a_request_and_a_command() {
        assert_eq!(METHODS.len(), 19);
        assert_eq!(Method::ALL.len(), METHODS.len());
        assert_eq!(Method::of_name("flemma/ping"), None);
        for method in METHODS {
            assert_eq!(Method::of_name(method).map(Method::name), Some(*method));
            let command = command_of(method).unwrap();
            assert!(command.starts_with("flemma.") && !command.contains('/'));
            assert!(
                FlemmaRequest::arguments(method)
                    .unwrap()
                    .starts_with("[uri")
            );
        }
        assert_eq!(command_of("flemma/nope"), None);
        assert_eq!(commands().count(), METHODS.len());
        assert_eq!(
            FlemmaRequest::arguments("flemma/reject").unwrap(),
            "[uri, toolId, reason?]"
        );
        assert_eq!(
            FlemmaRequest::arguments("flemma/compact").unwrap(),
            "[uri, line?, focus?, keep?]"
        );
        assert_eq!(
            FlemmaRequest::arguments("flemma/compactUndo").unwrap(),
            "[uri, line?]"
        );
        assert_eq!(
            FlemmaRequest::arguments("flemma/rewind").unwrap(),
            "[uri, toolId, files?, chat?, force?, dryRun?]"
        );
        assert_eq!(
            FlemmaRequest::arguments("flemma/changes").unwrap(),
            "[uri, toolId?]"
        );
        // The editors' "Rewind" lens: both, by position.
        let rewind = FlemmaRequest::from_command(
            "flemma.rewind",
            &[json!("u"), json!("t1"), json!(true), json!(true)],
        )
        .unwrap();
        let FlemmaRequest::Rewind(params) = rewind else {
            panic!("{rewind:?}");
        };
        assert!(params.rewinds_files() && params.cuts_chat());
        let chat_only = RewindParams {
            chat: Some(true),
            files: None,
            ..params.clone()
        };
        assert!(!chat_only.rewinds_files() && chat_only.cuts_chat());
        let default = RewindParams {
            chat: None,
            files: None,
            ..params
        };
        assert!(default.rewinds_files() && !default.cuts_chat());
    }

    #[test]
    fn requests_decode_with_errors_that_name_the_problem() {
        let send = FlemmaRequest::decode("flemma/send", json!({"uri": "/a.chat"})).unwrap();
        assert_eq!(
            send,
            FlemmaRequest::Send(DocumentParams {
                uri: "/a.chat".into()
            })
        );
        let error = FlemmaRequest::decode("flemma/explode", json!({})).unwrap_err();
        assert_eq!(error.code, codes::METHOD_NOT_FOUND);
        assert!(error.message.contains("flemma/approveAll"), "{error}");
        let error = FlemmaRequest::decode("flemma/approve", json!({"uri": "a"})).unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS);
        assert!(
            error.message.contains("missing field `toolId`")
                && error.message.contains("{uri, toolId}"),
            "{error}"
        );
        let error = FlemmaRequest::decode("flemma/send", Value::Null).unwrap_err();
        assert!(error.message.contains("missing"), "{error}");
    }

    /// `rpc.sock`'s decode from the params' text answers as the decode from a `Value` does,
    /// requests and refusals alike (messages included).
    #[test]
    fn decoding_the_params_text_answers_as_decoding_a_value() {
        let table: &[(&str, Option<&str>)] = &[
            ("flemma/send", Some(r#"{"uri": "/a.chat"}"#)),
            (
                "flemma/reject",
                Some(r#"{"uri": "/a.chat", "toolId": "t1", "reason": "no"}"#),
            ),
            ("flemma/approve", Some(r#"{"uri": "a"}"#)),
            ("flemma/approve", Some(r#"{"uri": "a", "toolId": 7}"#)),
            ("flemma/send", Some(r#"{"uri": "/a.chat", "x": 1}"#)),
            ("flemma/compact", Some(r#"{"uri": "/a.chat", "line": -1}"#)),
            ("flemma/send", Some(r#"["/a.chat"]"#)),
            ("flemma/send", Some("null")),
            ("flemma/send", None),
            ("flemma/explode", Some("{}")),
            ("flemma/explode", None),
        ];
        for &(method, text) in table {
            let value = text.map_or(Value::Null, |text| serde_json::from_str(text).unwrap());
            assert_eq!(
                FlemmaRequest::decode_text(method, text),
                FlemmaRequest::decode(method, value),
                "{method} {text:?}"
            );
        }
    }

    #[test]
    fn commands_take_the_params_in_order() {
        let reject =
            FlemmaRequest::from_command("flemma.reject", &[json!("u"), json!("t1"), json!("why")])
                .unwrap();
        assert_eq!(
            reject,
            FlemmaRequest::Reject(RejectParams {
                uri: "u".into(),
                tool_id: "t1".into(),
                reason: Some("why".into())
            })
        );
        // The optional reason may be left out.
        let reject =
            FlemmaRequest::from_command("flemma.reject", &[json!("u"), json!("t1")]).unwrap();
        assert!(matches!(
            reject,
            FlemmaRequest::Reject(RejectParams { reason: None, .. })
        ));
        let error = FlemmaRequest::from_command("flemma.approve", &[json!("u")]).unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS);
        assert_eq!(
            error.message,
            "`flemma.approve` takes [uri, toolId]: argument 2 (toolId) is missing"
        );
        let error = FlemmaRequest::from_command("flemma.send", &[json!(3)]).unwrap_err();
        assert!(error.message.contains("invalid type"), "{error}");
        let error =
            FlemmaRequest::from_command("flemma.send", &[json!("u"), json!("extra")]).unwrap_err();
        assert_eq!(
            error.message,
            "`flemma.send` takes [uri]: 2 arguments given, at most 1 taken"
        );
        let error = FlemmaRequest::from_command("flemma.nope", &[]).unwrap_err();
        assert!(error.message.contains("unknown command"), "{error}");
    }
}
