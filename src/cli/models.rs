//! `flemmad models PROVIDER`: list the models a provider serves, with catalogue prices.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use flemma_config::{ConfigLayer, LayerKind};
use flemma_provider::credentials::CredentialEnvironment;
use tokio_util::sync::CancellationToken;

use crate::chat::{LoadError, user_config_layer};
use crate::provider_setup::{client, provider_setup, runtime};

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// anthropic, openai, openai-compatible, moonshot, gemini or vertex.
    pub provider: String,
    /// Print JSON (one object per model) instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ModelsArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut layers = Vec::new();
    match user_config_layer(config_path) {
        Ok(Some(layer)) => layers.push(layer),
        Ok(None) => {}
        Err(LoadError::Blocked(report)) => {
            eprint!("{report}");
            return Ok(ExitCode::from(1));
        }
        Err(LoadError::Unreadable(error)) => return Err(error),
    }
    let mut runtime_layer = ConfigLayer::new(LayerKind::Runtime);
    if let Err(error) =
        runtime_layer.set("provider", serde_json::Value::String(args.provider.clone()))
    {
        eprintln!("flemmad models: {error}");
        return Ok(ExitCode::from(1));
    }
    layers.push(runtime_layer);
    let config = match flemma_config::resolve(&layers) {
        Ok(resolved) => resolved.config,
        Err(errors) => {
            for e in errors.errors() {
                eprintln!("flemmad models: {e}");
            }
            return Ok(ExitCode::from(1));
        }
    };
    let environment = CredentialEnvironment::from_process();
    let setup = provider_setup(&config, None, &environment)?;
    let client = client(&config, &setup, environment)?;
    let models = runtime()?.block_on(client.list_models(
        setup.kind,
        &setup.options,
        &setup.endpoint,
        CancellationToken::new(),
    ));
    let models = match models {
        Ok(models) => models,
        Err(error) => {
            eprintln!("flemmad models: {error}");
            return Ok(ExitCode::from(1));
        }
    };
    let catalogue = flemma_provider::catalogue::Catalogue::builtin();
    for model in &models {
        let spec = catalogue.lookup(setup.kind, &model.id);
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "id": model.id,
                    "display_name": model.display_name,
                    "context_window": model.context_window.or(spec.map(|s| s.context_window)),
                    "max_output_tokens": model.max_output_tokens.or(spec.map(|s| s.max_output_tokens)),
                    "input_price_per_mtok": spec.map(|s| s.input),
                    "output_price_per_mtok": spec.map(|s| s.output),
                })
            );
        } else {
            let prices = spec.map_or(String::new(), |s| {
                format!("  ${:.2} in / ${:.2} out per Mtok", s.input, s.output)
            });
            println!("{}{}", model.id, prices);
        }
    }
    Ok(ExitCode::SUCCESS)
}
