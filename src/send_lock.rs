//! One `send` per chat file at a time: an exclusive `flock` on
//! `<chat dir>/.flemma/<chat file name>/send.lock`, holding the owner's pid. A second `send`
//! is refused at once (it would pay for a second reply and interleave the two in the file).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another `flemmad send` ({owner}) is already sending {chat}; wait for it to finish, or stop it{stop}"
    )]
    Busy {
        chat: String,
        owner: String,
        stop: String,
    },
    #[error(
        "cannot create the lock file {path}: {source}; the reply could not be written beside the chat either, so nothing was sent (check the directory's permissions)"
    )]
    Create {
        path: String,
        source: std::io::Error,
    },
}

/// Held while a send runs; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct SendLock {
    file: File,
}

impl SendLock {
    /// The lock file of `chat`.
    pub fn path_for(chat: &Path) -> PathBuf {
        let dir = chat.parent().unwrap_or(Path::new("."));
        let name = chat
            .file_name()
            .map_or_else(|| "chat".into(), |name| name.to_string_lossy().into_owned());
        dir.join(".flemma").join(name).join("send.lock")
    }

    /// Takes the lock of `chat` without waiting.
    pub fn acquire(chat: &Path) -> Result<Self, LockError> {
        let path = Self::path_for(chat);
        let create = |source| LockError::Create {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(create)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(create)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(errno) if errno == rustix::io::Errno::WOULDBLOCK => {
                let mut owner = String::new();
                let _ = file.read_to_string(&mut owner);
                let pid = owner.trim().parse::<u32>().ok();
                return Err(LockError::Busy {
                    chat: chat.display().to_string(),
                    owner: pid.map_or_else(|| "pid unknown".to_owned(), |pid| format!("pid {pid}")),
                    stop: pid.map_or_else(String::new, |pid| format!(" (kill {pid})")),
                });
            }
            Err(errno) => return Err(create(errno.into())),
        }
        // Best effort: the pid is only for the message of a second send.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(file, "{}", std::process::id());
        let _ = file.flush();
        Ok(Self { file })
    }
}

impl Drop for SendLock {
    fn drop(&mut self) {
        // Releasing is closing; clear the pid so a stale one is never shown.
        let _ = self.file.set_len(0);
    }
}
