//! One driver per chat, across processes (docs/engine.md): whoever drives a chat — the engine
//! host of a daemon, of an in-process language server or of `flemmad send` without a daemon,
//! `flemmad acp` —
//! holds an exclusive non-blocking `flock` on `$XDG_STATE_HOME/flemma/locks/<chat key>.lock`
//! for as long as it drives, with its pid and role written in it. A second driver is refused at
//! once, naming the first (it would pay for a second reply and interleave the two in the file).
//!
//! The lock lies in flemmad's state folder, which no tool of any chat can write (a lock beside
//! the chat, in its store, could be removed by a sandboxed command and taken twice). It is
//! opened following no symlink, must be a regular file with one link, and its owner is read
//! with a cap. A process that dies releases it (the kernel drops the `flock`). A holder that is
//! only taking or letting go of the lock (no owner written, this process, or a process gone) is
//! waited for up to a second, so that one driver following another is never refused.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use flemma_tools::nofollow::Dir;

use crate::user_dirs::UserDirs;

/// Who holds a chat's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// `send`, `serve`, `lsp`, `acp`: the command of the process that drives.
    pub role: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.role.as_str() {
            "serve" => write!(f, "the daemon (`flemmad serve`, pid {})", self.pid),
            "send" => write!(f, "`flemmad send` (pid {})", self.pid),
            role => write!(f, "`flemmad {role}` (pid {})", self.pid),
        }
    }
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{chat} is already being driven by {}; wait for it to finish, or stop it{stop}", owner.as_ref().map_or_else(|| "another flemmad (pid unknown)".to_owned(), ToString::to_string))]
    Busy {
        chat: String,
        owner: Option<Owner>,
        stop: String,
    },
    #[error(
        "cannot create the lock file {path}: {source}; nothing was sent (check the permissions of flemmad's state folder)"
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

/// Held while a driver runs; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct DriverLock {
    file: File,
}

/// The most of a lock file read for its owner.
const OWNER_CAP: u64 = 64;

/// How long a lock whose holder is taking or letting go of it is waited for before refusing.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether `pid` is a live process (a zombie counts as gone).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

impl DriverLock {
    /// The folder of the locks: `$XDG_STATE_HOME/flemma/locks` (`None` without a home).
    fn folder_path(dirs: &UserDirs) -> Option<PathBuf> {
        Some(dirs.flemma_state()?.join("locks"))
    }

    /// The lock file of `chat`.
    pub fn path_for(dirs: &UserDirs, chat: &Path) -> Option<PathBuf> {
        Some(Self::folder_path(dirs)?.join(lock_name(chat)))
    }

    fn folder(dirs: &UserDirs, create: bool) -> std::io::Result<Dir> {
        let path = Self::folder_path(dirs).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither XDG_STATE_HOME nor HOME is set",
            )
        })?;
        let base = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        if create {
            use std::os::unix::fs::DirBuilderExt as _;
            // The state folder itself is the user's (followed if it is a link).
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(base)?;
        }
        Dir::open_beneath(base, Path::new("flemma/locks"), create.then_some(0o700))
    }

    /// Takes the lock of `chat` without waiting, as `role`.
    /// `dirs` are the user's folders (the locks are in their state folder).
    pub fn acquire(dirs: &UserDirs, chat: &Path, role: &str) -> Result<Self, LockError> {
        let name = lock_name(chat);
        let shown = Self::path_for(dirs, chat)
            .map_or_else(|| name.clone(), |path| path.display().to_string());
        let create = |source: std::io::Error| {
            if source.kind() == std::io::ErrorKind::InvalidInput {
                LockError::Refused {
                    path: shown.clone(),
                    source,
                }
            } else {
                LockError::Create {
                    path: shown.clone(),
                    source,
                }
            }
        };
        let folder = Self::folder(dirs, true).map_err(create)?;
        let mut file = folder
            .open_for_write(OsStr::new(&name), 0o600, false)
            .map_err(create)?;
        wait_for_lock(&mut file, chat).map_err(|error| match error {
            Waited::Busy(busy) => busy,
            Waited::Failed(errno) => create(errno.into()),
        })?;
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(file, "{} {role}", std::process::id());
        let _ = file.flush();
        Ok(Self { file })
    }

    /// Who drives `chat` now, as its lock says (a holder writes itself in, and clears it when
    /// it lets go; a process that was killed is recognised as gone); read without following a
    /// link and at most a few bytes.
    pub fn owner(dirs: &UserDirs, chat: &Path) -> Option<Owner> {
        let folder = Self::folder(dirs, false).ok()?;
        let name = lock_name(chat);
        let mut file = folder.open_regular(OsStr::new(&name)).ok()??;
        read_owner(&mut file).filter(|owner| process_alive(owner.pid))
    }
}

