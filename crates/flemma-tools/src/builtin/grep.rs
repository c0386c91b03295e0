//! The `grep` tool: searches file contents with ripgrep (`--json`), else `grep -P`, else
//! `grep -E` with `\d \w \s` translated to POSIX classes. The excluded directory names come from
//! `tools.grep.exclude`. Output: one `path:line: text` line per match.

pub(crate) mod lines;

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};
use lines::{End, command, find_program, run_lines};

pub const NAME: &str = "grep";

/// Directory names never searched when the configuration says nothing else (the default of
/// `tools.grep.exclude`, defined by the configuration schema).
pub const DEFAULT_EXCLUDES: [&str; 8] = flemma_config::SEARCH_EXCLUDES;
/// Matches returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Longest matched line shown whole; longer ones are cut.
const MAX_LINE_CHARS: usize = 500;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "Search file contents for a regular expression (ripgrep syntax; `\\d \\w \\s` work everywhere). \
Returns `path:line: text` lines. Skips .git, node_modules, __pycache__, .venv, target, dist, build and vendor."
            .into(),
        input_schema: strict_object_schema(vec![
            ("pattern", json!({"type": "string", "description": "Regular expression to search for"})),
            ("path", json!({"type": ["string", "null"], "description": "File or directory to search (default: the working directory)"})),
            ("glob", json!({"type": ["string", "null"], "description": "Only files whose name matches this glob, e.g. `*.rs`"})),
            ("limit", json!({"type": ["integer", "null"], "description": "Maximum number of matches (default 100)"})),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    }
}

/// What the configuration adds to a call.
#[derive(Debug, Clone)]
pub struct GrepOptions {
    pub exclude: Vec<String>,
}

