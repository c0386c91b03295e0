//! What a runner gets and what it gives back. Runners are synchronous (the shell calls them on
//! a blocking thread) and poll `Cancel` at least every 50 ms while they wait on a process.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::sandbox::Bwrap;
pub use crate::sandbox::PathGuard;

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

/// What a running call tells while it works, and to whom: the shell gives each call its own
/// (the call's id is in it), and what it tells becomes a lifecycle event of the chat (an asked
/// agent's text, thoughts and tool calls; a permission it asks for).
pub trait ToolReporter: Send + Sync + std::fmt::Debug {
    /// The id of the tool call (its tool use id).
    fn tool_id(&self) -> &str;
    /// A lifecycle event of the chat about this call (it gets the call's id and tool name).
    fn event(&self, news: flemma_protocol::event::CallNews);
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
    /// The chat's text when the call started, for a tool that reads the conversation
    /// ([`crate::Capability::ReadsConversation`]).
    pub conversation: Option<Arc<str>>,
    /// Where this call tells what it does while it runs (`None`: nobody listens).
    pub reporter: Option<Arc<dyn ToolReporter>>,
    /// The user's home directory: `~/` in the tools' paths (`None`: unknown, and a path
    /// starting with `~/` is refused).
    pub home: Option<PathBuf>,
}

/// How a built-in tool's path argument becomes a path: `~` and `~/…` are the home directory, a
/// leading `$FLEMMA_TOOLS_STORE_PATH` (or `${FLEMMA_TOOLS_STORE_PATH}`) is the chat's store (as
/// it is for `bash` and `flemma.save_to`, Flemma 0.13.1), any other relative path lies under
/// the working directory. The one place a tool's path is resolved, for the runners
/// ([`RunContext::resolve`]) and the approval policy (`approval::ReadScope`) alike, so that a
/// call is judged on the path it really reads or writes: `read ~/.ssh/id_rsa` is the key in the
/// home directory, not a file under a folder named `~` of the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPaths {
    /// The working directory.
    pub cwd: PathBuf,
    /// The home directory (`None`: unknown).
    pub home: Option<PathBuf>,
    /// The chat's store directory (`None`: unknown).
    pub store: Option<PathBuf>,
}

impl ToolPaths {
    /// The path `written` names; an error says why it cannot be resolved (`~/` without a known
    /// home directory).
    pub fn resolve(&self, written: &str) -> Result<PathBuf, String> {
        let path = Path::new(written);
        if let Some(rest) = home_relative(written) {
            return match &self.home {
                Some(home) if rest.is_empty() => Ok(home.clone()),
                Some(home) => Ok(home.join(rest)),
                None => Err(format!(
                    "{written} starts with `~`, the home directory, which is not known here (HOME is not set); give the absolute path"
                )),
            };
        }
        if let Some(rest) = store_relative(written)
            && let Some(store) = &self.store
        {
            return Ok(PathBuf::from(format!("{}{rest}", store.display())));
        }
        Ok(if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        })
    }

    /// How a process started in the working directory (`rg`, `fd`) is given the path
    /// `written`: as written when it means the same path there (what the process prints then
    /// reads as the model wrote it), else the resolved path.
    pub fn for_process(&self, written: &str) -> Result<String, String> {
        if home_relative(written).is_none() && store_relative(written).is_none() {
            return Ok(written.to_owned());
        }
        self.resolve(written)
            .map(|path| path.to_string_lossy().into_owned())
    }
}

