//! `flemmad approve FILE (TOOL_ID… | --all)`: mark pending tool calls approved in the file, so
//! the next `flemmad send` runs them. The edits are `flemma_ide::actions`' (the language server
//! makes the same ones).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use flemma_ide::actions::{self, ActionError};
use flemma_syntax::{Document, TextEdit};

use super::CliError;
use super::progress::shell_quote;
use super::via_daemon::{self, Action, DaemonClient, Follow};
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
    /// Only edit the file, even when a daemon (`flemmad serve`) runs.
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

/// How often an edit is rebuilt when the file changes between our read and our write.
const ATTEMPTS: usize = 20;

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
        let action = if args.all {
            Action::ApproveAll
        } else {
            Action::Approve(args.tool_ids.clone())
        };
        return via_daemon::run_with(
            client,
            "approve",
            &args.file,
            action,
            Follow::progress(args.detach),
        );
    }
    if args.detach {
        return Err(CliError::failed("approve", via_daemon::NO_DAEMON_TO_DETACH));
    }
    if let Some(id) = args.tool_ids.iter().find(|id| is_permission_id(id)) {
        return Err(CliError::failed("approve", no_daemon_to_answer(id)));
    }
    // The calls as the edit that was written saw them: flemmad records their approval, so
    // that they run in an untrusted chat too (docs/security.md).
    let approved = std::cell::RefCell::new(Vec::new());
    let ids = edit_placeholders(context, "approve", &args.file, |doc: &Document| {
        let built = build(doc)?;
        *approved.borrow_mut() = built
            .0
            .iter()
            .filter_map(|id| call_of(doc, id).map(|(name, input)| (id.clone(), name, input)))
            .collect();
        Ok(built)
    })?;
    record_approvals(context, &args.file, &approved.into_inner());
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

/// `flemmad approve FILE ID --hunks N,… [--reason …]`: the call is recorded as approved in
/// part (it runs the approved hunks only; its result names the others and the reason), then
/// approved as usual — through the daemon when one runs (`flemma/approveHunks`), else in the
/// file.
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
    crate::proposals::approved_in_part(&pending, hunks, args.reason.as_deref()).map_err(refused)?;
    if !args.no_daemon
        && let Some(client) = DaemonClient::connect(context)
    {
        return via_daemon::run_with(
            client,
            COMMAND,
            &args.file,
            Action::ApproveHunks {
                tool_id: tool_id.clone(),
                hunks: hunks.to_vec(),
                reason: args.reason.clone(),
            },
            Follow::progress(args.detach),
        );
    }
    if args.detach {
        return Err(CliError::failed(COMMAND, via_daemon::NO_DAEMON_TO_DETACH));
    }
    let note = crate::proposals::record_in_part(
        &context.dirs,
        &chat,
        tool_id,
        &pending,
        hunks,
        args.reason.as_deref(),
    )
    .map_err(refused)?;
    let ids = std::slice::from_ref(tool_id);
    let approved = edit_placeholders(context, COMMAND, &args.file, |doc: &Document| {
        actions::approve(doc, ids).map(|edits| (ids.to_vec(), edits))
    })
    .inspect_err(|_| crate::reviewed::forget_partial(&context.dirs, &chat, tool_id))?;
    let calls: Vec<_> = call_of_text(context, &args.file, tool_id)
        .into_iter()
        .collect();
    record_approvals(context, &args.file, &calls);
    super::Ui::new("approve").note(format!(
        "approved part of `{}`: {note}\nRun `flemmad send {}` to run it",
        approved.join(", "),
        shell_quote(&args.file.display().to_string())
    ));
    Ok(ExitCode::SUCCESS)
}

/// The call `id` of the chat at `file` as it is on disk now: its id, name and input.
fn call_of_text(
    context: &ProcessContext,
    file: &Path,
    id: &str,
) -> Option<(String, String, serde_json::Value)> {
    let text = fsutil::read_chat(&context.dirs, file).ok()?;
    let doc = flemma_syntax::parse(text.as_str());
    call_of(&doc, id).map(|(name, input)| (id.to_owned(), name, input))
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

/// The name and input of the tool use `id` (its input must be a JSON object).
fn call_of(doc: &Document, id: &str) -> Option<(String, serde_json::Value)> {
    let (_, _, tool_use) = doc.tool_use(id)?;
    let raw = tool_use.fence.as_ref().map_or("", |f| doc.slice(f.content));
    let input: serde_json::Value = serde_json::from_str(raw).ok()?;
    input.is_object().then(|| (tool_use.name.clone(), input))
}

/// Records that the user approved `calls` of the chat at `file` through flemmad.
fn record_approvals(
    context: &ProcessContext,
    file: &Path,
    calls: &[(String, String, serde_json::Value)],
) {
    let chat = context.absolute(file);
    let records = crate::trust::CallRecords::for_dirs(&context.dirs);
    for (id, name, input) in calls {
        if let Err(error) = records.record(&chat, flemma_config::Seen::Approved, id, name, input) {
            super::Ui::new("approve").warn(format!(
                "cannot record the approval of `{id}` ({error:#}); if the chat is untrusted, `flemmad send` will ask for it again"
            ));
        }
    }
}

/// Builds the edits of `build` on the chat as it is on disk without writing them: the check
/// of a command the daemon carries out. Exits 2 as [`edit_placeholders`] does.
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

/// Reads the chat, builds the edits with `build` on its document and writes the result
/// atomically (rebuilt when someone wrote the file meanwhile). A refusal (unknown or
/// already-resolved id) exits 2 with the pending ids; nothing is written.
pub fn edit_placeholders(
    context: &ProcessContext,
    command: &str,
    path: &Path,
    build: impl Fn(&Document) -> Result<(Vec<String>, Vec<TextEdit>), ActionError>,
) -> Result<Vec<String>, CliError> {
    for _ in 0..ATTEMPTS {
        let text = fsutil::read_chat(&context.dirs, path)
            .map_err(|error| CliError::unreadable(command, &error))?;
        let doc = flemma_syntax::parse(text.as_str());
        let (ids, edits) = build(&doc).map_err(|error| {
            CliError::unreadable(
                command,
                &anyhow::anyhow!("{error}; nothing was changed in {}", path.display()),
            )
        })?;
        let next = flemma_syntax::apply_edits(&text, &edits)
            .map_err(|error| CliError::failed(command, format!("cannot edit the chat: {error}")))?;
        let replaced = fsutil::replace_chat_if_unchanged(&context.dirs, path, &text, &next)
            .map_err(|error| CliError::failed(command, format!("{error:#}")))?;
        if replaced {
            return Ok(ids);
        }
    }
    Err(CliError::failed(
        command,
        format!(
            "{} keeps changing; nothing was changed after {ATTEMPTS} attempts, try again",
            path.display()
        ),
    ))
}
