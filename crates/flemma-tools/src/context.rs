//! What a runner gets and what it gives back. Runners are synchronous (the shell calls them on
//! a blocking thread) and poll `Cancel` at least every 50 ms while they wait on a process.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::sandbox::Bwrap;

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

    /// Where an absolute `path` a tool names is on the host: the sandbox's private `/tmp` and
    /// cache are where its commands see them, so `write /tmp/x` then `bash cat /tmp/x` agree.
    fn host_path(&self, path: &Path) -> PathBuf {
        path.to_path_buf()
    }
}

/// Files as the editor holds them (an ACP client's `fs/read_text_file` and
/// `fs/write_text_file`). When a run context has one, `read`, `write` and `edit` read and write
/// text through it, so an unsaved buffer is what the model reads and an edit shows in the
/// editor at once. Paths are absolute, resolved and (for writes) checked by the sandbox policy
/// first; what decides whether a path exists or is text stays the disk. Calls block the tool's
/// thread; they give up when `cancel` is set (or after the implementation's own time limit).
pub trait EditorFiles: Send + Sync + std::fmt::Debug {
    /// Whether the editor reads files (`fs.readTextFile`).
    fn reads(&self) -> bool;
    /// Whether the editor writes files (`fs.writeTextFile`).
    fn writes(&self) -> bool;
    /// The text the editor has for `path` (its buffer when open, else the file).
    fn read_text(&self, path: &Path, cancel: &Cancel) -> Result<String, String>;
    /// Writes `text` to `path` through the editor.
    fn write_text(&self, path: &Path, text: &str, cancel: &Cancel) -> Result<(), String>;
}

/// Text files larger than this are read from the disk even when the editor reads files (a
/// protocol message that large helps no one).
pub const EDITOR_READ_LIMIT: u64 = 8 * 1024 * 1024;

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
    /// The process sandbox wrapping `bash` and custom tools, when a backend is active.
    pub sandbox: Option<Arc<Bwrap>>,
    /// The process's async runtime, for runners that do network IO (`fetch_content` blocks
    /// on it from the tool's thread). `None`: such a runner starts one for its call.
    pub runtime: Option<tokio::runtime::Handle>,
    /// Whether `fetch_content` may reach loopback, link-local and private addresses
    /// (`tools.fetch_private_addresses`).
    pub fetch_private_addresses: bool,
    /// The editor's view of files, when the chat's session has one (`EditorFiles`).
    pub editor: Option<Arc<dyn EditorFiles>>,
}

impl RunContext {
    /// A context in `cwd` with `guard`, a 30 s timeout, no chat, no extra environment, no
    /// process sandbox, public addresses only for `fetch_content`, and no runtime.
    pub fn new(cwd: impl Into<PathBuf>, guard: Arc<dyn PathGuard>) -> Self {
        Self {
            cwd: cwd.into(),
            chat_path: None,
            guard,
            timeout: Duration::from_secs(30),
            cancel: Cancel::new(),
            env: Vec::new(),
            sandbox: None,
            runtime: None,
            fetch_private_addresses: false,
            editor: None,
        }
    }

    /// The editor, when it reads files.
    pub fn editor_reads(&self) -> Option<&dyn EditorFiles> {
        self.editor.as_deref().filter(|editor| editor.reads())
    }

    /// The editor, when it writes files.
    pub fn editor_writes(&self) -> Option<&dyn EditorFiles> {
        self.editor.as_deref().filter(|editor| editor.writes())
    }

    /// Resolves `path` (relative to `cwd`). A leading `$FLEMMA_TOOLS_STORE_PATH` (or
    /// `${FLEMMA_TOOLS_STORE_PATH}`) is the conversation's store directory, as it is for `bash`
    /// and `flemma.save_to` (Flemma 0.13.1), so `read`, `write` and `edit` reach the store too.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let expanded = self.expand_store_path(path);
        let path = Path::new(expanded.as_deref().unwrap_or(path));
        if path.is_absolute() {
            self.guard.host_path(path)
        } else {
            self.cwd.join(path)
        }
    }
}

impl RunContext {
    /// `path` with its leading store variable replaced, when it has one and the store is known.
    fn expand_store_path(&self, path: &str) -> Option<String> {
        const VARIABLE: &str = "FLEMMA_TOOLS_STORE_PATH";
        let rest = path
            .strip_prefix("${FLEMMA_TOOLS_STORE_PATH}")
            .or_else(|| path.strip_prefix("$FLEMMA_TOOLS_STORE_PATH"))?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let store = self
            .env
            .iter()
            .find(|(name, _)| name == VARIABLE)
            .map(|(_, value)| value)?;
        Some(format!("{store}{rest}"))
    }
}

/// The file holding a tool's complete output when the runner produced more than its text shows
/// (`bash` reads huge outputs back from both ends only). Deleted when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct FullOutput(pub Arc<tempfile::TempPath>);

impl FullOutput {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl PartialEq for FullOutput {
    fn eq(&self, other: &Self) -> bool {
        self.path() == other.path()
    }
}
impl Eq for FullOutput {}

/// What a runner returns: the text that goes into the tool-result fence, and whether it is an
/// error result. Truncation and the result store are applied after, by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub text: String,
    pub is_error: bool,
    /// The complete output when `text` holds only part of it (used by the store).
    pub full_output: Option<FullOutput>,
}

impl Outcome {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            full_output: None,
        }
    }
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            full_output: None,
        }
    }
}
