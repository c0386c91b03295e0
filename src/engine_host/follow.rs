//! What a caller in this process follows of one document ([`EngineHost::follow`]): its events
//! as the daemon's subscribers get them (`engine:setup`: what a driver's setup found;
//! `engine:notice`: what the driver tells its editors), and what only such a caller is given —
//! why a driver could not be set up (where the daemon's subscribers get the `engine:stopped`
//! message). The command line without a daemon (`cli/local_host`) shows a send from it.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};

use flemma_engine::EngineEvent;
use tokio_util::sync::CancellationToken;

use crate::engine_host::{EngineHost, Shared, lock};

/// What a follower of a document is told, in order.
#[derive(Debug, Clone)]
pub enum Followed {
    /// A lifecycle event of the document (its streamed text and its notices included).
    Event(EngineEvent),
    /// A driver for the document could not be set up (the configuration, the provider, the
    /// tools or the client, or the chat cannot be read): nothing runs. What a setup found
    /// otherwise, every follower is told by `engine:setup`.
    SetupFailed(String),
}

impl EngineHost {
    /// What happens to the document at `path` from now on (see [`Followed`]). A receiver that
    /// is dropped is forgotten.
    pub fn follow(&self, path: &Path) -> Receiver<Followed> {
        let (sender, receiver) = std::sync::mpsc::channel();
        lock(&self.shared.followers).push((path.to_owned(), sender));
        receiver
    }

    /// Interrupts every driver as a Ctrl-C interrupts `flemmad send`: everything it runs is
    /// cancelled and marked `aborted`, background jobs too, and it stops `cancelled`. Drivers
    /// started afterwards are interrupted at once. For the process's own Ctrl-C, where the
    /// host lives in the command's process (`flemma/cancel` leaves background jobs running).
    pub fn interrupt(&self) {
        self.shared.interrupt.cancel();
    }
}

impl Shared {
    /// Tells the followers of `path`.
    pub(in crate::engine_host) fn tell_followers(&self, path: &Path, followed: Followed) {
        self.tell_followers_with(path, || followed.clone());
    }

    /// Tells the followers of `path` what `followed` makes, made only when one follows it
    /// (the daemon's host streams every reply's text with no follower).
    pub(in crate::engine_host) fn tell_followers_with(
        &self,
        path: &Path,
        followed: impl Fn() -> Followed,
    ) {
        lock(&self.followers).retain(|(followed_path, sender)| {
            followed_path != path || sender.send(followed()).is_ok()
        });
    }

    /// The interruption a driver starting now runs under (a driver being set up when the
    /// host is interrupted is interrupted once it runs).
    pub(in crate::engine_host) fn interruption(&self) -> CancellationToken {
        self.interrupt.child_token()
    }
}

/// The followers of every document, with the document each follows.
pub(in crate::engine_host) type Followers = Vec<(PathBuf, Sender<Followed>)>;
