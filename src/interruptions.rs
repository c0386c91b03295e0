//! What a driver leaves for the next one when it does not end cleanly (killed, or its writes
//! failed): that it was streaming a reply into the chat, why it stopped writing the chat,
//! when its write failed, and the foreground tool calls it started. The next driver's engine recovers with it (`flemma_engine::Recovery`):
//! a reply cut off by a failed write is marked as such, not as "the process ended", and a
//! call that was running waits for the user's approval again instead of running twice
//! (docs/engine.md, "Recovery").
//!
//! One record per chat, in `$XDG_STATE_HOME/flemma/interrupted/<chat key>.json` (where no tool
//! can write), and in this process's memory: when the disk that refused the chat refuses the
//! record too (a full disk), a daemon still knows. A driver that ends cleanly (everything it
//! did is written) removes the record.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use flemma_engine::Recovery;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    #[serde(default)]
    reply_streaming: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_failed: Option<String>,
    #[serde(default)]
    started_calls: Vec<String>,
}

impl From<Record> for Recovery {
    fn from(record: Record) -> Self {
        Recovery {
            reply_streaming: record.reply_streaming,
            write_failed: record.write_failed,
            started_calls: record.started_calls,
        }
    }
}

/// The records of the drivers of one owner: on disk under `$XDG_STATE_HOME/flemma/interrupted`
/// and in memory, by chat. Clones share the memory.
#[derive(Debug, Clone, Default)]
pub struct Interruptions {
    /// `$XDG_STATE_HOME/flemma/interrupted` (`None` without a state folder: memory only).
    dir: Option<PathBuf>,
    records: Arc<Mutex<HashMap<PathBuf, Record>>>,
}

impl Interruptions {
    /// The records of the user whose folders are `dirs`.
    pub fn for_dirs(dirs: &crate::user_dirs::UserDirs) -> Self {
        Self {
            dir: dirs.flemma_state().map(|dir| dir.join("interrupted")),
            records: Arc::default(),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Record>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn file_of(&self, chat: &Path) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{}.json", crate::user_dirs::chat_key(chat))))
    }

    fn read_file(&self, chat: &Path) -> Option<Record> {
        let text = std::fs::read(self.file_of(chat)?).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// What the last driver of `chat` left (nothing when it ended cleanly).
    pub fn recovery(&self, chat: &Path) -> Recovery {
        let kept = self.memory().get(chat).cloned();
        kept.or_else(|| self.read_file(chat))
            .unwrap_or_default()
            .into()
    }

    /// Changes `chat`'s record and saves it (in memory always, on disk when the disk takes it).
    fn update(&self, chat: &Path, change: impl FnOnce(&mut Record)) {
        let record = {
            let mut records = self.memory();
            let record = match records.get_mut(chat) {
                Some(record) => record,
                None => records
                    .entry(chat.to_owned())
                    .or_insert(self.read_file(chat).unwrap_or_default()),
            };
            change(record);
            record.clone()
        };
        let Some(file) = self.file_of(chat) else {
            return;
        };
        let saved = file
            .parent()
            .map_or(Ok(()), |dir| {
                use std::os::unix::fs::DirBuilderExt as _;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
            })
            .map_err(anyhow::Error::from)
            .and_then(|()| {
                let text = serde_json::to_string(&record)?;
                crate::fsutil::write_atomic(&file, &text)
            });
        if let Err(error) = saved {
            tracing::warn!(chat = %chat.display(), "cannot save what the driver leaves for the next one ({error:#}); this process keeps it");
        }
    }

    /// A reply is about to stream into `chat`. Recorded until the driver ends cleanly: a final
    /// `@Assistant:` message is a cut reply only when the process writing it did not.
    pub fn reply_started(&self, chat: &Path) {
        self.update(chat, |record| record.reply_streaming = true);
    }

    /// A foreground tool call of `chat` is about to start.
    pub fn call_started(&self, chat: &Path, tool_id: &str) {
        self.update(chat, |record| {
            if !record.started_calls.iter().any(|id| id == tool_id) {
                record.started_calls.push(tool_id.to_owned());
            }
        });
    }

    /// Writing `chat` failed with `reason`: the driver stops writing it.
    pub fn write_failed(&self, chat: &Path, reason: &str) {
        self.update(chat, |record| record.write_failed = Some(reason.to_owned()));
    }

    /// The driver of `chat` ended cleanly: everything it did is written, nothing to recover.
    pub fn clear(&self, chat: &Path) {
        self.memory().remove(chat);
        if let Some(file) = self.file_of(chat) {
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    tracing::warn!(file = %file.display(), %error, "cannot remove a recovery record");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_live_in_their_owner_and_on_disk() {
        let state = tempfile::tempdir().unwrap();
        let dirs = crate::user_dirs::UserDirs {
            state: Some(state.path().to_owned()),
            ..Default::default()
        };
        let chat = Path::new("/p/c.chat");
        let owner = Interruptions::for_dirs(&dirs);
        owner.reply_started(chat);
        owner.call_started(chat, "t1");
        // Another owner (another process) reads the record from disk.
        let other = Interruptions::for_dirs(&dirs);
        let recovery = other.recovery(chat);
        assert!(recovery.reply_streaming);
        assert_eq!(recovery.started_calls, vec!["t1".to_owned()]);
        // An owner without a state folder keeps its own records only.
        let alone = Interruptions::default();
        alone.write_failed(chat, "disk full");
        assert_eq!(
            alone.recovery(chat).write_failed.as_deref(),
            Some("disk full")
        );
        assert!(!Interruptions::default().recovery(chat).reply_streaming);
        owner.clear(chat);
        assert_eq!(other.recovery(chat), Recovery::default());
    }
}
