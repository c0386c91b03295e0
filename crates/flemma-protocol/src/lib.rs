//! `flemma-protocol`: the serde types of every stable JSON form flemmad speaks, and their JSON
//! Schemas (written to `protocol/` by `cargo test -p flemma-protocol` when `UPDATE_GENERATED=1`).
//!
//! Depends on no flemma crate (`flemma-conversation` uses its rate-limit types): the producers (`flemma-ide::to_protocol`, the binary) convert
//! their types into these.
//!
//! * [`parse_tree`]: `flemmad parse --json`.
//! * [`eval`]: `flemmad parse --eval --json`.
//! * [`models`]: `flemmad models --json` (one object per line).
//! * [`status`]: `flemmad status FILE --json`.
//! * [`event`]: `flemmad send --events` (one lifecycle event per line) and `flemma/event`.
//! * [`methods`]: the `flemma/*` requests (every front end decodes into them) and their
//!   answers; [`error`]: how a refused request is answered; [`document`]: how a request names
//!   its document.
//! * [`activity`]: what the engine is doing for a document, folded from its events (a type,
//!   not a JSON form: the CLI's live line and the LSP's `$/progress` share it).
//! * [`approval`]: the approval chain's verdict on a call (a type, not a JSON form: the chain,
//!   the engine and the editor share it).

pub mod activity;
pub mod approval;
pub mod context;
pub mod document;
pub mod engine;
pub mod error;
pub mod eval;
pub mod event;
pub mod methods;
pub mod models;
pub mod parse_tree;
pub mod status;

/// Every schema this crate publishes, as `(file name under protocol/, schema)`.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    fn schema(value: schemars::Schema) -> serde_json::Value {
        serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
    }
    vec![
        (
            "parse.schema.json",
            schema(schemars::schema_for!(parse_tree::ParsedDocument)),
        ),
        (
            "eval.schema.json",
            schema(schemars::schema_for!(eval::EvaluatedDocument)),
        ),
        (
            "event.schema.json",
            schema(schemars::schema_for!(event::LifecycleEvent)),
        ),
        (
            "status.schema.json",
            schema(schemars::schema_for!(status::ChatStatus)),
        ),
        (
            "models.schema.json",
            schema(schemars::schema_for!(models::ModelEntry)),
        ),
        (
            "methods.schema.json",
            schema(schemars::schema_for!(methods::FlemmaRequest)),
        ),
    ]
}
