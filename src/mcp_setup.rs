//! The MCP servers of a command or an engine host and of one chat: an [`McpHub`] (stdio
//! servers started through flemmad's own parent-death shim; made by [`new_hub`] where a
//! command or the host starts, handed down, and shut down where it ends: no process-wide
//! global), the servers a chat's configuration
//! defines (plus any a session adds), their discovery, and their tools registered beside the
//! built-ins. Shared by `send`, the engine host, `tools`, `status` and `doctor`; opening a
//! document in the language server never gets here.

use std::path::Path;
use std::time::Duration;

use flemma_config::ResolvedConfig;
use flemma_mcp::hub::CallOptions;
use flemma_mcp::select::Selection;
use flemma_mcp::{HubOptions, McpHub, ServerDef, ServerState, ServerStatus};
use flemma_tools::registry::Registry;
use flemma_tools::truncate::Keep;

/// A new set of MCP servers (none started yet): a command's, or an engine host's; stdio
/// servers start through the shim of `context`'s executable (without one, directly). Close it
/// with [`McpHub::shutdown`] where its owner ends.
pub fn new_hub(context: &crate::process_context::ProcessContext) -> McpHub {
    McpHub::new(hub_options(context))
}

/// The options of [`new_hub`]'s hub.
fn hub_options(context: &crate::process_context::ProcessContext) -> HubOptions {
    let mut options = HubOptions::default();
    options.launch.shim = context.executable().ok().map(Path::to_owned);
    options
}

/// The MCP side of one chat's tools: the servers' states, what was ignored, and how calls run.
#[derive(Debug, Clone, Default)]
pub struct McpTools {
    pub servers: Vec<ServerStatus>,
    /// Servers ignored, variables unset (one line each).
    pub notes: Vec<String>,
    pub options: Option<CallOptions>,
    /// The servers a session gave (an ACP editor's `mcpServers`): their tools are offered to
    /// the model without `tools.mcp.include` (the editor asked for them).
    pub session_servers: Vec<String>,
    /// The tools `tools.mcp.exclude` kept out: gone from `servers`, never registered.
    pub excluded: Vec<Excluded>,
}

impl McpTools {
    /// Starts (or reuses, in `hub`) the servers `resolved` defines for the chat at `chat` (its
    /// folder, `ProcessContext::chat_folder`; without a chat, the working directory; `${VAR}`
    /// from the process's `context`), plus `extra` (a session's own).
    pub async fn discover(
        hub: &McpHub,
        resolved: &ResolvedConfig,
        context: &crate::process_context::ProcessContext,
        chat: Option<&Path>,
        extra: &[ServerDef],
        sandbox: Option<flemma_mcp::connection::SandboxWrap>,
    ) -> Self {
        let mcp = &resolved.config.tools.mcp;
        let env = |name: &str| context.var(name);
        let folder = context.chat_folder(chat);
        let defined = flemma_mcp::definition::defined(resolved, &folder, &env);
        let mut notes = defined.notes;
        let mut defs = defined.servers;
        defs.extend(extra.iter().cloned());
        // The reserved name `flemma` is refused from every source, here where they meet.
        let defs = flemma_mcp::definition::allowed_names(defs, &mut notes);
        if defs.is_empty() {
            return Self {
                notes,
                ..Self::default()
            };
        }
        let startup = Duration::from_secs(mcp.startup_timeout);
        let mut servers = hub.ensure(&defs, startup, sandbox).await;
        // Exclusion runs first: an excluded tool is not this chat's at all.
        let mut excluded = Vec::new();
        for server in &mut servers {
            server
                .tools
                .retain(|tool| match mcp.excluded_by(&tool.full_name) {
                    Some(pattern) => {
                        excluded.push(Excluded {
                            name: tool.full_name.clone(),
                            pattern: pattern.to_owned(),
                        });
                        false
                    }
                    None => true,
                });
            if let ServerState::Ready { tools, .. } = &mut server.state {
                *tools = server.tools.len();
            }
        }
        for server in &servers {
            tracing::debug!(server = %server.name, state = ?server.state, tools = server.tools.len(), "MCP server");
        }
        Self {
            servers,
            notes,
            session_servers: extra.iter().map(|def| def.name.clone()).collect(),
            excluded,
            options: Some(CallOptions {
                timeout: Duration::from_secs(
                    mcp.timeout.unwrap_or(resolved.config.tools.default_timeout),
                ),
                startup_timeout: startup,
            }),
        }
    }

