//! The `edit` tool (seed `002` `edit_file`): replacements `{old, new}` resolved against the
//! original file, each `old` present exactly once; three matching passes (exact, edges, indent)
//! with re-indentation of `new`; overlapping edits refused; any refusal → nothing written.
//! Also accepts Flemma's form (`oldText`, `newText`) as one edit. CRLF files keep CRLF; the
//! write is atomic (a temporary file in the same directory, then a rename), goes through the
//! sandbox's [`PathGuard`](crate::context::PathGuard), and follows no symlink
//! ([`crate::nofollow`]).

mod indent;
mod matching;
mod render;

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};
use matching::{Found, Miss, Pass, Source};

pub const NAME: &str = "edit";
/// The largest file `edit` changes.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The tool's definition: name, description, strict input schema (with the required `label`).
pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "Replace text in an existing file. Each edit's `old` must appear exactly once in the file \
(whitespace at its edges and line indentation are forgiven, and reported); all edits are resolved against the \
original file and must not overlap. If any edit is refused, nothing is written. `new` is re-indented to the \
file's style. Use `dry_run` to see the diff without writing."
            .into(),
        input_schema: strict_object_schema(vec![
            (
                "path",
                json!({"type": "string", "description": "Path of an existing file, relative to the chat's directory or absolute"}),
            ),
            (
                "edits",
                json!({
                    "type": ["array", "null"],
                    "description": "Replacements, all resolved against the original file",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old": {"type": "string", "description": "Exact text to find, present exactly once"},
                            "new": {"type": "string", "description": "Replacement; empty deletes the matched text"}
                        },
                        "required": ["old", "new"],
                        "additionalProperties": false
                    }
                }),
            ),
            (
                "dry_run",
                json!({"type": ["boolean", "null"], "description": "Report what would change, write nothing"}),
            ),
            // Flemma's form (one replacement), so a call written by Flemma's `edit` runs too.
            (
                "oldText",
                json!({"type": ["string", "null"], "description": "One replacement's text to find (instead of `edits`)"}),
            ),
            (
                "newText",
                json!({"type": ["string", "null"], "description": "One replacement's new text (with `oldText`)"}),
            ),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    }
}

/// One requested replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub old: String,
    pub new: String,
}

/// An `edit` call's input, checked.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) path: String,
    pub(crate) edits: Vec<Replacement>,
    dry_run: bool,
}

pub(crate) fn parse(input: &Value) -> Result<Request, String> {
    let path = input
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .ok_or("edit needs `path`: the file to change")?
        .to_string();
    let dry_run = input
        .get("dry_run")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut edits = Vec::new();
    if let Some(list) = input.get("edits").filter(|v| !v.is_null()) {
        let items = list
            .as_array()
            .ok_or("`edits` must be a list of {old, new} objects")?;
        for (i, item) in items.iter().enumerate() {
            edits.push(pair(item).ok_or_else(|| {
                format!(
                    "edit #{}: needs `old` and `new` strings (or `oldText` and `newText`)",
                    i + 1
                )
            })?);
        }
    }
    let given = |key: &str| input.get(key).is_some_and(|v| !v.is_null());
    if given("oldText") || given("newText") {
        edits.push(
            pair(input).ok_or("`oldText` and `newText` must both be strings when one is given")?,
        );
    }
    if edits.is_empty() {
        return Err("edit needs at least one edit: `edits: [{old, new}]`".into());
    }
    Ok(Request {
        path,
        edits,
        dry_run,
    })
}

