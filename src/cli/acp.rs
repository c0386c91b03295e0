//! `flemmad acp`: the Agent Client Protocol agent over stdio (what Zed, JetBrains,
//! CodeCompanion, avante.nvim and Emacs agent-shell launch). The protocol is
//! `flemma_acp`'s; this runs it over the process's engine host (`crate::acp_host`).
//!
//! Logs go to `$XDG_STATE_HOME/flemma/flemmad.log` (never stdout, which carries the protocol).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub struct AcpArgs {}

pub fn run(_args: AcpArgs, config: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let engine = crate::engine_host::EngineHost::start(config.map(std::path::Path::to_owned))
        .context("cannot start the engine")?;
    let backend = Arc::new(crate::acp_host::AcpHost::new(engine.clone()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    tracing::info!("acp: serving on stdio");
    let outcome = runtime.block_on(flemma_acp::serve(
        backend,
        std::io::BufReader::new(std::io::stdin()),
        std::io::stdout(),
    ));
    // What still runs is cancelled with the abort marker (in-process, nothing outlives the
    // editor).
    engine.shutdown();
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    outcome.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))?;
    tracing::info!("acp: the client closed the connection");
    Ok(ExitCode::SUCCESS)
}
