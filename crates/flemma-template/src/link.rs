//! Bridges the borrowed [`Host`] into Rhai callbacks, which must be `'static`.
//!
//! An evaluation runs inside a [`std::thread::scope`]: one scoped thread owns the `&dyn Host`
//! and answers requests sent through a channel by [`HostLink`], a cheap `'static` handle that
//! native functions (`include`, personalities) capture. The thread ends when the last handle is
//! dropped, at the end of the evaluation.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::host::{Host, PersonalityContext};

enum Request {
    Read(PathBuf, mpsc::SyncSender<std::io::Result<Vec<u8>>>),
    Environment(mpsc::SyncSender<PersonalityContext>),
}

/// A `'static` handle to the evaluation's host.
#[derive(Debug, Clone)]
pub(crate) struct HostLink {
    requests: mpsc::Sender<Request>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Read(path, _) => write!(f, "Read({})", path.display()),
            Request::Environment(_) => f.write_str("Environment"),
        }
    }
}

impl HostLink {
    /// Reads a file through the host.
    pub(crate) fn read_file(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests
            .send(Request::Read(path.to_path_buf(), reply))
            .map_err(|_| disconnected())?;
        answer.recv().map_err(|_| disconnected())?
    }

    /// The host's environment, for personalities.
    pub(crate) fn environment(&self) -> PersonalityContext {
        let (reply, answer) = mpsc::sync_channel(1);
        if self.requests.send(Request::Environment(reply)).is_err() {
            return PersonalityContext::default();
        }
        answer.recv().unwrap_or_default()
    }
}

fn disconnected() -> std::io::Error {
    std::io::Error::other("the evaluation's host is gone (internal error); evaluate again")
}

/// Runs `work` with a [`HostLink`] served by `host` on a scoped thread.
pub(crate) fn with_host<R>(host: &dyn Host, work: impl FnOnce(HostLink) -> R) -> R {
    std::thread::scope(|scope| {
        let (requests, incoming) = mpsc::channel::<Request>();
        scope.spawn(move || {
            for request in incoming {
                match request {
                    Request::Read(path, reply) => {
                        let _ = reply.send(host.read_file(&path));
                    }
                    Request::Environment(reply) => {
                        let _ = reply.send(host.environment());
                    }
                }
            }
        });
        work(HostLink { requests })
    })
}
