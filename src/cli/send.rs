//! `flemmad send FILE`: the agentic main job. Loads the chat (recovering orphaned jobs), then
//! runs the engine's cycle with autopilot — stream the reply, run the approved tools and jobs,
//! send their results — writing every change into the file as it happens, until the
//! conversation is idle, waits for an approval, or fails.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use flemma_engine::Input;
use flemma_protocol::event::EngineStopped;
use tokio_util::sync::CancellationToken;

use super::CliError;
use super::error::{CycleEnd, cycle_end};
use super::progress::{Progress, approval_listing, summary};
use super::proposed::diffs;
use crate::chat;
use crate::driver_lock::{DriverLock, LockError};
use crate::engine_driver::{Driver, Report};
use crate::engine_setup::{self, SetupError, SetupOptions};
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

/// The code of the template diagnostics about tool uses and results (missing results,
/// unresolved placeholders).
const TOOL_DIAGNOSTIC: &str = "template-tool";

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
    let runtime = crate::runtime::get()?;
    let hub = crate::mcp_setup::new_hub();
    let services = crate::engine_driver::DriverServices::new(Arc::new(context.clone()));
    let outcome = runtime.block_on(send(args, &services, &hub));
    // No MCP server or asked agent outlives the send (they live on this runtime).
    runtime.block_on(hub.shutdown());
    runtime.block_on(services.agents.shutdown());
    outcome
}

async fn send(
    args: SendArgs,
    services: &crate::engine_driver::DriverServices,
    hub: &flemma_mcp::McpHub,
) -> Result<ExitCode, CliError> {
    let context = &*services.context;
    let path = args.file.clone();
    // Held until the cycle stops: a second driver of the same file (another send, a daemon)
    // is refused at once, before it reads a file the first one is still writing.
    let lock = DriverLock::acquire(&context.dirs, &path, "send");
    let refuse = |error: LockError| CliError::blocked("send", String::new(), &error.to_string());
    if let Err(busy @ LockError::Busy { .. }) = lock {
        return Err(refuse(busy));
    }
    // An unreadable chat says so (exit 2) before a lock that could not be created does.
    let text = crate::fsutil::read_chat(&context.dirs, &path)
        .map_err(|error| CliError::unreadable("send", &error))?;
    let _lock = lock.map_err(refuse)?;
    // Tool uses without results and placeholders are the engine's to resolve (run, ask, or
    // stop on them), so they block nothing here; and a chat whose tool calls wait for results
    // has something to do even when its last message is not a `@You:` with text. Each request
    // is evaluated again before it is sent.
    let options = SetupOptions {
        no_autopilot: args.no_autopilot,
    };
    let mut input = chat::config_input(context);
    if let Some(mode) = &args.mode {
        // The mode chosen for this send: a runtime layer (the frontmatter may narrow it).
        let mut layer = flemma_config::ConfigLayer::new(flemma_config::LayerKind::Runtime);
        layer
            .set("mode", serde_json::Value::String(mode.clone()))
            .map_err(|error| CliError::failed("send", error))?;
        input.layers.push(layer);
    }
    let prepared = match engine_setup::prepare(
        &path,
        &text,
        input,
        options,
        &crate::analyses::analyses(flemma_template::TemplateCache::new()),
        hub,
        services,
    )
    .await
    {
        Ok(prepared) => prepared,
        Err(SetupError::Blocked { analysis }) => {
            let loaded = chat::LoadedChat {
                path: path.clone(),
                analysis,
            };
            return Err(CliError::blocked(
                "send",
                loaded.report(true),
                "nothing was sent; fix the errors above and send again",
            ));
        }
        Err(SetupError::Failed(message)) => return Err(CliError::failed("send", message)),
    };
    let doc = &prepared.analysis.document;
    let ui = super::Ui::root();
    if !args.quiet {
        let shown: Vec<_> = prepared
            .analysis
            .diagnostics
            .iter()
            .filter(|d| d.severity <= flemma_syntax::Severity::Warning && d.code != TOOL_DIAGNOSTIC)
            .cloned()
            .collect();
        ui.stderr(&chat::render_all(
            &path,
            Some((doc, &doc.line_index())),
            &shown,
        ));
    }
    // The reply must have somewhere to go before it is paid for.
    if let Err(error) = crate::fsutil::check_writable(&path) {
        return Err(CliError::failed(
            "send",
            format!("{error:#}; nothing was sent"),
        ));
    }
    for warning in prepared
        .model_warnings
        .iter()
        .chain(&prepared.tool_warnings)
    {
        ui.warn(warning);
    }
    if !prepared.nothing_to_send.is_empty() {
        return Err(CliError::blocked(
            "send",
            chat::render_all(
                &path,
                Some((doc, &doc.line_index())),
                &prepared.nothing_to_send,
            ),
            "nothing was sent; fix the errors above and send again",
        ));
    }
    let absolute = prepared.parts.id.path().to_owned();
    let coalesce_ms = prepared.parts.coalesce.as_millis() as u64;
    let parts = prepared.parts;
    let mut progress = Progress::new(
        ui.clone(),
        flemma_protocol::document::path_to_uri(&absolute),
        args.events,
        args.quiet,
    );
    // Said when a request really goes out: a step that only runs tools, or an `(approved)`
    // sent back to pending, asks the provider nothing.
    let requested = progress.announce_on_first_request(format!(
        "sending {} to {} ({})…",
        path.display(),
        prepared.provider_name,
        prepared.model
    ));
    // Said once per send: on stderr by the diagnostics above, in the event stream here.
    if let Some(event) = engine_setup::trust_notice(&prepared.analysis) {
        progress.show(Report::Event(event));
    }
    let mut driver = Driver::new(parts, text, Box::new(move |report| progress.show(report)));
    let interrupt = CancellationToken::new();
    // An asked agent's question stops the send (nothing can wait for it in this process).
    let asked =
        super::questions::Asked::stop_at_first(&services.agents.questions, interrupt.clone());
    let on_interrupt = interrupt.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let started = Instant::now();
    let stopped = tokio::task::LocalSet::new()
        .run_until(driver.run(vec![Input::Load, Input::Advance], interrupt))
        .await
        .map_err(|error| CliError::failed("send", format!("{error:#}")))?;
    ui.stderr("\n");
    tracing::info!(
        max_delay_ms = driver.max_write_delay().as_millis() as u64,
        coalesce_ms,
        "longest wait between an edit and its write"
    );
    let engine = driver.engine();
    let summary = if requested.load(std::sync::atomic::Ordering::Relaxed) {
        summary(
            started.elapsed(),
            &crate::usage_report::totals(
                &engine.usage(),
                engine.cost(),
                engine.cache_saved(),
                engine.rate_limits(),
            ),
        )
    } else {
        format!(
            "{:.1}s, nothing was sent to the provider",
            started.elapsed().as_secs_f64()
        )
    };
    if let Some(listing) = asked.listing(&path, &summary) {
        ui.stderr(&listing);
        return Ok(CycleEnd::AwaitingApproval.exit_code());
    }
    // The exit code, decided from the typed stop as the daemon's followers decide it.
    let stopped = EngineStopped {
        reason: stopped.label(),
        message: stopped.message(),
    };
    let end = cycle_end("send", &stopped)?;
    match end {
        CycleEnd::Done => ui.note(format_args!("done in {summary}")),
        CycleEnd::AwaitingApproval => ui.stderr(&approval_listing(
            &path,
            &engine.pending_calls(),
            &summary,
            &diffs(args.diff, &path, context),
        )),
    }
    Ok(end.exit_code())
}
