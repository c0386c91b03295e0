//! The Agent Client Protocol (ACP, protocol version 1) agent of `flemmad acp`, on the official
//! Rust SDK (`agent-client-protocol`). The only crate that knows ACP types, as `flemma-lsp` is
//! the only one that knows LSP types.
//!
//! **A session is a `.chat` file.** `session/new` creates a chat under
//! `<cwd>/.flemma/sessions/` and its sessionId is the chat's absolute path; `session/load`
//! replays any chat's history ([`replay::history`]); `session/prompt` writes the prompt under
//! the chat's trailing `@You:` ([`prompt::with_prompt`]) and streams what the engine does as
//! session updates. The engine stays outside: a [`Backend`] (the binary's, over its engine
//! host) sends, approves, rejects and cancels, and tells what happens as [`TurnEvent`]s.
//!
//! **flemmad is also a client** of the agents `ask_agent` asks ([`client`]: their processes,
//! the runs, a foreign agent's transcript), with the tool's texts in [`ask`]; what an asked
//! agent does reaches the ACP client of the chat that asked as tool call updates and forwarded
//! permission requests ([`delegation`]).

pub mod agent;
pub mod ask;
pub mod backend;
pub mod chats;
pub mod client;
pub mod commands;
pub mod delegation;
pub mod files;
pub mod list;
pub mod modes;
pub mod prompt;
pub mod replay;

pub use agent::{AllowedAlways, serve};
pub use backend::{
    Backend, Choice, McpServerSpec, PendingCall, Picker, ProposedFile, Settings, TurnEvent,
};
pub use chats::{new_chat_text, sessions_dir};
pub use files::ClientFiles;
