//! The harness parameters the model may add to any call (`flemma.background`,
//! `flemma.save_to`). The wire side injects them into schemas (`flemma_wire::tools`); here
//! they are taken out of the input before the tool runs.

use serde_json::Value;

/// Runs an async tool in the background.
pub const BACKGROUND: &str = flemma_config::BACKGROUND_PARAMETER;
/// Redirects the output to a file.
pub const SAVE_TO: &str = flemma_config::SAVE_TO_PARAMETER;

/// The harness parameters of one call (null counts as unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessParameters {
    pub background: bool,
    pub save_to: Option<String>,
}

/// Removes the harness parameters from `input` and returns them.
pub fn strip(input: &mut Value) -> HarnessParameters {
    let Value::Object(map) = input else {
        return HarnessParameters::default();
    };
    let background = map
        .remove(BACKGROUND)
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let save_to = map
        .remove(SAVE_TO)
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|s| !s.is_empty());
    HarnessParameters {
        background,
        save_to,
    }
}
