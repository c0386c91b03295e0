//! The user's trust decisions and flemmad's record of chats' tool calls, on disk
//! (`docs/security.md`).
//!
//! * **Trusted folders** (`flemmad trust DIR`, the "Trust this folder" code action): one
//!   absolute path a line in `$XDG_CONFIG_HOME/flemma/trusted-folders` (`0600`), read by
//!   [`crate::chat::config_input`] into every analysis. A file that others may write, or that
//!   another user owns, is not used.
//! * **Call records**: what flemmad saw of an untrusted chat's tool calls (a call streamed from
//!   the model; a call approved through flemmad), one JSON object a line in
//!   `$XDG_STATE_HOME/flemma/calls/<sha-256 of the chat's path>.jsonl` (`0600`, directory
//!   `0700`). They live outside the chat's folder, so that whoever writes the chat (its author,
//!   or a model whose sandbox may write the project) cannot write them; a call is named by its
//!   id and a SHA-256 of its tool name and canonical input, so a record approves that call
//!   and no other.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::user_dirs::{UserDirs, chat_key, hex};
use anyhow::Context as _;
use flemma_config::{CallHistory, CallRef, Seen};
use rustix::fs::{Mode, OFlags};
use serde_json::{Value, json};

/// How much of a call record is read (a chat with thousands of calls stays far below).
const RECORDS_CAP: u64 = 16 << 20;
/// How much of the trusted-folders file is read.
const FOLDERS_CAP: u64 = 1 << 20;

/// `$XDG_CONFIG_HOME/flemma/trusted-folders` (`~/.config/flemma/trusted-folders`).
pub fn folders_file(dirs: &UserDirs) -> Option<PathBuf> {
    dirs.flemma_config().map(|dir| dir.join("trusted-folders"))
}

/// `$XDG_STATE_HOME/flemma/calls` (`~/.local/state/flemma/calls`).
fn records_dir(dirs: &UserDirs) -> Option<PathBuf> {
    dirs.flemma_state().map(|dir| dir.join("calls"))
}

/// Opens `path` for reading without following a symlink at its end.
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(std::fs::File::from(fd))
}

/// The folders trusted with `flemmad trust`, and a warning when the file is not used.
pub fn read_folders(dirs: &UserDirs) -> (Vec<PathBuf>, Option<String>) {
    let Some(path) = folders_file(dirs) else {
        return (Vec::new(), None);
    };
    read_folders_at(&path)
}

fn read_folders_at(path: &Path) -> (Vec<PathBuf>, Option<String>) {
    let file = match open_no_follow(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), None),
        Err(error) => {
            return (
                Vec::new(),
                Some(format!(
                    "cannot read the trusted folders in {}: {error}; no folder is trusted (it must be a regular file, not a link)",
                    path.display()
                )),
            );
        }
    };
    if let Ok(metadata) = file.metadata() {
        let others_write = metadata.mode() & 0o022 != 0;
        let not_ours = metadata.uid() != rustix::process::getuid().as_raw();
        if others_write || not_ours || !metadata.is_file() {
            return (
                Vec::new(),
                Some(format!(
                    "the trusted folders in {} are not used: the file {}; fix it with `chmod 600 {}` (as its owner), or remove it",
                    path.display(),
                    if not_ours {
                        "belongs to another user"
                    } else if others_write {
                        "may be written by other users"
                    } else {
                        "is not a regular file"
                    },
                    path.display()
                )),
            );
        }
    }
    let mut text = String::new();
    if let Err(error) = file.take(FOLDERS_CAP).read_to_string(&mut text) {
        return (
            Vec::new(),
            Some(format!("cannot read {}: {error}", path.display())),
        );
    }
    let folders = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .collect();
    (folders, None)
}

/// The spellings under which `dir` is trusted: its absolute path (`.` and `..` removed) and,
/// when links lead elsewhere, its real path.
fn spellings(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let absolute = std::path::absolute(dir)
        .with_context(|| format!("cannot make {} an absolute path", dir.display()))?;
    let lexical = flemma_protocol::document::normalize(&absolute);
    let mut out = vec![lexical.clone()];
    if let Ok(real) = std::fs::canonicalize(&lexical)
        && real != lexical
    {
        out.push(real);
    }
    Ok(out)
}

