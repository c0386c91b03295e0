//! Options of the Neovim plugin Flemma (up to 0.14) that flemmad does not implement.
//!
//! A Flemma chat or config that sets one of them must still work: setting one is a warning
//! that names what flemmad does instead, never an error. Only keys the schema does not know
//! reach this table, so an option flemmad grows later is simply no longer "Flemma-only".

/// Each entry: a Flemma option path (it covers everything below it) and what flemmad does
/// instead.
const FLEMMA_ONLY: &[(&str, &str)] = &[
    (
        "tools.mcporter",
        "flemmad runs MCP servers itself as tool sources: declare them under `[tools.mcp]` in the config file (no MCPorter needed)",
    ),
    (
        "tools.modules",
        "flemmad loads no Lua modules: declare tool sources as commands with `[[tools.sources]]`, or tools with `[[tools.custom]]`",
    ),
    (
        "tools.truncate",
        "the overflow of a truncated result goes to the result store: see `tools.store.path_format`",
    ),
    (
        "tools.show_spinner",
        "progress is shown by the editor or the CLI, not configured here",
    ),
    (
        "tools.cursor_after_result",
        "the cursor is the editor's: flemmad only edits the text",
    ),
    (
        "tools.bash.shell",
        "flemmad runs `bash` (inside the sandbox when one is active)",
    ),
    (
        "tools.bash.env",
        "tool processes inherit flemmad's environment plus `FLEMMA_TOOLS_STORE_PATH`; set variables where flemmad starts",
    ),
    (
        "parameters.openai.experimental",
        "flemmad replays Responses items as the provider sent them",
    ),
    (
        "parameters.moonshot",
        "Moonshot takes the `parameters.openai_compatible` options in flemmad",
    ),
    (
        "highlights",
        "display settings of the Neovim plugin; editors colour `.chat` files with their own syntax and the LSP's semantic information",
    ),
    (
        "ruler",
        "display settings of the Neovim plugin; flemmad has no UI",
    ),
    (
        "turns",
        "display settings of the Neovim plugin; flemmad has no UI",
    ),
    (
        "line_highlights",
        "display settings of the Neovim plugin; flemmad has no UI",
    ),
    (
        "ui",
        "display settings of the Neovim plugin; usage and cost come with `flemmad send` and the `flemma/event` notifications",
    ),
    (
        "notifications",
        "display settings of the Neovim plugin; usage and cost come with `flemmad send` and the `flemma/event` notifications",
    ),
    (
        "progress",
        "display settings of the Neovim plugin; flemmad reports progress with `$/progress`",
    ),
    (
        "statusline",
        "display settings of the Neovim plugin; flemmad has no UI",
    ),
    (
        "pricing",
        "flemmad always reports costs from its model catalogue (`[models]` overrides prices)",
    ),
    ("keymaps", "key bindings belong to the editor"),
    ("text_object", "key bindings belong to the editor"),
    (
        "role_style",
        "display settings of the Neovim plugin; flemmad has no UI",
    ),
    (
        "defaults",
        "display settings of the Neovim plugin; flemmad has no UI",
    ),
    (
        "editing.auto_prompt",
        "flemmad writes the next `@You:` after every reply",
    ),
    (
        "editing.auto_write",
        "flemmad always writes the reply: into the editor's buffer when one has the chat open, else into the file",
    ),
    (
        "editing.disable_textwidth",
        "buffer options belong to the editor",
    ),
    (
        "editing.manage_updatetime",
        "buffer options belong to the editor",
    ),
    (
        "editing.foldlevel",
        "folding is offered through LSP folding ranges",
    ),
    ("editing.conceal", "buffer options belong to the editor"),
    (
        "editing.auto_close",
        "folding is offered through LSP folding ranges",
    ),
    (
        "logging",
        "flemmad logs with `[log] level` and `[log] file` (or `RUST_LOG`)",
    ),
    (
        "diagnostics",
        "run flemmad with `RUST_LOG=debug` to log requests",
    ),
    (
        "sandbox.backends",
        "flemmad uses `bwrap` from `PATH` (`sandbox.backend`)",
    ),
    (
        "experimental",
        "flemmad always offers `grep`, `find`, `ls` and its language server",
    ),
    ("lsp", "flemmad is the language server (`flemmad lsp`)"),
];

/// What flemmad does instead of the Flemma-only option at `path` (or at a table above it), when
/// it is one.
pub(crate) fn instead_of(path: &str) -> Option<&'static str> {
    FLEMMA_ONLY
        .iter()
        .find(|(option, _)| {
            path == *option
                || path
                    .strip_prefix(option)
                    .is_some_and(|rest| rest.starts_with('.'))
        })
        .map(|(_, instead)| *instead)
}

/// The warning for a Flemma-only option.
pub(crate) fn warning(path: &str, instead: &str) -> String {
    format!("`{path}` is a Flemma option that flemmad does not implement; it is ignored: {instead}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_everything_below_them() {
        assert!(instead_of("tools.mcporter").is_some_and(|t| t.contains("[tools.mcp]")));
        assert!(instead_of("tools.mcporter.enabled").is_some());
        assert!(instead_of("tools.mcporters").is_none());
        assert!(instead_of("parameters.thinking").is_none());
    }
}
