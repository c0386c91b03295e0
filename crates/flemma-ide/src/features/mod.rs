//! One module per editor feature (hover, definition, symbols, folding, highlights, inlay hints, completion,
//! code actions), each answering with plain data in byte offsets.
//!
//! Every feature is a function over a [`flemma_syntax::Document`] plus small plain inputs (job
//! states, approval decisions, a [`FileSystem`] for file references), total on any input: a byte
//! offset anywhere (even past the end or inside a character) gives an answer or nothing, never a
//! panic. Ranges are [`TextRange`]s of bytes; the language server converts them to positions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flemma_syntax::{Document, SegmentKind, SuffixValue, TextRange, ToolResult};

pub mod code_actions;
pub mod code_lenses;
pub mod completion;
pub mod definition;
pub mod folding;
pub mod highlights;
pub mod hover;
pub mod inlay_hints;
pub mod symbols;

#[cfg(test)]
mod fixture;
#[cfg(test)]
mod totality;

/// The live state of a background job, as the engine knows it.
pub use flemma_protocol::engine::JobState;

/// Looks up the state of a job by id; `None` when the engine does not know it.
pub type JobStates<'a> = &'a dyn Fn(&str) -> Option<JobState>;

/// What the approval policy decided for a tool call, and who decided: the approval chain's own
/// types.
pub use flemma_protocol::approval::{Decision as ApprovalDecision, Verdict};

/// Approval decisions by tool use id.
pub type Approvals = HashMap<String, ApprovalDecision>;

/// What a path on disk is (the template host's notion).
pub use flemma_template::FileKind;

/// The little of the file system the features need, injected so tests need no IO.
pub trait FileSystem {
    fn kind(&self, path: &Path) -> FileKind;
    /// The entries of a directory: names, with whether each is a directory. Empty when unreadable.
    fn list(&self, dir: &Path) -> Vec<(String, bool)>;
    /// The home directory, for `~/` references.
    fn home(&self) -> Option<PathBuf>;
}

/// [`FileSystem`] through the template [`Host`](flemma_template::Host) of an analysis host (its
/// `io`): front ends look at the disk only through the port every evaluation uses.
#[derive(Debug, Clone, Copy)]
pub struct HostFileSystem<'a>(pub &'a dyn flemma_template::Host);

impl FileSystem for HostFileSystem<'_> {
    fn kind(&self, path: &Path) -> FileKind {
        self.0.file_kind(path)
    }

    fn list(&self, dir: &Path) -> Vec<(String, bool)> {
        self.0.list_dir(dir)
    }

    fn home(&self) -> Option<PathBuf> {
        self.0.home_dir()
    }
}

/// A path as written in a chat (`./a.md`, `~/x`, `/abs`, `a.md`) resolved against the chat's
/// directory.
pub fn resolve_path(written: &str, chat_dir: &Path, fs: &dyn FileSystem) -> PathBuf {
    if let Some(rest) = written.strip_prefix("~/") {
        if let Some(home) = fs.home() {
            return home.join(rest);
        }
    }
    let path = Path::new(written);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        chat_dir.join(written.strip_prefix("./").unwrap_or(written))
    }
}

/// The job id a tool result's suffix names (`job=job_x`).
pub(crate) fn job_id_of(result: &ToolResult) -> Option<&str> {
    match result.suffix.as_ref()?.get("job")? {
        SuffixValue::String(id) => Some(id),
        _ => None,
    }
}

/// The string literal argument of an `include("…")` call whose literal holds `offset`, searched in
/// `range` of the text: the literal's range (without quotes) and its text.
pub(crate) fn include_path_at(
    text: &str,
    range: TextRange,
    offset: usize,
) -> Option<(TextRange, &str)> {
    let code = text.get(range.start..range.end)?;
    let mut from = 0;
    while let Some(found) = code[from..].find("include(") {
        let call = from + found + "include(".len();
        from = call;
        let rest = &code[call..];
        let skipped = rest.len() - rest.trim_start().len();
        let rest = rest.trim_start();
        let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        let body = &rest[1..];
        let Some(close) = body.find(quote) else {
            continue;
        };
        let start = range.start + call + skipped + 1;
        let literal = TextRange::new(start, start + close);
        if literal.start <= offset && offset <= literal.end {
            return Some((literal, &body[..close]));
        }
    }
    None
}

/// The code range (frontmatter or template) holding `offset`, if any.
pub(crate) fn template_code_at(doc: &Document, offset: usize) -> Option<TextRange> {
    if let Some(frontmatter) = doc.frontmatter() {
        if frontmatter.code.start <= offset && offset <= frontmatter.code.end {
            return Some(frontmatter.code);
        }
    }
    let index = doc.message_index_at(offset)?;
    let message = &doc.messages()[index];
    let k = message
        .segments
        .partition_point(|s| s.range.start <= offset);
    let segment = message.segments.get(k.checked_sub(1)?)?;
    match &segment.kind {
        SegmentKind::Expression(t) | SegmentKind::Code(t)
            if t.code.start <= offset && offset <= t.code.end =>
        {
            Some(t.code)
        }
        _ => None,
    }
}
