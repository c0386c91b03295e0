//! `flemmad send FILE`: evaluate the chat, send it to the configured provider, stream the reply
//! into the file on disk, and append the closing `@You:`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use flemma_provider::credentials::CredentialEnvironment;
use flemma_provider::explain::ProviderError;
use flemma_provider::http::ClientEvent;
use flemma_provider::render::{ReplyOutcome, ReplyRenderer};
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::chat;
use crate::provider_setup::provider_setup;
use crate::reply_file::{ReplyFile, ReplyFileError};
use crate::send_lock::{LockError, SendLock};

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The .chat file to send. Its last `@You:` message must hold what you want to say.
    pub file: PathBuf,
}

/// What follows a finished reply: a blank line, `@You:`, a blank line.
const CLOSING_PROMPT: &str = "\n@You:\n\n";

pub fn run(args: SendArgs, config_path: Option<&Path>) -> Result<(), CliError> {
    crate::provider_setup::runtime()?.block_on(send(args, config_path))
}

async fn send(args: SendArgs, config_path: Option<&Path>) -> Result<(), CliError> {
    let path = args.file;
    // Held until the reply is written: a second send of the same file is refused at once,
    // before it reads a file the first one is still writing.
    let lock = SendLock::acquire(&path);
    let refuse = |error: LockError| CliError::blocked("send", String::new(), &error.to_string());
    if let Err(busy @ LockError::Busy { .. }) = lock {
        return Err(refuse(busy));
    }
    // An unreadable chat says so (exit 2) before a lock that could not be created does.
    let loaded = chat::load("send", &path, config_path)?;
    let _lock = lock.map_err(refuse)?;
    let report = loaded.report(true);
    if !loaded.analysis.send_blockers().is_empty() {
        return Err(CliError::blocked(
            "send",
            report,
            "nothing was sent; fix the errors above and send again",
        ));
    }
    eprint!("{report}");
    let Some(resolved) = &loaded.analysis.config else {
        return Err(CliError::failed(
            "send",
            "the configuration does not resolve",
        ));
    };
    let config = resolved.config.clone();
    let conversation = loaded.analysis.evaluation.conversation.clone();
    // The reply must have somewhere to go before it is paid for.
    if let Err(error) = crate::fsutil::check_writable(&path) {
        return Err(CliError::failed(
            "send",
            format!("{error:#}; nothing was sent"),
        ));
    }
    let environment = CredentialEnvironment::from_process();
    let setup = provider_setup(&config, Some(&path), &environment)?;
    if let Some(warning) = &setup.model_warning {
        eprintln!("flemmad: warning: {warning}");
    }
    let client = crate::provider_setup::client(&config, &setup, environment)?;
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });

    eprintln!(
        "flemmad: sending {} to {} ({})…",
        path.display(),
        setup.kind.name(),
        setup.options.model
    );
    let started = Instant::now();
    let mut writer = StreamWriter {
        renderer: ReplyRenderer::for_provider(setup.kind, config.editing.compact_headers),
        file: ReplyFile::new(&path),
        pending: String::new(),
        pending_since: None,
        coalesce: Duration::from_millis(config.editing.coalesce_ms),
        failure: None,
        cancel: cancel.clone(),
        max_delay: Duration::ZERO,
        written: 0,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    // The stream pushes events into a channel; the writer drains it and flushes coalesced text
    // when the window of the oldest unwritten byte closes, even if no further event arrives.
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let stream = async {
        let events = events;
        client
            .stream(
                setup.kind,
                &conversation,
                &setup.options,
                &setup.endpoint,
                cancel.clone(),
                &mut |event| {
                    let _ = events.send(event);
                },
            )
            .await
    };
    let write = async {
        loop {
            let deadline = writer.deadline();
            tokio::select! {
                event = received.recv() => match event {
                    Some(event) => writer.on_event(event),
                    None => break,
                },
                () = sleep_until_option(deadline) => writer.flush_or_stop(),
            }
        }
    };
    let (result, ()) = tokio::join!(stream, write);
    if writer.progress {
        // Clear the progress line; the summary follows.
        eprint!("\r\x1b[K");
        writer.progress = false;
    }
    if let Some(error) = writer.failure.take() {
        return Err(CliError::failed("send", error));
    }
    match result {
        Ok(summary) => {
            let tail = writer.renderer.finish(ReplyOutcome::Completed);
            writer.push(&tail);
            writer.push(CLOSING_PROMPT);
            writer
                .flush()
                .map_err(|error| CliError::failed("send", error))?;
            tracing::info!(
                max_delay_ms = writer.max_delay.as_millis() as u64,
                coalesce_ms = writer.coalesce.as_millis() as u64,
                "longest wait between a byte arriving and its write"
            );
            for warning in &summary.warnings {
                eprintln!("flemmad: warning: {warning}");
            }
            let usage = summary.usage;
            let cost = setup
                .model
                .as_ref()
                .map(|m| flemma_provider::catalogue::cost(&usage, m));
            eprintln!(
                "flemmad: done in {:.1}s: {} input, {} output tokens{}{}",
                started.elapsed().as_secs_f64(),
                usage.input_tokens,
                usage.output_tokens,
                cost.map_or(String::new(), |c| format!(", ${c:.4}")),
                if summary.retries > 0 {
                    format!(" ({} retries)", summary.retries)
                } else {
                    String::new()
                }
            );
            if let Some(error) = summary.stop_error() {
                return Err(CliError::failed("send", error));
            }
            Ok(())
        }
        Err(error) => {
            let cancelled = matches!(error, ProviderError::Cancelled);
            if writer.renderer.has_content() || writer.file.started() {
                let outcome = if cancelled {
                    ReplyOutcome::Interrupted
                } else {
                    ReplyOutcome::Failed(error.to_string())
                };
                let tail = writer.renderer.finish(outcome);
                writer.push(&tail);
                writer.push(CLOSING_PROMPT);
                writer
                    .flush()
                    .map_err(|error| CliError::failed("send", error))?;
            }
            if cancelled {
                Err(CliError::interrupted("send", "cancelled"))
            } else {
                Err(CliError::failed("send", error))
            }
        }
    }
}