fn pair(v: &Value) -> Option<Replacement> {
    let get = |a: &str, b: &str| v.get(a).or_else(|| v.get(b)).and_then(Value::as_str);
    Some(Replacement {
        old: get("old", "oldText")?.to_string(),
        new: get("new", "newText")?.to_string(),
    })
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let req = match parse(input) {
        Ok(r) => r,
        Err(e) => return Outcome::error(e),
    };
    let shown = req.path.as_str();
    let path = match ctx.resolve(&req.path) {
        Ok(path) => path,
        Err(error) => return Outcome::error(error),
    };
    if path.is_dir() {
        return Outcome::error(format!(
            "{shown} is a directory — edit changes one existing file"
        ));
    }
    if !path.exists() {
        return Outcome::error(format!(
            "{shown} does not exist. edit changes an existing file; create it with write"
        ));
    }
    let target = match ctx.guard.check_write(&path) {
        Ok(p) => p,
        Err(reason) => {
            return Outcome::error(format!(
                "{shown}: refused by the sandbox — {reason}; nothing was written"
            ));
        }
    };
    // Read and written through descriptors that follow no symlink (a link swapped in after
    // the check is refused, not followed).
    let bytes = match crate::nofollow::read_file(&target, MAX_FILE_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => return Outcome::error(format!("{shown} does not exist (any more)")),
        Err(e) => return Outcome::error(format!("{shown}: cannot be read: {e}")),
    };
    // The text the editor holds (an unsaved buffer) is the one edited, when it reads files.
    let bytes = match ctx.editor_reads() {
        Some(editor) => match editor.read_text(&target, &ctx.cancel) {
            Ok(text) => text.into_bytes(),
            Err(e) => return Outcome::error(format!("{shown}: cannot be read by the editor: {e}")),
        },
        None => bytes,
    };
    let Ok(original) = String::from_utf8(bytes) else {
        return Outcome::error(format!(
            "{shown} is not UTF-8 text — edit only changes text files; nothing was written"
        ));
    };
    let plan = match plan(shown, &original, &req.edits) {
        Ok(p) => p,
        Err(refusal) => return Outcome::error(refusal),
    };
    if plan.new_text == original {
        return Outcome::ok(format!(
            "{shown}: no change — every edit's new text equals its old text; nothing written"
        ));
    }
    if req.dry_run {
        return Outcome::ok(format!(
            "Dry run, nothing written — {}\n{}",
            plan.headline, plan.diff
        ));
    }
    let written = match ctx.editor_writes() {
        Some(editor) => editor.write_text(&target, &plan.new_text, &ctx.cancel),
        None => crate::nofollow::replace_file(&target, plan.new_text.as_bytes())
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = written {
        return Outcome::error(format!(
            "{shown}: the edited file could not be written ({e}); the file is unchanged"
        ));
    }
    Outcome::ok(format!("{}\n{}", plan.headline, plan.diff))
}

/// What an accepted call does: the new text, its headline and its numbered diff.
#[derive(Debug)]
pub struct Plan {
    pub new_text: String,
    pub headline: String,
    pub diff: String,
}

/// Places every edit against `original` and applies them, or explains every refusal. Pure: the
/// heart of the tool, used by the runner and the benchmarks.
pub fn plan(shown: &str, original: &str, edits: &[Replacement]) -> Result<Plan, String> {
    let crlf = original.contains("\r\n") && !has_lone_lf(original);
    let normalised;
    let text: &str = if crlf {
        normalised = original.replace("\r\n", "\n");
        &normalised
    } else {
        original
    };
    let src = Source::new(text);
    let mut refusals = Vec::new();
    let mut placed: Vec<(usize, Found)> = Vec::new();
    for (i, e) in edits.iter().enumerate() {
        let n = i + 1;
        let (old, new) = if crlf {
            (e.old.replace("\r\n", "\n"), e.new.replace("\r\n", "\n"))
        } else {
            (e.old.clone(), e.new.clone())
        };
        match matching::locate(&src, &old, &new) {
            Ok(f) => placed.push((n, f)),
            Err(miss) => refusals.push(describe_miss(shown, n, &old, &src, miss)),
        }
    }
    placed.sort_by_key(|(_, f)| (f.start, f.end));
    for pair in placed.windows(2) {
        let (a, fa) = &pair[0];
        let (b, fb) = &pair[1];
        if fb.start < fa.end {
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            let what = if (fa.start, fa.end) == (fb.start, fb.end) {
                "change the same text"
            } else {
                "overlap"
            };
            refusals.push(format!(
                "{shown}: edits #{lo} and #{hi} {what} (lines {} and {}) — edits are resolved against \
the original file, never one after the other: merge them into one edit, or make each touch separate text",
                span(&src, fa),
                span(&src, fb),
            ));
        }
    }
    if !refusals.is_empty() {
        refusals.push(format!(
            "nothing was written: {} of {} edit(s) refused, the file is unchanged",
            refusals.len().min(edits.len()),
            edits.len()
        ));
        return Err(refusals.join("\n"));
    }
    let found: Vec<&Found> = placed.iter().map(|(_, f)| f).collect();
    let applied = render::apply(&src, &found);
    let relaxed = found.iter().filter(|f| f.pass != Pass::Exact).count();
    let mut headline = format!(
        "{shown}: {} edit(s) applied, +{} -{} lines",
        edits.len(),
        applied.added(),
        applied.removed()
    );
    if let Some(line) = applied.first_change() {
        headline.push_str(&format!(", first change at line {line}"));
    }
    if relaxed > 0 {
        headline.push_str(&format!(" · {relaxed} matched ignoring whitespace"));
    }
    let diff = render::diff(&src, &applied);
    let new_text = if crlf {
        applied.text.replace('\n', "\r\n")
    } else {
        applied.text
    };
    Ok(Plan {
        new_text,
        headline,
        diff,
    })
}

fn has_lone_lf(text: &str) -> bool {
    let b = text.as_bytes();
    memchr::memchr_iter(b'\n', b).any(|i| i == 0 || b[i - 1] != b'\r')
}

/// `3-5` or `4`: the 1-based lines a match covers.
fn span(src: &Source<'_>, f: &Found) -> String {
    let a = src.line_of(f.start) + 1;
    let b = src.line_of(f.end.saturating_sub(1).max(f.start)) + 1;
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

fn describe_miss(shown: &str, n: usize, old: &str, src: &Source<'_>, miss: Miss) -> String {
    match miss {
        Miss::Empty => format!(
            "{shown}: edit #{n}: old is empty — give the exact text to replace (to add text, include the line next to it in old and in new)"
        ),
        Miss::Ambiguous { lines } => {
            let listed: Vec<String> = lines.iter().take(10).map(|l| l.to_string()).collect();
            let more = if lines.len() > 10 { ", …" } else { "" };
            format!(
                "{shown}: edit #{n}: old text appears {} times (lines {}{more}) — to change ONE of them, include \
its surrounding lines in old until the text is unique; to change several, send one edit per place, each \
with enough surrounding text to be unique",
                lines.len(),
                listed.join(", ")
            )
        }
        Miss::NotFound { closest } => {
            let mut out = format!(
                "{shown}: edit #{n}: old text not found — it must match the file exactly, including indentation and line breaks:\n"
            );
            for l in old.trim_matches('\n').split('\n') {
                out.push_str(&format!("  │ {l}\n"));
            }
            match closest {
                Some(region) => {
                    out.push_str("the closest the file comes to it — copy these lines:");
                    let last = region.first + region.count;
                    let w = last.to_string().len();
                    for i in region.first..last {
                        out.push_str(&format!("\n  │ {:>w$} │ {}", i + 1, src.lines[i].text));
                    }
                }
                None => out.push_str(
                    "no part of the file comes close — read the file again before editing it",
                ),
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits(pairs: &[(&str, &str)]) -> Vec<Replacement> {
        pairs
            .iter()
            .map(|(o, n)| Replacement {
                old: o.to_string(),
                new: n.to_string(),
            })
            .collect()
    }

    #[test]
    fn headline_and_numbered_diff() {
        let text = "a\nb\nc\nd\n";
        let p =
            plan("f.txt", text, &edits(&[("b\n", "B1\nB2\n")])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.new_text, "a\nB1\nB2\nc\nd\n");
        assert_eq!(
            p.headline,
            "f.txt: 1 edit(s) applied, +2 -1 lines, first change at line 2"
        );
        assert_eq!(p.diff, " 1 │ a\n-2 │ b\n+2 │ B1\n+3 │ B2\n 4 │ c\n");
    }

    #[test]
    fn second_hunk_numbers_follow_the_first() {
        let text = "1\n2\n3\n4\n5\n6\n7\n";
        let p = plan("f", text, &edits(&[("6", "six"), ("2", "two\nzwei")]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.new_text, "1\ntwo\nzwei\n3\n4\n5\nsix\n7\n");
        assert_eq!(
            p.diff,
            " 1 │ 1\n-2 │ 2\n+2 │ two\n+3 │ zwei\n 4 │ 3\n   ┆\n 6 │ 5\n-6 │ 6\n+7 │ six\n 8 │ 7\n"
        );
    }

    #[test]
    fn overlap_is_refused_with_both_numbers() {
        let err = plan("f", "abcdef\n", &edits(&[("abc", "x"), ("cde", "y")]))
            .err()
            .unwrap_or_default();
        assert!(err.contains("edits #1 and #2 overlap"), "{err}");
        assert!(err.ends_with("the file is unchanged"), "{err}");
    }

    #[test]
    fn crlf_round_trips() {
        let text = "one\r\n\ttwo\r\nthree\r\n";
        let p = plan(
            "f",
            text,
            &edits(&[("one\n    two", "one\n    TWO\n    2b")]),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.new_text, "one\r\n\tTWO\r\n\t2b\r\nthree\r\n");
        assert!(p.headline.ends_with("· 1 matched ignoring whitespace"));
    }
}
