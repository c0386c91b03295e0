//! Everything the evaluator needs from the outside world goes through [`Host`].

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

/// The ambient state a personality describes (`urn:flemma:personality:…`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PersonalityContext {
    /// The working directory the tools run in.
    pub cwd: Option<PathBuf>,
    /// The current git branch of the working directory, when it is a repository.
    pub git_branch: Option<String>,
    /// The tools the model may call in this conversation.
    pub enabled_tools: Vec<String>,
}

/// All IO of an evaluation: file reads (`include`, `@./file` references, project context), the
/// home directory, the clock and the environment described by personalities. Tests use a temp
/// dir through [`FsHost`] or their own implementation; the daemon uses [`FsHost`] or a wrapper
/// that adds the enabled tools.
pub trait Host: Send + Sync + std::fmt::Debug {
    /// Reads a whole file.
    fn read_file(&self, path: &Path) -> std::io::Result<Vec<u8>>;
    /// The user's home directory (for `@~/…`).
    fn home_dir(&self) -> Option<PathBuf>;
    /// The current time (for `now()`, `date()` and personalities).
    fn now(&self) -> SystemTime;
    /// The working directory, git branch and enabled tools, for personalities.
    fn environment(&self) -> PersonalityContext;
}

/// The real filesystem, the real clock and the process environment.
///
/// `environment()` reports the process working directory and its git branch (read from
/// `.git/HEAD`, walking up); it knows no enabled tools; wrap it to add them.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsHost;

impl Host for FsHost {
    fn read_file(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn home_dir(&self) -> Option<PathBuf> {
        std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from)
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn environment(&self) -> PersonalityContext {
        let cwd = std::env::current_dir().ok();
        let git_branch = cwd.as_deref().and_then(git_branch_of);
        PersonalityContext {
            cwd,
            git_branch,
            enabled_tools: Vec::new(),
        }
    }
}

/// The branch named by `.git/HEAD` in `dir` or its nearest ancestor that has one.
pub fn git_branch_of(dir: &Path) -> Option<String> {
    dir.ancestors().find_map(|ancestor| {
        let head = std::fs::read_to_string(ancestor.join(".git").join("HEAD")).ok()?;
        let head = head.trim();
        Some(match head.strip_prefix("ref: refs/heads/") {
            Some(branch) => branch.to_string(),
            None => format!("detached at {}", head.chars().take(12).collect::<String>()),
        })
    })
}
