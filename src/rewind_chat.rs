//! `flemmad rewind FILE --to ID --chat`: the chat cut back to just before the `@Assistant:`
//! message that made the call `ID`, the whole chat as it was kept first as an archive
//! (`crate::chat_archive`, kind [`KIND`]) where no tool can write; and `--undo-chat`, which
//! puts the last cut back, byte for byte, while the chat is still as the cut left it.

use std::path::{Path, PathBuf};

use crate::user_dirs::UserDirs;

/// The archives' kind (`$XDG_STATE_HOME/flemma/rewound/`).
const KIND: &str = "rewound";

/// Where the chat would be cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The byte offset: the chat keeps `text[..at]`.
    pub at: usize,
    /// The 1-based line of the `@Assistant:` message cut off.
    pub line: usize,
    /// How many messages go.
    pub messages: usize,
}

/// Where `text` is cut to go back before the call `tool_id`: the start of the `@Assistant:`
/// message that holds it.
pub fn cut_point(text: &str, tool_id: &str) -> Result<Cut, String> {
    let doc = flemma_syntax::parse(text.to_owned());
    let messages = doc.messages();
    let index = messages
        .iter()
        .position(|m| m.tool_uses().any(|(_, tool_use)| tool_use.id == tool_id))
        .ok_or_else(|| format!("the chat has no tool call `{tool_id}`"))?;
    let at = messages[index].range.start;
    Ok(Cut {
        at,
        line: text[..at].matches('\n').count() + 1,
        messages: messages.len() - index,
    })
}

fn refuse_when_driven(dirs: &UserDirs, path: &Path) -> Result<(), String> {
    match crate::driver_lock::DriverLock::owner(dirs, path) {
        Some(owner) => Err(format!(
            "{} (pid {}) is writing this chat; nothing was changed: cancel it or let it stop, then try again",
            owner.role, owner.pid
        )),
        None => Ok(()),
    }
}

/// The whole chat (`text`) kept as the archive of `cut` before it is made.
fn keep(dirs: &UserDirs, path: &Path, text: &str, cut: &Cut) -> Result<PathBuf, String> {
    crate::chat_archive::write(dirs, KIND, path, &format!("at{}", cut.at), text)
        .map_err(|error| format!("cannot keep the cut part ({error:#}); nothing was changed"))
}

/// Cuts the chat at `path` (whose text is `text`) at `cut`, after keeping the whole chat as an
/// archive; returns the archive's path.
pub fn cut(dirs: &UserDirs, path: &Path, text: &str, cut: &Cut) -> Result<PathBuf, String> {
    refuse_when_driven(dirs, path)?;
    let archive = keep(dirs, path, text, cut)?;
    match crate::fsutil::replace_chat_if_unchanged(dirs, path, text, &text[..cut.at]) {
        Ok(true) => Ok(archive),
        Ok(false) => {
            let _ = std::fs::remove_file(&archive);
            Err("the chat changed while it was cut; nothing was changed: try again".to_owned())
        }
        Err(error) => {
            let _ = std::fs::remove_file(&archive);
            Err(format!(
                "cannot write the chat ({error:#}); nothing was changed"
            ))
        }
    }
}

/// A cut to write through a document's session (an editor with the chat open gets it as an
/// edit): the whole text as it was is kept first; [`Prepared::applied`] tells, on the text
/// after the edit, whether the cut was taken, and the archive goes when it was not.
pub struct Prepared {
    pub cut: Cut,
    pub archive: PathBuf,
    /// What stays before the cut.
    kept: String,
    /// What the cut removes.
    removed: String,
}

impl Prepared {
    /// The edit that cuts the chat.
    pub fn edit(&self) -> flemma_syntax::TextEdit {
        flemma_syntax::TextEdit {
            range: flemma_syntax::TextRange::new(self.cut.at, self.cut.at + self.removed.len()),
            new_text: String::new(),
        }
    }

    /// Whether `current` (the text after the edit) took the cut: what stood before it is
    /// unchanged and what it removed is gone (what was typed after it meanwhile stays). The
    /// archive is removed when it did not.
    pub fn applied(&self, current: &str) -> bool {
        let taken = current.get(..self.cut.at) == Some(self.kept.as_str())
            && !current[self.cut.at..].starts_with(&self.removed);
        if !taken {
            let _ = std::fs::remove_file(&self.archive);
        }
        taken
    }

    /// The event that says it happened.
    pub fn event(&self, tool_id: &str) -> flemma_protocol::event::ChatRewound {
        flemma_protocol::event::ChatRewound {
            tool_id: tool_id.to_owned(),
            line: self.cut.line as u64,
            messages: self.cut.messages as u64,
            archive: self.archive.display().to_string(),
        }
    }
}

/// Prepares the cut of the chat at `path` (whose text is `text`) before the call `tool_id`:
/// the whole text kept as an archive first.
pub fn prepare(
    dirs: &UserDirs,
    path: &Path,
    text: &str,
    tool_id: &str,
) -> Result<Prepared, String> {
    let cut = cut_point(text, tool_id)?;
    let archive = keep(dirs, path, text, &cut)?;
    Ok(Prepared {
        archive,
        kept: text[..cut.at].to_owned(),
        removed: text[cut.at..].to_owned(),
        cut,
    })
}

