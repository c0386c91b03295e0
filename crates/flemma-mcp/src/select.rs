//! Which MCP tools a chat has and is offered. `tools.mcp.exclude` runs first: a tool it
//! matches is not registered at all (absent from listings, completion and `tools run`; the
//! binary drops it at discovery with `flemma_config::Mcp::excluded_by`).
//! `tools.mcp.include` and the chat's `tools.enabled` (names and globs kept verbatim by the
//! configuration until discovery) turn a registered tool on; `!` items of `tools.enabled` turn
//! it off again (it stays registered, like a built-in the chat disables), and exclusion wins.

use flemma_config::{Config, first_match, glob_match};

/// The selection rules of one resolved configuration.
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    pub include: &'a [String],
    pub exclude: &'a [String],
    /// The resolved `tools.enabled` (MCP items verbatim, exclusions as `!x`).
    pub enabled: &'a [String],
}

impl<'a> Selection<'a> {
    pub fn of(config: &'a Config) -> Self {
        Self {
            include: &config.tools.mcp.include,
            exclude: &config.tools.mcp.exclude,
            enabled: &config.tools.enabled,
        }
    }

    /// Whether the tool `full_name` is turned off: excluded, or removed by a `!` item of
    /// `tools.enabled` (never offered).
    pub fn excludes(&self, full_name: &str) -> bool {
        first_match(self.exclude, full_name).is_some()
            || self
                .enabled
                .iter()
                .filter_map(|item| item.strip_prefix('!'))
                .any(|p| glob_match(p, full_name))
    }

    /// Whether the tool `full_name` is offered to the model.
    pub fn offers(&self, full_name: &str) -> bool {
        if self.excludes(full_name) {
            return false;
        }
        self.include.iter().any(|p| glob_match(p, full_name))
            || self
                .enabled
                .iter()
                .filter(|item| !item.starts_with('!'))
                .any(|p| glob_match(p, full_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn include_enables_and_exclude_wins() {
        let include = strings(&["github.*"]);
        let exclude = strings(&["github.delete_*"]);
        let enabled = strings(&["bash", "docs.search", "!github.noisy"]);
        let selection = Selection {
            include: &include,
            exclude: &exclude,
            enabled: &enabled,
        };
        assert!(selection.offers("github.search_issues"));
        assert!(!selection.offers("github.delete_repo"));
        assert!(!selection.offers("github.noisy"));
        assert!(selection.offers("docs.search"), "opted in by tools.enabled");
        assert!(!selection.offers("docs.fetch"), "discovered, not included");
    }

    #[test]
    fn nothing_is_offered_by_default() {
        let none: Vec<String> = Vec::new();
        let selection = Selection {
            include: &none,
            exclude: &none,
            enabled: &none,
        };
        assert!(!selection.offers("github.search"));
    }
}
