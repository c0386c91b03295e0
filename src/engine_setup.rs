//! One setup for every driver of the engine: from a chat's text and the user configuration to
//! the [`DriverParts`] a [`Driver`](crate::engine_driver::Driver) runs with (provider, tools,
//! engine configuration, HTTP client, analysis host). The engine host uses it — in `flemmad
//! lsp`/`flemmad serve`, and in `flemmad send`'s own process without a daemon — so every
//! front end sends the same requests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma_engine::{Engine, EngineConfig, EngineEvent, Input};
use flemma_ide::{Analysis, ConfigInput, Diagnostic, DocumentId, NOTHING_TO_SEND};
use flemma_protocol::event::{IgnoredOption, TrustIgnored};
use flemma_provider::ProviderKind;

use crate::engine_driver::DriverParts;
use crate::provider_setup::provider_setup;
use crate::tool_setup::{SetupPolicy, ToolSetup};

/// The code of the template diagnostics about tool uses and results (missing results,
/// unresolved placeholders): the engine resolves those, so they block nothing.
const TOOL_DIAGNOSTIC: &str = "template-tool";

/// How a setup differs between its users.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetupOptions {
    /// One advance instead of the autopilot cycle (`flemmad send --no-autopilot`).
    pub no_autopilot: bool,
}

/// Everything a driver needs, and what its user says about the chat before it starts.
pub struct Prepared {
    pub parts: DriverParts,
    /// The analysis of the text as given (its diagnostics are worth showing).
    pub analysis: Arc<Analysis>,
    /// "model … is not in the catalogue (did you mean …?)", "… always thinks": worth a
    /// warning, not a refusal.
    pub model_warnings: Vec<String>,
    /// MCP servers that did not start or were ignored (one line each).
    pub tool_warnings: Vec<String>,
    /// `anthropic`, `openai`, …
    pub provider_name: &'static str,
    pub model: String,
    /// Non-empty when there is nothing to send: no `@You:` with text, no aborted reply to
    /// continue, no tool call waiting (judged after orphan recovery). A send refuses; an
    /// approve or a job delivery does not care.
    pub nothing_to_send: Vec<Diagnostic>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("path", &self.parts.path)
            .field("provider", &self.provider_name)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Why a chat cannot be driven.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The chat has errors that stop a send (its analysis holds them, with their ranges).
    #[error("the chat cannot be sent: {}; fix it and send again", summary(.analysis))]
    Blocked { analysis: Arc<Analysis> },
    /// The configuration, the provider, the tools or the client cannot be set up.
    #[error("{0}")]
    Failed(String),
}

