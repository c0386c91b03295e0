//! The commands' path without a daemon: the engine host the daemon runs ([`EngineHost`]),
//! started in this process. `send`, `approve` and `reject` hand it the same typed requests
//! `via_daemon` writes on `rpc.sock` ([`Action::requests`]) and follow the chat as the host
//! tells it ([`Followed`]: its events, the driver's notices among them, and what only a caller
//! in the process is given — why a driver could not be set up). Refusals are the daemon's, and how a
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

    /// Asks the host for `action` on the chat, the drivers it starts running as `options` say,
    /// and waits for them to stop. The ids of the calls decided.
    pub fn decide(&self, action: &Action, options: CallOptions) -> Result<Vec<String>, CliError> {
        self.decide_with(action.requests(&self.uri()), options)
    }

    /// [`LocalHost::decide`] with the requests given.
    pub fn decide_with(
        &self,
        requests: Vec<FlemmaRequest>,
        options: CallOptions,
    ) -> Result<Vec<String>, CliError> {
        let before = self.host.drivers(&self.path);
        let mut decided = Vec::new();
        let mut refused = None;
        for request in requests {
            match self.call(request, options) {
                Ok(FlemmaResponse::Accepted(accepted)) => decided.extend(accepted.tool_ids),
                Ok(_) => {}
                Err(error) => {
                    refused = Some(error);
                    break;
                }
            }
        }
        // The requests follow each other at once and mostly reach the driver the first one
        // started, but one that ended between two of them is followed by another. The host's
        // state counts the drivers its decisions started: each one's stop is waited for, so
        // that what the last one did is in the file when this returns.
        let stops = self.host.drivers(&self.path).stops_since(before);
        // The drivers' notices are shown as `via_daemon`'s progress shows them.
        let ui = crate::cli::ui::Ui::new(&self.command);
        let notice = |message: &str| ui.note(message);
        if let Err(stopped) = wait_for_stops(stops, || self.next(), notice) {
            let message = stopped.message.unwrap_or_default();
            return Err(CliError::failed(&self.command, message));
        }
        refused.map_or(Ok(decided), Err)
    }

    /// What happens next to the chat; `None` once the host's drivers' thread has ended (however it
    /// ended: the thread lets its followers go).
    pub fn next(&self) -> Option<Followed> {
        self.followed.recv().ok()
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

/// Waits for `count` drivers of the chat to stop (`engine:stopped`), taking what happens to it
/// from `next` and giving its notices (`engine:notice`) to `notice`: `Err` with the first that
/// stopped on an error (or the host's end, should it end first).
fn wait_for_stops(
    count: u64,
    mut next: impl FnMut() -> Option<Followed>,
    mut notice: impl FnMut(&str),
) -> Result<(), EngineStopped> {
    let mut failed = None;
    let mut stopped = 0;
    while stopped < count {
        match next() {
            Some(Followed::Event(EngineEvent::EngineStopped(stop))) => {
                stopped += 1;
                if stop.reason == StopLabel::Error && failed.is_none() {
                    failed = Some(stop);
                }
            }
            Some(Followed::Event(EngineEvent::EngineNotice(said))) => notice(&said.message),
            Some(_) => {}
            None => return Err(failed.unwrap_or_else(host_ended)),
        }
    }
    failed.map_or(Ok(()), Err)
}

/// How a followed driver "stopped" when the host's drivers' thread ended first.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_host::Drivers;

    fn stop(reason: StopLabel, message: Option<&str>) -> Option<Followed> {
        Some(Followed::Event(EngineEvent::EngineStopped(EngineStopped {
            reason,
            message: message.map(str::to_owned),
        })))
    }

    /// Issue 28: two decisions whose first driver ended before the second reached the host
    /// start two drivers; both are waited for, and the second's failure is the command's.
    #[test]
    fn every_driver_the_decisions_started_is_waited_for() {
        let before = Drivers::default();
        // The first driver ended before the host ran the second decision, which started
        // another: two started, none runs.
        let after = Drivers {
            started: 2,
            running: false,
        };
        assert_eq!(after.stops_since(before), 2);
        let followed = || {
            let mut followed = vec![
                stop(StopLabel::StepDone, None),
                Some(Followed::Event(EngineEvent::ConversationIdle(
                    flemma_protocol::event::Empty {},
                ))),
                Some(Followed::Event(EngineEvent::EngineNotice(
                    flemma_protocol::event::EngineNotice {
                        message: "thinking budget lowered".into(),
                    },
                ))),
                stop(StopLabel::Error, Some("cannot write the chat")),
            ]
            .into_iter();
            move || followed.next().flatten()
        };
        let mut noticed = Vec::new();
        let failed = wait_for_stops(after.stops_since(before), followed(), |said: &str| {
            noticed.push(said.to_owned())
        });
        assert_eq!(
            failed.map_err(|stopped| stopped.message),
            Err(Some("cannot write the chat".to_owned()))
        );
        // The drivers' notices are shown on the way.
        assert_eq!(noticed, ["thinking budget lowered"]);
        // Waiting for the first stop only (the race this replaced) missed it.
        assert_eq!(wait_for_stops(1, followed(), |_: &str| {}), Ok(()));
        // A driver that ran before the decisions stops too; nothing started, nothing waited.
        let running = Drivers {
            started: 3,
            running: true,
        };
        assert_eq!(running.stops_since(running), 1);
        let idle = Drivers {
            started: 3,
            running: false,
        };
        assert_eq!(idle.stops_since(idle), 0);
        assert_eq!(wait_for_stops(0, || None, |_: &str| {}), Ok(()));
        // The host's end stops the wait.
        assert_eq!(
            wait_for_stops(1, || None, |_: &str| {}).map_err(|stopped| stopped.reason),
            Err(StopLabel::Error)
        );
    }
}
