//! What a runner gets and what it gives back. Runners are synchronous (the shell calls them on
//! a blocking thread) and poll `Cancel` at least every 50 ms while they wait on a process.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Cooperative cancellation shared between the shell and a running tool.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Decides whether a path may be written. Implemented by the sandbox policy; symlinks and `..`
/// are resolved before the check. Returns the resolved path, or the reason it is refused.
pub trait PathGuard: Send + Sync + std::fmt::Debug {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String>;
}

/// Everything a built-in runner may use besides its input.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Working directory: the chat's directory unless configured otherwise.
    pub cwd: PathBuf,
    /// The chat file the call comes from, when there is one.
    pub chat_path: Option<PathBuf>,
    /// The sandbox's write policy.
    pub guard: Arc<dyn PathGuard>,
    /// Time limit for this call (the tool's own `timeout` input wins when it has one).
    pub timeout: Duration,
    /// Set when the call must stop (the runner then kills what it started).
    pub cancel: Cancel,
    /// Extra environment for processes (e.g. `FLEMMA_TOOLS_STORE_PATH`).
    pub env: Vec<(String, String)>,
}

/// What a runner returns: the text that goes into the tool-result fence, and whether it is an
/// error result. Truncation and the result store are applied after, by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub text: String,
    pub is_error: bool,
}

impl Outcome {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}
