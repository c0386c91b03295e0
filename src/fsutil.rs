//! File IO at the edge: reading chat files with clear errors; chat files written in place
//! behind a redo journal ([`replace_chat_if_unchanged`]); other files written atomically (a
//! temporary file in the same directory, fsync, rename; never truncate-and-write).

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::user_dirs::UserDirs;

/// Reads a chat file as UTF-8, with an error that names the file and the reason. A write of
/// flemmad's that a killed process left half done is finished first ([`recover_chat`]).
/// `dirs` are the user's folders (the journal is in their state folder).
pub fn read_chat(dirs: &UserDirs, path: &Path) -> anyhow::Result<String> {
    recover_chat(dirs, path);
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: it is not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Checks that `path` can be written the way [`write_atomic`] writes it: the file (when it
/// exists) is not read-only, and its directory takes a new file (a temporary file is created
/// and removed). Call it before work that is paid for (a provider request), so that a reply is
/// never lost for want of a writable file.
///
/// The file check reads the permission bits, so it holds even for root (who may write any
/// file): a file made read-only is one its owner wants left alone.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    check_not_read_only(path)?;
    let dir = dir_of(path);
    if std::fs::metadata(dir).is_ok_and(|metadata| metadata.permissions().readonly()) {
        anyhow::bail!(
            "cannot write {}: its directory {} is read-only; make it writable (chmod u+w {}) or move the chat to a writable directory",
            path.display(),
            dir.display(),
            dir.display()
        );
    }
    tempfile::Builder::new()
        .prefix(&format!("{}check-", flemma_tools::SCRATCH_PREFIX))
        .tempfile_in(dir)
        .map(drop)
        .map_err(|error| {
            anyhow::anyhow!(
                "cannot write {}: no new file can be created in its directory {} ({error}); make the directory writable or move the chat to a writable directory",
                path.display(),
                dir.display()
            )
        })
}

/// Refuses a file whose permission bits say nobody may write it (mode 444 and the like).
fn check_not_read_only(path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.permissions().readonly() => anyhow::bail!(
            "refusing to write {}: the file is read-only; make it writable (chmod u+w {}) if it should change",
            path.display(),
            path.display()
        ),
        _ => Ok(()),
    }
}

fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Writes `contents` to `path` atomically: temporary file in the same directory, fsync, rename.
/// The file's permissions are kept when it exists; a read-only file is refused (the rename
/// would replace it regardless of its mode).
pub fn write_atomic(path: &Path, contents: &str) -> anyhow::Result<()> {
    replace_if(path, contents, |_| true).map(|_| ())
}

fn replace_if(
    path: &Path,
    contents: &str,
    still_valid: impl Fn(Option<&[u8]>) -> bool,
) -> anyhow::Result<bool> {
    check_not_read_only(path)?;
    let dir = dir_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(flemma_tools::SCRATCH_PREFIX)
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(contents.as_bytes())
        .with_context(|| format!("cannot write a temporary file in {}", dir.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot flush a temporary file in {}", dir.display()))?;
    if let Ok(metadata) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), metadata.permissions());
    }
    let current = std::fs::read(path).ok();
    if !still_valid(current.as_deref()) {
        return Ok(false);
    }
    // Made read-only meanwhile (the reply streams for a while).
    check_not_read_only(path)?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot replace {}: {}", path.display(), e.error))?;
    if let Ok(dir_handle) = std::fs::File::open(dir) {
        let _ = dir_handle.sync_all();
    }
    Ok(true)
}

/// Replaces the chat at `path` with `contents` when it still holds `expected`, **in place**:
/// the same file (its inode) gets the bytes from the first one that differs, then is cut to
/// length and synced. In place, because a chat file is mounted read-only into the sandboxes of
/// its running tools, and a rename over it would undo that mount in all of them
/// (docs/security.md). A redo journal makes it as safe as a rename: what is about to be
/// written is first saved, synced, under `$XDG_STATE_HOME/flemma/journal/` (where no tool can
/// write), and a process killed halfway leaves the journal, which the next read of the chat
/// finishes ([`recover_chat`]). Returns whether it wrote.
pub fn replace_chat_if_unchanged(
    dirs: &UserDirs,
    path: &Path,
    expected: &str,
    contents: &str,
) -> anyhow::Result<bool> {
    replace_in_place(path, expected, contents, Journal::for_chat(dirs, path))
}

