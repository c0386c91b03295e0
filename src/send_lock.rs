//! One `send` per chat file at a time: an exclusive `flock` on
//! `<chat dir>/.flemma/<chat file name>/send.lock`, holding the owner's pid. A second `send`
//! is refused at once (it would pay for a second reply and interleave the two in the file).
//! The folder and the file are opened following no symlink (the folder lies where a model's
//! sandboxed commands may write, and repositories may ship it), the file must be regular, and
//! its pid is read with a cap.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use flemma_tools::nofollow::Dir;

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
    #[error("refused to use the lock file {path}: {source}; nothing was sent")]
    Refused {
        path: String,
        source: std::io::Error,
    },
}

/// Held while a send runs; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct SendLock {
    file: File,
}

/// The most of a lock file read for its pid (a pid is a few digits; a lock that points at an
/// endless file is never opened, and this bounds whatever else it holds).
const OWNER_CAP: u64 = 64;

impl SendLock {
    /// The lock file of `chat`.
    pub fn path_for(chat: &Path) -> PathBuf {
        let (dir, folder) = Self::place(chat);
        dir.join(folder).join(LOCK_NAME)
    }

    /// The chat's directory and the store folder below it that holds the lock.
    fn place(chat: &Path) -> (PathBuf, PathBuf) {
        let chat = std::path::absolute(chat).unwrap_or_else(|_| chat.to_path_buf());
        let dir = chat.parent().unwrap_or(Path::new("/")).to_path_buf();
        let name = chat
            .file_name()
            .map_or_else(|| "chat".into(), |name| name.to_string_lossy().into_owned());
        (dir, Path::new(".flemma").join(name))
    }

    /// Opens the lock's folder below the chat's directory, following no symlink there (a
    /// repository can ship `.flemma/<chat>` as a link to anywhere).
    fn folder(chat: &Path, create: bool) -> std::io::Result<Dir> {
        let (dir, folder) = Self::place(chat);
        Dir::open_beneath(&dir, &folder, create.then_some(0o700))
    }

    /// Takes the lock of `chat` without waiting. The lock file must be a regular file with one
    /// link; it is never followed when it is a symlink.
    pub fn acquire(chat: &Path) -> Result<Self, LockError> {
        let path = Self::path_for(chat);
        let create = |source: std::io::Error| {
            if source.kind() == std::io::ErrorKind::InvalidInput {
                LockError::Refused {
                    path: path.display().to_string(),
                    source,
                }
            } else {
                LockError::Create {
                    path: path.display().to_string(),
                    source,
                }
            }
        };
        let folder = Self::folder(chat, true).map_err(create)?;
        let mut file = folder
            .open_for_write(OsStr::new(LOCK_NAME), 0o600, false)
            .map_err(create)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(errno) if errno == rustix::io::Errno::WOULDBLOCK => {
                let pid = read_owner(&mut file);
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

    /// The pid a running send of `chat` wrote in its lock file, read without following a link
    /// and at most a few bytes (`None`: no lock, an empty one, or not a regular file).
    pub fn owner(chat: &Path) -> Option<u32> {
        let bytes = Self::folder(chat, false)
            .ok()?
            .read(OsStr::new(LOCK_NAME), OWNER_CAP)
            .ok()??;
        String::from_utf8_lossy(&bytes).trim().parse().ok()
    }
}

const LOCK_NAME: &str = "send.lock";

/// The pid in an open lock file (at most [`OWNER_CAP`] bytes read).
fn read_owner(file: &mut File) -> Option<u32> {
    let mut owner = String::new();
    let _ = (&mut *file).take(OWNER_CAP).read_to_string(&mut owner);
    owner.trim().parse::<u32>().ok()
}

impl Drop for SendLock {
    fn drop(&mut self) {
        // Releasing is closing; clear the pid so a stale one is never shown.
        let _ = self.file.set_len(0);
    }
}
