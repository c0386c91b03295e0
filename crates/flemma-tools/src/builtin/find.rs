//! The `find` tool: file names matching a glob, with `fd`/`fdfind`, else `git ls-files` (inside
//! a Git work tree), else `find`. The excluded directory names come from `tools.find.exclude`.
//! Output: one path per line, sorted, relative to the working directory.

use flemma_config::{GlobError, PathGlob};
use serde_json::{Value, json};

use super::grep::lines::{End, command, find_program, run_lines};
use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};

pub const NAME: &str = "find";
/// Paths returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 200;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "Find files and directories whose name matches a glob (`*.rs`, `test_*`, `src/**/mod.rs`; \
`*`, `?`, `[abc]`, `{a,b}` and `**`). A pattern without `/` matches the name alone. Returns sorted paths, one per line. \
Skips .git, node_modules, __pycache__, .venv, target, dist, build and vendor."
            .into(),
        input_schema: strict_object_schema(vec![
            ("pattern", json!({"type": "string", "description": "Glob the file name (or, with `/`, the relative path) must match"})),
            ("path", json!({"type": ["string", "null"], "description": "Directory to search (default: the working directory)"})),
            ("limit", json!({"type": ["integer", "null"], "description": "Maximum number of paths (default 200)"})),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    }
}

/// What the configuration adds to a call.
#[derive(Debug, Clone)]
pub struct FindOptions {
    pub exclude: Vec<String>,
}

impl Default for FindOptions {
    fn default() -> Self {
        Self {
            exclude: flemma_config::SEARCH_EXCLUDES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// Which program lists the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Fd,
    GitLsFiles,
    Find,
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    run_with(ctx, input, &FindOptions::default())
}

pub fn run_with(ctx: &RunContext, input: &Value, options: &FindOptions) -> Outcome {
    let Some(pattern) = input
        .get("pattern")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    else {
        return Outcome::error("find needs `pattern`: a glob such as `*.rs`");
    };
    let glob = match Glob::new(pattern) {
        Ok(glob) => glob,
        Err(error) => {
            return Outcome::error(format!(
                "{error} — `*` and `?` stay within a name, `**` is a whole path segment (`src/**/mod.rs`), `[` and `{{` must be closed, `\\` makes a character literal"
            ));
        }
    };
    let written = input
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or(".");
    let resolved = match ctx.readable(written) {
        Ok(path) => path,
        Err(refused) => return Outcome::error(refused),
    };
    // `~/…` and the store variable mean nothing to `fd`: it gets the path they name.
    let path = match ctx.paths().for_process(written) {
        Ok(path) => path,
        Err(error) => return Outcome::error(error),
    };
    let path = path.as_str();
    let limit = match input.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => match v.as_u64().filter(|&n| n > 0) {
            Some(n) => n as usize,
            None => return Outcome::error("`limit` must be a positive integer"),
        },
    };
    if !resolved.is_dir() {
        return Outcome::error(format!(
            "{path} is not a directory — give the directory to search in `path`"
        ));
    }
    let Some((backend, program)) = pick_backend(ctx, path) else {
        return Outcome::error(
            "find cannot run: none of `fd`, `fdfind`, `git` or `find` is on the PATH — install fd (`apt-get install fd-find`)",
        );
    };
    let mut cmd = command(ctx, &program);
    match backend {
        Backend::Fd => {
            cmd.args(["--hidden", "--color", "never"]);
            for dir in &options.exclude {
                cmd.arg("--exclude").arg(dir);
            }
            // fd lists everything; the glob is applied here so every backend means the same.
            cmd.arg("--").arg(".").arg(path);
        }
        Backend::GitLsFiles => {
            cmd.arg("-C").arg(path).args([
                "ls-files",
                "--cached",
                "--others",
                "--exclude-standard",
            ]);
        }
        Backend::Find => {
            cmd.arg(path);
            let mut first = true;
            cmd.arg("(");
            for dir in &options.exclude {
                if !first {
                    cmd.arg("-o");
                }
                first = false;
                cmd.args(["-name", dir]);
            }
            cmd.args([")", "-prune", "-o", "-print"]);
        }
    }
    let prefix = if path == "." {
        String::new()
    } else {
        format!("{}/", path.trim_end_matches('/'))
    };
    let mut found: Vec<String> = Vec::new();
    let mut more = false;
    let end = run_lines(ctx, cmd, |line| {
        let rel = match backend {
            Backend::GitLsFiles => {
                let under = options
                    .exclude
                    .iter()
                    .any(|d| line.split('/').any(|part| part == d));
                if under {
                    return true;
                }
                format!("{prefix}{line}")
            }
            _ => line.strip_prefix("./").unwrap_or(line).to_string(),
        };
        let rel = rel.trim_end_matches('/').to_string();
        if rel.is_empty() || rel == path || rel == "." {
            return true;
        }
        let within = rel.strip_prefix(&prefix).unwrap_or(&rel);
        if !glob.matches(within) {
            return true;
        }
        if found.len() == limit {
            more = true;
            return false;
        }
        found.push(rel);
        true
    });
    let end = match end {
        Ok(e) => e,
        Err(e) => {
            return Outcome::error(format!("find could not start {}: {e}", program.display()));
        }
    };
    found.sort();
    let mut text = found.join("\n");
    match end {
        End::Exited {
            code: Some(c),
            stderr,
        } if c != 0 && found.is_empty() => {
            return Outcome::error(format!(
                "find: listing files failed (exit {c}): {}",
                stderr.trim()
            ));
        }
        End::TimedOut => {
            text.push_str(&format!(
                "\n[error: {}s timeout exceeded — search a smaller `path`]",
                ctx.timeout.as_secs()
            ));
            return Outcome::error(text.trim_start().to_string());
        }
        End::Cancelled => {
            text.push_str("\n[error: cancelled]");
            return Outcome::error(text.trim_start().to_string());
        }
        _ => {}
    }
    if found.is_empty() {
        return Outcome::ok(format!("No files match {pattern} in {path}"));
    }
    if more {
        text.push_str(&format!(
            "\n[showing the first {limit} paths found — there are more; narrow the pattern or `path`, or raise `limit`]"
        ));
    }
    Outcome::ok(text)
}

/// `fd`, else `fdfind` (Debian's name), else `git ls-files` when `path` is in a work tree, else
/// `find`.
pub fn pick_backend(ctx: &RunContext, path: &str) -> Option<(Backend, std::path::PathBuf)> {
    if let Some(fd) = find_program(ctx, "fd").or_else(|| find_program(ctx, "fdfind")) {
        return Some((Backend::Fd, fd));
    }
    if let Some(git) = find_program(ctx, "git") {
        let inside = command(ctx, &git)
            .arg("-C")
            .arg(path)
            .args(["rev-parse", "--is-inside-work-tree"])
            .output()
            .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"true"));
        if inside {
            return Some((Backend::GitLsFiles, git));
        }
    }
    find_program(ctx, "find").map(|f| (Backend::Find, f))
}

