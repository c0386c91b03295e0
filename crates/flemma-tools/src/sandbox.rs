//! The sandbox: a write policy every file-writing tool follows ([`PathPolicy`]), and the
//! `bwrap` wrapper for processes ([`Bwrap`]) when it is installed and usable.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use flemma_config::SandboxPolicy;

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

/// Where the policy's URNs point for one chat.
#[derive(Debug, Clone, Default)]
pub struct PolicyPlaces {
    /// `urn:flemma:cwd`.
    pub cwd: PathBuf,
    /// The chat file (`urn:flemma:buffer:path` is its directory), when there is one.
    pub chat_path: Option<PathBuf>,
    /// `urn:flemma:store`: the chat's result-store directory.
    pub store_dir: Option<PathBuf>,
}

/// The write policy: a path may be written when, with symlinks and `..` resolved, it lies under
/// one of the writable roots, and not inside a `.git` directory unless the policy allows it,
/// nor in a chat file or a place that holds a chat's authority ([`PathPolicy::protect`]).
///
/// The sandbox's private places ([`PrivatePlaces`]: its own `/tmp` and cache) are seen by the
/// file tools as the sandboxed commands see them: `/tmp/x` is the chat's private `/tmp/x`
/// ([`PathGuard::host_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPolicy {
    roots: Vec<PathBuf>,
    git_writable: bool,
    /// Paths (resolved) no tool writes, whatever the roots say.
    protected: Vec<PathBuf>,
    /// The sandbox's private places, when it has them.
    private: Option<PrivatePlaces>,
    /// Why nothing but the private places is writable (a chat in ask mode), when so.
    read_only: Option<String>,
    /// The roots a read-only policy took away: seen where they are, not writable.
    read_only_roots: Vec<PathBuf>,
}

/// The places a chat's sandbox has of its own on the host, and where its commands see them:
/// a private `/tmp` (shared by the calls and jobs of one chat, never the host's, whose sockets
/// — tmux, ssh-agent, Emacs, Neovim `--listen` — would reach outside the sandbox) and a private
/// cache in place of `~/.cache` (which holds code that runs later outside it: pre-commit's
/// hooks, Neovim's byte-code, build caches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivatePlaces {
    /// The host folder seen as `/tmp`.
    pub tmp: PathBuf,
    /// The host folder seen as the cache.
    pub cache: PathBuf,
    /// Where the cache is seen (`~/.cache`, and `$XDG_CACHE_HOME` when set elsewhere).
    pub cache_targets: Vec<PathBuf>,
    /// An empty folder (read-only inside) mounted where a `.git` must not be created.
    pub empty: PathBuf,
}

impl PrivatePlaces {
    /// The places under `base` (`<cache>/flemma/sandbox/<chat key>`), seen at `/tmp` and at
    /// `cache_targets`. Nothing is created until a call needs them ([`PrivatePlaces::ensure`]).
    pub fn at(base: &Path, cache_targets: Vec<PathBuf>) -> Self {
        Self {
            tmp: base.join("tmp"),
            cache: base.join("cache"),
            cache_targets,
            empty: base.join("empty"),
        }
    }

    /// [`PrivatePlaces::at`], with the folders created.
    pub fn create(base: &Path, cache_targets: Vec<PathBuf>) -> std::io::Result<Self> {
        let places = Self::at(base, cache_targets);
        places.ensure()?;
        Ok(places)
    }

    /// Creates the folders (`0700`) when missing, and marks them used now (the shell prunes
    /// the places of chats unused for long).
    pub fn ensure(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        for dir in [&self.tmp, &self.cache, &self.empty] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        if let Some(base) = self.tmp.parent() {
            let _ = std::fs::File::create(base.join("last-used"));
        }
        Ok(())
    }

    /// The pairs (where a command sees it, where it is on the host), the deepest first (a
    /// cache inside `/tmp` is the cache).
    fn views(&self) -> Vec<(&Path, &Path)> {
        let mut views = vec![(Path::new("/tmp"), self.tmp.as_path())];
        views.extend(
            self.cache_targets
                .iter()
                .map(|target| (target.as_path(), self.cache.as_path())),
        );
        views.sort_by_key(|(seen, _)| std::cmp::Reverse(seen.components().count()));
        views
    }
}

