//! `flemmad send FILE`: the agentic main job. Loads the chat (recovering orphaned jobs), then
//! runs the engine's cycle with autopilot — stream the reply, run the approved tools and jobs,
//! send their results — writing every change into the file as it happens, until the
//! conversation is idle, waits for an approval, or fails.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use flemma_engine::{Input, PendingCall, StopReason};
use flemma_protocol::event::LifecycleEvent;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::chat;
use crate::engine_driver::{Driver, Report};
use crate::engine_setup::{self, SetupError, SetupOptions};
use crate::send_lock::{LockError, SendLock};

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
}

/// The code of the template diagnostics about tool uses and results (missing results,
/// unresolved placeholders).
const TOOL_DIAGNOSTIC: &str = "template-tool";

/// Exit status while a tool call waits for `flemmad approve` / `flemmad reject`.
pub(super) const AWAITING_APPROVAL_EXIT: u8 = 3;

pub fn run(args: SendArgs, config_path: Option<&Path>) -> Result<ExitCode, CliError> {
    if !args.no_daemon && !args.no_autopilot {
        let follow = super::via_daemon::Follow {
            events: args.events,
            quiet: args.quiet,
            detach: args.detach,
        };
        let action = super::via_daemon::Action::Send;
        if let Some(outcome) = super::via_daemon::run("send", &args.file, action, follow) {
            return outcome;
        }
    }
    if args.detach {
        return Err(CliError::failed(
            "send",
            super::via_daemon::NO_DAEMON_TO_DETACH,
        ));
    }
    crate::provider_setup::runtime()?.block_on(send(args, config_path))
}

