//! `flemmad send FILE`: the agentic main job. Loads the chat (recovering orphaned jobs), then
//! runs the engine's cycle with autopilot — stream the reply, run the approved tools and jobs,
//! send their results — writing every change into the file as it happens, until the
//! conversation is idle, waits for an approval, or fails. Through the daemon when one runs
//! (`via_daemon`), else through an engine host started in this process (`cli/local_host`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use clap::Args;
use flemma_engine::{EngineEvent, PendingCall};
use flemma_protocol::engine::UsageTotals;
use flemma_protocol::methods::{DocumentParams, FlemmaRequest, FlemmaResponse, ModeParams};

use super::CliError;
use super::error::{CycleEnd, cycle_end};
use super::local_host::LocalHost;
use super::progress::{Progress, approval_listing, sending_line, show_setup, summary};
use super::proposed::diffs;
use crate::engine_driver::Report;
use crate::engine_host::{CallOptions, Followed};
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The .chat file to send. Its last `@You:` message must hold what you want to say (or
    /// its tool calls must be waiting to run).
    pub file: PathBuf,
    /// Print every lifecycle event as one JSON line on stdout ({"name","uri","data"},
    /// protocol/events.md).
    #[arg(long)]
    pub events: bool,
    /// Print only errors and the final summary on stderr (no streamed text).
    #[arg(long)]
    pub quiet: bool,
    /// Do one advance (one reply, or one round of tools) instead of running with autopilot.
    /// Runs in this process even when a daemon runs.
    #[arg(long)]
    pub no_autopilot: bool,
    /// Run in this process even when a daemon (`flemmad serve`) runs.
    #[arg(long)]
    pub no_daemon: bool,
    /// With a daemon: return once it took the send instead of following it.
    #[arg(long, conflicts_with_all = ["no_daemon", "no_autopilot"])]
    pub detach: bool,
    /// When calls wait for approval, show under each `write` and `edit` what it would change,
    /// as a diff against the file as it is now (as `flemmad status --diff`).
    #[arg(long)]
    pub diff: bool,
    /// What the chat's tools may change for this send (docs/modes.md): `ask` only reads (the
    /// reading tools, and bash in a sandbox where the project is read-only), `default` follows
    /// the approval settings, `auto-edit` also approves `write` and `edit` inside the project.
    /// The chat's frontmatter may still make it stricter. Runs in this process even when a
    /// daemon runs.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(flemma_config::MODES))]
    pub mode: Option<String>,
}

pub fn run(args: SendArgs, context: &ProcessContext) -> Result<ExitCode, CliError> {
    if !args.no_daemon && !args.no_autopilot && args.mode.is_none() {
        let follow = super::via_daemon::Follow {
            events: args.events,
            quiet: args.quiet,
            detach: args.detach,
            diff: args.diff,
        };
        let action = super::via_daemon::Action::Send;
        if let Some(outcome) = super::via_daemon::run(context, "send", &args.file, action, follow) {
            return outcome;
        }
    }
    if args.detach {
        return Err(CliError::failed(
            "send",
            super::via_daemon::NO_DAEMON_TO_DETACH,
        ));
    }
    in_process(&args, context)
}