/// A file glob (`flemma_config::PathGlob`'s rules: `*` and `?` within one path segment, `**`
/// across segments, `[...]` classes, `{a,b}` alternatives). Without a `/` it matches the last
/// segment only; a leading `./` is dropped.
#[derive(Debug, Clone)]
pub struct Glob {
    glob: PathGlob,
    whole_path: bool,
}

impl Glob {
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        Ok(Self {
            glob: PathGlob::new(pattern)?,
            whole_path: pattern.contains('/'),
        })
    }

    pub fn matches(&self, rel_path: &str) -> bool {
        let subject = if self.whole_path {
            rel_path
        } else {
            rel_path.rsplit('/').next().unwrap_or(rel_path)
        };
        self.glob.matches(subject)
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn globs() {
        let g = |p: &str, s: &str| Glob::new(p).expect("a valid glob").matches(s);
        assert!(g("*.rs", "src/main.rs"));
        assert!(!g("*.rs", "src/main.rsx"));
        assert!(g("main.?s", "a/main.rs"));
        assert!(g("*.{rs,toml}", "Cargo.toml"));
        assert!(g("src/**/mod.rs", "src/a/b/mod.rs"));
        assert!(g("src/**/mod.rs", "src/mod.rs"));
        assert!(!g("src/*.rs", "src/a/b.rs"));
        assert!(g("[a-c]x[!0-9]", "bxz"));
        assert!(!g("[a-c]x[!0-9]", "bx1"));
    }
}