fn summary(analysis: &Analysis) -> String {
    blockers(analysis)
        .iter()
        .map(|d| d.message.clone())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What stops a send before the engine runs: everything `send_blockers` says except what the
/// engine resolves itself (tool calls waiting) and "nothing to send" (judged after recovery).
pub fn blockers(analysis: &Analysis) -> Vec<Diagnostic> {
    analysis
        .send_blockers()
        .into_iter()
        .filter(|d| d.code != TOOL_DIAGNOSTIC && d.code != NOTHING_TO_SEND)
        .collect()
}

/// Sets up a driver for the chat at `path` whose text is `text` (as read from the file or an
/// editor's buffer), under the layers below its frontmatter `config` (the user file of
/// [`crate::chat::config_input`], and for the engine host the editor's client settings and the
/// document's runtime switch).
pub async fn prepare(
    path: &Path,
    text: &str,
    config: ConfigInput,
    options: SetupOptions,
    analyses: &crate::analyses::Analyses,
    mcp: &flemma_mcp::McpHub,
    services: &crate::engine_driver::DriverServices,
) -> Result<Prepared, SetupError> {
    let context = &*services.context;
    let absolute: PathBuf = context.absolute(path);
    let id = DocumentId::new(absolute.clone());
    let analysis = crate::analyses::analysis(analyses, &id, true, |host| {
        host.set_text(id.clone(), text.to_owned());
        host.set_document_config(&id, config);
    })
    .map_err(|error| SetupError::Failed(error.to_string()))?;
    if !blockers(&analysis).is_empty() {
        return Err(SetupError::Blocked { analysis });
    }
    let Some(resolved) = &analysis.config else {
        return Err(SetupError::Failed(
            "the configuration does not resolve; see the diagnostics".into(),
        ));
    };
    let config = resolved.config.clone();
    let environment = context.credentials();
    let mut setup = provider_setup(&config, Some(&absolute), &environment)
        .map_err(|error| SetupError::Failed(format!("{error:#}")))?;
    // The chat's own approval function (frontmatter Rhai) decides too.
    let mut tools =
        ToolSetup::for_chat(context, &analysis, &absolute).map_err(SetupError::Failed)?;
    // An ACP session's view of files and MCP servers, when one gave them for this chat.
    tools.ctx.editor = services.editors.editor_files(&absolute);
    let session_servers = services.editors.mcp_servers(&absolute);
    let mcp = crate::mcp_setup::McpTools::discover(
        mcp,
        resolved,
        context,
        Some(&absolute),
        &session_servers,
        tools.sandbox_wrap(),
    )
    .await;
    tools.add_mcp(&mcp);
    let agent_notes = tools.add_agents(resolved, true, &services.agents);
    setup.options.tools = tools.definitions();
    let client = crate::provider_setup::client(&config, &setup, environment)
        .map_err(|error| SetupError::Failed(format!("{error:#}")))?;

    let mut engine = EngineConfig::from_config(&config);
    engine.autopilot = engine.autopilot && !options.no_autopilot;
    engine.verbatim_tool_arguments = matches!(
        setup.kind,
        ProviderKind::OpenAi
            | ProviderKind::OpenAiCompatible
            | ProviderKind::Moonshot
            | ProviderKind::Codex
    );
    // A subscription has no cost per request.
    engine.prices = setup
        .model
        .as_ref()
        .filter(|m| !m.subscription)
        .map(|m| m.prices(config.parameters.cache_retention));
    engine.context_window = setup.model.as_ref().map(|m| m.context_window);
    engine.id_seed = job_id_seed();
    // A cancelled `ask_agent` returns what the agent answered so far.
    engine.kept_when_cancelled = vec![flemma_acp::ask::NAME.to_owned()];
    engine.provider = Some(setup.kind.name().to_owned());
    engine.model = Some(setup.options.model.clone());
    let tools = Arc::new(tools);
    let recovery = services.interruptions.recovery(&absolute);
    // Nothing to do? Judged on the text as orphan recovery leaves it (a lost job's result is
    // something to send), and tool calls waiting for results are something to do.
    let mut probe = Engine::new(
        engine.clone(),
        text.to_owned(),
        Arc::new(SetupPolicy(tools.clone())),
    )
    .recovering(recovery.clone());
    probe.handle(0, Input::Load);
    let recovered = flemma_syntax::parse(probe.text());
    let tools_waiting =
        !recovered.unresolved_tool_uses().is_empty() || !recovered.placeholders(None).is_empty();
    let nothing_to_send = if tools_waiting {
        Vec::new()
    } else {
        let recovered = crate::analyses::analysis(analyses, &id, true, |host| {
            host.set_text(id.clone(), probe.text().to_owned())
        })
        .map_err(|error| SetupError::Failed(error.to_string()))?;
        crate::analyses::lock(analyses).set_text(id.clone(), text.to_owned());
        recovered
            .send_blockers()
            .into_iter()
            .filter(|d| d.code == NOTHING_TO_SEND)
            .collect()
    };
    let untrusted = (!analysis.trust.trusted)
        .then(|| Arc::new(crate::trust::CallRecords::for_dirs(&context.dirs)));
    Ok(Prepared {
        model_warnings: setup.model_warnings.clone(),
        tool_warnings: mcp.warnings().into_iter().chain(agent_notes).collect(),
        provider_name: setup.kind.name(),
        model: setup.options.model.clone(),
        nothing_to_send,
        analysis,
        parts: DriverParts {
            path: path.to_owned(),
            engine,
            tools,
            coalesce: Duration::from_millis(config.editing.coalesce_ms),
            provider: setup,
            client: Arc::new(client),
            host: analyses.clone(),
            id,
            untrusted,
            recovery,
            services: services.clone(),
        },
    })
}

/// `trust:ignored`, said once per send, for a chat whose frontmatter set options it may not
/// because they would widen what the chat may do (`None` when nothing was ignored).
pub fn trust_notice(analysis: &Analysis) -> Option<EngineEvent> {
    let ignored = analysis.config.as_ref()?.ignored();
    if ignored.is_empty() {
        return None;
    }
    let trust = flemma_ide::untrusted::trust_command(analysis.id.path());
    let options = ignored
        .iter()
        .map(|option| IgnoredOption {
            path: option.path.clone(),
            value: option.value.clone(),
            allowed: option.allowed.clone(),
            message: flemma_ide::untrusted::ignored_message(option, analysis.id.path()),
        })
        .collect();
    Some(EngineEvent::TrustIgnored(TrustIgnored {
        reason: analysis.trust.reason.clone(),
        trust,
        options,
    }))
}

/// A seed for job ids that differs between runs (ids are also checked unique in the file).
fn job_id_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
}
