//! The `find` tool.
