//! The `grep` tool.
