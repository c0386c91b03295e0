//! The client settings of a session: the `initializationOptions` of `initialize` and the
//! `flemma`/`flemmad` section of `workspace/didChangeConfiguration`, an object in the config
//! file's shape (`{"provider": "openai", "model": "gpt-5", "tools": {…}}`). They are the
//! session's [`LayerKind::Client`] layer: its documents are analysed with it (a bad key is a
//! diagnostic), and the engine gets it for sends started from the session.

use flemma_config::{ConfigLayer, LayerKind};
use serde_json::Value;

use crate::backend::ClientConfig;
use crate::session::Session;

/// The client layer of `settings` (`None` when they set nothing: `null` or `{}`).
pub fn client_config(settings: &Value) -> Option<ClientConfig> {
    match settings {
        Value::Null => None,
        Value::Object(map) if map.is_empty() => None,
        other => Some(ConfigLayer::from_json(other, LayerKind::Client)),
    }
}

/// The flemmad settings in the `settings` of `workspace/didChangeConfiguration`: the
/// `config` object of a `flemma` or `flemmad` section (VS Code's `flemma.config`), or a
/// `flemmad` section itself. `None` when the notification carries no such section (the
/// settings are left as they are).
pub fn changed_settings(settings: &Value) -> Option<&Value> {
    for section in ["flemmad", "flemma"] {
        if let Some(value) = settings.get(section) {
            return match value.get("config") {
                Some(config) => Some(config),
                None if section == "flemmad" => Some(value),
                None => None,
            };
        }
    }
    None
}

/// `workspace/didChangeConfiguration`: a flemmad section replaces the client layer.
pub(crate) fn did_change_configuration(session: &mut Session, params: &Value) {
    let Some(settings) = params.get("settings").and_then(changed_settings) else {
        tracing::debug!("a configuration change without a flemmad section; ignored");
        return;
    };
    let config = client_config(settings);
    apply(session, config);
}

/// Analyses the session's documents with `config` over the session's base configuration,
/// tells the engine, and publishes the documents' diagnostics again.
pub(crate) fn apply(session: &mut Session, config: Option<ClientConfig>) {
    let mut input = session.base_config.clone();
    if let Some(read) = config.clone() {
        input = input.with_layer(read);
    }
    session.host.set_config(input);
    session.backend.client_config(config);
    let open: Vec<String> = session.documents.keys().cloned().collect();
    for uri in open {
        crate::analysis_worker::schedule(session, &uri);
    }
}

/// The folders trusted with `flemmad trust` changed (a "Trust this folder" action, or a
/// document opened after a trust elsewhere): the session's documents are analysed with them
/// and their diagnostics published again. Nothing happens when they are the same.
pub(crate) fn set_trusted_folders(session: &mut Session, folders: Vec<std::path::PathBuf>) {
    if session.base_config.trusted_folders == folders {
        return;
    }
    session.base_config.trusted_folders = folders.clone();
    let mut input = session.host.config().clone();
    input.trusted_folders = folders;
    session.host.set_config(input);
    let open: Vec<String> = session.documents.keys().cloned().collect();
    for uri in open {
        crate::analysis_worker::schedule(session, &uri);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_flemmad_settings_are_found_in_a_configuration_change() {
        let config = json!({"provider": "openai"});
        assert_eq!(
            changed_settings(&json!({"flemma": {"config": config, "path": "x"}})),
            Some(&config)
        );
        assert_eq!(
            changed_settings(&json!({"flemmad": {"config": config}})),
            Some(&config)
        );
        assert_eq!(changed_settings(&json!({"flemmad": config})), Some(&config));
        assert_eq!(changed_settings(&json!({"flemma": {"path": "x"}})), None);
        assert_eq!(changed_settings(&json!({"editor": {}})), None);
    }

    #[test]
    fn empty_settings_are_no_layer_and_bad_keys_are_errors() {
        assert!(client_config(&json!({})).is_none());
        assert!(client_config(&Value::Null).is_none());
        let Some(Ok(layer)) = client_config(&json!({"provider": "openai"})) else {
            panic!("a valid layer");
        };
        assert_eq!(layer.kind(), LayerKind::Client);
        let Some(Err(errors)) = client_config(&json!({"modle": "gpt-5"})) else {
            panic!("an unknown key is an error");
        };
        assert_eq!(errors.0[0].layer, Some(LayerKind::Client));
        assert_eq!(errors.0[0].suggestion.as_deref(), Some("model"), "{errors}");
    }
}