impl PathPolicy {
    /// A policy allowing exactly `roots` (resolved like any checked path).
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut resolved: Vec<PathBuf> = roots
            .into_iter()
            .filter_map(|root| resolve_path(&root).ok())
            .collect();
        resolved.sort();
        resolved.dedup();
        Self {
            roots: resolved,
            git_writable: false,
            protected: Vec::new(),
            private: None,
            read_only: None,
            read_only_roots: Vec::new(),
        }
    }

    /// The same policy with no writable root: only the sandbox's private places (added by
    /// [`Self::with_private`]) stay writable, for the file tools and in `bwrap` alike; a write
    /// elsewhere is refused with `reason` (a chat in ask mode: docs/modes.md).
    pub fn read_only(mut self, reason: impl Into<String>) -> Self {
        self.read_only_roots.append(&mut self.roots);
        self.read_only = Some(reason.into());
        self
    }

    /// The roots [`Self::read_only`] took away: a command sees them where they are (a project
    /// under `/tmp` is the project, not the private `/tmp`), read-only.
    pub fn read_only_roots(&self) -> &[PathBuf] {
        &self.read_only_roots
    }

    /// The same policy, never writing `paths` (files or folders, resolved) whatever the roots
    /// say: the places that hold a chat's authority (the user's flemmad configuration and
    /// records, shell start-up files). Chat files are refused by name (see
    /// [`is_chat_file`]).
    pub fn protect(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.protected.extend(
            paths
                .into_iter()
                .filter_map(|path| resolve_path(&path).ok()),
        );
        self.protected.sort();
        self.protected.dedup();
        self
    }

    /// The same policy with the sandbox's private places: writable, and seen by the file tools
    /// where the sandboxed commands see them.
    pub fn with_private(mut self, private: PrivatePlaces) -> Self {
        for dir in [&private.tmp, &private.cache] {
            if let Ok(resolved) = resolve_path(dir) {
                if !self.roots.contains(&resolved) {
                    self.roots.push(resolved);
                }
            }
        }
        self.private = Some(private);
        self
    }

    /// The sandbox's private places, when it has them.
    pub fn private(&self) -> Option<&PrivatePlaces> {
        self.private.as_ref()
    }

    /// The protected paths (resolved).
    pub fn protected(&self) -> &[PathBuf] {
        &self.protected
    }

    /// The same policy, letting tools write inside `.git` directories or not.
    pub fn with_git_writable(mut self, git_writable: bool) -> Self {
        self.git_writable = git_writable;
        self
    }

    /// Whether tools may write inside `.git` directories.
    pub fn git_writable(&self) -> bool {
        self.git_writable
    }

    /// The policy of `policy.rw_paths` for one chat, with the URNs, `${VAR:-default}` and `~`
    /// expanded through `env`. Entries that expand to nothing (a URN with no place) are dropped,
    /// and so is a URN that names the home directory or a folder above it (a chat kept in
    /// `~`, or a working directory of `/`): the whole home would be writable, with the shell's
    /// start-up files and everything else that runs later outside the sandbox. A path the
    /// configuration names literally is kept (the user's own choice).
    pub fn from_config(
        policy: &SandboxPolicy,
        places: &PolicyPlaces,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let home = env("HOME")
            .filter(|home| !home.is_empty())
            .and_then(|home| resolve_path(Path::new(&home)).ok());
        let roots = policy.rw_paths.iter().filter_map(|entry| {
            let path = expand_rw_path(entry, places, env)?;
            let from_urn = entry.starts_with("urn:flemma:");
            let holds_home = |path: &Path| {
                let resolved = resolve_path(path).unwrap_or_else(|_| path.to_path_buf());
                home.as_deref()
                    .is_some_and(|home| home.starts_with(&resolved))
                    || resolved == Path::new("/")
            };
            (!(from_urn && holds_home(&path))).then_some(path)
        });
        Self::new(roots).with_git_writable(policy.git_writable)
    }

    /// The writable roots, resolved.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// `path` as a command in the sandbox sees it, on the host: a path in the private `/tmp` or
    /// cache is the private folder's, unless it lies in a writable root (a project under
    /// `/tmp` is the project).
    fn host_view(&self, path: &Path) -> PathBuf {
        let Some(private) = &self.private else {
            return path.to_path_buf();
        };
        let in_root = |path: &Path| {
            let resolved = resolve_path(path).unwrap_or_else(|_| path.to_path_buf());
            self.roots
                .iter()
                .chain(&self.read_only_roots)
                .filter(|root| **root != private.tmp && **root != private.cache)
                .any(|root| resolved.starts_with(root))
        };
        if in_root(path) {
            return path.to_path_buf();
        }
        for (seen, host) in private.views() {
            if let Ok(rest) = path.strip_prefix(seen) {
                return host.join(rest);
            }
        }
        path.to_path_buf()
    }
}

/// Whether `path` names a chat file (`*.chat`): a chat holds its own authority (frontmatter,
/// approvals, references), so no tool writes one.
pub fn is_chat_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("chat"))
}

impl PathGuard for PathPolicy {
    fn host_path(&self, path: &Path) -> PathBuf {
        self.host_view(path)
    }

    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        if !path.is_absolute() {
            return Err(format!(
                "{} is a relative path; the sandbox checks absolute paths only",
                path.display()
            ));
        }
        let path = &self.host_view(path);
        let resolved = resolve_path(path)?;
        if is_chat_file(path) || is_chat_file(&resolved) {
            return Err(format!(
                "{} is a chat file, which no tool may write: a chat's frontmatter, approvals and references decide what it may do (edit it yourself in your editor)",
                path.display()
            ));
        }
        if let Some(folder) = agents_folder(path).or_else(|| agents_folder(&resolved)) {
            return Err(format!(
                "{} is in {}, where asked agents' conversations are kept, which no tool may write: each is a chat that decides what its agent may do",
                path.display(),
                folder.display()
            ));
        }
        if let Some(place) = self
            .protected
            .iter()
            .find(|protected| resolved.starts_with(protected))
        {
            return Err(format!(
                "{} is in {}, which no tool may write: it holds flemmad's configuration, records or what your shell runs later",
                path.display(),
                place.display()
            ));
        }
        if !self.git_writable && is_in_git_dir(&resolved) {
            return Err(format!(
                "{} is inside a .git directory, which tools may not write: a hook or `core.fsmonitor` written there would run outside the sandbox at your next git command (set sandbox.policy.git_writable = true in your config.toml to allow it)",
                path.display()
            ));
        }
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            Ok(resolved)
        } else if let Some(reason) = &self.read_only {
            Err(format!("{} cannot be written: {reason}", path.display()))
        } else {
            let shown = if resolved == *path {
                path.display().to_string()
            } else {
                format!("{} (resolves to {})", path.display(), resolved.display())
            };
            Err(format!(
                "{shown} is outside the sandbox's writable paths ({}); add it to sandbox.policy.rw_paths to allow it",
                self.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}

/// The folder of asked agents' conversations (`<folder>/.flemma/<chat>.chat/agents`) that
/// `path` lies in, or is.
pub fn agents_folder(path: &Path) -> Option<PathBuf> {
    let mut current = PathBuf::new();
    let mut names: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        current.push(component);
        if let std::path::Component::Normal(name) = component {
            names.push(name);
            if let [.., flemma, chat, agents] = names.as_slice()
                && *flemma == ".flemma"
                && *agents == "agents"
                && is_chat_file(Path::new(chat))
            {
                return Some(current);
            }
        }
    }
    None
}

/// Whether `path` has a `.git` component (the repository's metadata, or a worktree's `.git`
/// file).
pub fn is_in_git_dir(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c, Component::Normal(name) if name == ".git"))
}

