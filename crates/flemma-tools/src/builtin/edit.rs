//! The `edit` tool.
