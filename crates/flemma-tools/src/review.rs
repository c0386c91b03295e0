//! Review before approval (issue 35): what a pending `write` or `edit` would do to its file,
//! as the file is now, without writing anything. Every front end shows it the same way
//! (`flemmad status --diff`, the LSP's hover on a pending call).
//!
//! The change is computed again whenever it is asked for: a file changed since the call was
//! proposed shows its new state, and an `edit` whose text is gone says so (the refusal the
//! tool itself would give).

use std::path::PathBuf;

use serde_json::Value;

use crate::builtin::{edit, write};
use crate::context::RunContext;

/// The largest file whose change is shown (a bigger one is only named).
const MAX_REVIEWED_BYTES: u64 = 4 * 1024 * 1024;

/// What a call would change in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedChange {
    /// The path as the model wrote it.
    pub shown: String,
    /// The path resolved as the tool resolves it.
    pub path: PathBuf,
    /// The file's text now (`None`: the file does not exist, the call creates it).
    pub before: Option<String>,
    /// Its text after the call.
    pub after: String,
}

impl ProposedChange {
    /// A unified diff (`--- a/<path>`, `+++ b/<path>`, 3 lines of context); empty when the
    /// call changes nothing.
    pub fn unified_diff(&self) -> String {
        if self.before.as_deref() == Some(self.after.as_str()) {
            return String::new();
        }
        write::unified_diff(
            self.before.as_deref().unwrap_or(""),
            &self.after,
            &self.shown,
        )
    }
}

/// The change `tool` would make with `input`: `None` for a tool that edits no file it names
/// (`bash` and the others: their effects cannot be known before they run), else the change or
/// why there is none to show (the tool's own refusal, an unreadable file).
pub fn proposed_change(
    tool: &str,
    input: &Value,
    ctx: &RunContext,
) -> Option<Result<ProposedChange, String>> {
    match tool {
        write::NAME => Some(proposed_write(input, ctx)),
        edit::NAME => Some(proposed_edit(input, ctx)),
        _ => None,
    }
}

fn proposed_write(input: &Value, ctx: &RunContext) -> Result<ProposedChange, String> {
    let (Some(shown), Some(content)) = (
        input.get("path").and_then(Value::as_str),
        input.get("content").and_then(Value::as_str),
    ) else {
        return Err("write needs `path` and `content` strings".into());
    };
    let path = ctx.resolve(shown)?;
    let before = current_text(&path, shown, ctx)?;
    Ok(ProposedChange {
        shown: shown.to_owned(),
        path,
        before,
        after: content.to_owned(),
    })
}

fn proposed_edit(input: &Value, ctx: &RunContext) -> Result<ProposedChange, String> {
    let request = edit::parse(input)?;
    let shown = request.path.as_str();
    let path = ctx.resolve(shown)?;
    let Some(before) = current_text(&path, shown, ctx)? else {
        return Err(format!(
            "{shown} does not exist. edit changes an existing file; create it with write"
        ));
    };
    let plan = edit::plan(shown, &before, &request.edits)?;
    Ok(ProposedChange {
        shown: shown.to_owned(),
        path,
        before: Some(before),
        after: plan.new_text,
    })
}

/// The file's text as the tool would find it: the editor's buffer when the editor reads
/// files, else the disk (following no symlink at its end); `None` when it does not exist.
fn current_text(
    path: &std::path::Path,
    shown: &str,
    ctx: &RunContext,
) -> Result<Option<String>, String> {
    if path.is_dir() {
        return Err(format!("{shown} is a directory"));
    }
    let bytes = match crate::nofollow::read_file(path, MAX_REVIEWED_BYTES) {
        Ok(None) => return Ok(None),
        Ok(Some(bytes)) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::FileTooLarge => {
            return Err(format!(
                "{shown} is larger than {} MiB: its change is not shown",
                MAX_REVIEWED_BYTES >> 20
            ));
        }
        Err(error) => return Err(format!("{shown} cannot be read: {error}")),
    };
    let bytes = match ctx.editor_reads() {
        Some(editor) => editor
            .read_text(path, &ctx.cancel)
            .map(String::into_bytes)
            .map_err(|error| format!("{shown} cannot be read by the editor: {error}"))?,
        None => bytes,
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{shown} is not UTF-8 text: its change is not shown"))
}

/// One hunk of a [`ProposedChange`]: a run of changed lines with up to 3 lines of context on
/// each side, numbered from 1 in the order of the file (as `flemmad status --diff` shows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// 1-based.
    pub number: usize,
    /// `@@ -a,b +c,d @@`.
    pub header: String,
    /// The hunk as a unified diff's lines (its header first).
    pub diff: String,
}

