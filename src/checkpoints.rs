//! Checkpoints of a project's files around the tool calls that can change them, and what a
//! conversation changed, call by call, and the way back (`flemmad changes`, `flemmad rewind`).
//!
//! Before and after each such call the project's files are recorded in a shadow git repository
//! under `$XDG_STATE_HOME/flemma/checkpoints/` (one per project, one branch and one index per
//! chat): outside the project, read-only inside the sandbox (it is under flemmad's state
//! folder), and never the user's own `.git` (no commit, index or ref of theirs is touched; the
//! project need not be a repository). It runs the `git` program with its configuration cut off
//! (no user or system config, no hooks): plumbing commands only. `.gitignore`d files, chats
//! (`*.chat`, their authority is not rewound with the files), flemmad's store (`.flemma/`) and
//! the content of nested repositories (git records them as links) are left out.
//!
//! Several calls at once are recorded one after the other (a lock per project); what they
//! change is then attributed to the call whose "after" comes first.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tools that never change files: no checkpoint around them.
const READ_ONLY_TOOLS: [&str; 6] = ["read", "grep", "find", "ls", "read_skill", "lsp"];

/// What is recorded and how long it is kept (`[checkpoints]` of the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Files larger than this are left out (a rewind neither restores nor removes them).
    pub max_file_bytes: u64,
    /// A chat whose last checkpoint is older than this loses its checkpoints (`None`: never).
    pub max_age: Option<std::time::Duration>,
    /// A project's repository over this size loses the oldest chats' checkpoints first.
    pub max_size_bytes: Option<u64>,
}

impl Limits {
    /// When no configuration could be read: the configuration's default file size limit
    /// (`checkpoints.max_file_mb`), and no pruning.
    pub const FALLBACK: Limits = Limits {
        max_file_bytes: 16 << 20,
        max_age: None,
        max_size_bytes: None,
    };
}

impl Limits {
    /// The limits the chat at `chat` is recorded under (its resolved configuration's
    /// `[checkpoints]`), for the commands that work on its checkpoints outside a driver (a
    /// rewind's own snapshot must leave out the same large files); [`Limits::FALLBACK`] when
    /// the configuration cannot be read.
    pub fn of_chat(chat: &Path, config_path: Option<&Path>) -> Limits {
        crate::chat::load("rewind", flemma_ide::Purpose::Inspect, chat, config_path)
            .ok()
            .and_then(|loaded| {
                let resolved = loaded.analysis.config.as_ref()?;
                Some((&resolved.config.checkpoints).into())
            })
            .unwrap_or(Limits::FALLBACK)
    }
}

impl From<&flemma_config::Checkpoints> for Limits {
    fn from(config: &flemma_config::Checkpoints) -> Self {
        Limits {
            max_file_bytes: config.max_file_mb.saturating_mul(1 << 20),
            max_age: (config.max_age_days > 0).then(|| {
                std::time::Duration::from_secs(config.max_age_days.saturating_mul(86_400))
            }),
            max_size_bytes: (config.max_size_mb > 0)
                .then(|| config.max_size_mb.saturating_mul(1 << 20)),
        }
    }
}

/// How often a project's checkpoints are checked for pruning (at most).
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// What went wrong with checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot run git ({0}); checkpoints need the git program on PATH")]
    NoGit(std::io::Error),
    #[error("git {command} failed: {stderr}")]
    Git { command: String, stderr: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(
        "no checkpoint of the call `{0}` in this chat: `flemmad changes FILE` lists the calls that have one"
    )]
    UnknownCall(String),
    #[error("no home directory: set HOME or XDG_STATE_HOME")]
    NoHome,
}

/// Whether a call of the tool `name` gets checkpoints (everything that may write: `bash`,
/// `write`, `edit`, custom and MCP tools, `fetch_content` with an `output`; the `lsp` tool only
/// for a rename).
pub fn changes_files(name: &str, input: &serde_json::Value) -> bool {
    if name == "lsp" {
        return input.get("action").and_then(|a| a.as_str()) == Some("rename");
    }
    !READ_ONLY_TOOLS.contains(&name) && !name.starts_with("flemma.")
}

/// A project too broad to record: `/` or the home directory itself.
fn too_broad(project: &Path, home: Option<&Path>) -> bool {
    project.parent().is_none()
        || home.is_some_and(|home| flemma_protocol::document::normalize(home) == project)
}

