//! Tools: the registry and everything a tool needs (definitions, approval chain, sandbox policy,
//! truncation, result store) plus the built-in runners. No knowledge of documents or LSP: the
//! engine decides *when* a tool runs, this crate says *what* it is and runs it.

pub mod approval;
pub mod builtin;
pub mod checkpoints;
pub mod context;
pub mod harness;
pub mod launch;
pub mod nofollow;
pub mod process;
pub mod registry;
pub mod review;
pub mod sandbox;
pub mod spec;
pub mod store;
pub mod truncate;
pub mod validate;

pub use approval::{ApprovalChain, Decision, Verdict};

/// How flemmad's own short-lived files begin (a writability probe, an atomic write's temporary
/// file): the tools that list folders leave them out, so they never reach the model.
pub const SCRATCH_PREFIX: &str = ".flemmad-";
pub use context::{Cancel, EditorFiles, FullOutput, Outcome, PathGuard, RunContext, ToolReporter};
pub use registry::{InvocationError, Registry};
pub use sandbox::{Bwrap, PathPolicy, PolicyPlaces};
pub use spec::{Capability, ToolSpec};
pub use store::ResultStore;
