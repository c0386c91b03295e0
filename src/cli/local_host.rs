//! The commands' path without a daemon: the engine host the daemon runs ([`EngineHost`]),
//! started in this process. `send`, `approve` and `reject` hand it the same typed requests
//! `via_daemon` writes on `rpc.sock` ([`Action::requests`]) and follow the chat as the host
//! tells it ([`Followed`]: its events, and what only a caller in the process is given — how
//! the setup went, typed, and the driver's notices). Refusals are the daemon's, and how a
//! driver stopped is its typed `engine:stopped`. `approve` and `reject` ask with
//! [`CallOptions::no_autopilot`]: the driver the decision starts only marks the calls (the next
//! `flemmad send` runs them).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use flemma_engine::EngineEvent;
use flemma_protocol::event::{EngineStopped, StopLabel};
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

use super::CliError;
use super::via_daemon::Action;
use crate::engine_host::{CallOptions, DocumentRef, EngineHost, Followed};
use crate::process_context::ProcessContext;

/// This process's engine host, working on one chat. Shut down when dropped (what still runs is
/// cancelled and written first).
pub struct LocalHost {
    command: String,
    host: Arc<EngineHost>,
    /// What happens to the chat, from before the first request.
    followed: Receiver<Followed>,
    /// The chat, as the host names it (absolute, `.` and `..` removed).
    path: PathBuf,
}

impl LocalHost {
    /// Starts the host for the chat at `file` (an unreadable chat says so first, exit 2, as
    /// through a daemon).
    pub fn start(command: &str, file: &Path, context: &ProcessContext) -> Result<Self, CliError> {
        // Read as the user named it (its messages keep that spelling).
        crate::fsutil::read_chat(&context.dirs, file)
            .map_err(|error| CliError::unreadable(command, &error))?;
        let path = flemma_protocol::document::normalize(&context.absolute(file));
        let host = EngineHost::start(Arc::new(context.clone()))
            .map_err(|error| CliError::failed(command, format!("{error:#}")))?;
        let followed = host.follow(&path);
        Ok(Self {
            command: command.to_owned(),
            host,
            followed,
            path,
        })
    }

    /// The chat, as the host names it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chat's `uri` in the requests.
    pub fn uri(&self) -> String {
        self.path.display().to_string()
    }

    /// Asks the host `request` about the chat; a refusal is the host's message (exit 1), as
    /// through a daemon.
    pub fn call(
        &self,
        request: FlemmaRequest,
        options: CallOptions,
    ) -> Result<FlemmaResponse, CliError> {
        self.host
            .call_with(DocumentRef::path(&self.path), request, options)
            .map_err(|error| CliError::failed(&self.command, error.message))
    }

    /// Asks the host for `action` on the chat, the driver it starts running as `options` say,
    /// and waits for that driver (if one started) to stop. The ids of the calls decided.
    pub fn decide(&self, action: &Action, options: CallOptions) -> Result<Vec<String>, CliError> {
        self.decide_with(action.requests(&self.uri()), options)
    }

    /// [`LocalHost::decide`] with the requests given.
    pub fn decide_with(
        &self,
        requests: Vec<FlemmaRequest>,
        options: CallOptions,
    ) -> Result<Vec<String>, CliError> {
        let mut decided = Vec::new();
        let mut started = false;
        let mut refused = None;
        for request in requests {
            match self.call(request, options) {
                Ok(FlemmaResponse::Accepted(accepted)) => {
                    started |= accepted.started;
                    decided.extend(accepted.tool_ids);
                }
                Ok(_) => {}
                Err(error) => {
                    refused = Some(error);
                    break;
                }
            }
        }
        // The requests follow each other at once, so they reach the driver the first one
        // started (each "started" is answered before the host's thread has run the ones
        // before it: counting them would wait for stops that never come). Should a driver
        // end between them, the next one starts another with the same options, and shutdown
        // makes it leave, its decisions written.
        if started {
            let stopped = self.stopped();
            if stopped.reason == StopLabel::Error {
                let message = stopped.message.unwrap_or_default();
                return Err(CliError::failed(&self.command, message));
            }
        }
        refused.map_or(Ok(decided), Err)
    }

    /// What happens next to the chat; `None` once the host's thread has ended (however it
    /// ended: the thread lets its followers go).
    pub fn next(&self) -> Option<Followed> {
        self.followed.recv().ok()
    }

    /// Waits for the chat's driver to stop: how it stopped (`engine:stopped`).
    fn stopped(&self) -> EngineStopped {
        while let Some(followed) = self.next() {
            if let Followed::Event(EngineEvent::EngineStopped(stopped)) = followed {
                return stopped;
            }
        }
        host_ended()
    }

    /// Interrupts the chat's driver as Ctrl-C does (an asked agent's question, which nothing
    /// in this process can wait for).
    pub fn interrupt(&self) {
        self.host.interrupt();
    }

    /// On Ctrl-C (or `flemmad cancel`'s `SIGINT`), interrupts what the host runs: the driver
    /// stops `cancelled`, what ran marked `aborted`; a second one quits at once (exit 130).
    /// Watched from now on.
    pub fn interrupt_on_ctrl_c(&self) {
        let watched = crate::runtime::get().and_then(|runtime| {
            let _entered = runtime.enter();
            let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
            Ok((runtime, signal))
        });
        match watched {
            Ok((runtime, mut signal)) => {
                let host = self.host.clone();
                runtime.spawn(async move {
                    if signal.recv().await.is_some() {
                        host.interrupt();
                    }
                    // A second Ctrl-C does not wait for what the first one stops.
                    if signal.recv().await.is_some() {
                        super::Ui::root().warn("interrupted again: quitting without waiting");
                        std::process::exit(130);
                    }
                });
            }
            Err(error) => {
                tracing::warn!(%error, "cannot watch for Ctrl-C; it will stop the send without marking what ran");
            }
        }
    }
}

/// How a followed driver "stopped" when the host's thread ended first.
pub fn host_ended() -> EngineStopped {
    EngineStopped {
        reason: StopLabel::Error,
        message: Some("the engine host stopped".into()),
    }
}

impl Drop for LocalHost {
    fn drop(&mut self) {
        self.host.shutdown();
    }
}
