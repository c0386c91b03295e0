//! Tools: the registry and everything a tool needs (definitions, approval chain, sandbox policy,
//! truncation, result store) plus the built-in runners. No knowledge of documents or LSP: the
//! engine decides *when* a tool runs, this crate says *what* it is and runs it.

pub mod builtin;
pub mod context;
pub mod spec;

pub use context::{Cancel, Outcome, PathGuard, RunContext};
pub use spec::{Capability, ToolSpec};
