//! The `fetch` tool.
