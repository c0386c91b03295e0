//! The `skill` tool.