/// A guard that allows every path (for callers that have no policy, such as tests of other
/// parts). Paths are still resolved.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl PathGuard for AllowAll {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        resolve_path(path)
    }
}

/// Resolves symlinks and `..` in an absolute `path`, including paths that do not exist yet: the
/// deepest existing ancestor is canonicalized and the rest appended (`..` among the missing
/// components pops lexically, since a missing component cannot be a symlink).
pub fn resolve_path(path: &Path) -> Result<PathBuf, String> {
    let mut resolved = PathBuf::from("/");
    let mut exists = true;
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                let candidate = resolved.join(name);
                if exists {
                    match candidate.symlink_metadata() {
                        Ok(_) => {
                            resolved = candidate.canonicalize().map_err(|error| {
                                format!(
                                    "{} cannot be resolved ({error}); a symlink with a missing target is refused",
                                    candidate.display()
                                )
                            })?;
                            continue;
                        }
                        Err(_) => exists = false,
                    }
                }
                resolved = candidate;
            }
        }
    }
    Ok(resolved)
}

/// Expands one `rw_paths` entry.
pub fn expand_rw_path(
    entry: &str,
    places: &PolicyPlaces,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    match entry {
        "urn:flemma:cwd" => return Some(places.cwd.clone()),
        "urn:flemma:buffer:path" => {
            return places
                .chat_path
                .as_ref()
                .and_then(|p| p.parent())
                .map(Path::to_path_buf);
        }
        "urn:flemma:store" => return places.store_dir.clone(),
        _ => {}
    }
    let expanded = expand_env(entry, env);
    let expanded = match expanded.strip_prefix("~/") {
        Some(rest) => format!("{}/{rest}", env("HOME")?),
        None if expanded == "~" => env("HOME")?,
        None => expanded,
    };
    let path = PathBuf::from(&expanded);
    if path.is_absolute() {
        Some(path)
    } else {
        Some(places.cwd.join(path))
    }
}

/// Expands `${VAR}`, `${VAR:-default}` and `$VAR` through `env` (unset → empty or default).
pub fn expand_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(index) = rest.find('$') {
        out.push_str(&rest[..index]);
        let after = &rest[index + 1..];
        if let Some(body) = after.strip_prefix('{') {
            if let Some(end) = body.find('}') {
                let inner = &body[..end];
                let (name, default) = match inner.split_once(":-") {
                    Some((name, default)) => (name, Some(default)),
                    None => (inner, None),
                };
                let value = env(name).filter(|v| !v.is_empty());
                match (value, default) {
                    (Some(value), _) => out.push_str(&value),
                    (None, Some(default)) => out.push_str(&expand_env(default, env)),
                    (None, None) => {}
                }
                rest = &body[end + 1..];
                continue;
            }
        }
        let starts_name = after
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        let name_len = if starts_name {
            after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count()
        } else {
            0
        };
        if name_len == 0 {
            out.push('$');
            rest = after;
        } else {
            out.push_str(&env(&after[..name_len]).unwrap_or_default());
            rest = &after[name_len..];
        }
    }
    out.push_str(rest);
    out
}

/// Whether a process sandbox backend is usable, and why not when it is not. Detected once per
/// process with a real trial run.
pub fn bwrap_availability() -> Result<PathBuf, String> {
    static DETECTED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DETECTED.get_or_init(detect_bwrap).clone()
}

fn detect_bwrap() -> Result<PathBuf, String> {
    let Some(program) = crate::launch::find_on_path("bwrap") else {
        return Err("bwrap is not installed (apt-get install bubblewrap)".into());
    };
    let output = Command::new(&program)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--die-with-parent",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match output {
        Ok(output) if output.status.success() => Ok(program),
        Ok(output) => Err(format!(
            "bwrap is installed but cannot run here ({}); user namespaces may be disabled",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!("bwrap could not be started: {error}")),
    }
}

/// What one sandboxed call may use. `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallLimits {
    /// Processes alive at once inside the sandbox.
    pub processes: Option<u32>,
    /// Memory (resident, all its processes together; each process's data segment too).
    pub memory_bytes: Option<u64>,
}

