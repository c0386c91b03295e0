//! The built-in tools, one module each. Every runner has the shape
//! `pub fn run(ctx: &RunContext, input: &serde_json::Value) -> Outcome` (input already validated
//! against the tool's schema, harness parameters stripped) plus a `pub fn spec() -> …` giving its
//! definition (`crate::spec::ToolSpec`; build strict schemas with
//! `crate::spec::strict_object_schema`).

pub mod bash;
pub mod custom;
pub mod edit;
pub mod fetch;
pub mod find;
pub mod grep;
pub mod jobs;
pub mod ls;
pub mod lsp;
pub mod read;
pub mod skill;
pub mod write;