impl ProposedChange {
    fn text_diff(&self) -> similar::TextDiff<'_, '_, '_, str> {
        similar::TextDiff::from_lines(self.before.as_deref().unwrap_or(""), &self.after)
    }

    /// The change's hunks, numbered from 1 (none when the call changes nothing).
    pub fn hunks(&self) -> Vec<Hunk> {
        if self.before.as_deref() == Some(self.after.as_str()) {
            return Vec::new();
        }
        let diff = self.text_diff();
        let mut unified = diff.unified_diff();
        unified.context_radius(CONTEXT);
        unified
            .iter_hunks()
            .enumerate()
            .map(|(i, hunk)| {
                let diff = hunk.to_string();
                let header = diff.lines().next().unwrap_or_default().to_owned();
                Hunk {
                    number: i + 1,
                    header,
                    diff,
                }
            })
            .collect()
    }

    /// The file's text with only the hunks numbered in `approved` applied (the others left as
    /// the file is now). Refuses a number that is no hunk of the change.
    pub fn narrowed(&self, approved: &[usize]) -> Result<String, String> {
        let diff = self.text_diff();
        let groups = diff.grouped_ops(CONTEXT);
        if let Some(wrong) = approved.iter().find(|n| **n == 0 || **n > groups.len()) {
            return Err(format!(
                "there is no hunk {wrong}: the change of {} has {} hunk{} (numbered from 1, as the diff shows them)",
                self.shown,
                groups.len(),
                if groups.len() == 1 { "" } else { "s" }
            ));
        }
        let hunk_of = |op: &similar::DiffOp| {
            groups
                .iter()
                .position(|group| group.contains(op))
                .map(|i| i + 1)
        };
        let (old, new) = (diff.old_slices(), diff.new_slices());
        let mut text = String::new();
        for op in diff.ops() {
            let take_new = !matches!(op.tag(), similar::DiffTag::Equal)
                && hunk_of(op).is_some_and(|n| approved.contains(&n));
            let lines = if take_new {
                &new[op.new_range()]
            } else {
                &old[op.old_range()]
            };
            text.extend(lines.iter().copied());
        }
        Ok(text)
    }

    /// An `edit` call's `edits` that turn the file as it is now into `target`: one `{old,
    /// new}` per hunk, the hunk's old lines with their context (so that each is found once).
    /// Refused when a hunk's old text is not found exactly once in the file, or the file does
    /// not exist (an `edit` changes an existing file).
    pub fn edits_to(&self, target: &str) -> Result<Vec<edit::Replacement>, String> {
        let Some(before) = self.before.as_deref() else {
            return Err(format!(
                "{} does not exist: an edit changes an existing file",
                self.shown
            ));
        };
        let diff = similar::TextDiff::from_lines(before, target);
        let (old, new) = (diff.old_slices(), diff.new_slices());
        let mut edits = Vec::new();
        for group in diff.grouped_ops(CONTEXT) {
            let (Some(first), Some(last)) = (group.first(), group.last()) else {
                continue;
            };
            let old_text: String = old[first.old_range().start..last.old_range().end].concat();
            let new_text: String = new[first.new_range().start..last.new_range().end].concat();
            if old_text.is_empty() || before.matches(old_text.as_str()).count() != 1 {
                return Err(format!(
                    "the change to {} at `{}` cannot be written as an edit (its text is not found exactly once in the file); change the call's input in the chat by hand",
                    self.shown,
                    old_text.lines().next().unwrap_or_default()
                ));
            }
            edits.push(edit::Replacement {
                old: old_text,
                new: new_text,
            });
        }
        if edits.is_empty() {
            return Err(format!(
                "the proposed content is {} as it is now: an edit that changes nothing is no edit; reject the call instead",
                self.shown
            ));
        }
        let planned = edit::plan(&self.shown, before, &edits)?;
        if planned.new_text != target {
            return Err(format!(
                "the change to {} cannot be written as an edit exactly (the edit tool would change it otherwise); change the call's input in the chat by hand",
                self.shown
            ));
        }
        Ok(edits)
    }
}

