//! `flemmad compact FILE [--keep N] [--focus TEXT]` and `flemmad compact --undo FILE`: the
//! older turns of a chat replaced by a summary written into the chat as ordinary text, the
//! turns themselves moved byte for byte into an archive `.chat` where no tool of the chat can
//! write, and put back exactly by `--undo` (docs/context.md). The compaction itself is
//! `crate::compaction`'s; this is its command: through the running daemon when one answers
//! (`flemma/compact`, `flemma/compactUndo`: written by the document's writer, so an editor
//! with the chat open gets the change as an edit), else on the file.

use std::path::PathBuf;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::chat;
use crate::compaction::{self, Refused};
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The exchanges (a `@You:` and what answers it) kept verbatim at the end (default:
    /// `context.keep`).
    #[arg(long, conflicts_with = "undo")]
    pub keep: Option<u64>,
    /// What the summary should keep above all (a task, a file, a decision).
    #[arg(long, conflicts_with = "undo")]
    pub focus: Option<String>,
    /// Put back the turns the last compaction replaced, exactly as they were.
    #[arg(long)]
    pub undo: bool,
    /// Work on the file in this process even when a daemon (`flemmad serve`) runs (an editor
    /// with the chat open through it then finds the file changed under it).
    #[arg(long)]
    pub no_daemon: bool,
}

pub fn run(args: CompactArgs, context: &ProcessContext) -> Result<(), CliError> {
    if !args.no_daemon
        && let Some(client) = super::via_daemon::DaemonClient::connect(context)
    {
        return through_daemon(client, &args);
    }
    let dirs = &context.dirs;
    if let Some(owner) = crate::driver_lock::DriverLock::owner(dirs, &args.file) {
        return Err(CliError::failed(
            "compact",
            format!(
                "a send runs on this chat (pid {}); nothing was changed: compact once it has stopped",
                owner.pid
            ),
        ));
    }
    if args.undo {
        return match compaction::undo(dirs, &args.file) {
            Ok(restore) => {
                super::Ui::new("compact").line(&format!(
                    "restored the compacted turns from {} into {}",
                    restore.archive.display(),
                    args.file.display()
                ))?;
                Ok(())
            }
            Err(Refused::Unreadable(why)) => {
                Err(CliError::unreadable("compact", &anyhow::anyhow!(why)))
            }
            Err(refused) => Err(CliError::failed("compact", refused)),
        };
    }
    let loaded = chat::load("compact", flemma_ide::Purpose::Send, &args.file, context)?;
    let Some(resolved) = &loaded.analysis.config else {
        return Err(CliError::blocked(
            "compact",
            loaded.report(false),
            "the configuration does not resolve; fix the errors above",
        ));
    };
    let unchanged = |why: String| CliError::failed("compact", Refused::Unchanged(why));
    let doc = &*loaded.analysis.document;
    let text = doc.text();
    let keep = args.keep.unwrap_or(resolved.config.context.keep).max(1);
    let plan =
        compaction::plan(doc, usize::try_from(keep).unwrap_or(usize::MAX)).map_err(unchanged)?;
    let summariser = compaction::Summariser::for_chat(
        &loaded.analysis.layers,
        &resolved.config,
        &args.file,
        None,
        context,
    )
    .map_err(|error| CliError::failed("compact", format!("{error:#}")))?;
    let summary = crate::runtime::get()?
        .block_on(summariser.summarise(
            &text[plan.start..plan.cut],
            args.focus.as_deref(),
            CancellationToken::new(),
        ))
        .map_err(unchanged)?;
    let compacted =
        compaction::prepare(dirs, &args.file, text, plan, &summary).map_err(unchanged)?;
    let next = compacted.apply(text);
    let written = crate::fsutil::replace_chat_if_unchanged(dirs, &args.file, text, &next)
        .map_err(|error| format!("{error:#}"))
        .and_then(|written| {
            written.then_some(()).ok_or_else(|| {
                "the chat changed while its summary was written; compact again".to_owned()
            })
        });
    if let Err(why) = written {
        compacted.discard();
        return Err(unchanged(why));
    }
    let mut meter = flemma_provider::Meter::new();
    let before = meter.estimate(&loaded.analysis.evaluation.conversation, &[]);
    let after = chat::load_text(
        "compact",
        flemma_ide::Purpose::Send,
        &args.file,
        next,
        context,
    )
    .map(|loaded| meter.estimate(&loaded.analysis.evaluation.conversation, &[]))
    .unwrap_or(before);
    super::Ui::new("compact").line(&format!(
        "compacted {} messages into a summary by {} (≈{} → ≈{} tokens of messages); the turns are kept in {}; `flemmad compact --undo {}` puts them back",
        compacted.plan.messages,
        summariser.model(),
        crate::context::thousands(before),
        crate::context::thousands(after),
        compacted.archive.display(),
        args.file.display()
    ))?;
    Ok(())
}

/// The compaction (or its undo) asked of the daemon, which writes it through the document's
/// writer (an editor with the chat open, else the file); follows the document's events until
/// its driver stops and says what happened as the in-process command does.
fn through_daemon(
    mut client: super::via_daemon::DaemonClient,
    args: &CompactArgs,
) -> Result<(), CliError> {
    use flemma_protocol::event::EngineEvent;
    use flemma_protocol::methods::{CompactParams, CompactUndoParams, FlemmaRequest};
    let uri = client.subscribe_chat("compact", &args.file)?;
    let failed = |error: super::via_daemon::ClientError| error.failed("compact");
    let request = if args.undo {
        FlemmaRequest::CompactUndo(CompactUndoParams { uri, line: None })
    } else {
        FlemmaRequest::Compact(CompactParams {
            uri,
            line: None,
            focus: args.focus.clone(),
            keep: args
                .keep
                .map(|keep| u32::try_from(keep).unwrap_or(u32::MAX)),
        })
    };
    client.call(&request).map_err(failed)?;
    let mut outcome: Option<Result<String, String>> = None;
    loop {
        let event = client.next_event().map_err(failed)?;
        let Some(event) = super::via_daemon::decode_event(&event) else {
            continue;
        };
        match event {
            EngineEvent::ContextCompacted(data) => {
                outcome = Some(Ok(crate::compaction::notice(&data)));
            }
            EngineEvent::ContextRestored(data) => {
                outcome = Some(Ok(crate::compaction::restored_notice(&data)));
            }
            EngineEvent::ContextCompactionFailed(failed) => outcome = Some(Err(failed.message)),
            EngineEvent::EngineStopped(stopped) => {
                let why = stopped
                    .message
                    .unwrap_or_else(|| "the daemon did nothing".to_owned());
                break match outcome.unwrap_or(Err(format!("{why}; nothing was changed"))) {
                    Ok(line) => {
                        super::Ui::new("compact").line(&format!("{line} (through the daemon)"))?;
                        Ok(())
                    }
                    Err(why) => Err(CliError::failed("compact", why)),
                };
            }
            _ => {}
        }
    }
}
