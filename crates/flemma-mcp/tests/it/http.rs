//! A streamable-HTTP server on 127.0.0.1: discovery, exact text, isError, a timeout.

use std::time::Duration;

use flemma_mcp::hub::CallOptions;
use flemma_mcp::{HubOptions, McpHub, Origin, ServerDef, ServerState, Transport};
use serde_json::json;

use crate::support::{demo_server, python, runtime, wait_for};

/// The demo server over HTTP; killed when dropped.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start(python: &std::path::Path) -> HttpServer {
    let port = free_port();
    let child = std::process::Command::new(python)
        .arg(demo_server())
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the HTTP demo server starts");
    let server = HttpServer { child, port };
    assert!(
        wait_for(Duration::from_secs(30), || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "the HTTP demo server listens"
    );
    server
}

#[test]
fn a_streamable_http_server_is_a_tool_source() {
    let Some(python) = python("a_streamable_http_server_is_a_tool_source") else {
        return;
    };
    let server = start(&python);
    let def = ServerDef {
        name: "web".into(),
        transport: Transport::Http {
            url: format!("http://127.0.0.1:{}/mcp", server.port),
            headers: vec![("X-Demo".into(), flemma_mcp::Hidden::new("1"))],
        },
        origin: Origin::Config,
    };
    let hub = McpHub::new(HubOptions::default());
    let rt = runtime();
    let statuses =
        rt.block_on(hub.ensure(std::slice::from_ref(&def), Duration::from_secs(30), None));
    assert!(
        matches!(statuses[0].state, ServerState::Ready { pid: None, .. }),
        "{:?}",
        statuses[0].state
    );
    let tool = |name: &str| {
        statuses[0]
            .tools
            .iter()
            .find(|t| t.tool.name == name)
            .cloned()
            .expect("the tool")
    };
    let (echo, fail, hang) = (tool("echo"), tool("fail"), tool("hang"));
    let outcomes = rt.block_on(async {
        tokio::task::spawn_blocking(move || {
            let cancel = flemma_tools::Cancel::new();
            let options = |secs| CallOptions {
                timeout: Duration::from_secs(secs),
                startup_timeout: Duration::from_secs(30),
            };
            vec![
                echo.run(&json!({"text": "über\n"}), &options(10), &cancel, None),
                fail.run(&json!({"message": "nope"}), &options(10), &cancel, None),
                hang.run(&json!({}), &options(1), &cancel, None),
            ]
        })
        .await
        .expect("the tool thread")
    });
    assert_eq!(outcomes[0].text, "über\n");
    assert!(outcomes[1].is_error && outcomes[1].text.contains("nope"));
    assert!(outcomes[2].is_error && outcomes[2].text.contains("no answer within 1 s"));
    rt.block_on(hub.shutdown());
}

#[test]
fn an_http_server_that_is_not_there_fails_with_the_url() {
    let def = ServerDef {
        name: "gone".into(),
        transport: Transport::Http {
            url: format!("http://127.0.0.1:{}/mcp", free_port()),
            headers: Vec::new(),
        },
        origin: Origin::Config,
    };
    let hub = McpHub::new(HubOptions::default());
    let rt = runtime();
    let statuses = rt.block_on(hub.ensure(&[def], Duration::from_secs(10), None));
    let ServerState::Failed { reason } = &statuses[0].state else {
        panic!("failed: {:?}", statuses[0].state)
    };
    assert!(reason.contains("http://127.0.0.1:"), "{reason}");
    rt.block_on(hub.shutdown());
}