/// Renders stream events and writes them to the file, coalesced: text is written at most
/// `coalesce` after its first unwritten byte arrived.
struct StreamWriter {
    renderer: ReplyRenderer,
    file: ReplyFile,
    pending: String,
    /// When the oldest byte of `pending` arrived.
    pending_since: Option<Instant>,
    coalesce: Duration,
    failure: Option<ReplyFileError>,
    cancel: CancellationToken,
    /// The longest time a byte waited between arriving and its write starting.
    max_delay: Duration,
    /// Bytes written into the file so far.
    written: usize,
    /// Show a live progress line (stderr is a terminal).
    progress: bool,
}

async fn sleep_until_option(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

impl StreamWriter {
    fn on_event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Retrying {
                attempt,
                delay,
                reason,
            } => eprintln!(
                "flemmad: {reason}; retrying in {:.1}s (attempt {attempt})",
                delay.as_secs_f64()
            ),
            ClientEvent::FirstByte => {}
            ClientEvent::Event(event) => {
                if let Some(text) = self.renderer.push(&event) {
                    self.push(&text);
                }
                if self.deadline().is_some_and(|d| Instant::now() >= d) {
                    self.flush_or_stop();
                }
            }
        }
    }

    fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.pending.is_empty() {
            self.pending_since = Some(Instant::now());
        }
        self.pending.push_str(text);
    }

    /// When the pending text must be written.
    fn deadline(&self) -> Option<Instant> {
        self.pending_since.map(|since| since + self.coalesce)
    }

    /// Flushes; a failure (the block was removed from the file) stops the stream.
    fn flush_or_stop(&mut self) {
        if let Err(error) = self.flush() {
            self.failure = Some(error);
            self.pending_since = None;
            self.cancel.cancel();
        }
    }

    fn flush(&mut self) -> Result<(), ReplyFileError> {
        if self.failure.is_some() || self.pending.is_empty() {
            return Ok(());
        }
        // The delay the writer adds is measured to the moment the write starts (the write
        // itself, with its fsync, is the file system's time).
        if let Some(since) = self.pending_since.take() {
            self.max_delay = self.max_delay.max(since.elapsed());
        }
        self.file.append(&self.pending)?;
        self.written += self.pending.len();
        self.pending.clear();
        if self.progress {
            eprint!("\r\x1b[Kflemmad: receiving… {} bytes written", self.written);
        }
        Ok(())
    }
}
