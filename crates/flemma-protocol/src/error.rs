//! What every front end answers when it refuses a `flemma/*` request: a JSON-RPC 2.0 error code
//! and a message saying what was wrong and what is accepted. The language server, `rpc.sock`
//! and the ACP agent send it as it is, so the same bad request gets the same answer everywhere.

/// The JSON-RPC error codes flemmad answers with.
pub mod codes {
    /// The message is not JSON (`id` is `null`).
    pub const PARSE_ERROR: i32 = -32700;
    /// JSON that is not a request (not an object, no `"jsonrpc": "2.0"`, no string `method`).
    pub const INVALID_REQUEST: i32 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// The params do not fit the method, or name no document flemmad can work on.
    pub const INVALID_PARAMS: i32 = -32602;
    /// flemmad failed while handling the request (a bug); it keeps running.
    pub const INTERNAL_ERROR: i32 = -32603;
    /// The engine cannot take the command now (`flemma/cancel` when nothing runs, …).
    pub const ENGINE_REFUSED: i32 = -32001;
    /// flemmad is shutting down (or its engine is not running).
    pub const SHUTTING_DOWN: i32 = -32002;
}

/// A refused request: its JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// One of [`codes`].
    pub code: i32,
    pub message: String,
}

impl RequestError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// [`codes::INVALID_PARAMS`].
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, message)
    }

    /// [`codes::ENGINE_REFUSED`].
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(codes::ENGINE_REFUSED, message)
    }

    /// [`codes::SHUTTING_DOWN`].
    pub fn shutting_down(message: impl Into<String>) -> Self {
        Self::new(codes::SHUTTING_DOWN, message)
    }
}
