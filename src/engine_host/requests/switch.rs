//! `flemma/switch` and `flemma/mode`: the document's runtime layers, and the configuration
//! its next request resolves.

use std::path::Path;

use flemma_config::{ConfigLayer, LayerKind, ResolvedConfig};
use flemma_engine::EngineEvent;
use flemma_ide::{ConfigInput, DocumentId};
use flemma_protocol::engine::{ModeResult, ModelSwitch, SwitchResult};
use flemma_protocol::error::RequestError;
use flemma_protocol::event::{ConfigUpdated, ModelRef};

use crate::engine_host::{EngineHost, Shared};

fn invalid_switch(message: String) -> RequestError {
    RequestError::invalid_params(message)
}

impl EngineHost {
    /// `flemma/switch`: the provider and model of the document's next requests, as its
    /// runtime layer (above the user file and the client settings, below the frontmatter).
    /// `model` is `provider/model`, or a model name for the document's current provider.
    pub(in crate::engine_host) fn switch(
        &self,
        path: &Path,
        model: &str,
    ) -> Result<SwitchResult, RequestError> {
        let (provider, model) = parse_model_spec(model)?;
        let text = self.shared.text_of(path).map_err(invalid_switch)?;
        // The current provider: the document's, under its layers as they are now.
        let mut input = self.shared.config_input(path);
        let frontmatter = self.shared.frontmatter_layers(path, &text)?;
        let before = resolved_config(path, &input, &frontmatter)?;
        let provider = provider.unwrap_or_else(|| before.config.provider.as_str().to_owned());
        let mut layer = ConfigLayer::new(LayerKind::Runtime);
        // A model string with parameters or a `$preset` says its provider itself: the runtime
        // layer holds it as written and the configuration resolves it.
        let model_string = model
            .as_deref()
            .filter(|m| m.starts_with('$') || m.contains(';'))
            .map(|m| match m.starts_with('$') {
                true => m.to_owned(),
                false => format!("{provider}/{m}"),
            });
        let pairs = match &model_string {
            Some(string) => [("provider", None), ("model", Some(string))],
            None => [("provider", Some(&provider)), ("model", model.as_ref())],
        };
        for (key, value) in pairs {
            let Some(value) = value else { continue };
            layer
                .set(key, serde_json::Value::String(value.clone()))
                .map_err(|error| {
                    invalid_switch(format!(
                        "cannot switch to `{provider}/{}`: {error}; name a model as `provider/model` (`flemmad models` lists them), a model of the current provider, or a provider alone",
                        model.as_deref().unwrap_or_default()
                    ))
                })?;
        }
        input.layers.retain(|l| l.kind() != LayerKind::Runtime);
        input.layers.push(layer.clone());
        let after = resolved_config(path, &input, &frontmatter)?;
        let next = ModelSwitch {
            provider: after.config.provider.as_str().to_owned(),
            model: after.config.model.clone(),
        };
        // A provider alone switches to its default model (the config's rule).
        let switched = match (model, provider.parse::<flemma_config::Provider>()) {
            _ if model_string.is_some() => next.clone(),
            (Some(model), _) => ModelSwitch { provider, model },
            (None, Ok(kind)) => ModelSwitch {
                model: flemma_config::default_model(kind).to_owned(),
                provider,
            },
            (None, Err(_)) => ModelSwitch {
                model: after.config.model.clone(),
                provider,
            },
        };
        let frontmatter_wins = [after.source_of("provider"), after.source_of("model")]
            .contains(&Some(LayerKind::Frontmatter));
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let message = if frontmatter_wins {
            format!(
                "switched {name} to {}/{}, but its frontmatter sets the {}, which wins: the next request uses {}/{}; remove `provider`/`model` from the frontmatter for the switch to take effect",
                switched.provider,
                switched.model,
                if after.source_of("model") == Some(LayerKind::Frontmatter) {
                    "model"
                } else {
                    "provider"
                },
                next.provider,
                next.model
            )
        } else {
            format!(
                "the next request of {name} uses {}/{}",
                next.provider, next.model
            )
        };
        {
            let (path, switched) = (path.to_owned(), switched.clone());
            self.shared
                .state
                .tell(move |owned| owned.state.set_switch(&path, layer, switched));
        }
        self.shared.publish(
            path,
            EngineEvent::ConfigUpdated(ConfigUpdated {
                layer: LayerKind::Runtime.as_str().to_owned(),
                provider: switched.provider.clone(),
                model: switched.model.clone(),
                next: ModelRef {
                    provider: next.provider.clone(),
                    model: next.model.clone(),
                },
                frontmatter_wins,
            }),
        );
        Ok(SwitchResult {
            switched,
            next,
            frontmatter_wins,
            message,
        })
    }