/// What `flemmad rewind` says of a cut: "the chat from line …".
pub fn describe(tool_id: &str, line: u64, messages: u64) -> String {
    format!(
        "the chat from line {line} (the `@Assistant:` message that made `{tool_id}`, and the {} message{} after it)",
        messages - 1,
        if messages == 2 { "" } else { "s" }
    )
}

/// The line the editors and `flemmad rewind` show once a cut is written.
pub fn notice(event: &flemma_protocol::event::ChatRewound) -> String {
    format!(
        "cut {}; the whole chat as it was is kept in {}",
        describe(&event.tool_id, event.line, event.messages),
        event.archive
    )
}

/// Why a rewind changed nothing: the files `changed` since the conversation's last call, and
/// how to overwrite them (`again`).
pub fn changed_since(changed: &[String], again: &str) -> String {
    format!(
        "nothing was changed: {} changed since the conversation's last call ({}); look at them, then {again} to overwrite them",
        if changed.len() == 1 {
            "this file was"
        } else {
            "these files were"
        },
        changed.join(", ")
    )
}

/// The one line `flemma/rewind` answers with: what was (would be) put back and cut, or why
/// nothing was changed.
pub fn summary(
    tool_id: &str,
    result: &flemma_protocol::engine::RewindResult,
    cut: Option<&flemma_protocol::engine::ChatCut>,
) -> String {
    if result.refused {
        return changed_since(&result.changed_since, "rewind again with force");
    }
    let would = if result.dry_run { "would " } else { "" };
    let mut said = Vec::new();
    let files = result.restored.len() + result.removed.len();
    if files > 0 {
        said.push(format!(
            "{would}put back {files} file{} as before `{tool_id}` ({} restored, {} removed)",
            if files == 1 { "" } else { "s" },
            result.restored.len(),
            result.removed.len()
        ));
    }
    if let Some(cut) = cut {
        said.push(format!(
            "{} {}",
            if result.dry_run {
                "would cut"
            } else {
                "cutting"
            },
            describe(tool_id, cut.line, cut.messages)
        ));
    }
    if said.is_empty() {
        return format!("the files are already as they were before `{tool_id}`");
    }
    said.join("; ")
}

/// The offset of the cut an archive records in its name (`…-at<offset>.chat`).
fn cut_of(archive: &Path) -> Option<usize> {
    let stem = archive.file_stem()?.to_str()?;
    stem.rsplit_once("-at")?.1.parse().ok()
}

/// Puts the chat at `path` back as it was before its last cut; returns the archive it came
/// from (removed: the chat holds all of it again).
pub fn undo(dirs: &UserDirs, path: &Path) -> Result<PathBuf, String> {
    refuse_when_driven(dirs, path)?;
    let archive = crate::chat_archive::list(dirs, KIND, path).pop().ok_or(
        "this chat was never cut back by `flemmad rewind --chat` (or every cut was undone)",
    )?;
    let whole = std::fs::read_to_string(&archive)
        .map_err(|error| format!("cannot read the archive {}: {error}", archive.display()))?;
    let kept = cut_of(&archive)
        .and_then(|at| whole.get(..at))
        .ok_or_else(|| format!("{} is not an archive of a cut", archive.display()))?;
    let text = crate::fsutil::read_chat(dirs, path).map_err(|error| format!("{error:#}"))?;
    if text != kept {
        return Err(format!(
            "the chat changed since it was cut back, so putting the cut part back would lose that; nothing was changed. The whole chat as it was before the cut is in {}: copy from it what you need",
            archive.display()
        ));
    }
    match crate::fsutil::replace_chat_if_unchanged(dirs, path, &text, &whole) {
        Ok(true) => {}
        Ok(false) => return Err("the chat changed meanwhile; nothing was changed".to_owned()),
        Err(error) => return Err(format!("cannot write the chat ({error:#})")),
    }
    if let Err(error) = std::fs::remove_file(&archive) {
        tracing::warn!(archive = %archive.display(), %error, "cannot remove an undone archive");
    }
    Ok(archive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cut_is_at_the_answer_that_made_the_call() {
        let text = "@You:\nGo.\n\n@Assistant:\nOk.\n\n**Tool Use:** `bash` (`b1`)\n```json\n{\"command\": \"true\"}\n```\n\n@You:\n**Tool Result:** `b1`\n```\n```\n";
        let cut = cut_point(text, "b1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&text[..cut.at], "@You:\nGo.\n\n");
        assert_eq!((cut.line, cut.messages), (4, 2));
        assert!(cut_point(text, "nope").is_err());
        assert_eq!(cut_of(Path::new("/s/00012-at42.chat")), Some(42));
        assert_eq!(cut_of(Path::new("/s/00012.chat")), None);
    }
}
