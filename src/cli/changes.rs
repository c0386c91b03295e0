//! `flemmad changes FILE [--call ID | --turn N]` and `flemmad rewind FILE --to ID`: what a conversation's
//! tool calls changed in the project's files, and the way back (`crate::checkpoints`).

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Ui};
use crate::checkpoints::{CheckpointError, Checkpoints};
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct ChangesArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// Only what this call changed (its tool-use id, as in the chat).
    #[arg(long, conflicts_with = "turn")]
    pub call: Option<String>,
    /// Only what the calls of the N-th answer changed (1 is the chat's first `@Assistant:`
    /// message).
    #[arg(long, value_name = "N")]
    pub turn: Option<usize>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").args(["files", "chat", "both"])))]
pub struct RewindArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The call to go back before (its tool-use id): the files are put back as they were just
    /// before it ran; with --chat, the chat is cut before the answer that made it.
    #[arg(long, required_unless_present = "undo_chat")]
    pub to: Option<String>,
    /// Put back the project's files only (the default).
    #[arg(long)]
    pub files: bool,
    /// Cut the chat back instead: the `@Assistant:` message that made the call and everything
    /// after it go; the whole chat is kept first under $XDG_STATE_HOME/flemma/rewound/
    /// (--undo-chat puts it back). The files are not changed.
    #[arg(long)]
    pub chat: bool,
    /// Put back the files and cut the chat back (the chat only when the files were).
    #[arg(long)]
    pub both: bool,
    /// Put the chat back as it was before its last --chat/--both cut, while the chat is still
    /// as that cut left it.
    #[arg(long, conflicts_with_all = ["to", "files", "chat", "both", "dry_run", "force"])]
    pub undo_chat: bool,
    /// Say what would be restored and removed, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also overwrite files changed since the conversation's last call (by you or another
    /// program), which are otherwise refused.
    #[arg(long)]
    pub force: bool,
    /// With --chat or --both: cut the chat in this process even when a daemon (`flemmad
    /// serve`) runs (an editor with the chat open through it then finds the file changed
    /// under it).
    #[arg(long)]
    pub no_daemon: bool,
}

fn checkpoints(
    command: &str,
    file: &std::path::Path,
    context: &ProcessContext,
) -> Result<Checkpoints, CliError> {
    if !file.is_file() {
        return Err(CliError::unreadable(
            command,
            &anyhow::anyhow!("{} is not a chat file that exists", file.display()),
        ));
    }
    crate::checkpoints::of_chat(context, file).map_err(|error| CliError::failed(command, error))
}

fn failed(command: &str, error: CheckpointError) -> CliError {
    match error {
        CheckpointError::UnknownCall(_) => CliError::unreadable(command, &error.into()),
        other => CliError::failed(command, other),
    }
}

/// The tool-use ids of the `turn`-th assistant message of `file` (1-based).
fn calls_of_turn(
    context: &ProcessContext,
    file: &std::path::Path,
    turn: usize,
) -> Result<Vec<String>, CliError> {
    let text = crate::fsutil::read_chat(&context.dirs, file)
        .map_err(|error| CliError::unreadable("changes", &error))?;
    let doc = flemma_syntax::parse(text);
    let answers: Vec<_> = doc
        .messages()
        .iter()
        .filter(|m| m.role == flemma_syntax::Role::Assistant)
        .collect();
    let Some(answer) = turn.checked_sub(1).and_then(|i| answers.get(i)) else {
        return Err(CliError::unreadable(
            "changes",
            &anyhow::anyhow!(
                "{} has {} answer{} (`@Assistant:` messages); --turn counts them from 1",
                file.display(),
                answers.len(),
                if answers.len() == 1 { "" } else { "s" }
            ),
        ));
    };
    Ok(answer
        .tool_uses()
        .map(|(_, tool_use)| tool_use.id.clone())
        .collect())
}

pub fn run_changes(args: ChangesArgs, context: &ProcessContext) -> Result<(), CliError> {
    let checkpoints = checkpoints("changes", &args.file, context)?;
    let calls = match (&args.call, args.turn) {
        (Some(id), _) => Some(vec![id.clone()]),
        (None, Some(turn)) => Some(calls_of_turn(context, &args.file, turn)?),
        (None, None) => None,
    };
    let text = checkpoints
        .changes(calls.as_deref())
        .map_err(|error| failed("changes", error))?;
    let ui = Ui::new("changes");
    if text.is_empty() {
        ui.note(format_args!(
            "no call of {} changed the project's files (only calls recorded since checkpoints exist are known)",
            args.file.display()
        ));
    } else {
        ui.write(&text)?;
    }
    Ok(())
}

pub fn run_rewind(args: RewindArgs, context: &ProcessContext) -> Result<(), CliError> {
    let ui = Ui::new("rewind");
    if args.undo_chat {
        let archive = crate::rewind_chat::undo(&context.dirs, &args.file)
            .map_err(|why| CliError::failed("rewind", why))?;
        ui.note(format_args!(
            "the chat is as it was before it was cut back (from {})",
            archive.display()
        ));
        return Ok(());
    }
    let Some(to) = args.to.as_deref() else {
        return Err(CliError::failed(
            "rewind",
            "--to ID names the call to go back before",
        ));
    };
    if (args.chat || args.both)
        && !args.no_daemon
        && let Some(client) = super::via_daemon::DaemonClient::connect(context)
    {
        return rewind_through_daemon(&ui, client, &args, to);
    }
    // The chat's cut is found first: --both changes nothing when the call is not in the chat.
    let chat_cut = if args.chat || args.both {
        let text = crate::fsutil::read_chat(&context.dirs, &args.file)
            .map_err(|error| CliError::unreadable("rewind", &error))?;
        let cut = crate::rewind_chat::cut_point(&text, to)
            .map_err(|why| CliError::unreadable("rewind", &anyhow::anyhow!(why)))?;
        Some((text, cut))
    } else {
        None
    };
    if !args.chat {
        rewind_files(&ui, &args, to, context)?;
    }
    let Some((text, cut)) = chat_cut else {
        return Ok(());
    };
    let what = crate::rewind_chat::describe(to, cut.line as u64, cut.messages as u64);
    if args.dry_run {
        ui.line(&format!("would cut {what}"))?;
        return Ok(());
    }
    let archive = crate::rewind_chat::cut(&context.dirs, &args.file, &text, &cut)
        .map_err(|why| CliError::failed("rewind", why))?;
    ui.line(&format!("cut {what}"))?;
    say_chat_kept(&ui, &archive.display(), &args.file);
    Ok(())
}

