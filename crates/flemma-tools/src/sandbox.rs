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
/// one of the writable roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPolicy {
    roots: Vec<PathBuf>,
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
        Self { roots: resolved }
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
        Self::new(roots)
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

/// The `bwrap` wrapper: the whole filesystem read-only, the policy's roots writable, `/dev` and
/// `/proc` fresh, its own pid namespace (so killing bwrap kills everything inside), the network
/// shared or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bwrap {
    program: PathBuf,
    writable: Vec<PathBuf>,
    network: bool,
}

impl Bwrap {
    /// The wrapper for `policy` when bwrap is usable, or the reason it is not.
    pub fn for_policy(policy: &PathPolicy, network: bool) -> Result<Self, String> {
        let program = bwrap_availability()?;
        Ok(Self {
            program,
            writable: policy
                .roots()
                .iter()
                .filter(|root| root.exists())
                .cloned()
                .collect(),
            network,
        })
    }

    /// The argv running `inner` inside the sandbox with working directory `cwd`.
    pub fn wrap(&self, inner: &[String], cwd: &Path) -> Vec<String> {
        let mut argv: Vec<OsString> = vec![self.program.clone().into_os_string()];
        let mut add = |parts: &[&str]| argv.extend(parts.iter().map(OsString::from));
        add(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        add(&["--unshare-pid", "--die-with-parent"]);
        if !self.network {
            add(&["--unshare-net"]);
        }
        for root in &self.writable {
            argv.push("--bind".into());
            argv.push(root.clone().into_os_string());
            argv.push(root.clone().into_os_string());
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
    fn resolution_handles_missing_components_and_dotdot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let path = root.join("a/b/../c.txt");
        assert_eq!(resolve_path(&path), Ok(root.join("a/c.txt")));
    }
}
