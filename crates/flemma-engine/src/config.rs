//! The part of the resolved configuration the engine reads.

pub use flemma_wire::Prices;

#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub autopilot: bool,
    pub max_turns: u64,
    /// Milliseconds before an auto-continue after job results delivered at idle.
    pub resume_delay: u64,
    /// Foreground tools running at once (0 = unlimited).
    pub max_concurrent: usize,
    pub compact_headers: bool,
    /// Write tool-call argument strings verbatim (providers that send strings: OpenAI
    /// Responses, Chat Completions, Moonshot). The shell sets it from the provider.
    pub verbatim_tool_arguments: bool,
    /// Prices of the model (for its cache retention), when the catalogue knows them: every
    /// cost the engine reports is [`Prices::cost`].
    pub prices: Option<Prices>,
    /// Seed of the job id source.
    pub id_seed: u64,
    /// The provider and model requests go to (named in `request:sending`, for status bars).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The model's context window in tokens, when the catalogue knows it (`usage:updated`
    /// tells it beside the tokens the last request had in context, for ACP's `usage_update`).
    pub context_window: Option<u64>,
    /// Tools whose output after a cancel is kept: the call stays `aborted` and its result block
    /// gets what the tool returned on its way out (an asked agent's answer so far). The session
    /// waits for it a bounded time ([`crate::session::LATE_RESULT_WAIT`]).
    pub kept_when_cancelled: Vec<String>,
}

impl EngineConfig {
    /// From the resolved configuration (frontmatter included).
    pub fn from_config(config: &flemma_config::Config) -> Self {
        Self {
            autopilot: config.tools.autopilot.enabled,
            max_turns: config.tools.autopilot.max_turns,
            resume_delay: config.tools.autopilot.resume_delay,
            max_concurrent: usize::try_from(config.tools.max_concurrent).unwrap_or(usize::MAX),
            compact_headers: config.editing.compact_headers,
            verbatim_tool_arguments: false,
            prices: None,
            id_seed: 0,
            provider: None,
            model: None,
            context_window: None,
            kept_when_cancelled: Vec::new(),
        }
    }
}

impl Default for EngineConfig {
    /// The documented defaults (`harness.md` §8).
    fn default() -> Self {
        Self {
            autopilot: true,
            max_turns: 100,
            resume_delay: 2000,
            max_concurrent: 2,
            compact_headers: true,
            verbatim_tool_arguments: false,
            prices: None,
            id_seed: 0,
            provider: None,
            model: None,
            context_window: None,
            kept_when_cancelled: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_what_the_schema_defaults_give() {
        let resolved = flemma_config::resolve(&[flemma_config::ConfigLayer::defaults()])
            .expect("the schema defaults resolve");
        assert_eq!(
            EngineConfig::from_config(&resolved.config),
            EngineConfig::default()
        );
    }
}
