//! The cost of one call to a local stdio MCP tool through flemmad's client: a tool thread
//! hands the call to the runtime that owns the connection, rmcp sends `tools/call` to the
//! server (the official Python SDK's, `tests/servers/demo_server.py`), the result comes back
//! and becomes the tool result's text. Compare with `benches/sdk_client_call.py`, the SDK's
//! own client calling the same tool of the same server (docs/benchmarks.md).
//!
//! Needs `FLEMMA_TEST_MCP_PYTHON` (a Python with PyPI `mcp`); says "skipped" without it.

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_mcp::hub::CallOptions;
use flemma_mcp::{HubOptions, McpHub, Origin, ServerDef, ServerState, Transport};
use serde_json::json;

fn call(c: &mut Criterion) {
    let Some(python) = std::env::var_os("FLEMMA_TEST_MCP_PYTHON") else {
        eprintln!("skipped: set FLEMMA_TEST_MCP_PYTHON to a Python with PyPI `mcp`");
        return;
    };
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/servers/demo_server.py");
    let def = ServerDef {
        name: "demo".into(),
        transport: Transport::Stdio {
            command: PathBuf::from(python).display().to_string(),
            args: vec![server.display().to_string()],
            env: Vec::new(),
            cwd: std::env::temp_dir(),
            sandbox: false,
        },
        origin: Origin::Config,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let hub = McpHub::new(HubOptions::default());
    let status = runtime
        .block_on(hub.ensure(&[def], Duration::from_secs(60), None))
        .remove(0);
    assert!(
        matches!(status.state, ServerState::Ready { .. }),
        "{:?}",
        status.state
    );
    let echo = status
        .tools
        .iter()
        .find(|t| t.tool.name == "echo")
        .cloned()
        .expect("echo");
    let options = CallOptions {
        timeout: Duration::from_secs(30),
        startup_timeout: Duration::from_secs(60),
    };
    let cancel = flemma_tools::Cancel::new();
    let input = json!({"text": "hello"});
    c.bench_function("mcp/stdio echo call through flemmad's client", |b| {
        b.iter(|| {
            let outcome = echo.run(&input, &options, &cancel, None);
            assert_eq!(outcome.text, "hello");
        })
    });
    runtime.block_on(hub.shutdown());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(10));
    targets = call
}
criterion_main!(benches);
