//! The `lsp` tool.