/// What follows `~` in `~` or `~/…` (`~user/…` is not expanded).
fn home_relative(written: &str) -> Option<&str> {
    match written.strip_prefix('~')? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

/// What follows a leading store variable (`$FLEMMA_TOOLS_STORE_PATH/x` → `/x`).
fn store_relative(written: &str) -> Option<&str> {
    let rest = written
        .strip_prefix("${FLEMMA_TOOLS_STORE_PATH}")
        .or_else(|| written.strip_prefix("$FLEMMA_TOOLS_STORE_PATH"))?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
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
            home: None,
            conversation: None,
            reporter: None,
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

    /// How this call's paths resolve ([`ToolPaths`]).
    pub fn paths(&self) -> ToolPaths {
        ToolPaths {
            cwd: self.cwd.clone(),
            home: self.home.clone(),
            store: self
                .env
                .iter()
                .find(|(name, _)| name == "FLEMMA_TOOLS_STORE_PATH")
                .map(|(_, value)| PathBuf::from(value)),
        }
    }

    /// The path `path` names ([`ToolPaths::resolve`]: `~/` the home directory, the store
    /// variable the store, relative to `cwd`).
    /// The sandbox's private `/tmp` and cache are where its commands see them
    /// ([`PathGuard::host_path`]).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        self.paths()
            .resolve(path)
            .map(|resolved| self.guard.host_path(&resolved))
    }

    /// The path `written` names, for a tool that reads it (`read`, `grep`, `find`, `ls`, the
    /// `lsp` tool): refused when it lies in `/proc`, `/sys` or `/dev`, as written or once its
    /// links are followed (these tools run in flemmad's own process: `/proc/self/environ`
    /// holds every API key). Credential paths are left to the approval policy.
    pub fn readable(&self, written: &str) -> Result<PathBuf, String> {
        let path = self.resolve(written)?;
        let real = crate::sandbox::resolve_path(&path).unwrap_or_else(|_| path.clone());
        match flemma_config::reach::never_read(&path, &[])
            .or_else(|| flemma_config::reach::never_read(&real, &[]))
        {
            Some(never) => Err(format!("{written} is not read: {never}")),
            None => Ok(path),
        }
    }

    /// [`RunContext::readable`] again, on the file `file` the tool opened for the path
    /// `written` (as the kernel names it in `/proc/self/fd`): a link swapped in after the
    /// first check is not read through.
    pub fn check_opened(&self, written: &str, file: &std::fs::File) -> Result<(), String> {
        use std::os::fd::AsRawFd as _;
        let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) else {
            return Ok(());
        };
        match flemma_config::reach::never_read(&opened, &[]) {
            Some(never) => Err(format!("{written} is not read: {never}")),
            None => Ok(()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_paths_expand_home_and_store() {
        let paths = ToolPaths {
            cwd: PathBuf::from("/work/project"),
            home: Some(PathBuf::from("/home/me")),
            store: Some(PathBuf::from("/work/project/.flemma/c.chat")),
        };
        let resolve = |written: &str| paths.resolve(written).map(|p| p.display().to_string());
        assert_eq!(
            resolve("~/.ssh/id_rsa").as_deref(),
            Ok("/home/me/.ssh/id_rsa")
        );
        assert_eq!(resolve("~").as_deref(), Ok("/home/me"));
        assert_eq!(resolve("~user/x").as_deref(), Ok("/work/project/~user/x"));
        assert_eq!(
            resolve("src/main.rs").as_deref(),
            Ok("/work/project/src/main.rs")
        );
        assert_eq!(resolve("/etc/hosts").as_deref(), Ok("/etc/hosts"));
        assert_eq!(
            resolve("$FLEMMA_TOOLS_STORE_PATH/out.txt").as_deref(),
            Ok("/work/project/.flemma/c.chat/out.txt")
        );
        assert_eq!(
            resolve("${FLEMMA_TOOLS_STORE_PATH}").as_deref(),
            Ok("/work/project/.flemma/c.chat")
        );
        assert_eq!(
            paths.for_process("src").as_deref(),
            Ok("src"),
            "a plain path reaches a process as written"
        );
        assert_eq!(
            paths.for_process("~/notes").as_deref(),
            Ok("/home/me/notes")
        );
        let homeless = ToolPaths {
            home: None,
            ..paths.clone()
        };
        let refused = homeless.resolve("~/x.txt");
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("HOME is not set")),
            "{refused:?}"
        );
    }

    #[test]
    fn the_reading_tools_never_read_proc_sys_or_dev() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink("/proc/self", dir.path().join("me")).expect("link");
        #[derive(Debug)]
        struct NoWrites;
        impl PathGuard for NoWrites {
            fn check_write(&self, _: &Path) -> Result<PathBuf, String> {
                Err("no".into())
            }
        }
        let ctx = RunContext::new(dir.path(), Arc::new(NoWrites));
        for path in [
            "/proc/self/environ",
            "me/environ",
            "/sys/kernel",
            "/dev/zero",
            "/dev/fd/0",
        ] {
            let refused = ctx.readable(path);
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("which flemmad never reads")),
                "{path}: {refused:?}"
            );
        }
        assert!(ctx.readable("notes.txt").is_ok());
    }
}
