//! The `ls` tool.
