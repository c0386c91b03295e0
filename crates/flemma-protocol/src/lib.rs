//! `flemma-protocol`: the serde types of every stable JSON form flemmad speaks, and their JSON
//! Schemas (written to `protocol/` by `cargo test -p flemma-protocol` when `UPDATE_GENERATED=1`).
//!
//! Today: the parse tree printed by `flemmad parse --json` ([`parse_tree`]). The `flemma/*`
//! methods and events join here as the engine and LSP issues add them.

pub mod parse_tree;

/// Every schema this crate publishes, as `(file name under protocol/, schema)`.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![(
        "parse.schema.json",
        serde_json::to_value(schemars::schema_for!(parse_tree::ParsedDocument))
            .unwrap_or(serde_json::Value::Null),
    )]
}
