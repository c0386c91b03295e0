//! `flemmad acp`: the Agent Client Protocol agent over stdio (what Zed, JetBrains,
//! CodeCompanion, avante.nvim and Emacs agent-shell launch). The protocol is `flemma_acp`'s,
//! served over an engine host (`crate::acp_backend`): the daemon's when one answers (this process
//! is then a byte pipe to its `acp.sock`, as `flemmad lsp` is to `lsp.sock`, so background
//! jobs, the editor's MCP servers and its files live in the daemon), else one in this process.
//!
//! Logs go to `$XDG_STATE_HOME/flemma/flemmad.log` (never stdout, which carries the protocol).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use super::proxy;
use crate::acp_backend::AcpBackend;
use crate::process_context::ProcessContext;

#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// Run the engine in this process even when a daemon (`flemmad serve`) runs; without it,
    /// the connection is the daemon's when one answers (so background jobs outlive the editor).
    #[arg(long)]
    pub no_daemon: bool,
}

pub fn run(args: AcpArgs, context: &ProcessContext) -> anyhow::Result<ExitCode> {
    if !args.no_daemon
        // An ACP session ends with the editor's input alone.
        && let Some(outcome) =
            proxy::through_daemon(&context.runtime, |paths| &paths.acp_socket, "acp", |_| false)
    {
        outcome.context("the connection to the daemon failed")?;
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = crate::runtime::get()?;
    let input = std::io::BufReader::new(std::io::stdin());
    let engine = crate::engine_host::EngineHost::start(Arc::new(context.clone()))
        .context("cannot start the engine")?;
    tracing::info!("acp: serving on stdio");
    let backend = Arc::new(AcpBackend::new(engine.clone()));
    // One connection in this process: what the user allows always lasts as long as it.
    let allowed = flemma_acp::AllowedAlways::default();
    let outcome = runtime.block_on(flemma_acp::serve(
        backend,
        allowed,
        input,
        std::io::stdout(),
    ));
    // What still runs is cancelled with the abort marker (in-process, nothing outlives the
    // editor).
    engine.shutdown();
    outcome.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))?;
    tracing::info!("acp: the client closed the connection");
    Ok(ExitCode::SUCCESS)
}