    /// `flemma/mode`: what the document's tools may change from its next send on, as a
    /// runtime layer of its own (the frontmatter may make it stricter, docs/modes.md).
    pub(in crate::engine_host) fn set_mode(
        &self,
        path: &Path,
        name: &str,
    ) -> Result<ModeResult, RequestError> {
        let Some(mode) = flemma_config::Mode::parse(name) else {
            return Err(RequestError::invalid_params(format!(
                "unknown mode `{name}`; the modes are {} (docs/modes.md)",
                flemma_config::MODES.join(", ")
            )));
        };
        let mut layer = ConfigLayer::new(LayerKind::Runtime);
        layer
            .set("mode", serde_json::Value::String(name.to_owned()))
            .map_err(|error| RequestError::invalid_params(error.to_string()))?;
        let effective = self.resolved_mode(path, Some(layer.clone()))?;
        {
            let path = path.to_owned();
            self.shared
                .state
                .tell(move |owned| owned.state.set_mode(&path, layer, mode));
        }
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let message = if effective == mode {
            format!(
                "{name} is in {} mode from its next send: {}",
                mode.as_str(),
                mode.description()
            )
        } else {
            format!(
                "set {name} to {} mode, but its frontmatter sets the stricter {} mode, which wins: {}",
                mode.as_str(),
                effective.as_str(),
                effective.description()
            )
        };
        Ok(ModeResult {
            mode: mode.as_str().to_owned(),
            effective: effective.as_str().to_owned(),
            message,
        })
    }

    /// The mode the document's tools run in at its next send (docs/modes.md): its
    /// configuration's, with `flemma/mode`'s layer (or `instead`, a new one) and its
    /// frontmatter.
    pub fn resolved_mode(
        &self,
        path: &Path,
        instead: Option<ConfigLayer>,
    ) -> Result<flemma_config::Mode, RequestError> {
        let text = self.shared.text_of(path).map_err(invalid_switch)?;
        let mut input = self.shared.config_input(path);
        if let Some(layer) = instead {
            let set_before = {
                let path = path.to_owned();
                self.shared
                    .state
                    .ask(move |owned| owned.state.mode(&path).map(|(l, _)| l.clone()))
            };
            input.layers.retain(|l| Some(l) != set_before.as_ref());
            input.layers.push(layer);
        }
        let frontmatter = self.shared.frontmatter_layers(path, &text)?;
        Ok(resolved_config(path, &input, &frontmatter)?.config.mode)
    }

    /// The document's configuration as its next request resolves it (its layers, its
    /// `flemma/switch` and `flemma/mode` layers, its frontmatter).
    pub fn resolved_config(&self, path: &Path) -> Result<ResolvedConfig, RequestError> {
        let text = self.shared.text_of(path).map_err(invalid_switch)?;
        let input = self.shared.config_input(path);
        let frontmatter = self.shared.frontmatter_layers(path, &text)?;
        resolved_config(path, &input, &frontmatter)
    }

    /// The model the document's `flemma/switch` layer holds, as written (a `$preset` stays
    /// one, a model string keeps its parameters); `None` before any switch.
    pub fn switched_model(&self, path: &Path) -> Option<String> {
        let path = path.to_owned();
        self.shared.state.ask(move |owned| {
            owned
                .state
                .switch(&path)
                .and_then(|(layer, _)| layer.get("model"))
                .and_then(|value| value.as_str().map(str::to_owned))
        })
    }
}

