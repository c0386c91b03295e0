//! `flemmad acp`: the Agent Client Protocol agent over stdio (what Zed, JetBrains,
//! CodeCompanion, avante.nvim and Emacs agent-shell launch). The protocol is `flemma_acp`'s;
//! this runs it over a running daemon's engine (`rpc.sock`, so background jobs outlive the
//! editor) when one answers, else over an engine host in this process (`crate::acp_host`).
//!
//! Logs go to `$XDG_STATE_HOME/flemma/flemmad.log` (never stdout, which carries the protocol).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use flemma_acp::{Backend, McpServerSpec, TurnEvent};
use serde_json::json;

use super::via_daemon::DaemonClient;
use crate::acp_host::{AcpHost, turn_event};

#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// Run the engine in this process even when a daemon (`flemmad serve`) runs; without it,
    /// prompts run in the daemon when one answers (so background jobs outlive the editor).
    #[arg(long)]
    pub no_daemon: bool,
}

pub fn run(args: AcpArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let daemon = (!args.no_daemon)
        .then(DaemonClient::connect)
        .flatten()
        .is_some();
    let runtime = crate::runtime::get()?;
    let input = std::io::BufReader::new(std::io::stdin());
    let outcome = if daemon {
        tracing::info!("acp: serving on stdio through the daemon");
        let backend = Arc::new(DaemonBackend {
            files: AcpHost::files(),
        });
        runtime.block_on(flemma_acp::serve(backend, input, std::io::stdout()))
    } else {
        let engine = crate::engine_host::EngineHost::start(config.map(Path::to_owned))
            .context("cannot start the engine")?;
        tracing::info!("acp: serving on stdio");
        let backend = Arc::new(AcpHost::new(engine.clone()));
        let outcome = runtime.block_on(flemma_acp::serve(backend, input, std::io::stdout()));
        // What still runs is cancelled with the abort marker (in-process, nothing outlives
        // the editor).
        engine.shutdown();
        outcome
    };
    outcome.map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))?;
    tracing::info!("acp: the client closed the connection");
    Ok(ExitCode::SUCCESS)
}

/// The engine of a running daemon, over `rpc.sock` (docs/rpc.md); the chat files are read and
/// written here as in-process.
struct DaemonBackend {
    files: AcpHost,
}

fn daemon_call(method: &str, params: serde_json::Value) -> Result<serde_json::Value, String> {
    let mut client = DaemonClient::connect().ok_or_else(|| {
        "the daemon stopped answering; restart `flemmad serve`, or the editor's agent (it then runs the engine itself)".to_owned()
    })?;
    client.request(method, params).map_err(|e| e.to_string())
}

impl Backend for DaemonBackend {
    fn create_chat(&self, path: &Path, text: &str) -> Result<(), String> {
        self.files.create_chat(path, text)
    }

    fn read_chat(&self, path: &Path) -> Result<String, String> {
        self.files.read_chat(path)
    }

    fn replace_chat(&self, path: &Path, expected: &str, text: &str) -> Result<bool, String> {
        self.files.replace_chat(path, expected, text)
    }

    fn events(&self, path: &Path) -> tokio::sync::mpsc::UnboundedReceiver<TurnEvent> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        // Subscribed before this returns, so the send that follows misses nothing.
        let client = DaemonClient::connect().and_then(|mut client| {
            client
                .request("flemma/subscribe", json!({"uri": path, "text": true}))
                .ok()
                .map(|_| client)
        });
        let Some(mut client) = client else {
            let _ = sender.send(TurnEvent::Stopped {
                reason: "error".into(),
                message: Some("cannot follow the chat's events: the daemon does not answer".into()),
            });
            return receiver;
        };
        let _ = std::thread::Builder::new()
            .name("acp-daemon-events".into())
            .spawn(move || {
                while let Ok(event) = client.next_event() {
                    let name = event["name"].as_str().unwrap_or_default();
                    let Some(turn) = turn_event(name, &event["data"]) else {
                        continue;
                    };
                    if sender.send(turn).is_err() {
                        break;
                    }
                }
            });
        receiver
    }

    fn send(&self, path: &Path) -> Result<(), String> {
        daemon_call("flemma/send", json!({"uri": path})).map(drop)
    }

    fn approve(&self, path: &Path, tool_id: &str) -> Result<(), String> {
        daemon_call("flemma/approve", json!({"uri": path, "toolId": tool_id})).map(drop)
    }

    fn reject(&self, path: &Path, tool_id: &str, reason: Option<String>) -> Result<(), String> {
        let mut params = json!({"uri": path, "toolId": tool_id});
        if let Some(reason) = reason {
            params["reason"] = json!(reason);
        }
        daemon_call("flemma/reject", params).map(drop)
    }

    fn cancel(&self, path: &Path) -> bool {
        daemon_call("flemma/cancel", json!({"uri": path})).is_ok()
    }

    fn mcp_servers(&self, _path: &Path, _cwd: &Path, servers: Vec<McpServerSpec>) -> Vec<String> {
        servers
            .iter()
            .map(|server| {
                format!(
                    "the editor's MCP server `{}` is not used: the daemon runs this session's prompts and takes MCP servers only from the configuration; run `flemmad acp --no-daemon` to use the editor's",
                    server.name()
                )
            })
            .collect()
    }
}
