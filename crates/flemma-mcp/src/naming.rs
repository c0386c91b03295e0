//! Tool names: server NAME's tool TOOL is the tool `NAME.TOOL`, NAME in its tool-name form
//! (dots become hyphens, so `.` separates server from tool). The wire form (what a provider
//! sees, at most 64 characters) is `flemma_wire`'s business.

pub use flemma_config::{RESERVED_MCP_SERVER, mcp_server_name};

/// The full tool name of `tool` on the server whose tool-name form is `server`.
pub fn full_name(server: &str, tool: &str) -> String {
    format!("{server}.{tool}")
}

/// The server and tool of a full name (`github.search.v2` → `github`, `search.v2`).
pub fn split(full: &str) -> Option<(&str, &str)> {
    full.split_once('.')
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_in_server_names_become_hyphens() {
        assert_eq!(mcp_server_name("docs.internal"), "docs-internal");
        assert_eq!(full_name("docs-internal", "get__x"), "docs-internal.get__x");
    }

    #[test]
    fn the_first_dot_separates_server_and_tool() {
        assert_eq!(split("github.search.v2"), Some(("github", "search.v2")));
        assert_eq!(split("bash"), None);
        assert_eq!(split(".x"), None);
    }
}
