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