async fn send(args: SendArgs, config_path: Option<&Path>) -> Result<ExitCode, CliError> {
    let path = args.file.clone();
    // Held until the cycle stops: a second send of the same file is refused at once, before
    // it reads a file the first one is still writing.
    let lock = SendLock::acquire(&path);
    let refuse = |error: LockError| CliError::blocked("send", String::new(), &error.to_string());
    if let Err(busy @ LockError::Busy { .. }) = lock {
        return Err(refuse(busy));
    }
    // An unreadable chat says so (exit 2) before a lock that could not be created does.
    let text =
        crate::fsutil::read_chat(&path).map_err(|error| CliError::unreadable("send", &error))?;
    let _lock = lock.map_err(refuse)?;
    // Tool uses without results and placeholders are the engine's to resolve (run, ask, or
    // stop on them), so they block nothing here; and a chat whose tool calls wait for results
    // has something to do even when its last message is not a `@You:` with text. Each request
    // is evaluated again before it is sent.
    let options = SetupOptions {
        no_autopilot: args.no_autopilot,
    };
    let prepared = match engine_setup::prepare(&path, &text, config_path, options) {
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
    if !args.quiet {
        let shown: Vec<_> = prepared
            .analysis
            .diagnostics
            .iter()
            .filter(|d| d.severity <= flemma_syntax::Severity::Warning && d.code != TOOL_DIAGNOSTIC)
            .cloned()
            .collect();
        eprint!(
            "{}",
            chat::render_all(&path, Some((doc, &doc.line_index())), &shown)
        );
    }
    // The reply must have somewhere to go before it is paid for.
    if let Err(error) = crate::fsutil::check_writable(&path) {
        return Err(CliError::failed(
            "send",
            format!("{error:#}; nothing was sent"),
        ));
    }
    if let Some(warning) = &prepared.model_warning {
        eprintln!("flemmad: warning: {warning}");
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
    if !args.quiet {
        eprintln!(
            "flemmad: sending {} to {} ({})…",
            path.display(),
            prepared.provider_name,
            prepared.model
        );
    }
    let absolute = prepared.parts.id.path().to_owned();
    let coalesce_ms = prepared.parts.coalesce.as_millis() as u64;
    let parts = prepared.parts;
    let mut progress = Progress::new(file_uri(&absolute), args.events, args.quiet);
    let mut driver = Driver::new(parts, text, Box::new(move |report| progress.show(report)));
    let interrupt = CancellationToken::new();
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
    eprintln!();
    tracing::info!(
        max_delay_ms = driver.max_write_delay().as_millis() as u64,
        coalesce_ms,
        "longest wait between an edit and its write"
    );
    let engine = driver.engine();
    let usage = engine.usage();
    let summary = format!(
        "{:.1}s, {} input, {} output tokens{}",
        started.elapsed().as_secs_f64(),
        usage.input_tokens,
        usage.output_tokens,
        engine
            .cost()
            .map_or(String::new(), |cost| format!(", ${cost:.4}"))
    );
    match stopped {
        StopReason::Idle | StopReason::StepDone => {
            eprintln!("flemmad: done in {summary}");
            Ok(ExitCode::SUCCESS)
        }
        StopReason::AwaitingApproval { .. } => {
            eprint!(
                "{}",
                approval_listing(&path, &engine.pending_calls(), &summary)
            );
            Ok(ExitCode::from(AWAITING_APPROVAL_EXIT))
        }
        StopReason::UserContentInApproved { tool_id } => Err(CliError::failed(
            "send",
            format!(
                "the approved tool call `{tool_id}` was not run because its result block holds text you typed; review it (delete the text to run the tool, or mark the block as your result) and send again"
            ),
        )),
        StopReason::MaxTurns { message } => Err(CliError::failed("send", message)),
        StopReason::Error { message } => Err(CliError::failed(
            "send",
            format!("{message} (everything before is in the file)"),
        )),
        StopReason::Cancelled => Err(CliError::interrupted(
            "send",
            "cancelled; what ran was stopped and marked `aborted` in the file",
        )),
    }
}

/// The stderr listing of the calls waiting for approval, with the commands to answer them.
pub(super) fn approval_listing(path: &Path, pending: &[PendingCall], summary: &str) -> String {
    let file = shell_quote(&path.display().to_string());
    let mut out = format!(
        "flemmad send: waiting for approval ({summary}); {} tool call{} pending:\n",
        pending.len(),
        if pending.len() == 1 { "" } else { "s" }
    );
    for call in pending {
        out.push_str(&format!(
            "  `{}` ({}), asked by {}: {}\n    approve: flemmad approve {file} {}\n    reject:  flemmad reject {file} {} --reason 'why not'\n",
            call.tool_name,
            call.tool_id,
            call.resolver,
            preview(&call.input),
            shell_quote(&call.tool_id),
            shell_quote(&call.tool_id),
        ));
    }
    out.push_str(&format!(
        "then run `flemmad send {file}` again (or `flemmad approve {file} --all`)\n"
    ));
    out
}

/// A one-line preview of a tool input (at most 100 characters).
fn preview(input: &serde_json::Value) -> String {
    const MAX: usize = 100;
    let text = input.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let mut cut: String = text.chars().take(MAX).collect();
    cut.push('…');
    cut
}

/// `word` quoted for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A `file://` URI for an absolute path (bytes outside the unreserved set percent-encoded).
pub fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.display().to_string().bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// Shows what the driver reports: events as JSON lines on stdout (`--events`), progress on
/// stderr (unless `--quiet`).
pub(super) struct Progress {
    uri: String,
    events: bool,
    quiet: bool,
    /// The last thing written to stderr ended a line.
    at_line_start: bool,
}

impl Progress {
    pub(super) fn new(uri: String, events: bool, quiet: bool) -> Self {
        Self {
            uri,
            events,
            quiet,
            at_line_start: true,
        }
    }

    pub(super) fn show(&mut self, report: Report) {
        match report {
            Report::Event(event) => {
                if self.events {
                    let line = LifecycleEvent {
                        name: event.name.to_owned(),
                        uri: self.uri.clone(),
                        data: event.data.clone(),
                    };
                    if let Ok(json) = serde_json::to_string(&line) {
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "{json}");
                        let _ = out.flush();
                    }
                }
                if let Some(line) = describe(&event) {
                    self.line(&line);
                }
            }
            Report::Text(text) => {
                if !self.quiet {
                    eprint!("{text}");
                    self.at_line_start = text.ends_with('\n');
                }
            }
            Report::Notice(notice) => {
                if !self.at_line_start {
                    eprintln!();
                    self.at_line_start = true;
                }
                eprintln!("flemmad: {notice}");
            }
        }
    }

    fn line(&mut self, line: &str) {
        if self.quiet {
            return;
        }
        if !self.at_line_start {
            eprintln!();
        }
        eprintln!("flemmad: {line}");
        self.at_line_start = true;
    }
}

/// The stderr line of an event (`None`: not worth a line).
fn describe(event: &flemma_engine::Event) -> Option<String> {
    let data = &event.data;
    let text = |key: &str| data.get(key).and_then(|v| v.as_str()).unwrap_or("?");
    Some(match event.name {
        "tool:executing" => format!("running `{}` ({})", text("toolName"), text("toolId")),
        "tool:completed" => format!(
            "`{}` ({}) finished: {}",
            text("toolName"),
            text("toolId"),
            text("status")
        ),
        "job:submitted" => format!(
            "`{}` ({}) runs in the background as {}",
            text("toolName"),
            text("toolId"),
            text("jobId")
        ),
        "job:completed" => format!(
            "background job {} (`{}`) delivered",
            text("jobId"),
            text("toolName")
        ),
        "autopilot:resume-scheduled" => format!(
            "continuing in {} ms (edit the file to stop)",
            data.get("delayMs").and_then(|v| v.as_u64()).unwrap_or(0)
        ),
        "autopilot:resume-cancelled" => "you edited the file: not continuing".to_owned(),
        "document:recovered" => format!(
            "{} background job(s) of an earlier session were lost and marked so",
            data.get("count").and_then(|v| v.as_u64()).unwrap_or(0)
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("talk.chat"), "talk.chat");
        assert_eq!(shell_quote("my talk.chat"), "'my talk.chat'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn uris_encode_what_a_path_may_hold() {
        assert_eq!(
            file_uri(Path::new("/tmp/a b/c.chat")),
            "file:///tmp/a%20b/c.chat"
        );
    }
}
