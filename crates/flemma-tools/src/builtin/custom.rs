//! The `custom` tool.
