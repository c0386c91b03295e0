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

mod monitor;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use monitor::{Monitor, Since};

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
    /// More lines of the repository's `info/exclude`.
    excluded: Vec<String>,
    /// What this value (and its clones) knows of the project since its last checkpoint.
    watch: Arc<Mutex<Watch>>,
}

/// A checkpoint this value recorded: its tree and its commit.
#[derive(Debug, Clone)]
struct Recorded {
    tree: String,
    /// `None`: the chat's branch did not exist yet (its index was filled ahead, `prepare`).
    commit: Option<String>,
}

/// The value `update-ref` compares with to say "this ref must not exist yet" (SHA-1 repositories,
/// as `git init` makes them).
const NO_COMMIT: &str = "0000000000000000000000000000000000000000";

/// The monitor of the project's folders and the checkpoint recorded while it watched.
#[derive(Debug, Default)]
struct Watch {
    monitor: Option<Monitor>,
    /// The last checkpoint recorded while `monitor` watched (the chat's index holds its tree).
    last: Option<Recorded>,
    /// The project cannot be monitored (too many folders, no inotify, turned off).
    unmonitored: bool,
}

impl Watch {
    /// What changed since `last`, or `None` when only a scan can tell.
    fn since(&mut self, git: &dyn Fn() -> Command) -> Option<(Recorded, Vec<PathBuf>)> {
        let last = self.last.clone()?;
        match self.monitor.as_mut()?.since(git) {
            Since::Nothing => Some((last, Vec::new())),
            Since::Changes(paths) => Some((last, paths)),
            Since::Lost => {
                self.monitor = None;
                self.last = None;
                None
            }
        }
    }

    /// A monitor watching from now on, unless the project cannot have one.
    fn ensure_monitor(&mut self, project: &Path, git: &dyn Fn() -> Command) {
        if self.monitor.is_some() || self.unmonitored {
            return;
        }
        self.monitor = Monitor::start(project, git);
        self.unmonitored = self.monitor.is_none();
    }
}

/// What a pruning forgot.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Chats whose checkpoints all went.
    pub chats: usize,
    /// Points of the pruning chat's own history that went.
    pub points: usize,
}

/// One point of a chat's history with its dates (pruning writes the kept ones again).
struct Dated {
    tree: String,
    /// Committed at (Unix seconds): what the age limit is compared with.
    date: u64,
    authored: u64,
    message: String,
}

/// What one call changed in the project's files ([`Checkpoints::call_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallChanges {
    pub tool_id: String,
    pub tool_name: String,
    /// The files it changed, in the diff's order.
    pub files: Vec<FileChange>,
    /// The change as a unified diff (git's, `diff --git a/… b/…` per file).
    pub diff: String,
}

/// One file a call changed: its path in the project (the new one of a file renamed, with
/// the old one in `from`) and the lines it added and removed (`None` for a binary file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub from: Option<String>,
    pub added: Option<u64>,
    pub removed: Option<u64>,
}