/// The `bwrap` wrapper: the whole filesystem read-only, the policy's roots writable, and inside
/// them read-only what holds authority or runs later outside the sandbox — every `.git` (unless
/// the policy allows it), every chat file, the protected places — with the folders leading to
/// them made mount points, so that none can be renamed away and replaced; a `.git` cannot be
/// created at a root. Its own `/tmp` and cache ([`PrivatePlaces`]), `/dev` and `/proc`, the
/// hidden paths (the daemon's runtime directory, other programs' sockets, credentials) covered
/// by empty ones, its own pid namespace (killing bwrap kills everything inside) and session (no
/// `TIOCSTI` into the user's terminal), no capability (as root too), the network shared or not.
#[derive(Debug, Clone)]
pub struct Bwrap {
    program: PathBuf,
    writable: Vec<PathBuf>,
    /// Roots bound where they are, read-only (a read-only policy's: see
    /// [`PathPolicy::read_only_roots`]).
    readable: Vec<PathBuf>,
    git_writable: bool,
    hidden: Vec<PathBuf>,
    network: bool,
    protected: Vec<PathBuf>,
    private: Option<PrivatePlaces>,
    limits: CallLimits,
    /// What the last calls found in the roots (each call looks again at what changed).
    scan: std::sync::Arc<std::sync::Mutex<RootScan>>,
}

impl Bwrap {
    /// The wrapper for `policy` when bwrap is usable, or the reason it is not. Only the
    /// outermost existing roots are bound: a root inside another (the store inside the
    /// project) is writable already, and binding it again would follow a symlink a sandboxed
    /// command could have put there. The policy's protected paths and private places are the
    /// sandbox's too.
    pub fn for_policy(policy: &PathPolicy, network: bool) -> Result<Self, String> {
        Ok(Self::with_program(bwrap_availability()?, policy, network))
    }

    fn with_program(program: PathBuf, policy: &PathPolicy, network: bool) -> Self {
        let private = policy.private().cloned();
        let writable = policy
            .roots()
            .iter()
            .filter(|root| {
                private
                    .as_ref()
                    .is_none_or(|p| **root != p.tmp && **root != p.cache)
            })
            .cloned()
            .collect::<Vec<_>>();
        Self {
            program,
            writable: outermost_directories(&writable),
            readable: outermost_directories(policy.read_only_roots()),
            git_writable: policy.git_writable(),
            hidden: Vec::new(),
            network,
            protected: policy.protected().to_vec(),
            private,
            limits: CallLimits::default(),
            scan: Default::default(),
        }
    }

    /// Hides `paths` inside the sandbox — a directory is empty there, a file reads as empty: the
    /// daemon's runtime directory and its sockets, the user's credentials. A path that holds a
    /// writable root or the working directory is not hidden (it would hide them too).
    pub fn with_hidden(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.hidden.extend(paths);
        self
    }

    /// The same wrapper with `limits` on each call.
    pub fn with_limits(mut self, limits: CallLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits of each call.
    pub fn limits(&self) -> CallLimits {
        self.limits
    }

    /// Whether sandboxed commands have the network.
    pub fn network(&self) -> bool {
        self.network
    }

    /// The writable roots bound into the sandbox.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// The sandbox's private places, when it has them.
    pub fn private(&self) -> Option<&PrivatePlaces> {
        self.private.as_ref()
    }

    /// The argv running `inner` inside the sandbox with working directory `cwd`. The `.git`
    /// placeholders it mounts at the roots stay in place (empty folders: git looks past them);
    /// a call that ends should use [`Bwrap::command`], which removes them.
    pub fn wrap(&self, inner: &[String], cwd: &Path) -> Vec<String> {
        let mut command = self.command(inner, cwd);
        command.placeholders.keep();
        std::mem::take(&mut command.argv)
    }

    /// The command running `inner` inside the sandbox with working directory `cwd`: its argv,
    /// and the `.git` placeholders, removed when it is dropped (once no other call of this
    /// process uses them).
    pub fn command(&self, inner: &[String], cwd: &Path) -> SandboxedCommand {
        if let Some(private) = &self.private {
            if let Err(error) = private.ensure() {
                tracing::warn!(%error, tmp = %private.tmp.display(), "the sandbox's private /tmp cannot be made");
            }
        }
        let found = match self.scan.lock() {
            Ok(mut scan) => scan.look(&self.writable, SCAN_BUDGET),
            Err(_) => Found::default(),
        };
        // Planned and counted at once: another call's placeholder is one here too, never a
        // `.git` to bind (it goes when the last call that uses it ends).
        let (plan, placeholders) = Placeholders::take(|active| self.plan(&found, cwd, active));
        SandboxedCommand {
            argv: plan.argv(&self.program, inner, cwd, self.network),
            placeholders,
        }
    }

    /// The mounts for one call, given what lies in the roots and the `.git` placeholders other
    /// calls of this process have mounted (`active`).
    fn plan(
        &self,
        found: &Found,
        cwd: &Path,
        active: &std::collections::HashMap<PathBuf, usize>,
    ) -> MountPlan {
        let mut plan = MountPlan::default();
        if let Some(private) = &self.private {
            plan.binds
                .push(("--bind", private.tmp.clone(), "/tmp".into()));
            for target in &private.cache_targets {
                plan.binds
                    .push(("--bind", private.cache.clone(), target.clone()));
            }
        }
        for root in &self.readable {
            plan.binds.push(("--ro-bind", root.clone(), root.clone()));
        }
        for root in &self.writable {
            plan.binds.push(("--bind", root.clone(), root.clone()));
        }
        // What stays read-only inside the roots, by path (a parent before its children).
        let mut kept: std::collections::BTreeMap<PathBuf, Keep> = Default::default();
        let read_only = |path: &Path, kept: &mut std::collections::BTreeMap<PathBuf, Keep>| {
            if self.writable.iter().any(|root| path.starts_with(root)) {
                kept.insert(path.to_path_buf(), Keep::ReadOnly);
            }
        };
        if !self.git_writable {
            for git in found.git.iter().filter(|git| !active.contains_key(*git)) {
                read_only(git, &mut kept);
            }
            if let Some(private) = &self.private {
                for root in self.writable.iter().filter(|root| root.parent().is_some()) {
                    let git = root.join(".git");
                    if active.contains_key(&git) || git.symlink_metadata().is_err() {
                        kept.insert(git.clone(), Keep::Placeholder(private.empty.clone()));
                        plan.placeholders.push(git);
                    }
                }
            }
        }
        for chat in found.chats.iter().chain(&found.agents) {
            read_only(chat, &mut kept);
        }
        for path in &self.protected {
            if path.symlink_metadata().is_ok() {
                read_only(path, &mut kept);
            }
        }
        if kept.len() > MOST_KEPT {
            tracing::warn!(
                kept = kept.len(),
                "more chats and .git folders in the writable roots than one sandbox mounts ({MOST_KEPT}): the rest stay writable"
            );
        }
        let mut covered: Vec<PathBuf> = Vec::new();
        let mut pinned: std::collections::BTreeSet<PathBuf> = Default::default();
        for (path, keep) in kept.into_iter().take(MOST_KEPT) {
            if covered.iter().any(|ro| path.starts_with(ro)) {
                continue;
            }
            // The folders between the root and the path become mount points: a mount point
            // cannot be renamed or removed, so the path cannot be moved away and replaced.
            let Some(root) = self.writable.iter().find(|root| path.starts_with(root)) else {
                continue;
            };
            let mut between: Vec<PathBuf> = path
                .ancestors()
                .skip(1)
                .take_while(|dir| dir.starts_with(root) && *dir != root.as_path())
                .map(Path::to_path_buf)
                .collect();
            between.reverse();
            // `-try`: a folder or chat found by the scan may be gone when bwrap starts (another
            // program removed it); what no longer exists needs no protection.
            for dir in between {
                if pinned.insert(dir.clone()) {
                    plan.binds.push(("--bind-try", dir.clone(), dir));
                }
            }
            match keep {
                Keep::ReadOnly => plan
                    .binds
                    .push(("--ro-bind-try", path.clone(), path.clone())),
                Keep::Placeholder(empty) => plan.binds.push(("--ro-bind", empty, path.clone())),
            }
            covered.push(path);
        }
        for hidden in &self.hidden {
            // A link's target is what gets covered (`/var/run` is `/run`), once.
            let Ok(hidden) = hidden.canonicalize() else {
                continue;
            };
            let holds_writable = self.writable.iter().any(|root| root.starts_with(&hidden))
                || cwd.starts_with(&hidden);
            if holds_writable || plan.covers.iter().any(|(done, _)| *done == hidden) {
                continue;
            }
            match hidden.metadata() {
                Ok(meta) => plan.covers.push((hidden, meta.is_dir())),
                Err(_) => continue,
            }
        }
        plan
    }
}

/// How a path inside a writable root is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Keep {
    /// Bound read-only onto itself.
    ReadOnly,
    /// An empty read-only folder mounted where nothing may be created.
    Placeholder(PathBuf),
}

