//! The `write` tool.