fn replace_in_place(
    path: &Path,
    expected: &str,
    contents: &str,
    journal: Option<Journal>,
) -> anyhow::Result<bool> {
    use std::io::Read as _;
    use std::os::unix::fs::FileExt as _;
    check_not_read_only(path)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {} to write it", path.display()))?;
    // How the file stood before it was read: an editor that writes it meanwhile (truncate and
    // write, no lock) changes its size or times, and is seen below.
    // (An editor that saves by renaming a new file over the chat leaves this one unlinked:
    // the path then names another file, seen below too.)
    let stamp = |file: &std::fs::File| {
        use std::os::unix::fs::MetadataExt as _;
        file.metadata().ok().map(|m| {
            (
                m.len(),
                m.modified().ok(),
                m.ctime(),
                m.ctime_nsec(),
                m.ino(),
            )
        })
    };
    let before = stamp(&file);
    let mut current = Vec::new();
    file.read_to_end(&mut current)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if current != expected.as_bytes() {
        return Ok(false);
    }
    let new = contents.as_bytes();
    let mut offset = current.iter().zip(new).take_while(|(a, b)| a == b).count();
    while !contents.is_char_boundary(offset) {
        offset -= 1;
    }
    if offset == current.len() && offset == new.len() {
        return Ok(true);
    }
    if let Some(journal) = &journal {
        journal.save(&current[..offset], &contents[offset..], new.len())?;
    }
    // The journal's fsync takes milliseconds: a write by someone else in that time would be
    // overwritten. Checked again just before writing, so that only microseconds are left
    // (an editor takes no lock; none can close the window entirely).
    let renamed_over = || {
        use std::os::unix::fs::MetadataExt as _;
        match (std::fs::metadata(path), &before) {
            (Ok(named), Some(stamp)) => named.ino() != stamp.4,
            (Ok(_), None) => false,
            // Deleted meanwhile: the driver's next read says so.
            (Err(_), _) => true,
        }
    };
    if stamp(&file) != before || renamed_over() {
        if let Some(journal) = journal {
            journal.done();
        }
        return Ok(false);
    }
    file.write_all_at(&new[offset..], offset as u64)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.set_len(new.len() as u64)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.sync_data()
        .with_context(|| format!("cannot flush {}", path.display()))?;
    if let Some(journal) = journal {
        journal.done();
    }
    Ok(true)
}

/// Writes the chat at `path` (whatever it holds) in place, as [`replace_chat_if_unchanged`].
pub fn write_chat(dirs: &UserDirs, path: &Path, contents: &str) -> anyhow::Result<()> {
    for _ in 0..3 {
        let current = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                std::fs::write(path, contents)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                return Ok(());
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        let Ok(current) = String::from_utf8(current) else {
            anyhow::bail!("cannot write {}: it is not UTF-8 text", path.display());
        };
        if replace_chat_if_unchanged(dirs, path, &current, contents)? {
            return Ok(());
        }
    }
    anyhow::bail!(
        "cannot write {}: another program keeps changing it; try again",
        path.display()
    )
}

