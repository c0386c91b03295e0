//! `flemmad approve FILE (TOOL_ID… | --all)`: approve pending tool calls through the engine
//! host — the daemon's, which goes on with the chat (its autopilot runs them), else this
//! process's (`cli/local_host`), which only marks them approved in the file, so the next
//! `flemmad send` runs them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use flemma_ide::actions::{self, ActionError};
use flemma_syntax::{Document, TextEdit};

use super::CliError;
use super::local_host::LocalHost;
use super::progress::shell_quote;
use super::via_daemon::{self, Action, DaemonClient, Follow};
use crate::engine_host::CallOptions;
use crate::fsutil;
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["tool_ids", "all"])))]
#[command(
    override_usage = "flemmad approve [OPTIONS] <FILE> <TOOL_IDS>...\n       flemmad approve [OPTIONS] <FILE> --all"
)]
pub struct ApproveArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The ids of the tool calls to approve (as `flemmad send` listed them).
    pub tool_ids: Vec<String>,
    /// Approve every pending tool call.
    #[arg(long, conflicts_with = "tool_ids")]
    pub all: bool,
    /// Only mark the decision in this process (the next `flemmad send` acts on it), even when a
    /// daemon (`flemmad serve`) runs.
    #[arg(long)]
    pub no_daemon: bool,
    /// With a daemon: return once it took the approval instead of following the cycle.
    #[arg(long, conflicts_with = "no_daemon")]
    pub detach: bool,
    /// Approve only these hunks of one pending `write` or `edit` (numbered from 1, in the
    /// order `flemmad status FILE --diff` shows its `@@` lines); the others are rejected and
    /// the call's result tells the model which.
    #[arg(
        long,
        value_delimiter = ',',
        conflicts_with = "all",
        value_name = "N,…"
    )]
    pub hunks: Option<Vec<u32>>,
    /// With `--hunks`: why the other hunks were rejected (the model reads it).
    #[arg(long, requires = "hunks")]
    pub reason: Option<String>,
}

pub fn run(args: ApproveArgs, context: &ProcessContext) -> Result<ExitCode, CliError> {
    if let Some(hunks) = &args.hunks {
        return approve_hunks(&args, hunks, context);
    }
    let build = |doc: &Document| {
        if args.all {
            actions::approve_all(doc)
        } else {
            actions::approve(doc, &args.tool_ids).map(|edits| (args.tool_ids.clone(), edits))
        }
    };
    if !args.no_daemon
        && let Some(client) = DaemonClient::connect(context)
    {
        // Unknown or resolved ids are refused here (exit 2), as without a daemon; an asked
        // agent's question is the daemon's to know.
        if args.all || !args.tool_ids.iter().all(|id| is_permission_id(id)) {
            check_placeholders(context, "approve", &args.file, build)?;
        }
        return via_daemon::run_with(
            client,
            "approve",
            &args.file,
            action(&args),
            Follow::progress(args.detach),
        );
    }
    if args.detach {
        return Err(CliError::failed("approve", via_daemon::NO_DAEMON_TO_DETACH));
    }
    if let Some(id) = args.tool_ids.iter().find(|id| is_permission_id(id)) {
        return Err(CliError::failed("approve", no_daemon_to_answer(id)));
    }
    // Checked here first (exit 2, nothing changed), as with a daemon.
    check_placeholders(context, "approve", &args.file, build)?;
    let ids =
        LocalHost::start("approve", &args.file, context)?.decide(&action(&args), MARK_ONLY)?;
    let list = ids
        .iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ");
    super::Ui::new("approve").note(format!(
        "approved {list}; run `flemmad send {}` to run {}",
        shell_quote(&args.file.display().to_string()),
        if ids.len() == 1 { "it" } else { "them" }
    ));
    Ok(ExitCode::SUCCESS)
}

/// What `flemmad approve` asks the engine.
fn action(args: &ApproveArgs) -> Action {
    if args.all {
        Action::ApproveAll
    } else {
        Action::Approve(args.tool_ids.clone())
    }
}