/// Trusts the folder `dir` (and everything below it): adds it to the trusted folders. Returns
/// the spellings added (none when it was trusted already).
pub fn trust_folder(dirs: &UserDirs, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let metadata =
        std::fs::metadata(dir).with_context(|| format!("cannot trust {}", dir.display()))?;
    if !metadata.is_dir() {
        anyhow::bail!(
            "{} is not a folder: flemmad trusts folders (every chat below one); give the folder that holds the chat",
            dir.display()
        );
    }
    let path = folders_file(dirs)
        .context("cannot tell where the trusted folders live: set HOME (or XDG_CONFIG_HOME)")?;
    let (mut folders, warning) = read_folders_at(&path);
    if let Some(warning) = warning
        && path.exists()
    {
        anyhow::bail!("{warning}");
    }
    let mut added = Vec::new();
    for spelling in spellings(dir)? {
        if !folders.contains(&spelling) {
            folders.push(spelling.clone());
            added.push(spelling);
        }
    }
    if !added.is_empty() {
        write_folders(&path, &folders)?;
    }
    Ok(added)
}

/// Stops trusting `dir`: removes it (every spelling of it) from the trusted folders. Returns
/// what was removed.
pub fn untrust_folder(dirs: &UserDirs, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let path = folders_file(dirs)
        .context("cannot tell where the trusted folders live: set HOME (or XDG_CONFIG_HOME)")?;
    let (folders, warning) = read_folders_at(&path);
    if let Some(warning) = warning {
        anyhow::bail!("{warning}");
    }
    let absolute = std::path::absolute(dir)
        .with_context(|| format!("cannot make {} an absolute path", dir.display()))?;
    let mut gone = vec![flemma_protocol::document::normalize(&absolute)];
    if let Ok(real) = std::fs::canonicalize(dir) {
        gone.push(real);
    }
    let (removed, kept): (Vec<PathBuf>, Vec<PathBuf>) = folders
        .into_iter()
        .partition(|folder| gone.contains(folder));
    if !removed.is_empty() {
        write_folders(&path, &kept)?;
    }
    Ok(removed)
}

fn write_folders(path: &Path, folders: &[PathBuf]) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    create_private_dir(dir)?;
    let mut text = String::from(
        "# Folders whose chats flemmad trusts (their frontmatter may widen what a chat may do).\n# Managed by `flemmad trust`; one absolute path a line. See docs/security.md.\n",
    );
    for folder in folders {
        text.push_str(&folder.display().to_string());
        text.push('\n');
    }
    crate::fsutil::write_atomic(path, &text)?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// The record file of the chat at `chat` (its path made absolute and lexical).
fn records_file(dir: &Path, chat: &Path) -> PathBuf {
    dir.join(format!("{}.jsonl", chat_key(chat)))
}

/// A call's fingerprint: SHA-256 of its tool name and canonical input.
fn fingerprint(name: &str, input: &Value) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(name.as_bytes());
    context.update(&[0]);
    context.update(flemma_syntax::write::canonical_json(input).as_bytes());
    hex(context.finish().as_ref())
}

/// flemmad's record of chats' tool calls (see the module documentation). As a
/// [`CallHistory`] it answers from the chat's record as it is on disk (read again when the
/// file changed: the language server's analyses); [`CallRecords::load`] reads it once (an
/// engine's input).
#[derive(Debug, Clone)]
pub struct CallRecords {
    dir: Option<PathBuf>,
    /// The record last read.
    last: Arc<Mutex<Option<LastRead>>>,
}

/// A record as read, with what says whether the file changed since.
#[derive(Debug)]
struct LastRead {
    file: PathBuf,
    len: u64,
    modified: Option<std::time::SystemTime>,
    calls: Arc<LoadedCalls>,
}

/// One chat's records, read once.
#[derive(Debug, Default)]
pub struct LoadedCalls {
    seen: std::collections::HashSet<(Seen, String, String)>,
}

impl CallHistory for LoadedCalls {
    fn saw(&self, _chat: &Path, seen: Seen, call: CallRef<'_>) -> bool {
        self.seen.contains(&(
            seen,
            call.tool_id.to_owned(),
            fingerprint(call.name, call.input),
        ))
    }
}

impl CallRecords {
    /// The records under `$XDG_STATE_HOME/flemma/calls`.
    pub fn for_dirs(dirs: &UserDirs) -> Self {
        Self {
            dir: records_dir(dirs),
            last: Arc::default(),
        }
    }

