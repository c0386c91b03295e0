//! `flemmad reject FILE TOOL_ID [--reason TEXT]`: reject a pending tool call (with a reason:
//! an error result holding `User feedback: <reason>`) through the engine host — the daemon's,
//! which goes on with the chat, else this process's (`cli/local_host`), which only marks it,
//! so the next `flemmad send` tells the model.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use flemma_ide::actions;
use flemma_protocol::methods::{FlemmaRequest, ToolCallParams};

use super::CliError;
use super::approve::{MARK_ONLY, check_placeholders, is_permission_id, no_daemon_to_answer};
use super::local_host::LocalHost;
use super::progress::shell_quote;
use super::via_daemon::{self, Action, DaemonClient, Follow};
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The id of the tool call to reject.
    pub tool_id: String,
    /// Why: written into the result as `User feedback: <reason>` for the model to read.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Only mark the decision in this process (the next `flemmad send` acts on it), even when a
    /// daemon (`flemmad serve`) runs.
    #[arg(long)]
    pub no_daemon: bool,
    /// With a daemon: return once it took the rejection instead of following the cycle.
    #[arg(long, conflicts_with = "no_daemon")]
    pub detach: bool,
}

/// What `flemmad reject` asks the engine.
fn action(args: &RejectArgs) -> Action {
    Action::Reject {
        tool_id: args.tool_id.clone(),
        reason: args.reason.clone(),
    }
}

pub fn run(args: RejectArgs, context: &ProcessContext) -> Result<ExitCode, CliError> {
    let build = |doc: &flemma_syntax::Document| {
        actions::reject(doc, &args.tool_id, args.reason.as_deref())
            .map(|edit| (vec![args.tool_id.clone()], vec![edit]))
    };
    if !args.no_daemon
        && let Some(client) = DaemonClient::connect(context)
    {
        if !is_permission_id(&args.tool_id) {
            check_placeholders(context, "reject", &args.file, build)?;
        }
        return via_daemon::run_with(
            client,
            "reject",
            &args.file,
            action(&args),
            Follow::progress(args.detach),
        );
    }
    if args.detach {
        return Err(CliError::failed("reject", via_daemon::NO_DAEMON_TO_DETACH));
    }
    if is_permission_id(&args.tool_id) {
        return Err(CliError::failed(
            "reject",
            no_daemon_to_answer(&args.tool_id),
        ));
    }
    // Checked here first (exit 2, nothing changed), as with a daemon.
    check_placeholders(context, "reject", &args.file, build)?;
    let host = LocalHost::start("reject", &args.file, context)?;
    let mut requests = action(&args).requests(&host.uri());
    if args.reason.as_deref().is_some_and(|r| !r.trim().is_empty()) {
        // The rejection with its reason is resolved at once into the error result the model
        // reads (`flemma/execute` of a rejected call), as the daemon's autopilot resolves it.
        requests.push(FlemmaRequest::Execute(ToolCallParams {
            uri: host.uri(),
            tool_id: args.tool_id.clone(),
        }));
    }
    host.decide_with(requests, MARK_ONLY)?;
    super::Ui::new("reject").note(format!(
        "rejected `{}`; run `flemmad send {}` to tell the model",
        args.tool_id,
        shell_quote(&args.file.display().to_string())
    ));
    Ok(ExitCode::SUCCESS)
}