/// `provider/model`, a bare model name, or a provider alone (`None` model: its default); the
/// provider is checked by the config schema.
fn parse_model_spec(spec: &str) -> Result<(Option<String>, Option<String>), RequestError> {
    let malformed = |why: &str| {
        invalid_switch(format!(
            "`{spec}` is not a model: {why}; name it as `provider/model` (e.g. `anthropic/claude-sonnet-4-5`) or as a model of the current provider (`flemmad models` lists them)"
        ))
    };
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(malformed("it is empty"));
    }
    if spec.chars().any(char::is_whitespace) {
        return Err(malformed("it contains spaces"));
    }
    match spec.split_once('/') {
        None if flemma_config::Provider::ALL
            .iter()
            .any(|provider| provider.as_str() == spec) =>
        {
            Ok((Some(spec.to_owned()), None))
        }
        None => Ok((None, Some(spec.to_owned()))),
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => {
            Ok((Some(provider.to_owned()), Some(model.to_owned())))
        }
        Some(_) => Err(malformed("the provider or the model after `/` is missing")),
    }
}

/// The document's configuration resolved under `config` and its frontmatter's layers.
fn resolved_config(
    path: &Path,
    config: &ConfigInput,
    frontmatter: &[ConfigLayer],
) -> Result<ResolvedConfig, RequestError> {
    let does_not_resolve = || {
        invalid_switch(format!(
            "the configuration of {} does not resolve; fix its diagnostics first",
            path.display()
        ))
    };
    if !config.errors.is_empty() {
        return Err(does_not_resolve());
    }
    let layers: Vec<ConfigLayer> = config.layers.iter().chain(frontmatter).cloned().collect();
    flemma_config::resolve(&layers).map_err(|_| does_not_resolve())
}

impl Shared {
    /// The layers below the frontmatter of `path`'s next request: the user file, the client
    /// settings of the editor that writes it, and its runtime switch.
    pub(in crate::engine_host) fn config_input(&self, path: &Path) -> ConfigInput {
        let mut input = crate::chat::config_input(&self.services.context);
        let client = self
            .writer_editor(path)
            .and_then(|editor| editor.client_config);
        if let Some(read) = client {
            input = input.with_layer(read);
        }
        let path = path.to_owned();
        let runtime = self.state.ask(move |owned| {
            let switch = owned.state.switch(&path).map(|(layer, _)| layer.clone());
            let mode = owned.state.mode(&path).map(|(layer, _)| layer.clone());
            [switch, mode]
        });
        input.layers.extend(runtime.into_iter().flatten());
        input
    }

    /// The layers the document's frontmatter sets, from the document's one analysis (the
    /// engine's, when a driver works on it; else made for this question and not kept).
    pub(in crate::engine_host) fn frontmatter_layers(
        &self,
        path: &Path,
        text: &str,
    ) -> Result<Vec<ConfigLayer>, RequestError> {
        let id = DocumentId::new(std::path::absolute(path).unwrap_or_else(|_| path.to_owned()));
        let mut fresh = false;
        let analysis = crate::analyses::analysis(&self.analyses, &id, true, |host| {
            fresh = host.document(&id).is_none();
            if fresh {
                host.set_text(id.clone(), text.to_owned());
            }
        });
        if fresh {
            crate::analyses::lock(&self.analyses).forget(&id);
        }
        Ok(analysis
            .map_err(|error| invalid_switch(error.to_string()))?
            .layers
            .iter()
            .filter(|layer| layer.kind() == LayerKind::Frontmatter)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_names_a_provider_and_model_a_model_or_a_provider() {
        let spec = |s: &str| parse_model_spec(s).map_err(|e| e.to_string());
        assert_eq!(
            spec("anthropic/claude-sonnet-4-5"),
            Ok((Some("anthropic".into()), Some("claude-sonnet-4-5".into())))
        );
        assert_eq!(spec("gpt-5"), Ok((None, Some("gpt-5".into()))));
        assert_eq!(spec("openai"), Ok((Some("openai".into()), None)));
        // A model id may hold a slash of its own (OpenRouter names).
        assert_eq!(
            spec("openai-compatible/meta-llama/llama-3"),
            Ok((
                Some("openai-compatible".into()),
                Some("meta-llama/llama-3".into())
            ))
        );
        for bad in ["", "  ", "openai/", "/gpt-5", "gpt 5"] {
            let Err(message) = spec(bad) else {
                panic!("`{bad}` is refused");
            };
            assert!(message.contains("provider/model"), "{message}");
        }
    }
}