    /// Why the tool `name` is not registered, when `tools.mcp.exclude` is the reason.
    pub fn exclusion(&self, name: &str) -> Option<&Excluded> {
        self.excluded.iter().find(|excluded| excluded.name == name)
    }

    /// One line per problem: ignored servers, unset variables, servers that did not start.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.notes.clone();
        for server in &self.servers {
            if let ServerState::Failed { reason } = &server.state {
                out.push(format!(
                    "MCP server `{}` did not start, its tools are absent: {reason}",
                    server.name
                ));
            }
        }
        out
    }

    /// Registers every discovered tool in `registry` (the excluded ones are gone already);
    /// returns all their names and those offered to the model (by `tools.mcp.include` and the
    /// chat's `tools.enabled`, less its `!` items).
    pub fn register(&self, registry: &mut Registry, config: &flemma_config::Config) -> McpNames {
        let mut names = McpNames::default();
        let Some(options) = &self.options else {
            return names;
        };
        let selection = Selection::of(config);
        for server in &self.servers {
            for tool in &server.tools {
                if registry.get(&tool.full_name).is_some() && !names.all.contains(&tool.full_name) {
                    tracing::warn!(tool = %tool.full_name, "an MCP tool has the name of another tool; the other one is kept");
                    continue;
                }
                let spec = tool.tool.spec(&tool.full_name, &tool.server);
                let runner_tool = tool.clone();
                let runner_options = options.clone();
                registry.register(
                    spec,
                    move |ctx, input| {
                        let store = ctx
                            .env
                            .iter()
                            .find(|(key, _)| key == "FLEMMA_TOOLS_STORE_PATH")
                            .map(|(_, dir)| std::path::PathBuf::from(dir));
                        runner_tool.run(input, &runner_options, &ctx.cancel, store.as_deref())
                    },
                    Keep::Head,
                );
                names.all.push(tool.full_name.clone());
                if selection.offers(&tool.full_name) || self.session_servers.contains(&server.name)
                {
                    names.offered.push(tool.full_name.clone());
                }
            }
        }
        names
    }
}

/// The MCP tools of a registry: every discovered one, and those offered to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpNames {
    pub all: Vec<String>,
    pub offered: Vec<String>,
}

/// A discovered MCP tool that is not registered, and the `tools.mcp.exclude` glob that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    pub name: String,
    pub pattern: String,
}

impl std::fmt::Display for Excluded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is excluded by tools.mcp.exclude (\"{}\"): it is not registered; remove the pattern from tools.mcp.exclude to use it",
            self.name, self.pattern
        )
    }
}

/// The server a registered tool comes from (`None` for a built-in or custom tool).
pub fn server_of<'a>(mcp: &'a McpTools, tool: &str) -> Option<&'a ServerStatus> {
    mcp.servers
        .iter()
        .find(|server| server.tools.iter().any(|t| t.full_name == tool))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::process_context::ProcessContext;
    use crate::user_dirs::UserDirs;

    /// Stdio servers start through the shim of the context's executable (read once in
    /// `main`), not of whatever binary runs this code; a context without one starts them
    /// directly.
    #[test]
    fn the_shim_is_the_context_s_executable() {
        let context = ProcessContext::new(UserDirs::default(), PathBuf::from("/"), None, None);
        assert_eq!(hub_options(&context).launch.shim, None);
        let context = context.with_executable(Path::new("/opt/flemma/bin/flemmad"));
        assert_eq!(
            hub_options(&context).launch.shim,
            Some(PathBuf::from("/opt/flemma/bin/flemmad"))
        );
    }
}
