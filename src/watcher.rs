//! The file watcher: tells a driver at once when someone else changed the chat file it
//! writes, so that it re-reads and merges by anchors (the driver's own logic) instead of
//! waiting for its next poll.
//!
//! One `notify` watcher (inotify on Linux) with `notify-debouncer-full` per [`ChatWatcher`],
//! owned by whoever runs drivers (the engine host of the daemon or of `flemmad acp`, `flemmad
//! send`) and handed to each driver in its parts; it starts with the first watch. It watches *directories*, never files, and matches events by path: an editor's atomic save
//! (write a temporary file, rename it over the chat; vim's rename to a backup and write anew)
//! replaces the file's inode, which a watch on the file itself would lose; a watch on its
//! directory sees the rename, and the driver re-reads the path, whatever inode it names now.
//! A file deleted or moved away is an event like any other: the driver's read fails and it
//! stops writing (nothing recreates the file).
//!
//! When the watcher cannot be set up (inotify limits, `FLEMMAD_WATCH=poll`),
//! [`ChatWatcher::watch`] answers `None`, the driver polls instead, and this is logged once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::sync::Notify;

/// How long the debouncer waits for a burst of events on one path to settle (an atomic save
/// is several events) before it reports them.
const DEBOUNCE: Duration = Duration::from_millis(25);

/// The environment variable that turns the watcher off (`poll`): drivers poll instead.
pub const WATCH_ENV: &str = "FLEMMAD_WATCH";

/// Why a file cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot start the file watcher: {0}")]
    Start(notify::Error),
    #[error("cannot watch the directory {}: {source}", dir.display())]
    Directory { dir: PathBuf, source: notify::Error },
    #[error("cannot watch {}: its directory cannot be resolved ({source})", path.display())]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The process's watcher (cheap to clone).
#[derive(Clone)]
pub struct FileWatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FileWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileWatcher")
    }
}

struct Inner {
    debouncer: Mutex<Debouncer<notify::RecommendedWatcher, RecommendedCache>>,
    watched: Arc<Mutex<Watched>>,
    next_id: AtomicU64,
}

/// Who waits for which file, and how many of them each watched directory serves.
#[derive(Default)]
struct Watched {
    /// By the file's path (its directory resolved): the waiters' ids and their signals.
    files: HashMap<PathBuf, Vec<(u64, Arc<Notify>)>>,
    directories: HashMap<PathBuf, usize>,
}

impl Watched {
    /// Wakes the waiters of every file an event names (or of every file in a directory it
    /// names, which was removed or must be rescanned).
    fn wake(&self, paths: &[PathBuf], everyone: bool) {
        for (file, waiters) in &self.files {
            let named = everyone
                || paths
                    .iter()
                    .any(|path| path == file || file.parent() == Some(path.as_path()));
            if named {
                for (_, signal) in waiters {
                    signal.notify_one();
                }
            }
        }
    }
}

