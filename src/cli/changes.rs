//! `flemmad changes FILE [--call ID]` and `flemmad rewind FILE --to ID`: what a conversation's
//! tool calls changed in the project's files, and the way back (`crate::checkpoints`).

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::checkpoints::{CheckpointError, Checkpoints};

#[derive(Debug, Args)]
pub struct ChangesArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// Only what this call changed (its tool-use id, as in the chat).
    #[arg(long)]
    pub call: Option<String>,
}

#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The call to go back before (its tool-use id): the files are put back as they were just
    /// before it ran.
    #[arg(long)]
    pub to: String,
    /// Say what would be restored and removed, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also overwrite files changed since the conversation's last call (by you or another
    /// program), which are otherwise refused.
    #[arg(long)]
    pub force: bool,
}

fn checkpoints(command: &str, file: &std::path::Path) -> Result<Checkpoints, CliError> {
    if !file.is_file() {
        return Err(CliError::unreadable(
            command,
            &anyhow::anyhow!("{} is not a chat file that exists", file.display()),
        ));
    }
    Checkpoints::of(file).map_err(|error| CliError::failed(command, error))
}

fn failed(command: &str, error: CheckpointError) -> CliError {
    match error {
        CheckpointError::UnknownCall(_) => CliError::unreadable(command, &error.into()),
        other => CliError::failed(command, other),
    }
}

pub fn run_changes(args: ChangesArgs) -> Result<(), CliError> {
    let checkpoints = checkpoints("changes", &args.file)?;
    let text = checkpoints
        .changes(args.call.as_deref())
        .map_err(|error| failed("changes", error))?;
    if text.is_empty() {
        eprintln!(
            "flemmad changes: no call of {} changed the project's files (only calls recorded since checkpoints exist are known)",
            args.file.display()
        );
    } else {
        print!("{text}");
    }
    Ok(())
}

pub fn run_rewind(args: RewindArgs) -> Result<(), CliError> {
    let checkpoints = checkpoints("rewind", &args.file)?;
    let plan = checkpoints
        .rewind(&args.to, args.force, args.dry_run)
        .map_err(|error| failed("rewind", error))?;
    let refused = !args.force && !plan.changed_since.is_empty();
    let verb = if args.dry_run || refused {
        ("would restore", "would remove")
    } else {
        ("restored", "removed")
    };
    for path in &plan.restored {
        println!("{} {path}", verb.0);
    }
    for path in &plan.removed {
        println!("{} {path}", verb.1);
    }
    if refused {
        return Err(CliError::failed(
            "rewind",
            format!(
                "nothing was changed: {} changed since the conversation's last call ({}); look at them, then run again with --force to overwrite them",
                if plan.changed_since.len() == 1 {
                    "this file was"
                } else {
                    "these files were"
                },
                plan.changed_since.join(", ")
            ),
        ));
    }
    if plan.restored.is_empty() && plan.removed.is_empty() {
        eprintln!(
            "flemmad rewind: the files are already as they were before `{}`",
            args.to
        );
    } else if args.dry_run {
        eprintln!("flemmad rewind: --dry-run: nothing was changed");
    } else {
        eprintln!(
            "flemmad rewind: the files are as they were before `{}`; the chat itself is unchanged",
            args.to
        );
    }
    Ok(())
}
