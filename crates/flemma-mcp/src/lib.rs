//! MCP servers as tool sources: a native client on the official Rust SDK (`rmcp`), over a
//! child process's stdio or streamable HTTP.
//!
//! The pure parts — which servers a configuration defines and who may define them
//! ([`definition`]), tool names ([`naming`]), which tools a chat is offered ([`select`]) and how a
//! `tools/call` result becomes a tool result ([`convert`]) — do no IO and are unit-tested. The
//! IO is [`connection`] (one running server) and [`hub`] (the process's set of servers, shared
//! by every chat, keyed by what they run, so a session can add its own at run time).

pub mod connection;
pub mod convert;
pub mod definition;
pub mod hub;
pub mod naming;
pub mod select;
pub mod shim;

pub use definition::{Defined, Hidden, Origin, ServerDef, Transport};

pub use hub::{CallOptions, HubOptions, McpHub, McpTool, ServerState, ServerStatus};
