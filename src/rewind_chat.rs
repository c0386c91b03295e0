//! `flemmad rewind FILE --to ID --chat`: the chat cut back to just before the `@Assistant:`
//! message that made the call `ID`, the whole chat as it was kept first as an archive
//! (`crate::chat_archive`, kind [`KIND`]) where no tool can write; and `--undo-chat`, which
//! puts the last cut back, byte for byte, while the chat is still as the cut left it.

use std::path::{Path, PathBuf};

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

fn refuse_when_driven(path: &Path) -> Result<(), String> {
    match crate::driver_lock::DriverLock::owner(path) {
        Some(owner) => Err(format!(
            "{} (pid {}) is writing this chat; nothing was changed: cancel it or let it stop, then try again",
            owner.role, owner.pid
        )),
        None => Ok(()),
    }
}

/// Cuts the chat at `path` (whose text is `text`) at `cut`, after keeping the whole chat as an
/// archive; returns the archive's path.
pub fn cut(path: &Path, text: &str, cut: &Cut) -> Result<PathBuf, String> {
    refuse_when_driven(path)?;
    let archive = crate::chat_archive::write(KIND, path, &format!("at{}", cut.at), text)
        .map_err(|error| format!("cannot keep the cut part ({error:#}); nothing was changed"))?;
    match crate::fsutil::replace_chat_if_unchanged(path, text, &text[..cut.at]) {
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

/// The offset of the cut an archive records in its name (`…-at<offset>.chat`).
fn cut_of(archive: &Path) -> Option<usize> {
    let stem = archive.file_stem()?.to_str()?;
    stem.rsplit_once("-at")?.1.parse().ok()
}

/// Puts the chat at `path` back as it was before its last cut; returns the archive it came
/// from (removed: the chat holds all of it again).
pub fn undo(path: &Path) -> Result<PathBuf, String> {
    refuse_when_driven(path)?;
    let archive = crate::chat_archive::list(KIND, path).pop().ok_or(
        "this chat was never cut back by `flemmad rewind --chat` (or every cut was undone)",
    )?;
    let whole = std::fs::read_to_string(&archive)
        .map_err(|error| format!("cannot read the archive {}: {error}", archive.display()))?;
    let kept = cut_of(&archive)
        .and_then(|at| whole.get(..at))
        .ok_or_else(|| format!("{} is not an archive of a cut", archive.display()))?;
    let text = crate::fsutil::read_chat(path).map_err(|error| format!("{error:#}"))?;
    if text != kept {
        return Err(format!(
            "the chat changed since it was cut back, so putting the cut part back would lose that; nothing was changed. The whole chat as it was before the cut is in {}: copy from it what you need",
            archive.display()
        ));
    }
    match crate::fsutil::replace_chat_if_unchanged(path, &text, &whole) {
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
