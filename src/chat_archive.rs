//! Copies of a chat's text kept where no tool of any chat can write:
//! `$XDG_STATE_HOME/flemma/<kind>/<chat key>/<name>.chat` (flemmad's state folder is
//! read-only inside every sandbox, docs/security.md), so that putting one back never brings
//! back text a tool could have changed. A kind is what made them (`rewound`: the text a
//! `flemmad rewind --chat` cut off). Each archive is a whole, valid `.chat`, written once.
//!
//! Written to serve any command that moves chat text out of the chat (compaction's archives
//! are the same idea, `src/cli/compact.rs`).

use std::path::{Path, PathBuf};

use crate::user_dirs::UserDirs;

/// The folder of `kind`'s archives of `chat` (`None` without a state folder).
pub fn dir(dirs: &UserDirs, kind: &str, chat: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(chat).unwrap_or_else(|_| chat.to_owned());
    Some(
        dirs.flemma_state()?
            .join(kind)
            .join(crate::user_dirs::chat_key(&absolute)),
    )
}

/// Keeps `text` as a new archive of `kind` for `chat`, named `<nanoseconds>[-<tag>].chat`
/// (the newest sorts last); returns its path.
pub fn write(
    dirs: &UserDirs,
    kind: &str,
    chat: &Path,
    tag: &str,
    text: &str,
) -> anyhow::Result<PathBuf> {
    let Some(dir) = dir(dirs, kind, chat) else {
        anyhow::bail!("no state folder to keep the archive in (set HOME or XDG_STATE_HOME)");
    };
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", dir.display()))?;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = if tag.is_empty() {
        format!("{nanos:020}.chat")
    } else {
        format!("{nanos:020}-{tag}.chat")
    };
    let path = dir.join(name);
    crate::fsutil::write_atomic(&path, text)?;
    Ok(path)
}

/// `kind`'s archives of `chat`, oldest first.
pub fn list(dirs: &UserDirs, kind: &str, chat: &Path) -> Vec<PathBuf> {
    let Some(dir) = dir(dirs, kind, chat) else {
        return Vec::new();
    };
    let mut archives: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "chat"))
        .collect();
    archives.sort();
    archives
}