impl FileChange {
    /// The records of `git diff --numstat -z`: `added\tremoved\tpath\0`, or for a rename
    /// `added\tremoved\t\0old\0new\0`.
    fn from_numstat(out: &str) -> Vec<Self> {
        let mut fields = out.split('\0');
        let mut files = Vec::new();
        while let Some(record) = fields.next() {
            let mut parts = record.splitn(3, '\t');
            let (Some(added), Some(removed), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (path, from) = if path.is_empty() {
                let (Some(old), Some(new)) = (fields.next(), fields.next()) else {
                    break;
                };
                (new.to_owned(), Some(old.to_owned()))
            } else {
                (path.to_owned(), None)
            };
            files.push(FileChange {
                path,
                from,
                added: added.parse().ok(),
                removed: removed.parse().ok(),
            });
        }
        files
    }
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
    /// The checkpoints of the chat `key` (its branch and index are named by it) of the
    /// project `project`, kept in the shadow repository `git_dir` (created at the first
    /// checkpoint), with the fallback limits and a monitor of the project's folders.
    pub fn new(git_dir: PathBuf, project: PathBuf, key: String) -> Self {
        Self {
            git_dir,
            project,
            key,
            limits: Limits::FALLBACK,
            excluded: Vec::new(),
            watch: Arc::new(Mutex::new(Watch::default())),
        }
    }

    /// The same checkpoints under `limits`.
    pub fn with_limits(self, limits: Limits) -> Self {
        Self { limits, ..self }
    }

    /// The same checkpoints without a monitor: every checkpoint scans the whole tree.
    pub fn without_monitor(self) -> Self {
        if let Ok(mut watch) = self.watch.lock() {
            watch.unmonitored = true;
        }
        self
    }

    /// The same checkpoints leaving out `folders` too (relative to the project, as `/a/b/`
    /// lines of the repository's `info/exclude`: flemmad's own folders when they lie in it).
    pub fn excluding(self, folders: Vec<String>) -> Self {
        Self {
            excluded: folders,
            ..self
        }
    }

    /// The project whose files are recorded.
    pub fn project(&self) -> &Path {
        &self.project
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
        for folder in &self.excluded {
            exclude.push_str(folder);
            exclude.push('\n');
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
        let message = format!("{} {tool_id} {tool_name}", phase.word());
        let git = || self.git();
        let mut watch = self.watch.lock().unwrap_or_else(PoisonError::into_inner);
        // What the monitor saw since this value's last checkpoint: only that is recorded.
        if let Some((last, changed)) = watch.since(&git) {
            match self.record_changed(&last, &changed, &message) {
                Ok(Some(recorded)) => {
                    let commit = recorded.commit.clone().unwrap_or_default();
                    watch.last = Some(recorded);
                    return Ok(commit);
                }
                // The chat's branch moved meanwhile (a rewind, another process): scan.
                Ok(None) => {}
                Err(error) => tracing::info!(%error, "recording what changed failed: scanning"),
            }
        }
        // Watching before the scan: what changes while it runs is seen next time.
        watch.ensure_monitor(&self.project, &git);
        let recorded = self.record_all(&message)?;
        let commit = recorded.commit.clone().unwrap_or_default();
        watch.last = watch.monitor.is_some().then_some(recorded);
        Ok(commit)
    }

    /// Records the paths `changed` on top of `last` (whose tree the chat's index holds), as
    /// the next commit of the chat's branch, if the branch still ends at `last`.
    fn record_changed(
        &self,
        last: &Recorded,
        changed: &[PathBuf],
        message: &str,
    ) -> Result<Option<Recorded>, CheckpointError> {
        let literal = |prefix: &str, path: &Path| {
            let mut spec = prefix.as_bytes().to_vec();
            spec.extend_from_slice(path.as_os_str().as_encoded_bytes());
            spec
        };
        let (present, gone): (Vec<&PathBuf>, Vec<&PathBuf>) = changed
            .iter()
            .partition(|path| std::fs::symlink_metadata(self.project.join(path)).is_ok());
        let large = self.large_files_under(&present);
        let removed: Vec<Vec<u8>> = gone
            .iter()
            .chain(&large.iter().collect::<Vec<_>>())
            .map(|path| literal(":(literal)", path))
            .collect();
        if !removed.is_empty() {
            self.run_with_pathspecs(
                &[
                    "rm",
                    "--cached",
                    "--force",
                    "-r",
                    "--quiet",
                    "--ignore-unmatch",
                ],
                &removed,
            )?;
        }
        if !present.is_empty() {
            let mut specs: Vec<Vec<u8>> = present
                .iter()
                .map(|path| literal(":(literal)", path))
                .collect();
            specs.extend(large.iter().map(|path| literal(":(exclude,literal)", path)));
            self.run_with_pathspecs(&["add", "--all", "--ignore-errors"], &specs)?;
        }
        let tree = if changed.is_empty() {
            last.tree.clone()
        } else {
            self.run(&["write-tree"])?.trim().to_owned()
        };
        let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
        if let Some(parent) = &last.commit {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = self.run(&args)?.trim().to_owned();
        // Compare and swap: only if the branch still ends where this value left it.
        let expected = last.commit.as_deref().unwrap_or(NO_COMMIT);
        if self
            .run(&["update-ref", &self.branch(), &commit, expected])
            .is_err()
        {
            return Ok(None);
        }
        Ok(Some(Recorded {
            tree,
            commit: Some(commit),
        }))
    }

    /// Runs `git ARGS --pathspec-from-file=- --pathspec-file-nul` with `specs` on its input.
    fn run_with_pathspecs(&self, args: &[&str], specs: &[Vec<u8>]) -> Result<(), CheckpointError> {
        let mut child = self
            .git()
            .args(args)
            .args(["--pathspec-from-file=-", "--pathspec-file-nul"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(CheckpointError::NoGit)?;
        if let Some(mut stdin) = child.stdin.take() {
            for spec in specs {
                stdin.write_all(spec)?;
                stdin.write_all(b"\0")?;
            }
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            return Err(CheckpointError::Git {
                command: args.first().copied().unwrap_or_default().to_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }

    /// The files under `paths` (files or folders, relative to the project) over the size
    /// limit; what git ignores among them is harmless to name.
    fn large_files_under(&self, paths: &[&PathBuf]) -> Vec<PathBuf> {
        let mut large = Vec::new();
        let mut stack: Vec<PathBuf> = paths.iter().map(|path| (*path).clone()).collect();
        while let Some(path) = stack.pop() {
            let Ok(metadata) = std::fs::symlink_metadata(self.project.join(&path)) else {
                continue;
            };
            if metadata.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|name| name == ".git" || name == ".flemma")
                {
                    continue;
                }
                let entries = std::fs::read_dir(self.project.join(&path));
                for entry in entries.into_iter().flatten().flatten() {
                    stack.push(path.join(entry.file_name()));
                }
            } else if metadata.is_file() && metadata.len() > self.limits.max_file_bytes {
                large.push(path);
            }
        }
        large
    }

    /// Records the whole project (a scan of every file): the chat's index brought up to date
    /// with the tree, committed on the chat's branch.
    fn record_all(&self, message: &str) -> Result<Recorded, CheckpointError> {
        let tree = self.index_all()?;
        let branch = self.branch();
        let parent = self.head()?;
        let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
        if let Some(parent) = &parent {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = self.run(&args)?.trim().to_owned();
        self.run(&["update-ref", &branch, &commit])?;
        Ok(Recorded {
            tree,
            commit: Some(commit),
        })
    }

    /// The commit the chat's branch ends at (`None` before its first checkpoint).
    fn head(&self) -> Result<Option<String>, CheckpointError> {
        Ok(self
            .run(&["rev-parse", "--verify", "--quiet", &self.branch()])
            .ok()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty()))
    }

    /// The chat's index brought up to date with the whole tree (a scan of every file); its
    /// tree.
    fn index_all(&self) -> Result<String, CheckpointError> {
        // Files over the limit are left out (and dropped when one grew past it).
        let large = self.large_files()?;
        if !large.is_empty() {
            let mut args = vec![
                "rm",
                "--cached",
                "--force",
                "--quiet",
                "--ignore-unmatch",
                "--",
            ];
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
        Ok(self.run(&["write-tree"])?.trim().to_owned())
    }

    /// Makes the chat's next checkpoint cheap, ahead of the call that needs it (while the model
    /// still writes the call): the monitor started and the chat's index filled with the tree as
    /// it is (for a project never recorded, the hashing of every file). Nothing is committed.
    /// Does nothing when it was done, or when the project cannot be monitored.
    pub fn prepare(&self) -> Result<(), CheckpointError> {
        // Every call the model composes asks: once prepared, answer without the project's lock.
        if self
            .watch
            .lock()
            .is_ok_and(|watch| watch.last.is_some() || watch.unmonitored)
        {
            return Ok(());
        }
        self.locked(|| {
            let git = || self.git();
            let mut watch = self.watch.lock().unwrap_or_else(PoisonError::into_inner);
            if watch.last.is_some() {
                return Ok(());
            }
            watch.ensure_monitor(&self.project, &git);
            if watch.monitor.is_none() {
                return Ok(());
            }
            let tree = self.index_all()?;
            watch.last = Some(Recorded {
                tree,
                commit: self.head()?,
            });
            Ok(())
        })
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
    /// project: the checkpoints of every other chat whose last one is older than the age limit
    /// and this chat's own points older than it (a chat in use for longer than the limit),
    /// then, while the repository is over the size limit, other chats' checkpoints oldest
    /// first, then the older half of this chat's points, again and again (its last point
    /// always stays: it is what "changed since" compares with). Says what went.
    pub fn prune(&self) -> Result<Pruned, CheckpointError> {
        if self.limits.max_age.is_none() && self.limits.max_size_bytes.is_none() {
            return Ok(Pruned::default());
        }
        let stamp = self.git_dir.join("pruned");
        let due = std::fs::metadata(&stamp)
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_none_or(|since| since >= PRUNE_EVERY);
        if !due {
            return Ok(Pruned::default());
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
            let mut pruned = Pruned::default();
            if let Some(max_age) = self.limits.max_age {
                let (old, kept): (Vec<_>, Vec<_>) = branches
                    .into_iter()
                    .partition(|(date, _)| now.saturating_sub(*date) > max_age.as_secs());
                for (_, name) in &old {
                    self.forget(name)?;
                }
                pruned.chats += old.len();
                branches = kept;
                let cut_before = now.saturating_sub(max_age.as_secs());
                pruned.points += self.cut_own_points(|points| {
                    points
                        .iter()
                        .position(|point| point.date >= cut_before)
                        .unwrap_or(points.len())
                })?;
                if pruned != Pruned::default() {
                    self.collect_garbage()?;
                }
            }
            if let Some(max_size) = self.limits.max_size_bytes {
                let mut oldest = branches.into_iter();
                while directory_size(&self.git_dir) > max_size {
                    if let Some((_, name)) = oldest.next() {
                        self.forget(&name)?;
                        pruned.chats += 1;
                    } else {
                        let cut = self.cut_own_points(|points| points.len() / 2)?;
                        if cut == 0 {
                            break;
                        }
                        pruned.points += cut;
                    }
                    self.collect_garbage()?;
                }
            }
            Ok(pruned)
        })
    }

    /// Drops the chat's oldest points: those before the index `first_kept` says (given the
    /// points oldest first), moved back so that a call's "after" keeps the point before it
    /// and never past the last point. The kept points are written again with their dates and
    /// messages, the first without a parent; the branch moves only if it still ends where it
    /// did (compare and swap). Returns how many points went.
    fn cut_own_points(
        &self,
        first_kept: impl FnOnce(&[Dated]) -> usize,
    ) -> Result<usize, CheckpointError> {
        let branch = self.branch();
        let Some(head) = self.head()? else {
            return Ok(0);
        };
        let points: Vec<Dated> = self
            .run(&["log", "--reverse", "--format=%T %ct %at %s", &branch])?
            .lines()
            .filter_map(|line| {
                let mut words = line.splitn(4, ' ');
                Some(Dated {
                    tree: words.next()?.to_owned(),
                    date: words.next()?.parse().ok()?,
                    authored: words.next()?.parse().ok()?,
                    message: words.next()?.to_owned(),
                })
            })
            .collect();
        let mut keep = first_kept(&points).min(points.len().saturating_sub(1));
        while keep > 0 && points[keep].message.starts_with("after ") {
            keep -= 1;
        }
        if keep == 0 {
            return Ok(0);
        }
        let mut parent: Option<String> = None;
        for point in &points[keep..] {
            let mut command = self.git();
            command
                .args(["commit-tree", &point.tree, "-m", &point.message])
                .env("GIT_COMMITTER_DATE", format!("@{} +0000", point.date))
                .env("GIT_AUTHOR_DATE", format!("@{} +0000", point.authored));
            if let Some(parent) = &parent {
                command.args(["-p", parent]);
            }
            let out = command.output().map_err(CheckpointError::NoGit)?;
            if !out.status.success() {
                return Err(CheckpointError::Git {
                    command: "commit-tree".to_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                });
            }
            parent = Some(String::from_utf8_lossy(&out.stdout).trim().to_owned());
        }
        let Some(new_head) = parent else {
            return Ok(0);
        };
        if self
            .run(&["update-ref", &branch, &new_head, &head])
            .is_err()
        {
            return Ok(0);
        }
        // The monitor's last checkpoint is the same tree under its new name.
        let mut watch = self.watch.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(last) = watch.last.as_mut()
            && last.commit.as_deref() == Some(head.as_str())
        {
            last.commit = Some(new_head);
        }
        Ok(keep)
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
        Ok(self
            .call_changes(calls)?
            .iter()
            .map(|call| {
                let files = call.files.len();
                format!(
                    "== {} ({}): {files} file{} changed\n{}",
                    call.tool_id,
                    call.tool_name,
                    if files == 1 { "" } else { "s" },
                    call.diff
                )
            })
            .collect())
    }

    /// What the calls `calls` changed (every call's when `None`), in order, as data: each
    /// call's files with their added and removed lines, and its unified diff; calls that
    /// changed nothing are left out. One call named alone that has no checkpoint is an error
    /// ([`CheckpointError::UnknownCall`]).
    pub fn call_changes(
        &self,
        calls: Option<&[String]>,
    ) -> Result<Vec<CallChanges>, CheckpointError> {
        let points = self.points()?;
        let mut out = Vec::new();
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
            // `-z`: paths as they are, not quoted.
            let files = FileChange::from_numstat(&self.run(&[
                "diff",
                "--numstat",
                "-z",
                &start.commit,
                &after.commit,
            ])?);
            out.push(CallChanges {
                tool_id: after.tool_id.clone(),
                tool_name: after.tool_name.clone(),
                files,
                diff,
            });
        }
        if let Some([id]) = calls
            && out.is_empty()
        {
            self.point(Phase::Before, id)?;
        }
        Ok(out)
    }

    /// The chat's last recorded point as its branch says, read without running git (the loose
    /// ref, else `packed-refs`): while it is the same, nothing was recorded or rewound, so what
    /// was computed from the checkpoints still holds. `None`: nothing recorded.
    pub fn tip(&self) -> Option<String> {
        let branch = self.branch();
        if let Ok(text) = std::fs::read_to_string(self.git_dir.join(&branch)) {
            return Some(text.trim().to_owned());
        }
        let packed = std::fs::read_to_string(self.git_dir.join("packed-refs")).ok()?;
        packed.lines().find_map(|line| {
            let (hash, name) = line.split_once(' ')?;
            (name == branch).then(|| hash.to_owned())
        })
    }

    /// How many files each call changed, by tool use id (calls that changed nothing left
    /// out), counted as [`Checkpoints::call_changes`] counts them (each point's change from
    /// the one before it), in one git process however many calls there are.
    pub fn file_counts(&self) -> Result<std::collections::HashMap<String, usize>, CheckpointError> {
        let mut counts = std::collections::HashMap::new();
        if self.tip().is_none() {
            return Ok(counts);
        }
        // Each point: a \x01, its parents and message on one line, then its numstat lines.
        let log = self.run(&["log", "--format=%x01%P %s", "--numstat", &self.branch()])?;
        for record in log.split('\x01').skip(1) {
            let mut lines = record.lines();
            let Some((parents, message)) = lines.next().and_then(|line| line.split_once(' '))
            else {
                continue;
            };
            let mut words = message.split(' ');
            let (Some("after"), Some(tool_id), name) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            if parents.is_empty() || name == Some("rewind") {
                continue;
            }
            let files = lines.filter(|line| !line.trim().is_empty()).count();
            if files > 0 {
                counts.insert(tool_id.to_owned(), files);
            }
        }
        Ok(counts)
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
            // What the call added goes first: an added entry may be a link planted where a
            // folder of restored files was (`remove_file` removes the link, never its target),
            // and git then puts the folder back instead of writing through the link.
            for path in &plan.removed {
                match std::fs::remove_file(self.project.join(path)) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error.into()),
                }
            }
            if !plan.restored.is_empty() {
                let mut args = vec!["checkout", target.commit.as_str(), "--"];
                args.extend(plan.restored.iter().map(String::as_str));
                self.run(&args)?;
            }
            // The files as they are now are the new baseline for "changed since".
            self.record_locked(Phase::After, tool_id, "rewind")?;
            Ok(plan)
        })
    }
}

/// The bytes of the files under `dir`.
pub fn directory_size(dir: &Path) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_records_are_read_with_renames_and_binary_files() {
        let out = "2\t1\ta b.txt\0-\t-\timg.png\u{0}0\t0\t\0src.txt\0moved.txt\0";
        let files = FileChange::from_numstat(out);
        let file = |path: &str, from: Option<&str>, added, removed| FileChange {
            path: path.to_owned(),
            from: from.map(str::to_owned),
            added,
            removed,
        };
        assert_eq!(
            files,
            vec![
                file("a b.txt", None, Some(2), Some(1)),
                file("img.png", None, None, None),
                file("moved.txt", Some("src.txt"), Some(0), Some(0)),
            ]
        );
        assert!(FileChange::from_numstat("").is_empty());
    }

    /// The checkpoints of the chat `key` of `project` in the shadow repository `git_dir`.
    fn checkpoints(git_dir: &Path, project: &Path, key: &str) -> Checkpoints {
        Checkpoints::new(git_dir.to_path_buf(), project.to_path_buf(), key.to_owned()).with_limits(
            Limits {
                max_file_bytes: 4096,
                ..Limits::FALLBACK
            },
        )
    }

    /// Every path under `dir`.
    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(folder) = stack.pop() {
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    stack.push(entry.path());
                }
                paths.push(entry.path());
            }
        }
        paths.sort();
        paths
    }

    fn tree_of(checkpoints: &Checkpoints, commit: &str) -> String {
        checkpoints
            .run(&["rev-parse", &format!("{commit}^{{tree}}")])
            .expect("rev-parse")
            .trim()
            .to_owned()
    }

    /// After every change of a long random series (files and folders created, changed,
    /// renamed, deleted, made executable, linked; ignored files, a changed `.gitignore`, a file
    /// over the size limit, chats), what the monitored checkpoints record is what a scan of
    /// the whole tree records.
    #[test]
    fn what_the_monitor_records_is_what_a_scan_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("project");
        let git_dir = dir.path().join("shadow.git");
        std::fs::create_dir_all(project.join("src/deep")).expect("mkdir");
        std::fs::write(project.join(".gitignore"), "target/\n*.log\n").expect("write");
        std::fs::write(project.join("src/a.rs"), "a").expect("write");
        std::fs::create_dir_all(project.join("empty")).expect("mkdir");
        let monitored = checkpoints(&git_dir, &project, "monitored");
        // The index filled ahead: the first checkpoint already knows what changed since.
        monitored.prepare().expect("prepare");
        let mut random: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |below: usize| {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            (random % below as u64) as usize
        };
        let names = ["a.rs", "b.txt", "c", "x.log", "n.chat", "big.bin"];
        let folders = ["", "src", "src/deep", "empty", "new", "new/inner", "target"];
        let mut fast = 0;
        for step in 0..100 {
            let folder = project.join(folders[next(folders.len())]);
            let file = folder.join(names[next(names.len())]);
            let _ = std::fs::create_dir_all(&folder);
            match next(9) {
                0 | 1 => {
                    let size = if file.ends_with("big.bin") { 8192 } else { 10 };
                    let _ = std::fs::write(&file, format!("{step}").repeat(size));
                }
                2 => {
                    let _ = std::fs::remove_file(&file);
                }
                3 => {
                    let to = project
                        .join(folders[next(folders.len())])
                        .join(names[next(names.len())]);
                    let _ = std::fs::rename(&file, to);
                }
                4 => {
                    // The executable bit of a file that exists, flipped (git records it).
                    use std::os::unix::fs::PermissionsExt;
                    let files: Vec<PathBuf> = walk(&project)
                        .into_iter()
                        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()))
                        .collect();
                    if let Some(file) = files.get(next(files.len().max(1))) {
                        let mode =
                            std::fs::metadata(file).map_or(0o644, |m| m.permissions().mode());
                        let flipped = if mode & 0o100 == 0 { 0o755 } else { 0o644 };
                        let _ = std::fs::set_permissions(
                            file,
                            std::fs::Permissions::from_mode(flipped),
                        );
                    }
                }
                5 => {
                    let _ = std::fs::remove_file(&file);
                    let _ = std::os::unix::fs::symlink("a.rs", &file);
                }
                6 if next(4) == 0 => {
                    let _ = std::fs::remove_dir_all(project.join("new"));
                }
                7 if next(6) == 0 => {
                    let rules = ["target/\n*.log\n", "*.txt\n", ""][next(3)];
                    let _ = std::fs::write(project.join(".gitignore"), rules);
                }
                8 => {
                    // Nothing changes: the next checkpoint must find nothing.
                }
                _ => {
                    let _ = std::fs::write(&file, "again");
                }
            }
            let before = monitored
                .watch
                .lock()
                .map(|w| w.last.is_some())
                .unwrap_or(false);
            let commit = monitored
                .record(Phase::After, &format!("call{step}"), "bash")
                .expect("record");
            fast += usize::from(before);
            let scanned = checkpoints(&git_dir, &project, &format!("scan{step}"));
            let truth = scanned
                .record(Phase::After, &format!("call{step}"), "bash")
                .expect("scan");
            assert_eq!(
                tree_of(&monitored, &commit),
                tree_of(&scanned, &truth),
                "step {step}: the monitored checkpoint differs from a scan"
            );
        }
        // The monitor was in use (no silent fallback to scanning every time).
        assert!(fast > 50, "only {fast} of 100 checkpoints used the monitor");
        // The code lenses' counts, in one process, are what `changes` shows call by call.
        let shown: std::collections::HashMap<String, usize> = monitored
            .call_changes(None)
            .expect("changes")
            .into_iter()
            .map(|call| (call.tool_id, call.files.len()))
            .collect();
        assert!(shown.len() > 30, "{shown:?}");
        assert_eq!(monitored.file_counts().expect("counts"), shown);
    }

    /// A checkpoint prepared ahead, then a branch moved by someone else (a rewind, another
    /// process): the next checkpoint does not lose that history, and records what is there.
    #[test]
    fn a_branch_moved_meanwhile_is_not_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("project");
        let git_dir = dir.path().join("shadow.git");
        std::fs::create_dir_all(&project).expect("mkdir");
        std::fs::write(project.join("a.txt"), "one").expect("write");
        let monitored = checkpoints(&git_dir, &project, "chat");
        monitored.prepare().expect("prepare");
        // Another value of the same chat (no shared monitor) records first.
        let other = checkpoints(&git_dir, &project, "chat");
        other.record(Phase::Before, "x", "bash").expect("record");
        std::fs::write(project.join("a.txt"), "two").expect("write");
        let commit = monitored.record(Phase::After, "x", "bash").expect("record");
        let points = monitored.points().expect("points");
        assert_eq!(points.len(), 2, "{points:?}");
        assert_eq!(points[1].commit, commit);
        let scanned = checkpoints(&git_dir, &project, "scan");
        let truth = scanned.record(Phase::After, "x", "bash").expect("scan");
        assert_eq!(tree_of(&monitored, &commit), tree_of(&scanned, &truth));
        // And a prepared chat's first checkpoint starts the branch.
        let fresh = checkpoints(&git_dir, &project, "fresh");
        fresh.prepare().expect("prepare");
        std::fs::write(project.join("b.txt"), "new").expect("write");
        let first = fresh.record(Phase::Before, "y", "write").expect("record");
        assert_eq!(fresh.points().expect("points").len(), 1);
        let truth = scanned.record(Phase::After, "y", "bash").expect("scan");
        assert_eq!(tree_of(&fresh, &first), tree_of(&scanned, &truth));
    }

    /// A model that plants symlinks after a checkpoint (a file replaced by a link to a file
    /// outside the project, a folder replaced by a link to a folder outside it) cannot make a
    /// rewind write or delete anything outside the project: the links themselves are put back
    /// as the files and folders they were.
    #[cfg(unix)]
    #[test]
    fn a_rewind_through_planted_symlinks_changes_nothing_outside_the_project() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("project");
        let outside = dir.path().join("outside");
        let git_dir = dir.path().join("shadow.git");
        std::fs::create_dir_all(project.join("sub")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(project.join("a.txt"), "original a").expect("write");
        std::fs::write(project.join("sub/b.txt"), "original b").expect("write");
        std::fs::write(outside.join("victim.txt"), "victim").expect("write");
        std::fs::write(outside.join("b.txt"), "outside b").expect("write");
        std::fs::write(outside.join("new.txt"), "outside new").expect("write");
        let before_outside = walk(&outside)
            .into_iter()
            .map(|path| (path.clone(), std::fs::read(&path).ok()))
            .collect::<Vec<_>>();
        let chat = checkpoints(&git_dir, &project, "chat").without_monitor();
        chat.record(Phase::Before, "w1", "write")
            .expect("before w1");
        // The call changes both files and adds one in the folder.
        std::fs::write(project.join("a.txt"), "changed a").expect("write");
        std::fs::write(project.join("sub/b.txt"), "changed b").expect("write");
        std::fs::write(project.join("sub/new.txt"), "added").expect("write");
        chat.record(Phase::After, "w1", "write").expect("after w1");
        // A later call plants the links.
        chat.record(Phase::Before, "b2", "bash").expect("before b2");
        std::fs::remove_file(project.join("a.txt")).expect("rm");
        std::os::unix::fs::symlink(outside.join("victim.txt"), project.join("a.txt"))
            .expect("symlink");
        std::fs::remove_dir_all(project.join("sub")).expect("rm -r");
        std::os::unix::fs::symlink(&outside, project.join("sub")).expect("symlink");
        chat.record(Phase::After, "b2", "bash").expect("after b2");

        let rewound = chat.rewind("w1", true, false);
        let after_outside = walk(&outside)
            .into_iter()
            .map(|path| (path.clone(), std::fs::read(&path).ok()))
            .collect::<Vec<_>>();
        assert_eq!(
            before_outside, after_outside,
            "the rewind ({rewound:?}) changed files outside the project"
        );
        rewound.expect("rewind");
        let a = project.join("a.txt");
        assert!(!a.symlink_metadata().expect("a.txt").is_symlink());
        assert_eq!(std::fs::read_to_string(&a).expect("a.txt"), "original a");
        let sub = project.join("sub");
        assert!(!sub.symlink_metadata().expect("sub").is_symlink());
        assert_eq!(
            std::fs::read_to_string(sub.join("b.txt")).expect("sub/b.txt"),
            "original b"
        );
        assert!(!sub.join("new.txt").exists());
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
