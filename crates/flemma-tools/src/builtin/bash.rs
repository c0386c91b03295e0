//! The `bash` tool.
