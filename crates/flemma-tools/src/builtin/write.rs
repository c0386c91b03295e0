//! `write`: creates or replaces a file (parents created), answering with a one-line headline and
//! a unified diff against the previous content.

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};

pub const NAME: &str = "write";
/// The largest previous content read for the diff (a larger file is overwritten without one).
const PREVIOUS_CAP: u64 = 16 * 1024 * 1024;

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "Create or overwrite a file with `content` (parent directories are created). \
Answers with a headline and a unified diff against the previous content."
            .into(),
        input_schema: strict_object_schema(vec![
            (
                "path",
                json!({"type": "string", "description": "File path, relative to the chat's directory or absolute."}),
            ),
            (
                "content",
                json!({"type": "string", "description": "The complete new content."}),
            ),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    }
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let (Some(shown), Some(content)) = (
        input.get("path").and_then(Value::as_str),
        input.get("content").and_then(Value::as_str),
    ) else {
        return Outcome::error("write needs `path` and `content` strings");
    };
    let path = match ctx
        .resolve(shown)
        .and_then(|path| ctx.guard.check_write(&path))
    {
        Ok(path) => path,
        Err(reason) => return Outcome::error(format!("Refused to write {shown}: {reason}")),
    };
    if path.is_dir() {
        return Outcome::error(format!("{shown} is a directory; give a file path"));
    }
    // Read and written through descriptors that follow no symlink: a link swapped in after the
    // check above (by a background job, say) is refused, never written through.
    let on_disk = match crate::nofollow::read_file(&path, PREVIOUS_CAP) {
        Ok(previous) => previous,
        Err(error) if error.kind() == std::io::ErrorKind::FileTooLarge => Some(Vec::new()),
        Err(error) => {
            return Outcome::error(format!("{shown} cannot be read before writing: {error}"));
        }
    };
    // An existing file the editor holds had the editor's text (an unsaved buffer included).
    let previous = match (on_disk, ctx.editor_reads()) {
        (Some(_), Some(editor)) => match editor.read_text(&path, &ctx.cancel) {
            Ok(text) => Some(text.into_bytes()),
            Err(error) => {
                return Outcome::error(format!(
                    "{shown} cannot be read by the editor before writing: {error}"
                ));
            }
        },
        (on_disk, _) => on_disk,
    };
    if previous.as_deref() == Some(content.as_bytes()) {
        return Outcome::ok(format!("{shown} already has this content; nothing written"));
    }
    // An editor that writes files writes this one: its buffer shows the change at once.
    let written = match ctx.editor_writes() {
        Some(editor) => path
            .parent()
            .map_or(Ok(()), crate::nofollow::create_dirs)
            .map_err(|e| format!("cannot create its folder: {e}"))
            .and_then(|()| editor.write_text(&path, content, &ctx.cancel)),
        None => crate::nofollow::replace_file(&path, content.as_bytes()).map_err(|e| e.to_string()),
    };
    if let Err(error) = written {
        return Outcome::error(format!("Could not write {shown}: {error}"));
    }
    let lines = content.lines().count();
    match previous {
        None => Outcome::ok(format!(
            "Created {shown} ({lines} lines, {} bytes)\n{}",
            content.len(),
            unified_diff("", content, shown)
        )),
        Some(bytes) => {
            let old = String::from_utf8_lossy(&bytes);
            let diff = similar::TextDiff::from_lines(old.as_ref(), content);
            let (mut added, mut removed) = (0, 0);
            for change in diff.iter_all_changes() {
                match change.tag() {
                    similar::ChangeTag::Insert => added += 1,
                    similar::ChangeTag::Delete => removed += 1,
                    similar::ChangeTag::Equal => {}
                }
            }
            Outcome::ok(format!(
                "Overwrote {shown} (+{added} -{removed} lines, now {lines} lines)\n{}",
                unified_diff(&old, content, shown)
            ))
        }
    }
}

/// A unified diff with 3 lines of context, headed `--- a/<path>` / `+++ b/<path>`.
pub fn unified_diff(old: &str, new: &str, path: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}