/// The tree recorded for the chat at `chat` whose project is `project`: the project, unless
/// the chat's folder lies in a folder the project's repository ignores (a scratch project
/// under a repository's ignored `target/` or `build/`): that repository's files are not the
/// chat's, and its view would see none of the chat's, so the chat's folder is recorded
/// (with its own `.gitignore` files, and whatever repositories enclose it).
fn own_tree(chat: &Path, project: PathBuf) -> PathBuf {
    let start = flemma_config::reach::project_start(chat);
    if start == project || !start.starts_with(&project) {
        return project;
    }
    let ignored = Command::new("git")
        .arg("-C")
        .arg(&project)
        .args([
            "-c",
            "core.fsmonitor=false",
            "check-ignore",
            "--quiet",
            "--",
        ])
        .arg(&start)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if ignored { start } else { project }
}

/// The bytes of the files under `dir`.
fn directory_size(dir: &Path) -> u64 {
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(kind) if kind.is_file() => {
                    bytes += entry.metadata().map_or(0, |metadata| metadata.len());
                }
                _ => {}
            }
        }
    }
    bytes
}

/// What the checkpoints take on disk: the folder of the shadow repositories, their bytes, and
/// how many projects they record (`flemmad doctor`). `None` without a state folder.
pub fn space_used() -> Option<(PathBuf, u64, usize)> {
    let dir = crate::user_dirs::flemma_state()?.join("checkpoints");
    let projects = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "git"))
        .count();
    let bytes = directory_size(&dir);
    Some((dir, bytes, projects))
}

/// One recorded point: before or after a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    pub commit: String,
    pub phase: Phase,
    pub tool_id: String,
    pub tool_name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Before,
    After,
    /// The state just before a rewind wrote the files (so a rewind can itself be undone).
    Rewind,
}

impl Phase {
    fn word(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::After => "after",
            Phase::Rewind => "rewind",
        }
    }
}

/// The checkpoints of one chat in its project.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    git_dir: PathBuf,
    project: PathBuf,
    /// The chat's key (its branch and index are named by it).
    key: String,
    limits: Limits,
}

/// What a rewind does (or, with `--dry-run`, would do).
#[derive(Debug, Default)]
pub struct RewindPlan {
    /// Files written back to their content before the call.
    pub restored: Vec<String>,
    /// Files the call (or a later one) created, removed.
    pub removed: Vec<String>,
    /// Files changed since the conversation's last call (by you): refused without `--force`.
    pub changed_since: Vec<String>,
}

impl Checkpoints {
    /// The checkpoints of the chat at `chat` (absolute), whose project is `project`.
    pub fn for_chat(chat: &Path, project: &Path) -> Result<Self, CheckpointError> {
        let state = crate::user_dirs::flemma_state().ok_or(CheckpointError::NoHome)?;
        let project_key = crate::trust::chat_key(project);
        Ok(Self {
            git_dir: state
                .join("checkpoints")
                .join(format!("{}.git", &project_key[..32])),
            project: project.to_path_buf(),
            key: crate::trust::chat_key(chat)[..32].to_owned(),
            limits: Limits::FALLBACK,
        })
    }

    /// The same checkpoints under `limits`.
    pub fn with_limits(self, limits: Limits) -> Self {
        Self { limits, ..self }
    }

    /// The checkpoints of `chat` in its project (its git work tree, else its folder).
    pub fn of(chat: &Path) -> Result<Self, CheckpointError> {
        let chat = std::path::absolute(chat)?;
        let home = crate::user_dirs::home();
        let project = flemma_config::reach::chat_project(&chat, home.as_deref(), |dir| {
            dir.join(".git").exists()
        });
        Self::for_chat(&chat, &own_tree(&chat, project))
    }

    /// The checkpoints to record for calls of `chat`, unless its project is too broad to
    /// record: the home directory or `/` (a chat kept directly in either).
    pub fn recording(chat: &Path, limits: Limits) -> Option<Self> {
        let checkpoints = Self::of(chat)
            .map(|checkpoints| checkpoints.with_limits(limits))
            .map_err(|error| tracing::info!(%error, "no checkpoints"))
            .ok()?;
        let home = crate::user_dirs::home();
        (!too_broad(&checkpoints.project, home.as_deref())).then_some(checkpoints)
    }

    fn branch(&self) -> String {
        format!("refs/heads/chat-{}", self.key)
    }