    /// What flemmad saw of the chat at `chat`'s calls (empty when nothing was recorded or the
    /// record cannot be read: its calls then wait for approval, the safe side).
    pub fn load(&self, chat: &Path) -> LoadedCalls {
        let mut loaded = LoadedCalls::default();
        let Some(dir) = &self.dir else {
            return loaded;
        };
        let path = records_file(dir, chat);
        let Ok(file) = open_no_follow(&path) else {
            return loaded;
        };
        if file
            .metadata()
            .is_ok_and(|m| !m.is_file() || m.uid() != rustix::process::getuid().as_raw())
        {
            tracing::warn!(path = %path.display(), "a call record that is not the user's regular file is not used");
            return loaded;
        }
        let mut text = String::new();
        if file.take(RECORDS_CAP).read_to_string(&mut text).is_err() {
            return loaded;
        }
        for line in text.lines() {
            let Ok(record) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let field = |key: &str| record.get(key).and_then(Value::as_str);
            if let (Some(seen), Some(tool), Some(digest)) = (
                field("seen").and_then(Seen::from_name),
                field("toolId"),
                field("digest"),
            ) {
                loaded
                    .seen
                    .insert((seen, tool.to_owned(), digest.to_owned()));
            }
        }
        loaded
    }

    /// Records that flemmad saw the call `tool_id` (`name` with `input`) of the chat at `chat`
    /// the way `seen` says.
    pub fn record(
        &self,
        chat: &Path,
        seen: Seen,
        tool_id: &str,
        name: &str,
        input: &Value,
    ) -> anyhow::Result<()> {
        let dir = self
            .dir
            .as_ref()
            .context("cannot tell where flemmad keeps its records: set HOME (or XDG_STATE_HOME)")?;
        create_private_dir(dir)?;
        let path = records_file(dir, chat);
        let fd = rustix::fs::open(
            &path,
            OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .with_context(|| format!("cannot open {}", path.display()))?;
        let mut file = std::fs::File::from(fd);
        let line = json!({
            "seen": seen.as_str(),
            "toolId": tool_id,
            "digest": fingerprint(name, input),
            "chat": flemma_protocol::document::normalize(chat).display().to_string(),
        });
        writeln!(file, "{line}").with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

impl CallHistory for CallRecords {
    fn saw(&self, chat: &Path, seen: Seen, call: CallRef<'_>) -> bool {
        let Some(dir) = &self.dir else {
            return false;
        };
        let path = records_file(dir, chat);
        let Ok(metadata) = std::fs::symlink_metadata(&path) else {
            return false;
        };
        let (len, modified) = (metadata.len(), metadata.modified().ok());
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let loaded = match &*last {
            Some(read) if read.file == path && read.len == len && read.modified == modified => {
                read.calls.clone()
            }
            _ => {
                let calls = Arc::new(self.load(chat));
                *last = Some(LastRead {
                    file: path,
                    len,
                    modified,
                    calls: calls.clone(),
                });
                calls
            }
        };
        loaded.saw(chat, seen, call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_approves_that_call_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let records = CallRecords {
            dir: Some(dir.path().join("calls")),
            last: Arc::default(),
        };
        let chat = Path::new("/chats/x/../talk.chat");
        let input = json!({"command": "ls", "b": 1});
        records
            .record(chat, Seen::Approved, "t1", "bash", &input)
            .unwrap();
        let call = |id, name, input| CallRef {
            tool_id: id,
            name,
            input,
        };
        let same_chat = Path::new("/chats/talk.chat");
        let reordered = json!({"b": 1, "command": "ls"});
        assert!(records.saw(same_chat, Seen::Approved, call("t1", "bash", &reordered)));
        assert!(!records.saw(same_chat, Seen::FromModel, call("t1", "bash", &input)));
        assert!(!records.saw(same_chat, Seen::Approved, call("t2", "bash", &input)));
        let other = json!({"command": "rm"});
        assert!(!records.saw(same_chat, Seen::Approved, call("t1", "bash", &other)));
        assert!(!records.saw(
            Path::new("/chats/other.chat"),
            Seen::Approved,
            call("t1", "bash", &input)
        ));
        let file = records_file(&dir.path().join("calls"), same_chat);
        let mode = std::fs::metadata(&file).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_folders_file_others_may_write_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trusted-folders");
        std::fs::write(&path, "# c\n/home/me/notes\nrelative\n").unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let (folders, warning) = read_folders_at(&path);
        assert_eq!(folders, [PathBuf::from("/home/me/notes")]);
        assert!(warning.is_none());
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        let (folders, warning) = read_folders_at(&path);
        assert!(folders.is_empty());
        assert!(
            warning.unwrap().contains("may be written by other users"),
            "the warning names the reason"
        );
    }
}
