//! The JSON form of `flemmad models PROVIDER --json`: one [`ModelEntry`] object per line.
//!
//! Stable: fields are only ever added.

use schemars::JsonSchema;
use serde::Serialize;

/// One model a provider serves, with what the built-in catalogue knows of it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ModelEntry {
    /// The id to put in `model`.
    pub id: String,
    /// The provider's display name, when it gives one.
    pub display_name: Option<String>,
    /// Input context window in tokens (the provider's figure, else the catalogue's).
    pub context_window: Option<u64>,
    /// Most output tokens per reply (the provider's figure, else the catalogue's).
    pub max_output_tokens: Option<u64>,
    /// Catalogue price per million input tokens, in US dollars.
    pub input_price_per_mtok: Option<f64>,
    /// Catalogue price per million output tokens, in US dollars.
    pub output_price_per_mtok: Option<f64>,
}