    fn git(&self) -> Command {
        let mut command = Command::new("git");
        command
            .arg("--git-dir")
            .arg(&self.git_dir)
            .arg("--work-tree")
            .arg(&self.project)
            .current_dir(&self.project)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "flemmad")
            .env("GIT_AUTHOR_EMAIL", "flemmad@localhost")
            .env("GIT_COMMITTER_NAME", "flemmad")
            .env("GIT_COMMITTER_EMAIL", "flemmad@localhost")
            .env(
                "GIT_INDEX_FILE",
                self.git_dir.join(format!("index-{}", self.key)),
            )
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .args(["-c", "core.quotePath=false", "-c", "core.fsmonitor=false"])
            .args([
                "-c",
                "core.autocrlf=false",
                "-c",
                "advice.addEmbeddedRepo=false",
            ])
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> Result<String, CheckpointError> {
        let out = self
            .git()
            .args(args)
            .output()
            .map_err(CheckpointError::NoGit)?;
        if !out.status.success() {
            return Err(CheckpointError::Git {
                command: args.first().copied().unwrap_or_default().to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn ensure_repository(&self) -> Result<(), CheckpointError> {
        if self.git_dir.join("HEAD").exists() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.git_dir)?;
        let out = Command::new("git")
            .args(["init", "--bare", "--quiet"])
            .arg(&self.git_dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .output()
            .map_err(CheckpointError::NoGit)?;
        if !out.status.success() {
            return Err(CheckpointError::Git {
                command: "init".to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        // No hooks ever run (plumbing only), but none are left to tempt anyone either.
        let _ = std::fs::remove_dir_all(self.git_dir.join("hooks"));
        std::fs::create_dir_all(self.git_dir.join("info"))?;
        // flemmad's own folders when they lie in the project (its state holds this repository).
        let mut exclude = String::from("*.chat\n.flemma/\n.git\n");
        let dirs = crate::user_dirs::UserDirs::from_process();
        for dir in [dirs.state, dirs.cache].into_iter().flatten() {
            if let Ok(inside) = dir.join("flemma").strip_prefix(&self.project) {
                exclude.push_str(&format!("/{}/\n", inside.display()));
            }
        }
        std::fs::write(self.git_dir.join("info").join("exclude"), exclude)?;
        Ok(())
    }

    /// Holds the project's lock while `work` runs (one recording at a time per project, across
    /// threads and processes).
    fn locked<T>(
        &self,
        work: impl FnOnce() -> Result<T, CheckpointError>,
    ) -> Result<T, CheckpointError> {
        // Next to the repository, so that its creation is under the lock too.
        let folder = self.git_dir.parent().unwrap_or(&self.git_dir);
        std::fs::create_dir_all(folder)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.git_dir.with_extension("lock"))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(std::io::Error::from)?;
        let result = self.ensure_repository().and_then(|()| work());
        let _ = rustix::fs::flock(&file, rustix::fs::FlockOperation::Unlock);
        result
    }

    /// Records the project's files as they are now, `phase` the call `tool_id`.
    pub fn record(
        &self,
        phase: Phase,
        tool_id: &str,
        tool_name: &str,
    ) -> Result<String, CheckpointError> {
        self.locked(|| self.record_locked(phase, tool_id, tool_name))
    }

    fn record_locked(
        &self,
        phase: Phase,
        tool_id: &str,
        tool_name: &str,
    ) -> Result<String, CheckpointError> {
        // Files over the limit are left out (and dropped when one grew past it).
        let large = self.large_files()?;
        if !large.is_empty() {
            let mut args = vec!["rm", "--cached", "--quiet", "--ignore-unmatch", "--"];
            args.extend(large.iter().map(String::as_str));
            self.run(&args)?;
        }
        let excluded: Vec<String> = large
            .iter()
            .map(|path| format!(":(exclude,literal){path}"))
            .collect();
        let mut args = vec!["add", "--all", "--ignore-errors", "--", "."];
        args.extend(excluded.iter().map(String::as_str));
        self.run(&args)?;
        let tree = self.run(&["write-tree"])?.trim().to_owned();
        let branch = self.branch();
        let parent = self
            .run(&["rev-parse", "--verify", "--quiet", &branch])
            .ok()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty());
        let message = format!("{} {tool_id} {tool_name}", phase.word());
        let mut args = vec!["commit-tree", tree.as_str(), "-m", message.as_str()];
        if let Some(parent) = &parent {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = self.run(&args)?.trim().to_owned();
        self.run(&["update-ref", &branch, &commit])?;
        Ok(commit)
    }

    /// The files `add --all` would take (new or changed since the last checkpoint, not
    /// ignored) that are larger than the limit.
    fn large_files(&self) -> Result<Vec<String>, CheckpointError> {
        let listed = self.run(&[
            "ls-files",
            "-z",
            "--others",
            "--modified",
            "--exclude-standard",
            "--",
            ".",
        ])?;
        Ok(listed
            .split('\0')
            .filter(|path| !path.is_empty())
            .filter(|path| {
                std::fs::symlink_metadata(self.project.join(path)).is_ok_and(|metadata| {
                    metadata.is_file() && metadata.len() > self.limits.max_file_bytes
                })
            })
            .map(str::to_owned)
            .collect())
    }

    /// Forgets old checkpoints when the limits say so, at most once every [`PRUNE_EVERY`] per
    /// project: the checkpoints of every other chat whose last one is older than the age limit,
    /// then, while the repository is over the size limit, other chats' checkpoints oldest
    /// first. Returns how many chats' checkpoints went.
    pub fn prune(&self) -> Result<usize, CheckpointError> {
        if self.limits.max_age.is_none() && self.limits.max_size_bytes.is_none() {
            return Ok(0);
        }
        let stamp = self.git_dir.join("pruned");
        let due = std::fs::metadata(&stamp)
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_none_or(|since| since >= PRUNE_EVERY);
        if !due {
            return Ok(0);
        }
        self.locked(|| {
            std::fs::write(&stamp, b"")?;
            let own = self.branch();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            // Other chats' branches, oldest last checkpoint first.
            let mut branches: Vec<(u64, String)> = self
                .run(&[
                    "for-each-ref",
                    "--sort=committerdate",
                    "--format=%(committerdate:unix) %(refname)",
                    "refs/heads/",
                ])?
                .lines()
                .filter_map(|line| {
                    let (date, name) = line.split_once(' ')?;
                    Some((date.parse().ok()?, name.to_owned()))
                })
                .filter(|(_, name)| *name != own)
                .collect();
            let mut gone = 0;
            if let Some(max_age) = self.limits.max_age {
                let (old, kept): (Vec<_>, Vec<_>) = branches
                    .into_iter()
                    .partition(|(date, _)| now.saturating_sub(*date) > max_age.as_secs());
                for (_, name) in &old {
                    self.forget(name)?;
                }
                gone += old.len();
                branches = kept;
                if !old.is_empty() {
                    self.collect_garbage()?;
                }
            }
            if let Some(max_size) = self.limits.max_size_bytes {
                let mut oldest = branches.into_iter();
                while directory_size(&self.git_dir) > max_size {
                    let Some((_, name)) = oldest.next() else {
                        break;
                    };
                    self.forget(&name)?;
                    self.collect_garbage()?;
                    gone += 1;
                }
            }
            Ok(gone)
        })
    }

    /// Removes the branch `name` (`refs/heads/chat-KEY`) and the index of its chat.
    fn forget(&self, name: &str) -> Result<(), CheckpointError> {
        self.run(&["update-ref", "-d", name])?;
        if let Some(key) = name.strip_prefix("refs/heads/chat-") {
            let _ = std::fs::remove_file(self.git_dir.join(format!("index-{key}")));
        }
        Ok(())
    }

    /// Drops what no branch reaches any more.
    fn collect_garbage(&self) -> Result<(), CheckpointError> {
        self.run(&["reflog", "expire", "--expire=now", "--all"])?;
        self.run(&["gc", "--prune=now", "--quiet"])?;
        Ok(())
    }

    /// Every recorded point of the chat, oldest first.
    pub fn points(&self) -> Result<Vec<Point>, CheckpointError> {
        if !self.git_dir.join("HEAD").exists() {
            return Ok(Vec::new());
        }
        let branch = self.branch();
        if self
            .run(&["rev-parse", "--verify", "--quiet", &branch])
            .is_err()
        {
            return Ok(Vec::new());
        }
        let log = self.run(&["log", "--reverse", "--format=%H %s", &branch])?;
        Ok(log
            .lines()
            .filter_map(|line| {
                let mut words = line.split(' ');
                let commit = words.next()?.to_owned();
                let phase = match words.next()? {
                    "before" => Phase::Before,
                    "after" => Phase::After,
                    "rewind" => Phase::Rewind,
                    _ => return None,
                };
                Some(Point {
                    commit,
                    phase,
                    tool_id: words.next()?.to_owned(),
                    tool_name: words.next().unwrap_or_default().to_owned(),
                })
            })
            .collect())
    }

    fn point(&self, phase: Phase, tool_id: &str) -> Result<Point, CheckpointError> {
        self.points()?
            .into_iter()
            .find(|p| p.phase == phase && p.tool_id == tool_id)
            .ok_or_else(|| CheckpointError::UnknownCall(tool_id.to_owned()))
    }

    /// What the calls `calls` changed (every call's when `None`), in order, each under a
    /// `== call` line as a unified diff; calls that changed nothing are left out. One call
    /// named alone that has no checkpoint is an error ([`CheckpointError::UnknownCall`]).
    pub fn changes(&self, calls: Option<&[String]>) -> Result<String, CheckpointError> {
        let points = self.points()?;
        let mut out = String::new();
        // A call's changes: from the point recorded just before its "after" (its own
        // "before", or, when calls ran at once, the other call's "after") to its "after", so
        // that nothing is counted twice.
        for (at, after) in points.iter().enumerate() {
            if after.phase != Phase::After || after.tool_name == "rewind" {
                continue;
            }
            if calls.is_some_and(|ids| !ids.contains(&after.tool_id)) {
                continue;
            }
            let Some(start) = at.checked_sub(1).map(|i| &points[i]) else {
                continue;
            };
            let diff = self.run(&["diff", "--no-color", &start.commit, &after.commit])?;
            if diff.is_empty() {
                continue;
            }
            let files = self
                .run(&["diff", "--name-only", &start.commit, &after.commit])?
                .lines()
                .count();
            out.push_str(&format!(
                "== {} ({}): {files} file{} changed\n{diff}",
                after.tool_id,
                after.tool_name,
                if files == 1 { "" } else { "s" },
            ));
        }
        if let Some([id]) = calls
            && out.is_empty()
        {
            self.point(Phase::Before, id)?;
        }
        Ok(out)
    }

    /// Puts the project's files back as they were before the call `tool_id`. A file changed
    /// since the conversation's last recorded point (by you, not by a call) is refused unless
    /// `force`; `dry_run` only says what would happen.
    pub fn rewind(
        &self,
        tool_id: &str,
        force: bool,
        dry_run: bool,
    ) -> Result<RewindPlan, CheckpointError> {
        self.locked(|| {
            let target = self.point(Phase::Before, tool_id)?;
            // What the conversation left last (a refused or dry rewind's own snapshot is not).
            let last = self
                .points()?
                .into_iter()
                .rfind(|p| p.phase != Phase::Rewind)
                .map(|p| p.commit)
                .unwrap_or_else(|| target.commit.clone());
            let now = self.record_locked(Phase::Rewind, tool_id, "rewind")?;
            let mut plan = RewindPlan::default();
            for line in self
                .run(&[
                    "diff",
                    "--name-status",
                    "--no-renames",
                    &target.commit,
                    &now,
                ])?
                .lines()
            {
                let Some((status, path)) = line.split_once('\t') else {
                    continue;
                };
                if status == "A" {
                    plan.removed.push(path.to_owned());
                } else {
                    plan.restored.push(path.to_owned());
                }
            }
            let touched: std::collections::BTreeSet<&str> = plan
                .restored
                .iter()
                .chain(&plan.removed)
                .map(String::as_str)
                .collect();
            plan.changed_since = self
                .run(&["diff", "--name-only", "--no-renames", &last, &now])?
                .lines()
                .filter(|path| touched.contains(path))
                .map(str::to_owned)
                .collect();
            if dry_run || (!force && !plan.changed_since.is_empty()) {
                return Ok(plan);
            }
            if !plan.restored.is_empty() {
                let mut args = vec!["checkout", target.commit.as_str(), "--"];
                args.extend(plan.restored.iter().map(String::as_str));
                self.run(&args)?;
            }
            for path in &plan.removed {
                match std::fs::remove_file(self.project.join(path)) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error.into()),
                }
            }
            // The files as they are now are the new baseline for "changed since".
            self.record_locked(Phase::After, tool_id, "rewind")?;
            Ok(plan)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_directory_and_the_root_are_never_recorded() {
        let home = Path::new("/home/me");
        assert!(too_broad(Path::new("/"), Some(home)));
        assert!(too_broad(
            Path::new("/home/me"),
            Some(Path::new("/home/me/"))
        ));
        assert!(!too_broad(Path::new("/home/me/project"), Some(home)));
        assert!(!too_broad(Path::new("/srv/x"), None));
    }

    #[test]
    fn only_tools_that_can_write_get_checkpoints() {
        let none = serde_json::Value::Null;
        for name in ["bash", "write", "edit", "demo.write", "fetch_content", "mk"] {
            assert!(changes_files(name, &none), "{name}");
        }
        for name in ["read", "grep", "find", "ls", "flemma.jobs.status"] {
            assert!(!changes_files(name, &none), "{name}");
        }
        assert!(changes_files(
            "lsp",
            &serde_json::json!({"action": "rename"})
        ));
        assert!(!changes_files(
            "lsp",
            &serde_json::json!({"action": "definition"})
        ));
    }
}