/// The mounts of one sandboxed call.
#[derive(Debug, Default)]
struct MountPlan {
    /// `(option, source, target)`, in order.
    binds: Vec<(&'static str, PathBuf, PathBuf)>,
    /// Hidden paths: `(path, is a folder)`.
    covers: Vec<(PathBuf, bool)>,
    /// The `.git` placeholders this call creates at the roots.
    placeholders: Vec<PathBuf>,
}

impl MountPlan {
    fn argv(&self, program: &Path, inner: &[String], cwd: &Path, network: bool) -> Vec<String> {
        let mut argv: Vec<OsString> = vec![program.as_os_str().to_owned()];
        let mut add = |parts: &[&str]| argv.extend(parts.iter().map(OsString::from));
        add(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        add(&["--unshare-pid", "--die-with-parent", "--new-session"]);
        add(&["--cap-drop", "ALL"]);
        if !network {
            add(&["--unshare-net"]);
        }
        for (option, source, target) in &self.binds {
            argv.push(OsString::from(option));
            argv.push(source.as_os_str().to_owned());
            argv.push(target.as_os_str().to_owned());
        }
        for (hidden, is_dir) in &self.covers {
            if *is_dir {
                argv.push("--tmpfs".into());
            } else {
                argv.push("--ro-bind".into());
                argv.push("/dev/null".into());
            }
            argv.push(hidden.as_os_str().to_owned());
        }
        argv.push("--chdir".into());
        argv.push(cwd.as_os_str().to_owned());
        argv.push("--".into());
        argv.extend(inner.iter().map(OsString::from));
        argv.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }
}

/// A command ready to run in the sandbox: its argv and the `.git` placeholders it mounts.
#[derive(Debug)]
pub struct SandboxedCommand {
    pub argv: Vec<String>,
    placeholders: Placeholders,
}

/// The `.git` placeholders of the running calls of this process, counted by path: the last
/// call to end removes the (empty) folder bwrap created for the mount.
#[derive(Debug, Default)]
struct Placeholders {
    paths: Vec<PathBuf>,
}

fn placeholder_counts() -> &'static std::sync::Mutex<std::collections::HashMap<PathBuf, usize>> {
    static COUNTS: OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, usize>>> =
        OnceLock::new();
    COUNTS.get_or_init(Default::default)
}

impl Placeholders {
    /// Plans a call with the placeholders in use (`plan` gets them) and counts the ones it
    /// mounts, under one lock.
    fn take(
        plan: impl FnOnce(&std::collections::HashMap<PathBuf, usize>) -> MountPlan,
    ) -> (MountPlan, Self) {
        let mut counts = placeholder_counts()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let plan = plan(&counts);
        for path in &plan.placeholders {
            *counts.entry(path.clone()).or_default() += 1;
        }
        let paths = plan.placeholders.clone();
        (plan, Self { paths })
    }