impl FileWatcher {
    /// Starts a watcher (its own threads: notify's and the debouncer's).
    pub fn start() -> Result<Self, WatchError> {
        let watched = Arc::new(Mutex::new(Watched::default()));
        let handler_watched = watched.clone();
        let debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| {
            let watched = lock(&handler_watched);
            match result {
                Ok(events) => {
                    for event in events {
                        watched.wake(&event.paths, event.need_rescan());
                    }
                }
                Err(errors) => {
                    for error in &errors {
                        tracing::warn!(%error, "the file watcher reported an error; re-reading every watched file");
                    }
                    watched.wake(&[], true);
                }
            }
        })
        .map_err(WatchError::Start)?;
        Ok(Self {
            inner: Arc::new(Inner {
                debouncer: Mutex::new(debouncer),
                watched,
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// Watches `path` (a file; its directory is what is watched) until the returned
    /// [`FileWatch`] is dropped.
    pub fn watch(&self, path: &Path) -> Result<FileWatch, WatchError> {
        let (dir, name) = split(path)?;
        let file = dir.join(name);
        let mut watched = lock(&self.inner.watched);
        if !watched.directories.contains_key(&dir) {
            lock(&self.inner.debouncer)
                .watch(&dir, RecursiveMode::NonRecursive)
                .map_err(|source| WatchError::Directory {
                    dir: dir.clone(),
                    source,
                })?;
        }
        *watched.directories.entry(dir.clone()).or_default() += 1;
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let signal = Arc::new(Notify::new());
        watched
            .files
            .entry(file.clone())
            .or_default()
            .push((id, signal.clone()));
        Ok(FileWatch {
            watcher: self.clone(),
            file,
            dir,
            id,
            signal,
        })
    }

    fn forget(&self, watch: &FileWatch) {
        let mut watched = lock(&self.inner.watched);
        if let Some(waiters) = watched.files.get_mut(&watch.file) {
            waiters.retain(|(id, _)| *id != watch.id);
            if waiters.is_empty() {
                watched.files.remove(&watch.file);
            }
        }
        let Some(count) = watched.directories.get_mut(&watch.dir) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            watched.directories.remove(&watch.dir);
            if let Err(error) = lock(&self.inner.debouncer).unwatch(&watch.dir) {
                // The directory itself went away: its watch went with it.
                tracing::debug!(dir = %watch.dir.display(), %error, "cannot unwatch");
            }
        }
    }
}

/// The directory of `path` resolved (symlinks, `..`), and the file's name.
fn split(path: &Path) -> Result<(PathBuf, &std::ffi::OsStr), WatchError> {
    let resolve = |source| WatchError::Resolve {
        path: path.to_owned(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        resolve(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let dir = parent.canonicalize().map_err(resolve)?;
    Ok((dir, name))
}

/// One file watched for one waiter.
pub struct FileWatch {
    watcher: FileWatcher,
    file: PathBuf,
    dir: PathBuf,
    id: u64,
    signal: Arc<Notify>,
}

impl std::fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatch")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl FileWatch {
    /// Waits until the file may have changed (changes since the last call included; several
    /// changes wake it once).
    pub async fn changed(&self) {
        self.signal.notified().await;
    }
}

impl Drop for FileWatch {
    fn drop(&mut self) {
        self.watcher.forget(self);
    }
}

/// The watcher of the chats of one owner (the engine host, `flemmad send`), handed to its
/// drivers (cheap to clone). The `notify` watcher starts with the first watch (an idle daemon
/// runs none); when it cannot, or watching is off, every watch is `None` and the drivers poll.
#[derive(Debug, Clone, Default)]
pub struct ChatWatcher {
    inner: Arc<ChatWatcherInner>,
}

#[derive(Debug, Default)]
struct ChatWatcherInner {
    /// Watching is off (`FLEMMAD_WATCH=poll`, `ProcessContext::poll_files`).
    off: bool,
    /// Started at the first watch: `None` when watching is off or impossible.
    watcher: OnceLock<Option<FileWatcher>>,
    /// A failure was logged (once per owner).
    warned: AtomicBool,
}

impl ChatWatcher {
    /// A watcher of one owner; `off` (`ProcessContext::poll_files`): every watch is `None`.
    pub fn new(off: bool) -> Self {
        Self {
            inner: Arc::new(ChatWatcherInner {
                off,
                ..ChatWatcherInner::default()
            }),
        }
    }

    /// Watches `path`; `None` when watching is off or impossible (the caller polls then).
    /// Failures are logged once.
    pub fn watch(&self, path: &Path) -> Option<FileWatch> {
        let inner = &self.inner;
        let watcher = inner.watcher.get_or_init(|| {
            if inner.off {
                tracing::info!("{WATCH_ENV}=poll: chat files are polled, not watched");
                return None;
            }
            match FileWatcher::start() {
                Ok(watcher) => Some(watcher),
                Err(error) => {
                    inner.warned.store(true, Ordering::Relaxed);
                    tracing::warn!(%error, "chat files are polled instead of watched (changes made by others are seen within a poll interval)");
                    None
                }
            }
        });
        match watcher.as_ref()?.watch(path) {
            Ok(watch) => Some(watch),
            Err(error) => {
                if !inner.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%error, "a chat file is polled instead of watched (the inotify watch limit? raise fs.inotify.max_user_watches); logged once");
                }
                None
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    async fn wakes(watch: &FileWatch) -> bool {
        let woke = tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .is_ok();
        // Let the rest of this change arrive (one change can come in several debounced
        // batches on a loaded machine) and drop the wake-up it leaves behind, so that the
        // next step waits for its own change and not for a late batch of this one.
        tokio::time::sleep(DEBOUNCE * 8).await;
        let _ = tokio::time::timeout(Duration::from_millis(1), watch.changed()).await;
        woke
    }

    #[tokio::test]
    async fn an_append_an_atomic_save_and_a_deletion_each_wake_the_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("talk.chat");
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        let watcher = FileWatcher::start().unwrap();
        let watch = watcher.watch(&path).unwrap();
        let other = watcher.watch(&dir.path().join("other.chat")).unwrap();

        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"more\n").unwrap();
        drop(file);
        assert!(wakes(&watch).await, "an append");

        // An editor's atomic save: a temporary file renamed over the chat (a new inode).
        let tmp = dir.path().join(".talk.chat.swp");
        std::fs::write(&tmp, "@You:\nsaved\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(wakes(&watch).await, "an atomic save");
        // And again: the watch follows the path, not the first inode.
        std::fs::write(&tmp, "@You:\nsaved again\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(wakes(&watch).await, "a second atomic save");

        std::fs::remove_file(&path).unwrap();
        assert!(wakes(&watch).await, "a deletion");

        // Nothing happened to the other file.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), other.changed())
                .await
                .is_err()
        );
        drop(watch);
        drop(other);
        assert!(lock(&watcher.inner.watched).directories.is_empty());
    }
}
