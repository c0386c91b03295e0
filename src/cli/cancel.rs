//! `flemmad cancel FILE`: stops what runs for a chat — through the daemon when one runs, else
//! by interrupting the `flemmad send` that holds the chat's send lock (as Ctrl-C would).

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use super::via_daemon;
use crate::send_lock::{LockError, SendLock};

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The .chat file.
    pub file: PathBuf,
}

pub fn run(args: CancelArgs) -> Result<(), CliError> {
    if let Some(outcome) = via_daemon::cancel(&args.file) {
        return outcome;
    }
    // No daemon: a `flemmad send` of this chat in another process holds its lock.
    match SendLock::acquire(&args.file) {
        Ok(_free) => Err(CliError::failed(
            "cancel",
            format!(
                "nothing runs for {}: no daemon answers and no `flemmad send` of it runs",
                args.file.display()
            ),
        )),
        Err(LockError::Busy { owner, .. }) => {
            let pid = owner
                .strip_prefix("pid ")
                .and_then(|pid| pid.parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw);
            let Some(pid) = pid else {
                return Err(CliError::failed(
                    "cancel",
                    format!(
                        "a `flemmad send` of {} runs but its pid is unknown; press Ctrl-C in its terminal",
                        args.file.display()
                    ),
                ));
            };
            rustix::process::kill_process(pid, rustix::process::Signal::INT).map_err(|error| {
                CliError::failed(
                    "cancel",
                    format!("cannot interrupt the `flemmad send` ({owner}): {error}"),
                )
            })?;
            eprintln!(
                "flemmad cancel: interrupted the `flemmad send` of {} ({owner}); it marks what ran `aborted` and exits 130",
                args.file.display()
            );
            Ok(())
        }
        Err(error) => Err(CliError::failed("cancel", error)),
    }
}
