//! The process's one tokio runtime, built on first use: the engine host's drivers (on the host
//! thread's `LocalSet`), `flemmad send`, the daemon's signals and `rpc.sock`, the providers'
//! HTTP and the tools that do network IO (`fetch_content`) all run on it. Commands that never
//! need it (`parse`, `fmt`) never build it.

use std::sync::OnceLock;

use anyhow::Context as _;
use tokio::runtime::{Handle, Runtime};

/// Worker threads: the drivers run on the host's own thread, so the workers only drive IO,
/// timers and the tasks of HTTP connections.
const WORKER_THREADS: usize = 2;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime (built on the first call).
pub fn get() -> anyhow::Result<&'static Runtime> {
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name("flemmad-worker")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Two threads racing here: the loser's runtime is dropped unused (outside any runtime, so
    // dropping it is allowed).
    Ok(RUNTIME.get_or_init(|| runtime))
}

/// A handle on the runtime, for threads that block on it (`Handle::block_on`) or spawn onto it.
pub fn handle() -> anyhow::Result<Handle> {
    Ok(get()?.handle().clone())
}
