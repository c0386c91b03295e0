//! The `read` tool.
