//! The checks every request passes before it is answered: the document exists (open in an
//! editor, or a regular file), and no other process drives the chat a command would start a
//! driver for.

use std::path::Path;

use flemma_protocol::error::RequestError;

use crate::engine_host::{DocumentRef, EngineHost};

/// What the host holds of a document when a request arrives: whether an editor has it open,
/// whether a driver runs for it (asked once per request).
#[derive(Debug, Clone, Copy)]
pub(in crate::engine_host) struct Held {
    pub editor: bool,
    pub running: bool,
}

impl EngineHost {
    /// What the host holds of `path` now.
    pub(in crate::engine_host) fn held(&self, path: &Path) -> Held {
        let path = path.to_owned();
        self.shared.state.ask(move |owned| Held {
            editor: owned.state.has_editor(&path),
            running: owned.state.is_running(&path),
        })
    }

    /// Refuses a document that is neither open in an editor (the caller's or another) nor a
    /// regular file, nor being worked on.
    pub(in crate::engine_host) fn check_exists(
        &self,
        method: &str,
        document: DocumentRef<'_>,
        held: Held,
    ) -> Result<(), RequestError> {
        let path = document.path;
        if document.buffer.is_some() || held.editor || held.running {
            return Ok(());
        }
        let problem = match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => return Ok(()),
            Ok(meta) if meta.is_dir() => "is a directory, not a chat file".to_owned(),
            Ok(_) => "is not a regular file".to_owned(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                "does not exist and no editor has it open".to_owned()
            }
            Err(error) => format!("cannot be read ({error})"),
        };
        Err(RequestError::invalid_params(format!(
            "{method}: {} {problem}; name an existing .chat file or a document open in an editor",
            path.display()
        )))
    }

    /// Refuses a command that would start a driver for a chat another process drives (one
    /// driver per chat, across processes: `crate::driver_lock`); `running`: a driver of this
    /// host runs for it.
    pub(in crate::engine_host) fn check_driver(
        &self,
        path: &Path,
        running: bool,
    ) -> Result<(), RequestError> {
        if running {
            return Ok(());
        }
        match crate::driver_lock::DriverLock::owner(&self.context().dirs, path) {
            Some(owner) if owner.pid != std::process::id() => Err(RequestError::refused(format!(
                "{} is being driven by {owner}: nothing was done here; wait for it to finish, or stop it where it runs",
                path.display()
            ))),
            _ => Ok(()),
        }
    }
}