    /// Leaves the placeholders in place (a long-lived process uses them).
    fn keep(&mut self) {
        self.paths.clear();
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        let Ok(mut counts) = placeholder_counts().lock() else {
            return;
        };
        for path in self.paths.drain(..) {
            let count = counts.entry(path.clone()).or_default();
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&path);
                // Only an empty folder goes (a `.git` someone made since stays).
                let _ = std::fs::remove_dir(&path);
            }
        }
    }
}

/// How long one call looks through the writable roots for `.git` folders and chats, at most
/// (the first look reads every folder; later ones only those whose modification time changed).
pub const SCAN_BUDGET: std::time::Duration = std::time::Duration::from_millis(1500);

/// What lies in the writable roots that must stay as it is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Every `.git` (folder or file), and the git folders a `.git` file names inside the roots.
    pub git: Vec<PathBuf>,
    /// Every chat file (`*.chat`).
    pub chats: Vec<PathBuf>,
    /// Every folder of asked agents' conversations (`.flemma/<chat>.chat/agents`): read-only
    /// as a whole, so a conversation made while a call runs is out of its reach too.
    pub agents: Vec<PathBuf>,
    /// Whether every folder was looked at (else the time ran out).
    pub complete: bool,
}

/// Folders never walked (a root of `/` would reach them): the kernel's views, not files.
const PSEUDO_FILESYSTEMS: [&str; 4] = ["/proc", "/sys", "/dev", "/run"];

/// At most this many paths are kept read-only in one call (each is a mount).
pub const MOST_KEPT: usize = 4096;

/// What a folder of the roots held when it was last read.
#[derive(Debug, Clone)]
struct FolderEntry {
    modified: Option<std::time::SystemTime>,
    folders: Vec<PathBuf>,
    git: Vec<PathBuf>,
    chats: Vec<PathBuf>,
    agents: Vec<PathBuf>,
}

/// The writable roots' folders as last read, so a call reads again only the folders whose
/// modification time changed (an entry added, removed or renamed in them): a call that finds
/// nothing new costs a `stat` per folder.
#[derive(Debug, Default)]
pub struct RootScan {
    folders: std::collections::HashMap<PathBuf, FolderEntry>,
    warned: bool,
}

impl RootScan {
    /// Walks `roots` (links not followed, `.git` folders not entered) for `.git` entries and
    /// chat files, for `budget` at most.
    pub fn look(&mut self, roots: &[PathBuf], budget: std::time::Duration) -> Found {
        let started = std::time::Instant::now();
        let mut found = Found {
            complete: true,
            ..Found::default()
        };
        let mut visited: std::collections::HashSet<PathBuf> = Default::default();
        let mut stack: Vec<PathBuf> = roots.to_vec();
        while let Some(dir) = stack.pop() {
            if started.elapsed() > budget {
                found.complete = false;
                break;
            }
            if !visited.insert(dir.clone()) {
                continue;
            }
            let modified = dir.symlink_metadata().ok().and_then(|m| m.modified().ok());
            let fresh = match self.folders.get(&dir) {
                Some(entry) if entry.modified.is_some() && entry.modified == modified => {
                    entry.clone()
                }
                _ => {
                    let entry = read_folder(&dir, modified, roots);
                    self.folders.insert(dir.clone(), entry.clone());
                    entry
                }
            };
            found.git.extend(fresh.git);
            found.chats.extend(fresh.chats);
            found.agents.extend(fresh.agents);
            stack.extend(
                fresh
                    .folders
                    .into_iter()
                    .filter(|folder| !PSEUDO_FILESYSTEMS.iter().any(|p| folder == Path::new(p))),
            );
        }
        self.folders.retain(|dir, _| visited.contains(dir));
        if !found.complete && !self.warned {
            self.warned = true;
            tracing::warn!(
                roots = ?roots,
                "the writable roots are too large to look through in {budget:?}: the .git folders and chats not reached are not made read-only"
            );
        }
        found.git.sort();
        found.git.dedup();
        found.chats.sort();
        found.agents.sort();
        found
    }
}

/// Walks `roots` once (see [`RootScan::look`]).
pub fn scan_roots(roots: &[PathBuf], budget: std::time::Duration) -> Found {
    RootScan::default().look(roots, budget)
}

/// One folder's subfolders, `.git` entries and chats.
fn read_folder(
    dir: &Path,
    modified: Option<std::time::SystemTime>,
    roots: &[PathBuf],
) -> FolderEntry {
    let mut entry = FolderEntry {
        modified,
        folders: Vec::new(),
        git: Vec::new(),
        chats: Vec::new(),
        agents: Vec::new(),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return entry;
    };
    for item in entries.flatten() {
        let Ok(kind) = item.file_type() else {
            continue;
        };
        let name = item.file_name();
        let path = item.path();
        if name == ".git" {
            if kind.is_file() {
                entry.git.extend(named_git_dirs(&path, roots));
            }
            if kind.is_dir() || kind.is_file() {
                entry.git.push(path);
            }
        } else if kind.is_dir() {
            if name == "agents" && agents_folder(&path).as_deref() == Some(path.as_path()) {
                entry.agents.push(path.clone());
            }
            entry.folders.push(path);
        } else if kind.is_file() && is_chat_file(&path) {
            entry.chats.push(path);
        }
    }
    entry
}

