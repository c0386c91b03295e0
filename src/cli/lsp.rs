//! `flemmad lsp`: the language server over stdio (what editors launch).
//!
//! Logs go to `$XDG_STATE_HOME/flemma/flemmad.log` (never stdout, which carries the protocol).

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use super::proxy;
use crate::process_context::ProcessContext;

#[derive(Debug, clap::Args)]
pub struct LspArgs {
    /// Speak LSP over standard input and output (the default; accepted because editors pass it).
    #[arg(long)]
    pub stdio: bool,
    /// Run the server in this process even when a daemon (`flemmad serve`) runs; without
    /// it, `flemmad lsp` becomes a pipe to the daemon's session when one answers.
    #[arg(long)]
    pub no_daemon: bool,
}

pub fn run(args: LspArgs, context: &ProcessContext) -> anyhow::Result<ExitCode> {
    if !args.no_daemon
        && let Some(outcome) =
            proxy::through_daemon(&context.runtime, |paths| &paths.lsp_socket, "lsp", {
                let mut watch = flemma_lsp::transport::ExitWatch::default();
                move |bytes: &[u8]| watch.feed(bytes)
            })
    {
        outcome.context("the connection to the daemon failed")?;
        return Ok(ExitCode::SUCCESS);
    }
    let engine = crate::engine_host::EngineHost::start(Arc::new(context.clone()))
        .context("cannot start the engine")?;
    let backend = Box::new(crate::lsp_backend::LspBackend::new(engine.clone()));
    // The user's config file (FLEMMA_CONFIG / XDG), as the CLI reads it: problems with it are
    // diagnostics of every open chat, not a refusal to start.
    let host = flemma_ide::AnalysisHost::with_template_cache(
        Arc::new(context.file_host()),
        crate::chat::config_input(context),
        engine.template_cache(),
    );
    let (connection, io_threads) =
        flemma_lsp::transport::stdio().context("cannot start the stdio transport")?;
    let outcome = flemma_lsp::run_with(connection, backend, host);
    if let Err(error) = &outcome {
        tracing::error!(%error, "the language server stopped");
    }
    // The session's documents are written on disk now; requests still running are cancelled
    // with the abort marker (in-process, nothing outlives the editor).
    engine.shutdown();
    outcome.context("the language server stopped")?;
    // The reader thread ends at `exit` or at the end of stdin; the writer once every sender
    // is gone.
    io_threads.join().context("the stdio transport failed")?;
    tracing::info!("exit");
    Ok(ExitCode::SUCCESS)
}

/// Where the log goes: `$XDG_STATE_HOME/flemma/flemmad.log` (`~/.local/state` by default).
fn log_path(context: &ProcessContext) -> Option<PathBuf> {
    Some(context.dirs.flemma_state()?.join("flemmad.log"))
}

/// Logging for LSP mode: to the log file, else (when it cannot be opened) to stderr; never
/// stdout. `RUST_LOG` chooses the level (default `info`).
pub fn init_logging(context: &ProcessContext) {
    use tracing_subscriber::EnvFilter;
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let file = log_path(context).and_then(|path| {
        std::fs::create_dir_all(path.parent()?).ok()?;
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .ok()
    });
    match file {
        Some(file) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter())
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
        None => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter())
                .with_ansi(false)
                .with_writer(std::io::stderr)
                .try_init();
            tracing::warn!(
                "cannot open the log file under $XDG_STATE_HOME/flemma; logging to stderr"
            );
        }
    }
}
