//! `flemma-engine`: one state machine per `.chat` document — the advance cycle (categorize,
//! execute, send), streaming, autopilot, approvals, cancellation, background jobs and lifecycle
//! events (`harness.md` §1, §2, §4, §9).
//!
//! **Architecture invariant**: no IO, no clock, no threads, no async. [`Engine::handle`] takes
//! the time and an [`Input`] and returns [`Effect`]s; the shell performs them (edit a buffer or a
//! file, stream a request, run a tool, set a timer, emit an event) and feeds the outcomes back as
//! inputs. All format text comes from `flemma_syntax::write`. See `docs/engine.md`.

mod config;
mod engine;
pub mod events;
pub mod ids;
mod jobs;
pub mod loop_detect;
mod policy;
mod reply;
pub mod session;
pub mod texts;
mod types;

pub use config::{EngineConfig, Prices};
pub use engine::{Engine, INTERRUPTED_RESOLVER, PROVENANCE_RESOLVER, PendingCall};
pub use jobs::{Job, JobState};
pub use policy::{BACKGROUND_PARAMETER, Decision, JOBS_STATUS_TOOL, ToolInfo, ToolPolicy, Verdict};
pub use types::*;
