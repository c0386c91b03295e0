//! `flemmad models PROVIDER`: list the models a provider serves, with catalogue prices.

use clap::Args;
use flemma_config::{ConfigLayer, LayerKind};
use flemma_protocol::models::ModelEntry;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::process_context::ProcessContext;
use crate::provider_setup::{client, provider_setup};

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// anthropic, openai, openai-compatible, moonshot, gemini or vertex.
    pub provider: String,
    /// Print JSON Lines (one object per model, protocol/models.schema.json) instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ModelsArgs, context: &ProcessContext) -> Result<(), CliError> {
    let ui = super::Ui::new("models");
    let input = crate::chat::config_input(context);
    let problems = input.diagnostics();
    if !problems.is_empty() {
        let place = input.user_file.clone().unwrap_or_default();
        return Err(CliError::blocked(
            "models",
            crate::chat::render_all(&place, None, &problems),
            "fix the configuration above and try again",
        ));
    }
    let mut layers = input.layers;
    let mut runtime_layer = ConfigLayer::new(LayerKind::Runtime);
    runtime_layer
        .set("provider", serde_json::Value::String(args.provider.clone()))
        .map_err(|error| CliError::failed("models", error))?;
    layers.push(runtime_layer);
    let config = match flemma_config::resolve(&layers) {
        Ok(resolved) => resolved.config,
        Err(errors) => return Err(CliError::failed("models", errors)),
    };
    let environment = context.credentials();
    let setup = provider_setup(&config, None, &environment)?;
    let catalogue = flemma_provider::catalogue::Catalogue::builtin();
    let models = if setup.kind == flemma_provider::ProviderKind::Codex {
        // The Codex backend's own list depends on the Codex CLI's version: the catalogue's.
        catalogue
            .models()
            .iter()
            .filter(|m| m.provider == setup.kind)
            .map(|m| flemma_provider::ModelInfo {
                id: m.id.clone(),
                display_name: None,
                context_window: Some(m.context_window),
                max_output_tokens: Some(m.max_output_tokens),
            })
            .collect()
    } else {
        let client = client(&config, &setup, environment)?;
        crate::runtime::get()?
            .block_on(client.list_models(
                setup.kind,
                &setup.options,
                &setup.endpoint,
                CancellationToken::new(),
            ))
            .map_err(|error| CliError::failed("models", error))?
    };
    for model in &models {
        let spec = catalogue.lookup(setup.kind, &model.id);
        if args.json {
            let entry = ModelEntry {
                id: model.id.clone(),
                display_name: model.display_name.clone(),
                context_window: model.context_window.or(spec.map(|s| s.context_window)),
                max_output_tokens: model
                    .max_output_tokens
                    .or(spec.map(|s| s.max_output_tokens)),
                input_price_per_mtok: spec.map(|s| s.input),
                output_price_per_mtok: spec.map(|s| s.output),
            };
            ui.json(&entry)?;
        } else {
            let prices = spec.map_or(String::new(), |s| {
                let paid = if s.subscription {
                    " at API prices (your ChatGPT plan pays)"
                } else {
                    ""
                };
                format!("  ${:.2} in / ${:.2} out per Mtok{paid}", s.input, s.output)
            });
            ui.line(&format!("{}{}", model.id, prices))?;
        }
    }
    Ok(())
}
