//! File IO at the edge: reading chat files with clear errors, and atomic writes (a temporary file
//! in the same directory, fsync, rename; never truncate-and-write).

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

/// Reads a chat file as UTF-8, with an error that names the file and the reason.
pub fn read_chat(path: &Path) -> anyhow::Result<String> {
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
        .prefix(".flemmad-check-")
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

/// Like [`write_atomic`], but only when the file still holds `expected` right before the rename
/// (someone may have written it since it was read). Returns whether it replaced the file.
pub fn replace_if_unchanged(path: &Path, expected: &str, contents: &str) -> anyhow::Result<bool> {
    replace_if(path, contents, |current| {
        current == Some(expected.as_bytes())
    })
}

fn replace_if(
    path: &Path,
    contents: &str,
    still_valid: impl Fn(Option<&[u8]>) -> bool,
) -> anyhow::Result<bool> {
    check_not_read_only(path)?;
    let dir = dir_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(".flemmad-")
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
