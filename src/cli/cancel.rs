//! `flemmad cancel FILE`: stops what runs for a chat — through the daemon when one runs, else
//! by interrupting the `flemmad send` that holds the chat's driver lock (as Ctrl-C would).

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use super::via_daemon;
use crate::driver_lock::DriverLock;
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// Do not ask a running daemon: only interrupt a `flemmad send` of the chat running in
    /// another process.
    #[arg(long)]
    pub no_daemon: bool,
}

pub fn run(args: CancelArgs, context: &ProcessContext) -> Result<(), CliError> {
    if !args.no_daemon
        && let Some(outcome) = via_daemon::cancel(context, &args.file)
    {
        return outcome;
    }
    // No daemon: a `flemmad send` of this chat in another process holds its lock.
    match DriverLock::owner(&context.dirs, &args.file) {
        None => Err(CliError::failed(
            "cancel",
            format!(
                "nothing runs for {}: {}",
                args.file.display(),
                if args.no_daemon {
                    "no `flemmad send` of it runs (the daemon was not asked: --no-daemon)"
                } else {
                    "no daemon answers and no `flemmad send` of it runs"
                }
            ),
        )),
        Some(owner) if owner.role != "send" => Err(CliError::failed(
            "cancel",
            format!(
                "{} is driven by {owner}, which does not answer here; cancel it where it runs (its editor's Cancel)",
                args.file.display()
            ),
        )),
        Some(owner) => {
            let pid = i32::try_from(owner.pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .ok_or_else(|| CliError::failed("cancel", format!("{owner} has no valid pid")))?;
            rustix::process::kill_process(pid, rustix::process::Signal::INT).map_err(|error| {
                CliError::failed("cancel", format!("cannot interrupt {owner}: {error}"))
            })?;
            super::Ui::new("cancel").note(format!(
                "interrupted the `flemmad send` of {} (pid {}); it marks what ran `aborted` and exits 130",
                args.file.display(),
                owner.pid
            ));
            Ok(())
        }
    }
}
