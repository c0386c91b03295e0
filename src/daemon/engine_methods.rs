//! The engine's methods on `rpc.sock` (`flemma/send`, `cancel`, `approve`, …, `usage`): the
//! parameters are `flemma-protocol`'s, a document is named by an absolute path or a `file://`
//! URI, and every method answers at once (what follows is told by `flemma/event`).

use std::path::PathBuf;

use flemma_protocol::methods::{DocumentParams, RejectParams, SwitchParams, ToolCallParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::engine_host::{EngineHost, HostError};

/// JSON-RPC: the params do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;
/// The engine cannot take the command now (nothing runs to cancel, …).
pub const ENGINE_REFUSED: i64 = -32001;
/// The daemon is shutting down.
pub const SHUTTING_DOWN: i64 = -32002;

/// The engine's methods, for the `unknown method` message.
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

pub type MethodResult = Result<Value, (i64, String)>;

/// The answer of an engine method; `None` when `method` is not one.
pub fn call(host: &EngineHost, method: &str, params: Option<&Value>) -> Option<MethodResult> {
    Some(match method {
        "flemma/send" => document(method, params).and_then(|path| answer(host.send(&path))),
        "flemma/cancel" => document(method, params).and_then(|path| answer(host.cancel(&path))),
        "flemma/approveAll" => {
            document(method, params).and_then(|path| answer(host.approve_all(&path)))
        }
        "flemma/approve" => tool_call(method, params)
            .and_then(|(path, tool_id)| answer(host.approve(&path, &tool_id))),
        "flemma/background" => tool_call(method, params)
            .and_then(|(path, tool_id)| answer(host.background(&path, &tool_id))),
        "flemma/execute" => tool_call(method, params)
            .and_then(|(path, tool_id)| answer(host.execute(&path, &tool_id))),
        "flemma/reject" => parse::<RejectParams>(method, params).and_then(|p| {
            let path = document_path(method, &p.uri)?;
            answer(host.reject(&path, &p.tool_id, p.reason))
        }),
        "flemma/status" => document(method, params).and_then(|path| json(host.status(&path))),
        "flemma/jobs" => document(method, params).and_then(|path| json(host.jobs(&path))),
        "flemma/usage" => document(method, params).and_then(|path| json(host.usage(&path))),
        "flemma/switch" => parse::<SwitchParams>(method, params).and_then(|p| {
            let path = document_path(method, &p.uri)?;
            host.switch(&path, &p.model)
                .map_err(|error| (INVALID_PARAMS, error.to_string()))
                .and_then(json)
        }),
        _ => return None,
    })
}

fn parse<T: DeserializeOwned>(method: &str, params: Option<&Value>) -> Result<T, (i64, String)> {
    let params = params.cloned().unwrap_or(Value::Null);
    serde_json::from_value(params).map_err(|error| {
        (
            INVALID_PARAMS,
            format!("invalid params for {method}: {error}; see docs/rpc.md for its params"),
        )
    })
}

fn document(method: &str, params: Option<&Value>) -> Result<PathBuf, (i64, String)> {
    let params: DocumentParams = parse(method, params)?;
    document_path(method, &params.uri)
}

fn tool_call(method: &str, params: Option<&Value>) -> Result<(PathBuf, String), (i64, String)> {
    let params: ToolCallParams = parse(method, params)?;
    Ok((document_path(method, &params.uri)?, params.tool_id))
}

/// The document a `uri` param names: a `file://` URI or an absolute path (`.` and `..`
/// removed). A relative path is refused: the daemon's working directory is not the caller's.
pub fn document_path(method: &str, uri: &str) -> Result<PathBuf, (i64, String)> {
    let path = if uri.starts_with("file://") {
        flemma_lsp::uri_to_path(uri).ok_or_else(|| {
            (
                INVALID_PARAMS,
                format!("{method}: `{uri}` is not a file:// URI of a local file"),
            )
        })?
    } else if std::path::Path::new(uri).is_absolute() {
        PathBuf::from(uri)
    } else {
        return Err((
            INVALID_PARAMS,
            format!(
                "{method}: `{uri}` is not an absolute path or a file:// URI; the daemon does not know your working directory, so name the document by its absolute path"
            ),
        ));
    };
    // The same document whatever the spelling: `.` and `..` removed (without the file system).
    Ok(flemma_lsp::normalize(&path))
}

fn answer(outcome: Result<flemma_protocol::engine::Accepted, HostError>) -> MethodResult {
    match outcome {
        Ok(accepted) => json(accepted),
        Err(error @ HostError::NotRunning { .. }) => Err((ENGINE_REFUSED, error.to_string())),
        Err(error @ HostError::ShuttingDown) => Err((SHUTTING_DOWN, error.to_string())),
        Err(error @ HostError::InvalidSwitch(_)) => Err((INVALID_PARAMS, error.to_string())),
    }
}

fn json(value: impl serde::Serialize) -> MethodResult {
    serde_json::to_value(value)
        .map_err(|error| (ENGINE_REFUSED, format!("cannot encode the answer: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_absolute_paths_or_file_uris() {
        assert_eq!(
            document_path("flemma/send", "/tmp/a/../b c.chat"),
            Ok(PathBuf::from("/tmp/b c.chat"))
        );
        assert_eq!(
            document_path("flemma/send", "file:///tmp/b%20c.chat"),
            Ok(PathBuf::from("/tmp/b c.chat"))
        );
        let Err((code, message)) = document_path("flemma/send", "talk.chat") else {
            panic!("a relative path is refused");
        };
        assert_eq!(code, INVALID_PARAMS);
        assert!(message.contains("absolute path"), "{message}");
        assert!(document_path("flemma/send", "file://host/x.chat").is_err());
    }
}