/// For a `.git` file (a worktree or submodule: `gitdir: <path>`), the git folder it names and
/// that one's common folder, when they lie inside `roots`.
fn named_git_dirs(git: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    let inside = |path: &Path| roots.iter().any(|root| path.starts_with(root));
    let Some(gitdir) = std::fs::read_to_string(git).ok().and_then(|text| {
        let dir = text.trim().strip_prefix("gitdir:")?.trim().to_owned();
        let base = git.parent().unwrap_or(Path::new("/"));
        resolve_path(&base.join(dir)).ok()
    }) else {
        return Vec::new();
    };
    if !gitdir.is_dir() {
        return Vec::new();
    }
    let common = std::fs::read_to_string(gitdir.join("commondir"))
        .ok()
        .and_then(|c| resolve_path(&gitdir.join(c.trim())).ok())
        .filter(|dir| dir.is_dir());
    [Some(gitdir), common]
        .into_iter()
        .flatten()
        .filter(|dir| inside(dir))
        .collect()
}

/// Where credentials live in a home directory: hidden from sandboxed commands, which otherwise
/// read the whole home (`cat ~/.ssh/id_rsa` would send the key to the provider as a tool
/// result). Defined with what flemmad never reads for a chat (`flemma_config::reach`).
pub use flemma_config::reach::HOME_CREDENTIALS;