impl Default for GrepOptions {
    fn default() -> Self {
        Self {
            exclude: DEFAULT_EXCLUDES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Which program does the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Ripgrep,
    GrepPerl,
    GrepExtended,
}

#[derive(Debug)]
struct Request {
    pattern: String,
    path: String,
    glob: Option<String>,
    limit: usize,
}

fn parse(input: &Value) -> Result<Request, String> {
    let pattern = input
        .get("pattern")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .ok_or("grep needs `pattern`: the regular expression to search for")?
        .to_string();
    let text = |k: &str| {
        input
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let limit = match input.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => v
            .as_u64()
            .filter(|&n| n > 0)
            .ok_or("`limit` must be a positive integer")? as usize,
    };
    Ok(Request {
        pattern,
        path: text("path").unwrap_or_else(|| ".".into()),
        glob: text("glob"),
        limit,
    })
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    run_with(ctx, input, &GrepOptions::default())
}

pub fn run_with(ctx: &RunContext, input: &Value, options: &GrepOptions) -> Outcome {
    let mut req = match parse(input) {
        Ok(r) => r,
        Err(e) => return Outcome::error(e),
    };
    let resolved = match ctx.readable(&req.path) {
        Ok(path) => path,
        Err(refused) => return Outcome::error(refused),
    };
    // `~/…` and the store variable mean nothing to `rg`: it gets the path they name.
    match ctx.paths().for_process(&req.path) {
        Ok(path) => req.path = path,
        Err(error) => return Outcome::error(error),
    }
    if !resolved.exists() {
        return Outcome::error(format!(
            "{} does not exist — give a file or directory to search",
            req.path
        ));
    }
    let Some((backend, program)) = pick_backend(ctx) else {
        return Outcome::error(
            "grep cannot run: neither `rg` nor `grep` is on the PATH — install ripgrep (`apt-get install ripgrep`)",
        );
    };
    let mut cmd = command(ctx, &program);
    match backend {
        Backend::Ripgrep => {
            cmd.args(["--json", "--line-number", "--hidden", "--no-messages"]);
            for dir in &options.exclude {
                cmd.arg("--glob").arg(format!("!{dir}"));
            }
            if let Some(g) = &req.glob {
                cmd.arg("--glob").arg(g);
            }
            cmd.arg("--regexp").arg(&req.pattern);
        }
        Backend::GrepPerl | Backend::GrepExtended => {
            let flag = if backend == Backend::GrepPerl {
                "-P"
            } else {
                "-E"
            };
            cmd.args(["-r", "-n", "-I", "--null", "-s", flag]);
            for dir in &options.exclude {
                cmd.arg(format!("--exclude-dir={dir}"));
            }
            if let Some(g) = &req.glob {
                cmd.arg(format!("--include={g}"));
            }
            let pattern = if backend == Backend::GrepExtended {
                posix_pattern(&req.pattern)
            } else {
                req.pattern.clone()
            };
            cmd.arg("-e").arg(pattern);
        }
    }
    cmd.arg("--").arg(&req.path);

    let mut found: Vec<String> = Vec::new();
    let mut more = false;
    let end = run_lines(ctx, cmd, |line| {
        let Some(m) = parse_line(backend, line) else {
            return true;
        };
        if found.len() == req.limit {
            more = true;
            return false;
        }
        found.push(m);
        true
    });
    let end = match end {
        Ok(e) => e,
        Err(e) => {
            return Outcome::error(format!("grep could not start {}: {e}", program.display()));
        }
    };
    let mut text = found.join("\n");
    match end {
        End::Exited {
            code: Some(2),
            stderr,
        } if found.is_empty() => {
            return Outcome::error(format!(
                "grep: the search failed ({}): {}",
                backend_name(backend),
                stderr.trim()
            ));
        }
        End::Exited { .. } | End::Enough => {}
        End::TimedOut => {
            text.push_str(&format!(
                "\n[error: {}s timeout exceeded — narrow `path` or `glob`]",
                ctx.timeout.as_secs()
            ));
            return Outcome::error(text.trim_start().to_string());
        }
        End::Cancelled => {
            text.push_str("\n[error: cancelled]");
            return Outcome::error(text.trim_start().to_string());
        }
    }
    if found.is_empty() {
        return Outcome::ok(format!("No matches for /{}/ in {}", req.pattern, req.path));
    }
    if more {
        text.push_str(&format!(
            "\n[showing the first {} matches — there are more; narrow the pattern, `path` or `glob`, or raise `limit`]",
            req.limit
        ));
    }
    Outcome::ok(text)
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Ripgrep => "rg",
        Backend::GrepPerl => "grep -P",
        Backend::GrepExtended => "grep -E",
    }
}

/// ripgrep, else a `grep` that understands `-P`, else `grep -E`.
pub fn pick_backend(ctx: &RunContext) -> Option<(Backend, std::path::PathBuf)> {
    if let Some(rg) = find_program(ctx, "rg") {
        return Some((Backend::Ripgrep, rg));
    }
    let grep = find_program(ctx, "grep")?;
    let perl_ok = command(ctx, &grep)
        .args(["-q", "-P", "-e", "x", "--", "/dev/null"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        // Exit 1 = "no match": -P is understood. 2 = not supported.
        .is_ok_and(|s| s.code() == Some(1));
    Some((
        if perl_ok {
            Backend::GrepPerl
        } else {
            Backend::GrepExtended
        },
        grep,
    ))
}

/// One output line of the backend → `path:line: text`, or `None` for lines that are not matches.
fn parse_line(backend: Backend, line: &str) -> Option<String> {
    let (path, number, text) = match backend {
        Backend::Ripgrep => {
            let v: Value = serde_json::from_str(line).ok()?;
            if v.get("type")?.as_str()? != "match" {
                return None;
            }
            let data = v.get("data")?;
            let path = data.pointer("/path/text")?.as_str()?.to_string();
            let number = data.get("line_number")?.as_u64()?;
            let text = data
                .pointer("/lines/text")
                .and_then(Value::as_str)
                .unwrap_or("[not UTF-8]")
                .to_string();
            (path, number, text)
        }
        Backend::GrepPerl | Backend::GrepExtended => {
            let (path, rest) = line.split_once('\0')?;
            let (number, text) = rest.split_once(':')?;
            (path.to_string(), number.parse().ok()?, text.to_string())
        }
    };
    let path = path.strip_prefix("./").unwrap_or(&path);
    let text = text.trim_end_matches(['\n', '\r']);
    let text = if text.chars().count() > MAX_LINE_CHARS {
        let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
        format!("{cut}… [line cut at {MAX_LINE_CHARS} characters]")
    } else {
        text.to_string()
    };
    Some(format!("{path}:{number}: {text}"))
}

/// Translates the Perl classes `\d \w \s` (and their negations) to POSIX bracket expressions
/// for `grep -E`; everything else is left as written.
pub fn posix_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    let mut in_bracket = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(&next) = chars.peek() else {
                    out.push('\\');
                    break;
                };
                chars.next();
                let class = match next {
                    'd' => Some(("0-9", false)),
                    'w' => Some(("[:alnum:]_", false)),
                    's' => Some(("[:space:]", false)),
                    'D' => Some(("0-9", true)),
                    'W' => Some(("[:alnum:]_", true)),
                    'S' => Some(("[:space:]", true)),
                    _ => None,
                };
                match class {
                    Some((body, false)) if in_bracket => out.push_str(body),
                    Some((body, negated)) if !in_bracket => {
                        out.push('[');
                        if negated {
                            out.push('^');
                        }
                        out.push_str(body);
                        out.push(']');
                    }
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_bracket => {
                in_bracket = true;
                out.push('[');
                // A `]` right after `[` or `[^` is a literal member.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
            }
            '[' if in_bracket && chars.peek() == Some(&':') => {
                // A POSIX class inside a bracket: copy through its closing `:]`.
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            ']' if in_bracket => {
                in_bracket = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_perl_classes() {
        assert_eq!(posix_pattern(r"\d+\s*\w"), "[0-9]+[[:space:]]*[[:alnum:]_]");
        assert_eq!(posix_pattern(r"[\d,]\D"), "[0-9,][^0-9]");
        assert_eq!(posix_pattern(r"\\d \."), r"\\d \.");
        assert_eq!(posix_pattern(r"[[:alpha:]\s]"), "[[:alpha:][:space:]]");
    }
}