/// Moves `file` into the folder `trash` (made `0700` when missing) as
/// `<seconds since the epoch>-<its name>` (a number added when that is taken), and returns its
/// new path. A trash on another file system gets a copy, synced, before the original is removed.
pub fn move_to_trash(file: &Path, trash: &Path) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context as _;
    use std::os::unix::fs::DirBuilderExt as _;
    let name = file
        .file_name()
        .with_context(|| format!("{} names no file", file.display()))?
        .to_string_lossy()
        .into_owned();
    if !file.is_file() {
        anyhow::bail!("{} is not a file that exists", file.display());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(trash)
        .with_context(|| format!("cannot make the trash folder {}", trash.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut target = trash.join(format!("{stamp}-{name}"));
    let mut n = 1;
    while target.exists() {
        n += 1;
        target = trash.join(format!("{stamp}-{n}-{name}"));
    }
    match std::fs::rename(file, &target) {
        Ok(()) => {}
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            std::fs::copy(file, &target).with_context(|| {
                format!("cannot copy {} to {}", file.display(), target.display())
            })?;
            std::fs::File::open(&target)?.sync_all()?;
            std::fs::remove_file(file)
                .with_context(|| format!("cannot remove {} after copying it", file.display()))?;
        }
        Err(error) => {
            return Err(error).with_context(|| {
                format!("cannot move {} to {}", file.display(), target.display())
            });
        }
    }
    Ok(target)
}

/// Finishes a chat write a killed process left half done: when the chat's journal exists and
/// the file still holds the part the write kept, the rest is written again; a file someone
/// changed since is left as it is (with a warning). Errors are logged, never raised: the read
/// that follows reports what is wrong with the file.
pub fn recover_chat(dirs: &UserDirs, path: &Path) {
    let Some(journal) = Journal::for_chat(dirs, path) else {
        return;
    };
    if let Err(error) = journal.redo(path) {
        tracing::warn!(%error, chat = %path.display(), "an unfinished write of the chat could not be finished");
    }
}

/// The redo journal of one chat's in-place write.
struct Journal {
    path: std::path::PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct JournalEntry {
    /// SHA-256 (hex) of the bytes before `offset`, which the write kept.
    kept: String,
    offset: u64,
    /// The bytes written from `offset` (the rest of the new text).
    tail: String,
    /// The new text's length.
    length: u64,
}

impl Journal {
    fn for_chat(dirs: &UserDirs, chat: &Path) -> Option<Self> {
        let dir = dirs.flemma_state()?.join("journal");
        Some(Self::in_dir(&dir, chat))
    }

    fn in_dir(dir: &Path, chat: &Path) -> Self {
        Self {
            path: dir.join(format!("{}.json", crate::user_dirs::chat_key(chat))),
        }
    }

    fn save(&self, kept: &[u8], tail: &str, length: usize) -> anyhow::Result<()> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let entry = JournalEntry {
            kept: sha256_hex(kept),
            offset: kept.len() as u64,
            tail: tail.to_owned(),
            length: length as u64,
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&self.path)
            .with_context(|| format!("cannot write the journal {}", self.path.display()))?;
        serde_json::to_writer(&mut file, &entry)?;
        file.sync_data()
            .with_context(|| format!("cannot flush the journal {}", self.path.display()))?;
        Ok(())
    }

    fn done(self) {
        let _ = std::fs::remove_file(&self.path);
    }

    fn redo(&self, chat: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::FileExt as _;
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        let entry: JournalEntry = match serde_json::from_slice(&text) {
            Ok(entry) => entry,
            Err(_) => {
                // Killed while the journal itself was written: the chat was not touched yet.
                std::fs::remove_file(&self.path)?;
                return Ok(());
            }
        };
        let current = std::fs::read(chat)?;
        let offset = usize::try_from(entry.offset)?;
        let finished = current.len() as u64 == entry.length
            && current.get(offset..) == Some(entry.tail.as_bytes());
        if !finished {
            if current.len() >= offset && sha256_hex(&current[..offset]) == entry.kept {
                let file = std::fs::OpenOptions::new().write(true).open(chat)?;
                file.write_all_at(entry.tail.as_bytes(), entry.offset)?;
                file.set_len(entry.length)?;
                file.sync_data()?;
                tracing::info!(chat = %chat.display(), "finished a write a killed flemmad left half done");
            } else {
                tracing::warn!(chat = %chat.display(), "an unfinished write of flemmad's was dropped: the chat changed since");
            }
        }
        std::fs::remove_file(&self.path)?;
        Ok(())
    }
}

/// The SHA-256 of `bytes` in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn a_chat_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let chat = dir.path().join("a.chat");
        std::fs::write(&chat, "@You:\nhé\n").unwrap();
        let inode = std::fs::metadata(&chat).unwrap().ino();
        let journal = || Some(Journal::in_dir(&dir.path().join("journal"), &chat));
        assert!(replace_in_place(&chat, "@You:\nhé\n", "@You:\nhè, là\n", journal()).unwrap());
        assert_eq!(std::fs::read_to_string(&chat).unwrap(), "@You:\nhè, là\n");
        assert_eq!(
            std::fs::metadata(&chat).unwrap().ino(),
            inode,
            "the same file"
        );
        assert!(!replace_in_place(&chat, "@You:\nold\n", "x", journal()).unwrap());
        assert!(replace_in_place(&chat, "@You:\nhè, là\n", "@You:\n", journal()).unwrap());
        assert_eq!(std::fs::read_to_string(&chat).unwrap(), "@You:\n");
        assert!(!journal().unwrap().path.exists(), "no journal once written");
    }

    #[test]
    fn a_write_a_killed_process_left_is_finished_by_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let chat = dir.path().join("a.chat");
        let journal = Journal::in_dir(&dir.path().join("journal"), &chat);
        // The journal was saved and the write cut after two bytes of its tail.
        std::fs::write(&chat, "@You:\nhi\n\n@Assistant:\nHe").unwrap();
        let (kept, tail) = ("@You:\nhi\n", "\n@Assistant:\nHello there.\n");
        journal
            .save(kept.as_bytes(), tail, kept.len() + tail.len())
            .unwrap();
        journal.redo(&chat).unwrap();
        assert_eq!(
            std::fs::read_to_string(&chat).unwrap(),
            "@You:\nhi\n\n@Assistant:\nHello there.\n"
        );
        assert!(!journal.path.exists());
        // A chat someone changed since keeps their text.
        std::fs::write(&chat, "@You:\nsomething else\n").unwrap();
        journal.save(b"@You:\nhi\n", "more", 13).unwrap();
        journal.redo(&chat).unwrap();
        assert_eq!(
            std::fs::read_to_string(&chat).unwrap(),
            "@You:\nsomething else\n"
        );
        assert!(!journal.path.exists());
    }
}
