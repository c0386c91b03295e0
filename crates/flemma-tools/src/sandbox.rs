//! The sandbox: a write policy every file-writing tool follows ([`PathPolicy`]), and the
//! `bwrap` wrapper for processes ([`Bwrap`]) when it is installed and usable.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use flemma_config::SandboxPolicy;

use crate::context::PathGuard;

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
/// one of the writable roots, and not inside a `.git` directory unless the policy allows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPolicy {
    roots: Vec<PathBuf>,
    git_writable: bool,
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
        }
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
    /// expanded through `env`. Entries that expand to nothing (a URN with no place) are dropped.
    pub fn from_config(
        policy: &SandboxPolicy,
        places: &PolicyPlaces,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let roots = policy
            .rw_paths
            .iter()
            .filter_map(|entry| expand_rw_path(entry, places, env));
        Self::new(roots).with_git_writable(policy.git_writable)
    }

    /// The writable roots, resolved.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }
}

impl PathGuard for PathPolicy {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        if !path.is_absolute() {
            return Err(format!(
                "{} is a relative path; the sandbox checks absolute paths only",
                path.display()
            ));
        }
        let resolved = resolve_path(path)?;
        if !self.git_writable && is_in_git_dir(&resolved) {
            return Err(format!(
                "{} is inside a .git directory, which tools may not write: a hook or `core.fsmonitor` written there would run outside the sandbox at your next git command (set sandbox.policy.git_writable = true in your config.toml to allow it)",
                path.display()
            ));
        }
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            Ok(resolved)
        } else {
            let shown = if resolved == path {
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
    let Some(program) = crate::process::find_on_path("bwrap") else {
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

/// The `bwrap` wrapper: the whole filesystem read-only, the policy's roots writable (except the
/// `.git` directories in them, unless the policy allows it), `/dev` and `/proc` fresh, the
/// hidden paths (the daemon's runtime directory and other sockets) covered by empty
/// directories, its own pid namespace (so killing bwrap kills everything inside) and session
/// (no `TIOCSTI` into the user's terminal), the network shared or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bwrap {
    program: PathBuf,
    writable: Vec<PathBuf>,
    git_writable: bool,
    hidden: Vec<PathBuf>,
    network: bool,
}

impl Bwrap {
    /// The wrapper for `policy` when bwrap is usable, or the reason it is not. Only the
    /// outermost existing roots are bound: a root inside another (the store inside the
    /// project) is writable already, and binding it again would follow a symlink a sandboxed
    /// command could have put there.
    pub fn for_policy(policy: &PathPolicy, network: bool) -> Result<Self, String> {
        let program = bwrap_availability()?;
        Ok(Self {
            program,
            writable: outermost_directories(policy.roots()),
            git_writable: policy.git_writable(),
            hidden: Vec::new(),
            network,
        })
    }

    /// Hides `paths` inside the sandbox — a directory is empty there, a file reads as empty: the
    /// daemon's runtime directory and its sockets, the user's credentials. A path that holds a
    /// writable root or the working directory is not hidden (it would hide them too).
    pub fn with_hidden(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.hidden.extend(paths);
        self
    }

    /// Whether sandboxed commands have the network.
    pub fn network(&self) -> bool {
        self.network
    }

    /// The writable roots bound into the sandbox.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// The argv running `inner` inside the sandbox with working directory `cwd`.
    pub fn wrap(&self, inner: &[String], cwd: &Path) -> Vec<String> {
        let mut argv: Vec<OsString> = vec![self.program.clone().into_os_string()];
        let mut add = |parts: &[&str]| argv.extend(parts.iter().map(OsString::from));
        add(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        add(&["--unshare-pid", "--die-with-parent", "--new-session"]);
        if !self.network {
            add(&["--unshare-net"]);
        }
        let mut mount = |option: &str, source: &Path, target: &Path| {
            argv.push(option.into());
            argv.push(source.as_os_str().to_owned());
            argv.push(target.as_os_str().to_owned());
        };
        for root in &self.writable {
            mount("--bind", root, root);
        }
        if !self.git_writable {
            for git in git_paths(&self.writable, cwd) {
                mount("--ro-bind", &git, &git);
            }
        }
        for hidden in &self.hidden {
            let holds_writable = self.writable.iter().any(|root| root.starts_with(hidden))
                || cwd.starts_with(hidden);
            if holds_writable {
                continue;
            }
            // Followed like bwrap follows it: a link's target is what gets covered.
            match hidden.metadata() {
                Ok(meta) if meta.is_dir() => {
                    argv.push("--tmpfs".into());
                    argv.push(hidden.as_os_str().to_owned());
                }
                Ok(_) => {
                    argv.push("--ro-bind".into());
                    argv.push("/dev/null".into());
                    argv.push(hidden.as_os_str().to_owned());
                }
                Err(_) => {}
            }
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

/// The `.git` entries a sandboxed command could otherwise write: each writable root's own
/// `.git`, the `.git` of the repository holding the working directory, and for a worktree's
/// `.git` file the git directory it names (and that one's common directory) — each only when
/// it lies inside a writable root.
fn git_paths(writable: &[PathBuf], cwd: &Path) -> Vec<PathBuf> {
    let inside = |path: &Path| writable.iter().any(|root| path.starts_with(root));
    let mut candidates: Vec<PathBuf> = writable.iter().map(|root| root.join(".git")).collect();
    if let Some(repository) = cwd
        .ancestors()
        .map(|dir| dir.join(".git"))
        .find(|git| git.symlink_metadata().is_ok())
    {
        candidates.push(repository);
    }
    let mut found: Vec<PathBuf> = Vec::new();
    let push = |path: PathBuf, found: &mut Vec<PathBuf>| {
        if inside(&path) && !found.contains(&path) {
            found.push(path);
        }
    };
    for git in candidates {
        let Ok(meta) = git.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            push(git, &mut found);
        } else if meta.is_file() {
            // A worktree: `gitdir: <path>`, whose `commondir` names the shared repository.
            let named = std::fs::read_to_string(&git).ok().and_then(|text| {
                let dir = text.trim().strip_prefix("gitdir:")?.trim().to_owned();
                let base = git.parent().unwrap_or(Path::new("/"));
                resolve_path(&base.join(dir)).ok()
            });
            push(git, &mut found);
            if let Some(gitdir) = named.filter(|dir| dir.is_dir()) {
                let common = std::fs::read_to_string(gitdir.join("commondir"))
                    .ok()
                    .and_then(|c| resolve_path(&gitdir.join(c.trim())).ok())
                    .filter(|dir| dir.is_dir());
                push(gitdir, &mut found);
                if let Some(common) = common {
                    push(common, &mut found);
                }
            }
        }
    }
    found
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

    #[test]
    fn bwrap_binds_outermost_roots_and_keeps_git_read_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join(".git")).expect("git dir");
        std::fs::create_dir_all(root.join(".flemma/x.chat")).expect("store");
        std::fs::create_dir_all(root.join("run")).expect("runtime dir");
        let policy = PathPolicy::new([root.clone(), root.join(".flemma/x.chat")]);
        let bwrap = Bwrap {
            program: PathBuf::from("bwrap"),
            writable: outermost_directories(policy.roots()),
            git_writable: false,
            hidden: vec![root.join("run"), root.clone()],
            network: false,
        };
        let argv = bwrap.wrap(&["true".into()], &root);
        let text = argv.join(" ");
        let shown = root.display().to_string();
        assert!(text.contains("--new-session"), "{text}");
        assert!(text.contains("--unshare-net"), "{text}");
        assert!(text.contains(&format!("--bind {shown} {shown}")), "{text}");
        assert!(
            !text.contains(".flemma"),
            "nested roots are not bound again: {text}"
        );
        assert!(
            text.contains(&format!("--ro-bind {shown}/.git {shown}/.git")),
            "{text}"
        );
        assert!(text.contains(&format!("--tmpfs {shown}/run")), "{text}");
        assert!(
            !text.contains(&format!("--tmpfs {shown} ")),
            "a hidden path holding the working directory is not hidden: {text}"
        );
    }

    #[test]
    fn resolution_handles_missing_components_and_dotdot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let path = root.join("a/b/../c.txt");
        assert_eq!(resolve_path(&path), Ok(root.join("a/c.txt")));
    }
}