/// The existing directories of `roots` that lie inside no other one.
fn outermost_directories(roots: &[PathBuf]) -> Vec<PathBuf> {
    let existing: Vec<&PathBuf> = roots.iter().filter(|r| r.is_dir()).collect();
    existing
        .iter()
        .filter(|root| {
            !existing
                .iter()
                .any(|other| other != *root && root.starts_with(other))
        })
        .map(|root| (*root).clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "TMPDIR" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_with_defaults() {
        assert_eq!(expand_env("${TMPDIR:-/tmp}", &env), "/tmp");
        assert_eq!(
            expand_env("${XDG_CACHE_HOME:-$HOME/.cache}", &env),
            "/home/u/.cache"
        );
        assert_eq!(expand_env("a$HOME/b", &env), "a/home/u/b");
        assert_eq!(expand_env("cost $5", &env), "cost $5");
    }

    #[test]
    fn tilde_and_urns_expand() {
        let places = PolicyPlaces {
            cwd: "/w".into(),
            chat_path: Some("/c/x.chat".into()),
            store_dir: None,
        };
        assert_eq!(
            expand_rw_path("~/.cache", &places, &env),
            Some("/home/u/.cache".into())
        );
        assert_eq!(
            expand_rw_path("urn:flemma:buffer:path", &places, &env),
            Some("/c".into())
        );
        assert_eq!(expand_rw_path("urn:flemma:store", &places, &env), None);
    }

    #[test]
    fn git_directories_are_not_writable_unless_allowed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join(".git/hooks")).expect("git dir");
        let policy = PathPolicy::new([root.clone()]);
        let error = policy
            .check_write(&root.join(".git/config"))
            .expect_err("refused");
        assert!(error.contains("git_writable"), "{error}");
        assert!(policy.check_write(&root.join("sub/.git/x")).is_err());
        assert!(policy.check_write(&root.join("src/main.rs")).is_ok());
        let open = policy.with_git_writable(true);
        assert!(open.check_write(&root.join(".git/config")).is_ok());
    }

    fn bwrap_for(policy: &PathPolicy, hidden: Vec<PathBuf>) -> Bwrap {
        Bwrap::with_program(PathBuf::from("bwrap"), policy, false).with_hidden(hidden)
    }

    #[test]
    fn bwrap_binds_outermost_roots_and_keeps_git_read_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join(".git")).expect("git dir");
        std::fs::create_dir_all(root.join(".flemma/x.chat")).expect("store");
        std::fs::create_dir_all(root.join("run")).expect("runtime dir");
        let policy = PathPolicy::new([root.clone(), root.join(".flemma/x.chat")]);
        let bwrap = bwrap_for(&policy, vec![root.join("run"), root.clone()]);
        let argv = bwrap.wrap(&["true".into()], &root);
        let text = argv.join(" ");
        let shown = root.display().to_string();
        assert!(text.contains("--new-session"), "{text}");
        assert!(text.contains("--unshare-net"), "{text}");
        assert!(text.contains("--cap-drop ALL"), "{text}");
        assert!(text.contains(&format!("--bind {shown} {shown}")), "{text}");
        assert!(
            !text.contains(".flemma"),
            "nested roots are not bound again: {text}"
        );
        assert!(
            text.contains(&format!("--ro-bind-try {shown}/.git {shown}/.git")),
            "{text}"
        );
        assert!(text.contains(&format!("--tmpfs {shown}/run")), "{text}");
        assert!(
            !text.contains(&format!("--tmpfs {shown} ")),
            "a hidden path holding the working directory is not hidden: {text}"
        );
    }

    #[test]
    fn asked_agents_conversations_are_read_only_as_a_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let agents = root.join("p/.flemma/talk.chat/agents");
        std::fs::create_dir_all(&agents).expect("agents");
        std::fs::create_dir_all(root.join("p/agents")).expect("an ordinary folder");
        let policy = PathPolicy::new([root.join("p")]);
        let bwrap = bwrap_for(&policy, vec![]);
        let found = scan_roots(bwrap.writable(), SCAN_BUDGET);
        assert_eq!(found.agents, vec![agents.clone()]);
        let plan = bwrap.plan(&found, &root.join("p"), &Default::default());
        let ro = ("--ro-bind-try", agents.clone(), agents.clone());
        assert!(plan.binds.contains(&ro), "{:?}", plan.binds);
        let pinned = (
            "--bind-try",
            root.join("p/.flemma/talk.chat"),
            root.join("p/.flemma/talk.chat"),
        );
        assert!(plan.binds.contains(&pinned), "{:?}", plan.binds);
        // The file tools refuse it, even for a conversation that does not exist yet.
        let refused = policy
            .check_write(&agents.join("reviewer-9.notes"))
            .expect_err("refused");
        assert!(refused.contains("asked agents' conversations"), "{refused}");
        assert!(policy.check_write(&root.join("p/agents/x.txt")).is_ok());
    }

    #[test]
    fn nested_git_and_chats_are_read_only_and_their_folders_pinned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let private = PrivatePlaces::create(&root.join("private"), vec![]).expect("private");
        std::fs::create_dir_all(root.join("p/vendor/lib/.git")).expect("nested git");
        std::fs::create_dir_all(root.join("p/chats")).expect("chats");
        std::fs::write(root.join("p/chats/a.chat"), "@You:\nhi\n").expect("chat");
        std::fs::write(root.join("p/b.CHAT"), "").expect("chat");
        let policy = PathPolicy::new([root.join("p")]).with_private(private.clone());
        let bwrap = bwrap_for(&policy, vec![]);
        let found = scan_roots(bwrap.writable(), SCAN_BUDGET);
        assert!(found.complete);
        assert_eq!(found.git, vec![root.join("p/vendor/lib/.git")]);
        assert_eq!(
            found.chats,
            vec![root.join("p/b.CHAT"), root.join("p/chats/a.chat")]
        );
        let plan = bwrap.plan(&found, &root.join("p"), &Default::default());
        let binds: Vec<(String, String)> = plan
            .binds
            .iter()
            .map(|(option, source, target)| {
                (
                    option.to_string(),
                    if source == target {
                        target.strip_prefix(&root).map_or_else(
                            |_| target.display().to_string(),
                            |p| p.display().to_string(),
                        )
                    } else {
                        format!("{} -> {}", source.display(), target.display())
                    },
                )
            })
            .collect();
        let bind = |option: &str, path: &str| (option.to_string(), path.to_string());
        let private_tmp = format!("{} -> /tmp", private.tmp.display());
        let placeholder = format!(
            "{} -> {}",
            private.empty.display(),
            root.join("p/.git").display()
        );
        assert_eq!(
            binds,
            vec![
                bind("--bind", &private_tmp),
                bind("--bind", "p"),
                bind("--ro-bind", &placeholder),
                bind("--ro-bind-try", "p/b.CHAT"),
                bind("--bind-try", "p/chats"),
                bind("--ro-bind-try", "p/chats/a.chat"),
                bind("--bind-try", "p/vendor"),
                bind("--bind-try", "p/vendor/lib"),
                bind("--ro-bind-try", "p/vendor/lib/.git"),
            ]
        );
        assert_eq!(plan.placeholders, vec![root.join("p/.git")]);
    }

    #[test]
    fn private_places_are_where_the_tools_see_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let home = root.join("home");
        let private = PrivatePlaces::create(&root.join("private"), vec![home.join(".cache")])
            .expect("private");
        let policy = PathPolicy::new([root.join("project")]).with_private(private.clone());
        assert_eq!(
            policy.host_path(Path::new("/tmp/notes.txt")),
            private.tmp.join("notes.txt")
        );
        assert_eq!(
            policy.host_path(&home.join(".cache/pip/x")),
            private.cache.join("pip/x")
        );
        assert!(policy.check_write(Path::new("/tmp/notes.txt")).is_ok());
        // The file tools never write a chat, nor the protected places.
        let protected = policy.clone().protect([home.join(".config/flemma")]);
        let chat = protected
            .check_write(&root.join("project/other.chat"))
            .expect_err("a chat");
        assert!(chat.contains("chat file"), "{chat}");
        std::fs::create_dir_all(home.join(".config/flemma")).expect("config");
        let config = PathPolicy::new([home.clone()])
            .protect([home.join(".config/flemma")])
            .check_write(&home.join(".config/flemma/config.toml"))
            .expect_err("protected");
        assert!(config.contains("no tool may write"), "{config}");
    }

    #[test]
    fn a_urn_naming_the_home_or_above_is_not_writable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().canonicalize().expect("canonical");
        let env = |name: &str| (name == "HOME").then(|| home.display().to_string());
        let places = PolicyPlaces {
            cwd: PathBuf::from("/"),
            chat_path: Some(home.join("notes.chat")),
            store_dir: Some(home.join(".flemma/notes.chat")),
        };
        let policy = SandboxPolicy {
            rw_paths: vec![
                "urn:flemma:cwd".into(),
                "urn:flemma:buffer:path".into(),
                "urn:flemma:store".into(),
            ],
            network: false,
            allow_privileged: false,
            git_writable: false,
        };
        let policy = PathPolicy::from_config(&policy, &places, &env);
        assert_eq!(policy.roots(), &[home.join(".flemma/notes.chat")]);
    }

    #[test]
    fn resolution_handles_missing_components_and_dotdot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let path = root.join("a/b/../c.txt");
        assert_eq!(resolve_path(&path), Ok(root.join("a/c.txt")));
    }
}