/// How the in-process host takes a decision: it only marks the calls (the next `flemmad send`
/// runs them), where the daemon goes on with the chat's autopilot.
pub(super) const MARK_ONLY: CallOptions = CallOptions { no_autopilot: true };

/// `flemmad approve FILE ID --hunks N,… [--reason …]`: the call is recorded as approved in
/// part (it runs the approved hunks only; its result names the others and the reason), then
/// approved as usual, with `flemma/approveHunks` — through the daemon when one runs, else through
/// this process's engine host.
fn approve_hunks(
    args: &ApproveArgs,
    hunks: &[u32],
    context: &ProcessContext,
) -> Result<ExitCode, CliError> {
    const COMMAND: &str = "approve";
    let [tool_id] = args.tool_ids.as_slice() else {
        return Err(CliError::unreadable(
            COMMAND,
            &anyhow::anyhow!("--hunks approves part of one call: name exactly one tool id"),
        ));
    };
    let text = fsutil::read_chat(&context.dirs, &args.file)
        .map_err(|error| CliError::unreadable(COMMAND, &error))?;
    let chat = context.absolute(&args.file);
    let refused = |why: String| {
        CliError::unreadable(
            COMMAND,
            &anyhow::anyhow!("{why}; nothing was changed in {}", args.file.display()),
        )
    };
    // Checked here first (exit 2, nothing changed), with a daemon too: the daemon checks
    // again on the chat as it holds it.
    let pending = crate::proposals::pending(&chat, text, tool_id, context).map_err(refused)?;
    let (_, note) = crate::proposals::approved_in_part(&pending, hunks, args.reason.as_deref())
        .map_err(refused)?;
    let action = Action::ApproveHunks {
        tool_id: tool_id.clone(),
        hunks: hunks.to_vec(),
        reason: args.reason.clone(),
    };
    if !args.no_daemon
        && let Some(client) = DaemonClient::connect(context)
    {
        let follow = Follow::progress(args.detach);
        return via_daemon::run_with(client, COMMAND, &args.file, action, follow);
    }
    if args.detach {
        return Err(CliError::failed(COMMAND, via_daemon::NO_DAEMON_TO_DETACH));
    }
    let approved = LocalHost::start(COMMAND, &args.file, context)?.decide(&action, MARK_ONLY)?;
    super::Ui::new("approve").note(format!(
        "approved part of `{}`: {note}\nRun `flemmad send {}` to run it",
        approved.join(", "),
        shell_quote(&args.file.display().to_string())
    ));
    Ok(ExitCode::SUCCESS)
}

/// Whether `id` names an asked agent's question rather than a tool call.
pub(super) fn is_permission_id(id: &str) -> bool {
    crate::agent_permissions::is_permission_id(id)
}

/// Why an asked agent's question cannot be answered without a daemon.
pub(super) fn no_daemon_to_answer(id: &str) -> String {
    format!(
        "`{id}` is an asked agent's question, which only the daemon that runs the agent can answer, and no daemon answers; start it with `flemmad serve` and send the chat again"
    )
}

/// Builds the edits of `build` on the chat as it is on disk without writing them: the check
/// of a command the engine host carries out (the daemon's, or this process's). A refusal
/// (unknown or already-resolved id) exits 2 with the pending ids.
pub fn check_placeholders(
    context: &ProcessContext,
    command: &str,
    path: &Path,
    build: impl Fn(&Document) -> Result<(Vec<String>, Vec<TextEdit>), ActionError>,
) -> Result<Vec<String>, CliError> {
    let text = fsutil::read_chat(&context.dirs, path)
        .map_err(|error| CliError::unreadable(command, &error))?;
    let doc = flemma_syntax::parse(text.as_str());
    build(&doc).map(|(ids, _)| ids).map_err(|error| {
        CliError::unreadable(
            command,
            &anyhow::anyhow!("{error}; nothing was changed in {}", path.display()),
        )
    })
}