/// How taking an open lock file ended badly.
enum Waited {
    Busy(LockError),
    Failed(rustix::io::Errno),
}

/// Takes the `flock` of the open lock file of `chat` without waiting for a driver, only for a
/// holder that is taking or letting go of it (at most [`SETTLE`]).
fn wait_for_lock(file: &mut File, chat: &Path) -> Result<(), Waited> {
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        match rustix::fs::flock(&*file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(errno) if errno == rustix::io::Errno::WOULDBLOCK => {
                let owner = read_owner(file);
                // A holder that is another live process drives: refused at once. A holder
                // not written yet or clearing itself (it is taking or letting go of the
                // lock), this process itself (its previous driver of the chat letting go) or
                // a process gone (a child between its fork and exec still holds the file
                // for an instant) is given a moment.
                let settling = owner.as_ref().is_none_or(|owner| {
                    owner.pid == std::process::id() || !process_alive(owner.pid)
                });
                if !settling || std::time::Instant::now() >= deadline {
                    return Err(Waited::Busy(LockError::Busy {
                        chat: chat.display().to_string(),
                        stop: owner
                            .as_ref()
                            .filter(|owner| owner.role == "send")
                            .map_or_else(String::new, |owner| {
                                format!(" (kill -INT {})", owner.pid)
                            }),
                        owner,
                    }));
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
                let _ = file.rewind();
            }
            Err(errno) => return Err(Waited::Failed(errno)),
        }
    }
}

/// The lock file's name for `chat`: its key in flemmad's folders.
fn lock_name(chat: &Path) -> String {
    let chat = std::path::absolute(chat).unwrap_or_else(|_| chat.to_path_buf());
    format!("{}.lock", crate::user_dirs::chat_key(&chat))
}

/// The owner in an open lock file (at most [`OWNER_CAP`] bytes read).
fn read_owner(file: &mut File) -> Option<Owner> {
    let mut text = String::new();
    let _ = (&mut *file).take(OWNER_CAP).read_to_string(&mut text);
    let mut parts = text.split_whitespace();
    let pid = parts.next()?.parse::<u32>().ok()?;
    let role = parts.next().unwrap_or("flemmad").to_owned();
    Some(Owner { pid, role })
}

impl Drop for DriverLock {
    fn drop(&mut self) {
        // Releasing is closing; clear the owner so a stale one is never shown.
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A lock file held through a second open file (another holder), with `owner` written in.
    fn held(dir: &Path, owner: &str) -> (File, File) {
        let path = dir.join("chat.lock");
        let mut holder = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        rustix::fs::flock(
            &holder,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        )
        .unwrap();
        write!(holder, "{owner}").unwrap();
        let mine = File::options().read(true).write(true).open(&path).unwrap();
        (holder, mine)
    }

    fn busy_owner(waited: Result<(), Waited>) -> Option<Owner> {
        match waited {
            Err(Waited::Busy(LockError::Busy { owner, .. })) => owner,
            Err(Waited::Busy(other)) => panic!("{other}"),
            Err(Waited::Failed(errno)) => panic!("{errno}"),
            Ok(()) => panic!("the lock was taken"),
        }
    }

    /// The flake of issue 28: a driver letting go (its owner cleared, the lock not yet
    /// released) refused the next one as "another flemmad (pid unknown)".
    #[test]
    fn a_holder_letting_go_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let (holder, mut mine) = held(dir.path(), "");
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(holder);
        });
        let started = Instant::now();
        assert!(wait_for_lock(&mut mine, Path::new("c.chat")).is_ok());
        assert!(started.elapsed() >= Duration::from_millis(100));
        letting_go.join().unwrap();
    }

    #[test]
    fn another_live_driver_is_refused_at_once_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let (_holder, mut mine) = held(dir.path(), &format!("{} send\n", other.id()));
        let started = Instant::now();
        let owner = busy_owner(wait_for_lock(&mut mine, Path::new("c.chat")));
        let _ = other.kill();
        let _ = other.wait();
        assert!(started.elapsed() < SETTLE / 2, "{:?}", started.elapsed());
        assert_eq!(
            owner,
            Some(Owner {
                pid: other.id(),
                role: "send".into()
            })
        );
    }

    #[test]
    fn a_holder_that_never_lets_go_is_refused_after_a_moment() {
        let dir = tempfile::tempdir().unwrap();
        let (_holder, mut mine) = held(dir.path(), "");
        let started = Instant::now();
        assert_eq!(
            busy_owner(wait_for_lock(&mut mine, Path::new("c.chat"))),
            None
        );
        assert!(started.elapsed() >= SETTLE, "{:?}", started.elapsed());
    }

    #[test]
    fn a_zombie_is_no_live_process() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        // Not reaped yet: a zombie once it has exited.
        while process_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!process_alive(pid));
        child.wait().unwrap();
        assert!(process_alive(std::process::id()));
    }
}
