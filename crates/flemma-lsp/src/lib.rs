//! The flemmad language server.
//!
//! **Architecture invariant:** this is the only crate that knows LSP types (`lsp-types`,
//! `lsp-server`). Everything it answers comes from plain-data features over
//! `flemma_ide` (the session owns an [`flemma_ide::AnalysisHost`]; diagnostics are its
//! `Analysis::diagnostics`, features are `flemma_ide::features::*`), converted at the edge by
//! `from_proto`/`to_proto`. Handlers never wait on the LLM or a tool: work that
//! takes time belongs to the [`Backend`] (the engine), which answers at once and reports back
//! through its [`Outbox`].
//!
//! Layout: [`Session`](session) owns all state; `main_loop` runs one loop over a closed
//! `Event` enum; `handlers/` holds one file per LSP method; `tasks` performs what the engine
//! hands over (reading and editing the mirror through versioned `workspace/applyEdit`,
//! `flemma/event`, messages); `progress` turns the engine's events into `$/progress`;
//! [`transport`] frames messages over stdio.

mod agent_permission;
mod analysis_pool;
mod analysis_worker;
mod backend;
mod commands;
mod from_proto;
mod handlers;
mod main_loop;
mod open_document;
mod progress;
mod publish;
mod session;
mod settings;
mod tasks;
mod to_proto;
pub mod transport;

pub use backend::{
    Answer, Backend, BufferAnswer, BufferSnapshot, ClientConfig, ContextMeter, NoEngine, Outbox,
    Reply, RequestDocument, Task,
};
pub use flemma_protocol::document::{normalize, path_to_uri, uri_to_path};
pub use main_loop::{LspError, run, run_with};
pub use settings::{changed_settings, client_config};
