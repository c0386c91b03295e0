//! The Python that has the official MCP SDK, and the demo server.

use std::path::PathBuf;
use std::time::Duration;

use flemma_mcp::{Origin, ServerDef, Transport};

/// The environment variable naming a Python with PyPI `mcp` installed (`.ci/run` makes one).
pub const PYTHON_VAR: &str = "FLEMMA_TEST_MCP_PYTHON";

/// That Python, or `None` after saying the test is skipped (in CI a missing Python fails).
pub fn python(test: &str) -> Option<PathBuf> {
    match std::env::var_os(PYTHON_VAR) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: {PYTHON_VAR} is not set; .ci/run installs PyPI `mcp` in a venv and sets it"
            );
            eprintln!(
                "skipped: {test}: set {PYTHON_VAR} to a Python with PyPI `mcp` (python3 -m venv v && v/bin/pip install mcp==2.3.0) to run the real MCP server tests"
            );
            None
        }
    }
}

/// `tests/servers/demo_server.py`.
pub fn demo_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/servers/demo_server.py")
}

/// `tests/servers/typed_server.py` (tools with optional, nested, enum, list and union
/// parameters).
pub fn typed_server() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/servers/typed_server.py")
}

/// The demo server over stdio, in `cwd`, with `env`.
pub fn stdio_def(
    name: &str,
    python: &std::path::Path,
    extra_args: &[&str],
    cwd: &std::path::Path,
    env: Vec<(String, flemma_mcp::Hidden)>,
) -> ServerDef {
    script_def(name, python, &demo_server(), extra_args, cwd, env)
}

/// The server `script` over stdio, in `cwd`, with `env`.
pub fn script_def(
    name: &str,
    python: &std::path::Path,
    script: &std::path::Path,
    extra_args: &[&str],
    cwd: &std::path::Path,
    env: Vec<(String, flemma_mcp::Hidden)>,
) -> ServerDef {
    let mut args = vec![script.display().to_string()];
    args.extend(extra_args.iter().map(|s| s.to_string()));
    ServerDef {
        name: name.to_string(),
        transport: Transport::Stdio {
            command: python.display().to_string(),
            args,
            env,
            cwd: cwd.to_path_buf(),
            sandbox: false,
        },
        origin: Origin::Config,
    }
}

/// A current-thread runtime, as flemmad's commands have.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Waits until `check` holds (at most `limit`).
pub fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    check()
}

/// Whether a process with this id is alive (and not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
