//! Where a driver reads and writes its chat: the file on disk ([`FileStore`]) or the buffer
//! of the LSP client that has it open (`lsp_backend::EditorStore`: the LSP's types stay
//! there, out of the host's reach). Exactly one store writes a document at a time
//! (design.md, "Who writes a document"); the engine host decides which, and the document
//! session (`flemma_engine::session`) decides what is read and written when.
//!
//! Only IO here: read a [`Snapshot`], and replace it with a new text only if the store still
//! holds it; a `false` answer means "someone changed it meanwhile" (the session reads again
//! and merges).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

pub use flemma_engine::session::Snapshot;

use crate::fsutil;

/// A future a store returns (drivers run on a `LocalSet`: it need not be `Send`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = anyhow::Result<T>> + 'a>>;

/// What a driver reads from and writes to.
pub trait ChatStore: Send {
    /// The text as it is now.
    fn read(&self) -> StoreFuture<'_, Snapshot>;

    /// Replaces `current` (the latest read) with `next`; `false` when the text moved since
    /// `current` was read (nothing was written then).
    fn replace_if_unchanged<'a>(
        &'a self,
        current: &'a Snapshot,
        next: &'a str,
    ) -> StoreFuture<'a, bool>;

    /// What is written, for messages: `the file talk.chat`, `helix's buffer of talk.chat`.
    fn describe(&self) -> String;

    /// Which store this is: two stores with the same key are the same file or the same
    /// editor's buffer.
    fn key(&self) -> String;

    /// The store is the file on disk (a watcher sees its changes; others must be polled).
    fn is_disk(&self) -> bool {
        false
    }

    /// The text this store and the engine last agreed on, when it is known: the base of the
    /// three-way merge when the store becomes the writer of a document whose text the engine
    /// moved on elsewhere (another editor's buffer). `None` (a file): the engine's text is
    /// written over it.
    fn shared_base(&self) -> Option<std::sync::Arc<str>> {
        None
    }

    /// The store stops being the writer; `text` is what it held after the engine's last
    /// read or write (remembered as its [`Self::shared_base`]).
    fn left(&self, text: &str) {
        let _ = text;
    }
}

/// The text an editor and the engine last agreed on: the editor's text at open, then what
/// its buffer held when it stopped being the document's writer. One per opening of a document
/// in an editor (a document closed and opened again is a new buffer), shared between the
/// host's handle on the editor and the stores made from it, which stop reading and writing
/// once it is closed.
#[derive(Debug, Clone)]
pub struct SharedText(Arc<Mutex<Shared>>);

#[derive(Debug)]
struct Shared {
    text: Arc<str>,
    closed: bool,
}

impl SharedText {
    pub fn new(text: &str) -> Self {
        Self(Arc::new(Mutex::new(Shared {
            text: Arc::from(text),
            closed: false,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self) -> Arc<str> {
        self.lock().text.clone()
    }

    pub fn set(&self, text: &str) {
        self.lock().text = Arc::from(text);
    }

    /// The editor closed this opening of the document.
    pub fn close(&self) {
        self.lock().closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Which opening this is (unique while it lives).
    pub fn instance(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

/// The file on disk: read it, and replace it atomically only if it still holds what was read.
#[derive(Debug, Clone)]
pub struct FileStore {
    pub path: PathBuf,
    /// The user's folders (its writes' journal is in their state folder).
    pub dirs: crate::user_dirs::UserDirs,
}

impl ChatStore for FileStore {
    fn read(&self) -> StoreFuture<'_, Snapshot> {
        Box::pin(async move {
            let text = fsutil::read_chat(&self.dirs, &self.path).map_err(|error| {
                let gone = error
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound);
                if !gone {
                    return error;
                }
                let message = format!(
                    "{} is gone (deleted or moved away by someone else while flemmad was writing it); flemmad stopped writing it and did not recreate it",
                    self.path.display()
                );
                tracing::warn!("{message}");
                anyhow::anyhow!(message)
            })?;
            Ok(Snapshot {
                text,
                version: None,
            })
        })
    }

    fn replace_if_unchanged<'a>(
        &'a self,
        current: &'a Snapshot,
        next: &'a str,
    ) -> StoreFuture<'a, bool> {
        // Off the async thread: a write waits for the disk (its fsyncs), and the drivers of
        // every other chat share that thread (docs/benchmarks.md, "fsync per write").
        let (path, expected, next) = (self.path.clone(), current.text.clone(), next.to_owned());
        let dirs = self.dirs.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                fsutil::replace_chat_if_unchanged(&dirs, &path, &expected, &next)
            })
            .await
            .map_err(|error| anyhow::anyhow!("writing the chat stopped: {error}"))?
        })
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn key(&self) -> String {
        format!("file {}", self.path.display())
    }

    fn is_disk(&self) -> bool {
        true
    }
}

/// How long an editor may take to answer a read or an edit before the driver gives up on it.
pub const EDITOR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why an editor store cannot go on: the host then hands the document to another store.
#[derive(Debug, thiserror::Error)]
pub enum EditorGone {
    #[error("the editor closed {0}")]
    Closed(String),
    #[error("the editor did not answer about {0} within {EDITOR_TIMEOUT:?}")]
    Timeout(String),
}