/// The send through this process's engine host (`cli/local_host`): the same `flemma/send`,
/// followed as `via_daemon` follows the daemon's, decided by the same `cycle_end`.
fn in_process(args: &SendArgs, context: &ProcessContext) -> Result<ExitCode, CliError> {
    let path = &args.file;
    let host = LocalHost::start("send", path, context)?;
    if let Some(mode) = &args.mode {
        // The mode chosen for this send: a runtime layer (the frontmatter may narrow it).
        let mode = FlemmaRequest::Mode(ModeParams {
            uri: host.uri(),
            mode: mode.clone(),
        });
        host.call(mode, CallOptions::default())?;
    }
    // The reply must have somewhere to go before it is paid for.
    if let Err(error) = crate::fsutil::check_writable(path) {
        return Err(CliError::failed(
            "send",
            format!("{error:#}; nothing was sent"),
        ));
    }
    let ui = super::Ui::root();
    let mut progress = Progress::new(
        ui.clone(),
        flemma_protocol::document::path_to_uri(host.path()),
        args.events,
        args.quiet,
    );
    host.interrupt_on_ctrl_c();
    let options = CallOptions {
        no_autopilot: args.no_autopilot,
    };
    let document = || DocumentParams { uri: host.uri() };
    host.call(FlemmaRequest::Send(document()), options)?;
    let started = Instant::now();
    // Whether a request really went out: a step that only runs tools, or an `(approved)` sent
    // back to pending, asks the provider nothing.
    let mut requested = None;
    let mut pending = Vec::new();
    let mut asked = Vec::new();
    let stopped = loop {
        let Some(followed) = host.next() else {
            break super::local_host::host_ended();
        };
        let event = match followed {
            Followed::SetupFailed(message) => {
                return Err(CliError::failed("send", message));
            }
            Followed::Event(event) => event,
        };
        match event {
            EngineEvent::EngineStopped(stopped) => break stopped,
            EngineEvent::EngineSetup(setup) => {
                let shown = show_setup(&ui, path, &setup, args.quiet);
                requested =
                    Some(progress.announce_on_first_request(sending_line(path, &setup, "")));
                progress.show(Report::Event(EngineEvent::EngineSetup(setup)));
                shown?;
            }
            EngineEvent::RequestText(streamed) => progress.show(Report::Text(streamed.text)),
            EngineEvent::RequestThinking(streamed) => {
                progress.show(Report::Thinking(streamed.text));
            }
            event => {
                match &event {
                    EngineEvent::ToolApprovalRequired(required) => {
                        pending = super::via_daemon::pending_calls(required);
                    }
                    // Nothing in this process can wait for an asked agent's question: the
                    // send stops at the first, which the listing shows.
                    EngineEvent::AgentPermissionRequired(question) => {
                        if asked.is_empty() {
                            host.interrupt();
                        }
                        asked.push(super::questions::pending_of(path, question));
                    }
                    _ => {}
                }
                progress.show(Report::Event(event));
            }
        }
    };
    ui.stderr("\n");
    let summary = if requested.is_some_and(|requested| requested.load(Ordering::Relaxed)) {
        let usage = match host.call(FlemmaRequest::Usage(document()), CallOptions::default()) {
            Ok(FlemmaResponse::Usage(usage)) => usage,
            _ => UsageTotals::default(),
        };
        summary(started.elapsed(), &usage)
    } else {
        format!(
            "{:.1}s, nothing was sent to the provider",
            started.elapsed().as_secs_f64()
        )
    };
    if !asked.is_empty() {
        ui.stderr(&super::questions::listing(path, &asked, &summary, false));
        return Ok(CycleEnd::AwaitingApproval.exit_code());
    }
    // The exit code, decided from the typed stop as the daemon's followers decide it.
    let end = cycle_end("send", &stopped)?;
    match end {
        CycleEnd::Done => ui.note(format_args!("done in {summary}")),
        CycleEnd::AwaitingApproval => {
            if pending.is_empty() {
                pending = pending_from_status(&host);
            }
            ui.stderr(&approval_listing(
                path,
                &pending,
                &summary,
                &diffs(args.diff, path, context),
            ))
        }
    }
    Ok(end.exit_code())
}

/// The pending calls the host knows of, when no event named them.
fn pending_from_status(host: &LocalHost) -> Vec<PendingCall> {
    let status = FlemmaRequest::Status(DocumentParams { uri: host.uri() });
    match host.call(status, CallOptions::default()) {
        Ok(FlemmaResponse::Status(status)) => status
            .pending
            .into_iter()
            .map(super::via_daemon::unnamed_call)
            .collect(),
        _ => Vec::new(),
    }
}
