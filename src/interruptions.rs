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
use std::sync::{Mutex, OnceLock, PoisonError};

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

/// The records of this process, by chat.
fn memory() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Record>> {
    static RECORDS: OnceLock<Mutex<HashMap<PathBuf, Record>>> = OnceLock::new();
    RECORDS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

fn file_of(chat: &Path) -> Option<PathBuf> {
    let dir = crate::user_dirs::flemma_state()?.join("interrupted");
    Some(dir.join(format!("{}.json", crate::user_dirs::chat_key(chat))))
}

fn read_file(chat: &Path) -> Option<Record> {
    let text = std::fs::read(file_of(chat)?).ok()?;
    serde_json::from_slice(&text).ok()
}

/// What the last driver of `chat` left (nothing when it ended cleanly).
pub fn recovery(chat: &Path) -> Recovery {
    let kept = memory().get(chat).cloned();
    kept.or_else(|| read_file(chat)).unwrap_or_default().into()
}

/// Changes `chat`'s record and saves it (in memory always, on disk when the disk takes it).
fn update(chat: &Path, change: impl FnOnce(&mut Record)) {
    let record = {
        let mut records = memory();
        let record = match records.get_mut(chat) {
            Some(record) => record,
            None => records
                .entry(chat.to_owned())
                .or_insert(read_file(chat).unwrap_or_default()),
        };
        change(record);
        record.clone()
    };
    let Some(file) = file_of(chat) else {
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
pub fn reply_started(chat: &Path) {
    update(chat, |record| record.reply_streaming = true);
}

/// A foreground tool call of `chat` is about to start.
pub fn call_started(chat: &Path, tool_id: &str) {
    update(chat, |record| {
        if !record.started_calls.iter().any(|id| id == tool_id) {
            record.started_calls.push(tool_id.to_owned());
        }
    });
}

/// Writing `chat` failed with `reason`: the driver stops writing it.
pub fn write_failed(chat: &Path, reason: &str) {
    update(chat, |record| record.write_failed = Some(reason.to_owned()));
}

/// The driver of `chat` ended cleanly: everything it did is written, nothing to recover.
pub fn clear(chat: &Path) {
    memory().remove(chat);
    if let Some(file) = file_of(chat) {
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(file = %file.display(), %error, "cannot remove a recovery record");
            }
        }
    }
}
