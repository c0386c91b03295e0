//! `flemmad doctor`: the MCP servers of the user configuration, started once each.

use super::*;

/// Each configured MCP server: does it start and list its tools (stdio servers in their `cwd`,
/// `/` by default, as every run starts them).
pub(super) fn check_mcp(context: &ProcessContext, findings: &mut Vec<Finding>) {
    const CHECK: &str = "mcp";
    let input = crate::chat::config_input(context);
    let Ok(resolved) = flemma_config::resolve(&input.layers) else {
        return; // the config check above reports it
    };
    if resolved.config.tools.mcp.servers.is_empty() {
        findings.push(Finding::new(
            CHECK,
            Status::Info,
            "no MCP servers configured",
        ));
        return;
    }
    let Ok(runtime) = crate::runtime::get() else {
        return;
    };
    let hub = crate::mcp_setup::new_hub(context);
    let mcp = runtime.block_on(crate::mcp_setup::McpTools::discover(
        &hub,
        &resolved,
        context,
        None,
        &[],
        None,
    ));
    runtime.block_on(hub.shutdown());
    for note in &mcp.notes {
        findings.push(Finding::new(CHECK, Status::Warn, note.clone()));
    }
    for server in &mcp.servers {
        findings.push(match &server.state {
            flemma_mcp::ServerState::Ready { tools, .. } => Finding::new(
                CHECK,
                Status::Ok,
                format!(
                    "server `{}` starts and lists {tools} tool{} ({})",
                    server.name,
                    if *tools == 1 { "" } else { "s" },
                    server.describe
                ),
            ),
            flemma_mcp::ServerState::Failed { reason } => Finding::new(
                CHECK,
                Status::Fail,
                format!("server `{}` does not start: {reason} ({})", server.name, server.describe),
            )
            .hint(format!(
                "run the server's command by hand to see why, or set tools.mcp.servers.{}.enabled = false",
                server.name
            )),
        });
    }
}
