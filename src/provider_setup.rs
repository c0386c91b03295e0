//! From a resolved configuration to what the provider crate needs: the provider kind, request
//! options, the endpoint (config → environment → default), client timeouts and the catalogue
//! entry of the model.

use std::path::Path;
use std::time::Duration;

use flemma_config::{Config, MaxTokens, Thinking as ConfigThinking};
use flemma_provider::catalogue::{Catalogue, ModelOverride, ModelSpec};
use flemma_provider::credentials::CredentialEnvironment;
use flemma_provider::http::{ClientConfig, Endpoint};
use flemma_provider::{ProviderKind, RequestOptions, Thinking, ThinkingLevel, ThinkingOff};

/// Output tokens assumed for models the catalogue does not know.
const UNKNOWN_MODEL_OUTPUT_LIMIT: u64 = 8192;

#[derive(Debug, Clone)]
pub struct ProviderSetup {
    pub kind: ProviderKind,
    pub options: RequestOptions,
    pub endpoint: Endpoint,
    pub client: ClientConfig,
    pub model: Option<ModelSpec>,
    /// "model … is not in the catalogue (did you mean …?)", "… always thinks": non-blocking.
    pub model_warnings: Vec<String>,
}

/// The model catalogue with the configuration's `[models."id"]` overrides (of its provider).
pub fn catalogue_of(config: &Config) -> Catalogue {
    let kind = ProviderKind::from(config.provider);
    let overrides: Vec<ModelOverride> = config
        .models
        .iter()
        .map(|(model, o)| ModelOverride {
            provider: kind,
            model: model.clone(),
            input: o.input,
            output: o.output,
            cache_read: o.cache_read,
            cache_write_5m: o.cache_write,
            cache_write_1h: None,
            context_window: o.context_window,
            max_output_tokens: o.max_output_tokens,
            thinking: o.thinking,
            adaptive_thinking: None,
        })
        .collect();
    Catalogue::builtin().with_overrides(&overrides)
}

pub fn provider_setup(
    config: &Config,
    chat_path: Option<&Path>,
    environment: &CredentialEnvironment,
) -> anyhow::Result<ProviderSetup> {
    let kind = ProviderKind::from(config.provider);
    let catalogue = catalogue_of(config);
    let model = catalogue.lookup(kind, &config.model).cloned();
    let parameters = &config.parameters;
    let output_limit = model
        .as_ref()
        .map_or(UNKNOWN_MODEL_OUTPUT_LIMIT, |m| m.max_output_tokens);
    let max_tokens = match parameters.max_tokens {
        MaxTokens::Tokens(n) => n,
        percent @ MaxTokens::Percent(_) => percent.for_limit(output_limit),
    };
    let mut model_warnings: Vec<String> = catalogue
        .unknown_model_warning(kind, &config.model)
        .into_iter()
        .collect();
    let thinking_supported = catalogue.supports_thinking(kind, &config.model);
    let thinking_off = model.as_ref().map_or(ThinkingOff::Omit, |m| m.thinking_off);
    let thinking = if thinking_supported {
        match parameters.thinking {
            ConfigThinking::Off | ConfigThinking::Budget(0)
                if thinking_off == ThinkingOff::Forced =>
            {
                model_warnings.push(format!(
                    "{} always thinks, so `thinking = false` cannot turn thinking off; it thinks at the lowest effort (low)",
                    config.model
                ));
                Thinking::Level(ThinkingLevel::Low)
            }
            ConfigThinking::Off => Thinking::Off,
            ConfigThinking::Budget(n) => Thinking::Budget(u32::try_from(n).unwrap_or(u32::MAX)),
            ConfigThinking::Level(level) => Thinking::Level(level),
        }
    } else {
        Thinking::Off
    };
    let options = RequestOptions {
        model: config.model.clone(),
        max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
        temperature: parameters.temperature,
        thinking,
        cache_retention: parameters.cache_retention,
        tools: Vec::new(),
        prompt_cache_key: chat_path.map(|p| p.display().to_string()),
        anthropic_version: parameters.anthropic.api_version.clone(),
        anthropic_beta: parameters.anthropic.beta.clone(),
        anthropic_thinking_budget: parameters
            .anthropic
            .thinking_budget
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        openai_reasoning: match kind {
            ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
                parameters.openai_compatible.reasoning_effort
            }
            _ => parameters.openai.reasoning,
        },
        openai_reasoning_summary: parameters.openai.reasoning_summary,
        gemini_thinking_budget: match kind {
            ProviderKind::Vertex => parameters.vertex.thinking_budget,
            _ => parameters.gemini.thinking_budget,
        }
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        vertex_project: parameters.vertex.project_id.clone(),
        vertex_location: parameters.vertex.location.clone(),
        supports_adaptive_thinking: model.as_ref().is_some_and(|m| m.adaptive_thinking),
        thinking_off,
        reasoning_efforts: model.as_ref().map_or(&[], |m| m.reasoning_efforts),
    };
    let endpoint = Endpoint::for_provider(
        kind,
        config.providers.get(config.provider).base_url.as_deref(),
        environment,
        &parameters.vertex.location,
    );
    let client = ClientConfig {
        connect_timeout: Duration::from_secs(parameters.connect_timeout),
        timeout: Duration::from_secs(parameters.timeout),
        idle_timeout: Duration::from_secs(parameters.idle_timeout),
        ..ClientConfig::default()
    };
    Ok(ProviderSetup {
        kind,
        options,
        endpoint,
        client,
        model,
        model_warnings,
    })
}

/// The HTTP client with the credential resolver chain configured from `config`.
pub fn client(
    config: &Config,
    setup: &ProviderSetup,
    environment: CredentialEnvironment,
) -> anyhow::Result<flemma_provider::http::ProviderClient> {
    let resolver = flemma_provider::credentials::CredentialResolver::new(
        environment,
        flemma_provider::credentials::ResolverOptions {
            gcloud_path: Some(config.secrets.gcloud.path.clone()),
            chatgpt_auth_file: config.secrets.chatgpt.auth_file.clone(),
            ..Default::default()
        },
    );
    Ok(flemma_provider::http::ProviderClient::new(
        setup.client,
        std::sync::Arc::new(resolver),
    )?)
}