/// Where the whole chat as it was is kept, and how to put it back.
fn say_chat_kept(ui: &Ui, archive: &dyn std::fmt::Display, file: &std::path::Path) {
    ui.note(format_args!(
        "the whole chat as it was is kept in {archive}; `flemmad rewind {} --undo-chat` puts it back",
        super::progress::shell_quote(&file.display().to_string()),
    ));
}

fn rewind_files(
    ui: &Ui,
    args: &RewindArgs,
    to: &str,
    context: &ProcessContext,
) -> Result<(), CliError> {
    let checkpoints = checkpoints("rewind", &args.file, context)?;
    let plan = checkpoints
        .rewind(to, args.force, args.dry_run)
        .map_err(|error| failed("rewind", error))?;
    let refused = !args.force && !plan.changed_since.is_empty();
    print_files(ui, &plan.restored, &plan.removed, args.dry_run || refused)?;
    if refused {
        return Err(CliError::failed(
            "rewind",
            crate::rewind_chat::changed_since(&plan.changed_since, "run again with --force"),
        ));
    }
    let chat = if args.both {
        "the chat is cut back next"
    } else {
        "the chat itself is unchanged"
    };
    if plan.restored.is_empty() && plan.removed.is_empty() {
        ui.note(format_args!(
            "the files are already as they were before `{to}`"
        ));
    } else if args.dry_run {
        ui.note("--dry-run: nothing was changed");
    } else {
        ui.note(format_args!(
            "the files are as they were before `{to}`; {chat}"
        ));
    }
    Ok(())
}

/// The files a rewind put back (`would`: would put back) and removed, one a line.
fn print_files(
    ui: &Ui,
    restored: &[String],
    removed: &[String],
    would: bool,
) -> std::io::Result<()> {
    let (restore, remove) = if would {
        ("would restore", "would remove")
    } else {
        ("restored", "removed")
    };
    for path in restored {
        ui.line(&format!("{restore} {path}"))?;
    }
    for path in removed {
        ui.line(&format!("{remove} {path}"))?;
    }
    Ok(())
}

/// `rewind --chat`/`--both` asked of the daemon (`flemma/rewind`): the daemon puts the files
/// back and cuts the chat through the document's writer (an editor with the chat open gets
/// the cut as an edit, the file is not written under it); follows the document's events until
/// the cut is written and says what happened as the in-process command does.
fn rewind_through_daemon(
    ui: &Ui,
    mut client: super::via_daemon::DaemonClient,
    args: &RewindArgs,
    to: &str,
) -> Result<(), CliError> {
    use flemma_protocol::event::EngineEvent;
    let uri = client.subscribe_chat("rewind", &args.file)?;
    let failed = |error: super::via_daemon::ClientError| error.failed("rewind");
    let request =
        flemma_protocol::methods::FlemmaRequest::Rewind(flemma_protocol::methods::RewindParams {
            uri,
            tool_id: to.to_owned(),
            files: Some(args.both),
            chat: Some(true),
            force: Some(args.force),
            dry_run: Some(args.dry_run),
        });
    let answer = client.call(&request).map_err(failed)?;
    let result: flemma_protocol::engine::RewindResult =
        serde_json::from_value(answer).map_err(|error| {
            CliError::failed(
                "rewind",
                format!("the daemon's answer is not understood: {error}"),
            )
        })?;
    print_files(
        ui,
        &result.restored,
        &result.removed,
        result.dry_run || result.refused,
    )?;
    if result.refused {
        return Err(CliError::failed("rewind", result.message));
    }
    let Some(cut) = &result.chat else {
        return Err(CliError::failed("rewind", result.message));
    };
    if result.dry_run {
        ui.line(&format!(
            "would cut {}",
            crate::rewind_chat::describe(to, cut.line, cut.messages)
        ))?;
        ui.note("--dry-run: nothing was changed");
        return Ok(());
    }
    let mut outcome: Option<Result<flemma_protocol::event::ChatRewound, String>> = None;
    loop {
        let event = client.next_event().map_err(failed)?;
        let Some(event) = super::via_daemon::decode_event(&event) else {
            continue;
        };
        match event {
            EngineEvent::ChatRewound(data) => outcome = Some(Ok(data)),
            EngineEvent::ChatRewindFailed(failed) => outcome = Some(Err(failed.message)),
            EngineEvent::EngineStopped(stopped) => {
                let why = stopped
                    .message
                    .unwrap_or_else(|| "the daemon did nothing".to_owned());
                break match outcome.unwrap_or(Err(format!("{why}; the chat was not cut"))) {
                    Ok(data) => {
                        ui.line(&format!(
                            "cut {} (through the daemon)",
                            crate::rewind_chat::describe(to, data.line, data.messages)
                        ))?;
                        say_chat_kept(ui, &data.archive, &args.file);
                        Ok(())
                    }
                    Err(why) => Err(CliError::failed("rewind", why)),
                };
            }
            _ => {}
        }
    }
}