/// The input of a `write` or `edit` call (`tool`, `input`) changed so that the call leaves its
/// file as `content` instead of `change.after`: a `write`'s `content` replaced; an `edit`'s
/// replacements made anew from the hunks between the file now and `content` (`edits`; its
/// other fields kept).
pub fn input_for(
    tool: &str,
    input: &Value,
    change: &ProposedChange,
    content: &str,
) -> Result<Value, String> {
    let mut revised = input.clone();
    let Some(fields) = revised.as_object_mut() else {
        return Err("the call's input is not a JSON object".into());
    };
    match tool {
        write::NAME => {
            fields.insert("content".into(), Value::String(content.to_owned()));
        }
        edit::NAME => {
            let edits = change.edits_to(content)?;
            for key in ["oldText", "newText", "edits"] {
                fields.remove(key);
            }
            let edits = edits
                .into_iter()
                .map(|e| serde_json::json!({"old": e.old, "new": e.new}))
                .collect();
            fields.insert("edits".into(), Value::Array(edits));
        }
        other => {
            return Err(format!(
                "only `write` and `edit` calls have a proposal to change, not `{other}`"
            ));
        }
    }
    Ok(revised)
}

/// Lines of context around each hunk (as [`write::unified_diff`] shows them).
const CONTEXT: usize = 3;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn change(before: Option<&str>, after: &str) -> ProposedChange {
        ProposedChange {
            shown: "f.txt".into(),
            path: PathBuf::from("/tmp/f.txt"),
            before: before.map(str::to_owned),
            after: after.to_owned(),
        }
    }

    const BEFORE: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
    const AFTER: &str = "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n";

    #[test]
    fn hunks_are_numbered_and_each_can_be_applied_alone() {
        let change = change(Some(BEFORE), AFTER);
        let hunks = change.hunks();
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].header, "@@ -1,4 +1,4 @@");
        assert!(
            hunks[1].diff.contains("-12\n+twelve\n"),
            "{}",
            hunks[1].diff
        );
        assert_eq!(
            change.narrowed(&[1]).unwrap(),
            BEFORE.replacen("1\n", "one\n", 1)
        );
        assert_eq!(
            change.narrowed(&[2]).unwrap(),
            BEFORE.replace("12\n", "twelve\n")
        );
        assert_eq!(change.narrowed(&[1, 2]).unwrap(), AFTER);
        assert_eq!(change.narrowed(&[]).unwrap(), BEFORE);
        let error = change.narrowed(&[3]).unwrap_err();
        assert!(
            error.contains("no hunk 3") && error.contains("2 hunks"),
            "{error}"
        );
        assert!(change.narrowed(&[0]).is_err());
    }

    #[test]
    fn inputs_for_new_content_keep_the_call_and_change_what_it_writes() {
        let change = change(Some(BEFORE), AFTER);
        let input = serde_json::json!({"path": "f.txt", "content": AFTER, "label": "l"});
        let revised = input_for("write", &input, &change, "x\n").unwrap();
        assert_eq!(
            revised,
            serde_json::json!({"path": "f.txt", "content": "x\n", "label": "l"})
        );
        let input = serde_json::json!({"path": "f.txt", "oldText": "1\n", "newText": "one\n"});
        let target = BEFORE.replace("12\n", "twelve\n");
        let revised = input_for("edit", &input, &change, &target).unwrap();
        assert_eq!(
            revised,
            serde_json::json!({"path": "f.txt", "edits": [{"old": "9\n10\n11\n12\n", "new": "9\n10\n11\ntwelve\n"}]})
        );
        assert!(input_for("bash", &input, &change, "x").is_err());
    }

    #[test]
    fn a_new_file_is_one_hunk_and_no_change_none() {
        let created = change(None, "a\nb\n");
        assert_eq!(created.hunks().len(), 1);
        assert_eq!(created.narrowed(&[]).unwrap(), "");
        assert!(change(Some("x\n"), "x\n").hunks().is_empty());
    }

    #[test]
    fn edits_to_a_target_are_unique_hunks_that_make_it() {
        let change = change(Some(BEFORE), AFTER);
        let edits = change.edits_to(AFTER).unwrap();
        assert_eq!(edits.len(), 2);
        assert_eq!(edits[0].old, "1\n2\n3\n4\n");
        assert_eq!(edits[0].new, "one\n2\n3\n4\n");
        assert!(
            change
                .edits_to(BEFORE)
                .unwrap_err()
                .contains("changes nothing")
        );
        // A hunk whose text is found twice cannot be an edit.
        let twice = super::tests::change(Some("a\nb\na\nb\n"), "a\nb\na\nB\n");
        let error = twice.edits_to("a\nb\na\nB\n");
        // With its context the hunk is the whole file: found once.
        assert!(error.is_ok(), "{error:?}");
        assert!(
            super::tests::change(None, "x")
                .edits_to("y")
                .unwrap_err()
                .contains("does not exist")
        );
    }
}
