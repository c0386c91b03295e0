//! The typed, resolved configuration that the rest of flemmad reads.
//!
//! Every field is filled from the schema defaults, so there are no `Default` impls here: the
//! schema is the single source of defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The resolved configuration tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The LLM provider.
    pub provider: Provider,
    /// The effective model id (the provider's default when unset or set below `provider`).
    pub model: String,
    /// What the chat's tools may change.
    pub mode: Mode,
    /// Request parameters.
    pub parameters: Parameters,
    /// Per-provider connection settings.
    pub providers: Providers,
    /// Model catalogue overrides keyed by model id.
    #[serde(default)]
    pub models: BTreeMap<String, ModelOverride>,
    /// Tool settings.
    pub tools: Tools,
    /// The ACP agents `ask_agent` may ask, keyed by name.
    #[serde(default)]
    pub agents: BTreeMap<String, Agent>,
    /// User-defined approval presets keyed by `$name` (built-ins are not listed here).
    #[serde(default)]
    pub presets: BTreeMap<String, Preset>,
    /// Sandbox settings.
    pub sandbox: Sandbox,
    /// The checkpoints of the project's files: pruning and the file size limit.
    pub checkpoints: Checkpoints,
    /// Which chats' frontmatter is trusted.
    pub trust: TrustSettings,
    /// Template extensions.
    pub templating: Templating,
    /// Document editing settings.
    pub editing: Editing,
    /// Credential resolver settings.
    pub secrets: Secrets,
    /// Logging.
    pub log: Log,
    /// The context window: when to warn, when and how to compact.
    pub context: Context,
}

/// What a chat's tools may change (`mode`; docs/modes.md), from the widest to the strictest.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The approval settings, and `write` and `edit` inside the project approved.
    AutoEdit,
    /// The approval settings.
    #[default]
    Default,
    /// Only reading: the reading tools, and `bash` in a sandbox where the project is read-only.
    Ask,
}

impl Mode {
    /// Every mode, from the widest to the strictest (`crate::schema::MODES`).
    pub const ALL: [Mode; 3] = [Mode::AutoEdit, Mode::Default, Mode::Ask];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::AutoEdit => "auto-edit",
            Mode::Default => "default",
            Mode::Ask => "ask",
        }
    }

    /// The mode named `name` (`ask`, `default`, `auto-edit`).
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.as_str() == name)
    }

    /// What the mode lets the chat's tools do, in one line (pickers, `flemmad status`).
    pub fn description(self) -> &'static str {
        match self {
            Mode::AutoEdit => {
                "file edits inside the project run without asking; the rest as the chat's approval settings say"
            }
            Mode::Default => "tools run as the chat's approval settings say",
            Mode::Ask => {
                "read-only: the reading tools, and bash in a sandbox where the project cannot be written"
            }
        }
    }
}

/// A built-in LLM provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Responses API.
    Openai,
    /// Any Chat Completions server (Ollama, llama.cpp, vLLM, LM Studio, OpenRouter).
    OpenaiCompatible,
    /// Moonshot (Chat Completions preset).
    Moonshot,
    /// Google Gemini API.
    Gemini,
    /// Google Vertex AI.
    Vertex,
    /// The Codex backend through a ChatGPT subscription (`codex login`).
    Codex,
}

impl Provider {
    /// Every provider, in documentation order.
    pub const ALL: [Provider; 7] = [
        Provider::Anthropic,
        Provider::Openai,
        Provider::OpenaiCompatible,
        Provider::Moonshot,
        Provider::Gemini,
        Provider::Vertex,
        Provider::Codex,
    ];

    /// The configuration name (`openai-compatible`).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
            Provider::OpenaiCompatible => "openai-compatible",
            Provider::Moonshot => "moonshot",
            Provider::Gemini => "gemini",
            Provider::Vertex => "vertex",
            Provider::Codex => "codex",
        }
    }

    /// Parses a configuration name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Provider {
    type Err = UnknownName;
    fn from_str(text: &str) -> Result<Self, UnknownName> {
        Provider::from_name(text).ok_or_else(|| UnknownName {
            what: "provider",
            given: text.to_owned(),
            expected: Provider::ALL.iter().map(|p| p.as_str()).collect(),
        })
    }
}

/// The model used when a provider is chosen without a model: Flemma's defaults (its README's
/// provider table).
pub fn default_model(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => "claude-sonnet-4-6",
        Provider::Openai => "gpt-5.4",
        Provider::OpenaiCompatible => "llama3.2",
        Provider::Moonshot => "kimi-k2.6",
        Provider::Gemini | Provider::Vertex => "gemini-3.1-pro-preview",
        Provider::Codex => "gpt-5.5",
    }
}

/// Request parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    /// Unified thinking setting.
    pub thinking: Thinking,
    /// Output token limit.
    pub max_tokens: MaxTokens,
    /// Sampling temperature (provider default when unset).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Whole-request timeout in seconds.
    pub timeout: u64,
    /// Connection timeout in seconds.
    pub connect_timeout: u64,
    /// Seconds of silence (from the provider, or from an asked agent) after which a reply is
    /// stopped.
    pub idle_timeout: u64,
    /// Prompt caching.
    pub cache_retention: CacheRetention,
    /// Anthropic-only parameters.
    pub anthropic: AnthropicParameters,
    /// OpenAI-only parameters.
    pub openai: OpenAiParameters,
    /// Chat Completions server parameters.
    pub openai_compatible: OpenAiCompatibleParameters,
    /// Vertex AI parameters.
    pub vertex: VertexParameters,
    /// Gemini API parameters.
    pub gemini: GeminiParameters,
}

/// A thinking level name: the one spelling for config, frontmatter and the wire crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// Least reasoning.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High (the default).
    High,
    /// The most the model allows.
    Max,
}

/// `parameters.thinking`: a level, a token budget, or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub enum Thinking {
    /// A named level.
    Level(ThinkingLevel),
    /// An explicit budget in tokens.
    Budget(u64),
    /// Thinking disabled (`false`).
    Off,
}

impl TryFrom<Value> for Thinking {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::Bool(false) => Ok(Thinking::Off),
            Value::Number(n) => n
                .as_u64()
                .map(Thinking::Budget)
                .ok_or_else(|| format!("thinking budget {n} is not a non-negative integer")),
            other => serde_json::from_value(other)
                .map(Thinking::Level)
                .map_err(|error| error.to_string()),
        }
    }
}

impl From<Thinking> for Value {
    fn from(thinking: Thinking) -> Value {
        match thinking {
            Thinking::Off => json!(false),
            Thinking::Budget(n) => json!(n),
            Thinking::Level(level) => serde_json::to_value(level).unwrap_or(Value::Null),
        }
    }
}

/// `parameters.max_tokens`: a count or a percentage of the model's output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub enum MaxTokens {
    /// An absolute number of tokens.
    Tokens(u64),
    /// A percentage (1..=100) of the model's output limit.
    Percent(u8),
}

impl MaxTokens {
    /// The token limit for a model whose output limit is `model_limit`.
    pub fn for_limit(self, model_limit: u64) -> u64 {
        match self {
            MaxTokens::Tokens(n) => n,
            MaxTokens::Percent(p) => (model_limit * u64::from(p) / 100).max(1),
        }
    }
}

impl TryFrom<Value> for MaxTokens {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, String> {
        match &value {
            Value::Number(n) => n
                .as_u64()
                .map(MaxTokens::Tokens)
                .ok_or_else(|| format!("max_tokens {n} is not a positive integer")),
            Value::String(text) => parse_percent(text)
                .map(MaxTokens::Percent)
                .ok_or_else(|| format!("max_tokens '{text}' is not a percentage such as \"50%\"")),
            other => Err(format!(
                "max_tokens {other} is neither a number nor a percentage"
            )),
        }
    }
}

impl From<MaxTokens> for Value {
    fn from(max_tokens: MaxTokens) -> Value {
        match max_tokens {
            MaxTokens::Tokens(n) => json!(n),
            MaxTokens::Percent(p) => json!(format!("{p}%")),
        }
    }
}

/// Parses `"NN%"` with NN in 1..=100.
pub(crate) fn parse_percent(text: &str) -> Option<u8> {
    let digits = text.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: u8 = digits.parse().ok()?;
    (1..=100).contains(&value).then_some(value)
}

/// Prompt caching retention: the one spelling for config and the wire crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheRetention {
    /// Provider default (5 minutes on Anthropic).
    #[default]
    Short,
    /// One hour.
    Long,
    /// No cache markers.
    None,
}

/// A reasoning effort name (OpenAI and Chat Completions servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// Minimal.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

/// OpenAI reasoning summary style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningSummary {
    /// Let the model choose.
    Auto,
    /// Short.
    Concise,
    /// Long.
    Detailed,
}

/// `Display`, `FromStr` and `as_str` from one table of names per unit enum, so a value's
/// spelling is written once and matches its serde name.
macro_rules! named_enum {
    ($type:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $type {
            /// Every value, in declaration order.
            pub const VALUES: &'static [$type] = &[$($type::$variant),+];

            /// The configuration spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $type {
            type Err = UnknownName;
            fn from_str(text: &str) -> Result<Self, UnknownName> {
                $type::VALUES
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == text)
                    .ok_or_else(|| UnknownName {
                        what: stringify!($type),
                        given: text.to_owned(),
                        expected: $type::VALUES.iter().map(|v| v.as_str()).collect(),
                    })
            }
        }
    };
}

/// A name that is not one of an enum's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not a {what} (expected one of: {})", expected.join(", "))]
pub struct UnknownName {
    /// The enum's type name.
    pub what: &'static str,
    /// The text that did not match.
    pub given: String,
    /// Every accepted spelling.
    pub expected: Vec<&'static str>,
}

named_enum!(ThinkingLevel { Minimal => "minimal", Low => "low", Medium => "medium", High => "high", Max => "max" });
named_enum!(CacheRetention { Short => "short", Long => "long", None => "none" });
named_enum!(ReasoningEffort { Minimal => "minimal", Low => "low", Medium => "medium", High => "high" });
named_enum!(ReasoningSummary { Auto => "auto", Concise => "concise", Detailed => "detailed" });

/// Anthropic-only parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicParameters {
    /// Thinking budget overriding `parameters.thinking`.
    #[serde(default)]
    pub thinking_budget: Option<u64>,
    /// `anthropic-version` header.
    pub api_version: String,
    /// Extra `anthropic-beta` flags.
    pub beta: Vec<String>,
}

/// OpenAI-only parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiParameters {
    /// Reasoning effort overriding `parameters.thinking`.
    #[serde(default)]
    pub reasoning: Option<ReasoningEffort>,
    /// Reasoning summary style.
    #[serde(default)]
    pub reasoning_summary: Option<ReasoningSummary>,
}

/// Chat Completions server parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiCompatibleParameters {
    /// `reasoning_effort` overriding `parameters.thinking`.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Whether a missing API key is an error.
    pub api_key_required: bool,
}

/// Vertex AI parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VertexParameters {
    /// Google Cloud project id.
    #[serde(default)]
    pub project_id: Option<String>,
    /// Vertex AI location.
    pub location: String,
    /// Thinking budget overriding `parameters.thinking`.
    #[serde(default)]
    pub thinking_budget: Option<u64>,
}

/// Gemini API parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeminiParameters {
    /// Thinking budget overriding `parameters.thinking`.
    #[serde(default)]
    pub thinking_budget: Option<u64>,
}

/// Per-provider connection settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Providers {
    /// Anthropic.
    #[serde(default)]
    pub anthropic: ProviderConnection,
    /// OpenAI.
    #[serde(default)]
    pub openai: ProviderConnection,
    /// Chat Completions servers.
    #[serde(default, rename = "openai-compatible")]
    pub openai_compatible: ProviderConnection,
    /// Moonshot.
    #[serde(default)]
    pub moonshot: ProviderConnection,
    /// Gemini API.
    #[serde(default)]
    pub gemini: ProviderConnection,
    /// Vertex AI.
    #[serde(default)]
    pub vertex: ProviderConnection,
    /// The Codex backend (ChatGPT subscription).
    #[serde(default)]
    pub codex: ProviderConnection,
}

impl Providers {
    /// The connection settings of `provider`.
    pub fn get(&self, provider: Provider) -> &ProviderConnection {
        match provider {
            Provider::Anthropic => &self.anthropic,
            Provider::Openai => &self.openai,
            Provider::OpenaiCompatible => &self.openai_compatible,
            Provider::Moonshot => &self.moonshot,
            Provider::Gemini => &self.gemini,
            Provider::Vertex => &self.vertex,
            Provider::Codex => &self.codex,
        }
    }
}

/// Connection settings of one provider.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConnection {
    /// Base URL override (env-var defaults are applied by the provider crate).
    #[serde(default)]
    pub base_url: Option<String>,
}

/// Catalogue overrides for one model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// USD per million input tokens.
    #[serde(default)]
    pub input: Option<f64>,
    /// USD per million output tokens.
    #[serde(default)]
    pub output: Option<f64>,
    /// USD per million cache-read tokens.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// USD per million cache-write tokens.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Context window in tokens.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Output limit in tokens.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Whether the model supports thinking.
    #[serde(default)]
    pub thinking: Option<bool>,
}

/// Tool settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tools {
    /// Tools offered to the model, presets and globs expanded, exclusions applied.
    pub enabled: Vec<String>,
    /// Auto-approved tools with presets expanded and exclusions applied; globs stay verbatim.
    /// Empty when a function decides (see `ResolvedConfig::auto_approve`).
    pub auto_approve: Vec<String>,
    /// When false, every tool call is approved.
    pub require_approval: bool,
    /// Approve `auto_approves_if_sandboxed` tools when a sandbox backend is active.
    pub auto_approve_sandboxed: bool,
    /// Concurrent tool executions per document (0 = unlimited).
    pub max_concurrent: u64,
    /// Default tool timeout in seconds.
    pub default_timeout: u64,
    /// Autopilot settings.
    pub autopilot: Autopilot,
    /// Result store settings.
    pub store: Store,
    /// Skills directory for `read_skill`.
    #[serde(default)]
    pub skills_dir: Option<String>,
    /// Whether `fetch_content` is offered.
    pub fetch_content: bool,
    /// Whether `fetch_content` may reach loopback, link-local and private addresses.
    pub fetch_private_addresses: bool,
    /// The `lsp` tool.
    pub lsp: LspTool,
    /// The `bash` tool.
    pub bash: WorkingDirectory,
    /// The `grep` tool.
    pub grep: SearchTool,
    /// The `find` tool.
    pub find: SearchTool,
    /// The `ls` tool.
    pub ls: WorkingDirectory,
    /// Command-line tools.
    pub custom: Vec<CustomTool>,
    /// MCP servers as tool sources.
    pub mcp: Mcp,
    /// Tool discovery commands.
    pub sources: Vec<ToolSource>,
}

/// `[tools.mcp]`: MCP servers as tool sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mcp {
    /// Whether MCP servers are used (`None`: on when servers are configured).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Globs over full tool names offered to the model.
    pub include: Vec<String>,
    /// Globs over full tool names never registered (absent from listings, completion and runs).
    pub exclude: Vec<String>,
    /// Seconds per call (`None`: `tools.default_timeout`).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Seconds a server may take to start.
    pub startup_timeout: u64,
    /// Whether chats may define servers.
    pub trust_chat_servers: bool,
    /// Servers keyed by their configured name.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServer>,
}

impl Mcp {
    /// Whether MCP servers are used: `enabled`, else whether any server is configured.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(!self.servers.is_empty())
    }

    /// The `exclude` glob that keeps the MCP tool `full_name` from being registered at all
    /// (`None`: it is not excluded).
    pub fn excluded_by(&self, full_name: &str) -> Option<&str> {
        crate::glob::first_match(&self.exclude, full_name)
    }
}

/// One `[tools.mcp.servers.NAME]` entry (`command` for stdio, or `url`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to flemmad's environment (`${VAR}` not yet expanded).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (`None`: the chat's directory).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers (`${VAR}` not yet expanded).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Run a stdio server inside the sandbox.
    #[serde(default)]
    pub sandbox: bool,
    /// Whether the server is used.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// The tool that asks the configured agents (declared when at least one is).
pub const ASK_AGENT_TOOL: &str = "ask_agent";

/// One `[agents.NAME]` entry: an ACP agent `ask_agent` may ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The program.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments (`${VAR}` not yet expanded).
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to flemmad's environment (`${VAR}` not yet expanded).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the process (`None`: the neutral directory).
    #[serde(default)]
    pub cwd: Option<String>,
    /// What the agent is for.
    #[serde(default)]
    pub description: Option<String>,
    /// What happens when it asks permission for one of its tool calls.
    #[serde(default)]
    pub permissions: AgentPermissions,
    /// Whether `ask_agent` offers it.
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// What happens when an asked agent asks permission for one of its own tool calls (from the
/// widest to the strictest).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentPermissions {
    /// Allowed.
    Run,
    /// The user decides.
    #[default]
    Ask,
    /// Rejected.
    Refuse,
}

impl AgentPermissions {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentPermissions::Run => "run",
            AgentPermissions::Ask => "ask",
            AgentPermissions::Refuse => "refuse",
        }
    }
}

/// Whether `name` may name an agent (`[agents.NAME]`): 1 to 64 letters, digits, `_`, `-` or
/// `.` — it is written into the tool's description, the events and the names of the files
/// that keep its conversations.
pub fn check_agent_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "the agent name '{name}' may only hold letters, digits, '_', '-' and '.' (1 to 64, not starting with '.'); rename [agents.\"{name}\"]"
        ))
    }
}

/// The tool-name form of an MCP server name: dots become hyphens (`.` separates the server
/// from the tool in `NAME.TOOL`).
pub fn mcp_server_name(configured: &str) -> String {
    configured.replace('.', "-")
}

/// The reserved MCP server name: its tools would fall under `flemma.*`, which `$standard`
/// approves.
pub const RESERVED_MCP_SERVER: &str = "flemma";

/// The tool-name form of an MCP server's name from any source (the configuration, a chat, an
/// ACP editor's `mcpServers`), or why it is refused: `flemma` is reserved (its tools would be
/// `flemma.*`, the harness's own, which `$standard` approves), and the name may only hold
/// letters, digits, `_`, `-` and `.` (it becomes the prefix of tool names the model sees and
/// the chat records).
pub fn check_mcp_server_name(configured: &str) -> Result<String, String> {
    let normal = mcp_server_name(configured);
    if normal == RESERVED_MCP_SERVER {
        return Err(format!(
            "the MCP server name '{configured}' is reserved: its tools would be `flemma.*`, the harness's own tools, which `$standard` approves; rename the server"
        ));
    }
    if normal.is_empty()
        || !normal
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(format!(
            "the MCP server name '{configured}' may only contain letters, digits, '_', '-' and '.'; rename the server"
        ));
    }
    Ok(normal)
}

/// Template extensions: Rhai modules and custom frontmatter parsers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Templating {
    /// Rhai module files, in load order (`~` not yet expanded).
    pub modules: Vec<String>,
    /// Parser commands (argv) keyed by frontmatter language.
    #[serde(default)]
    pub frontmatter_parsers: BTreeMap<String, Vec<String>>,
}

/// Autopilot settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Autopilot {
    /// Whether autopilot runs.
    pub enabled: bool,
    /// Maximum automatic turns per send.
    pub max_turns: u64,
    /// Delay in milliseconds before resuming after background completions at idle.
    pub resume_delay: u64,
}

/// Result store settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// `$chat`, `$state` or a template path.
    pub path_format: String,
    /// Template path for unsaved documents.
    pub unnamed_path_format: String,
    /// Write every result to the store.
    pub materialize: bool,
    /// Preview size for redirects.
    pub preview: Preview,
    /// Backup strategy.
    pub backup: Backup,
}

/// Preview size for redirected output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preview {
    /// Lines.
    pub lines: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Backup strategy before overwriting a store file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub enum Backup {
    /// Rename to `<stem>.<n>.<ext>`.
    Version,
    /// Overwrite in place (`false`).
    Off,
}

impl TryFrom<Value> for Backup {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::Bool(false) => Ok(Backup::Off),
            Value::String(text) if text == "version" => Ok(Backup::Version),
            other => Err(format!("backup {other} is neither \"version\" nor false")),
        }
    }
}

impl From<Backup> for Value {
    fn from(backup: Backup) -> Value {
        match backup {
            Backup::Version => json!("version"),
            Backup::Off => json!(false),
        }
    }
}

/// The `lsp` tool settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LspTool {
    /// Language server command lines.
    pub servers: Vec<String>,
    /// File extensions (without the dot) keyed by server program name, adding to (or, for a
    /// known server, replacing) the built-in table (`rust-analyzer` → `rs`, …).
    #[serde(default)]
    pub extensions: BTreeMap<String, Vec<String>>,
}

/// A tool with only a working directory setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingDirectory {
    /// Working directory (`urn:flemma:buffer:path` = the chat's directory).
    pub cwd: String,
}

/// `grep` / `find` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchTool {
    /// Working directory.
    pub cwd: String,
    /// Excluded directory names.
    pub exclude: Vec<String>,
}

/// A command-line tool declared in config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomTool {
    /// Tool name.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// Command line (`bash -c`).
    pub command: String,
    /// JSON Schema of the input.
    #[serde(default = "empty_input_schema")]
    pub input_schema: Value,
    /// Capability tags.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Timeout in seconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

fn empty_input_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// A tool discovery command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSource {
    /// Command line (`bash -c`).
    pub command: String,
    /// Timeout in seconds.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// A user-defined preset: an approval preset (`auto_approve`) and/or a model preset
/// (`provider`, `model`, `parameters`, `tools`, selected with `model = "$name"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// Tool names, globs and presets.
    #[serde(default)]
    pub auto_approve: Vec<String>,
    /// The provider the preset selects.
    #[serde(default)]
    pub provider: Option<Provider>,
    /// The model (id or model string) the preset selects.
    #[serde(default)]
    pub model: Option<String>,
    /// The parameters the preset sets, as written (a part of the `parameters` table).
    #[serde(default)]
    pub parameters: serde_json::Map<String, Value>,
    /// The tools the preset offers.
    #[serde(default)]
    pub tools: Vec<String>,
}

/// The checkpoints of the project's files around tool calls (docs/review.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoints {
    /// A chat whose last checkpoint is older than this many days loses its checkpoints; 0
    /// keeps them.
    pub max_age_days: u64,
    /// A project's checkpoints over this many MiB lose the oldest chats' first; 0: no limit.
    pub max_size_mb: u64,
    /// Files over this many MiB are left out.
    pub max_file_mb: u64,
}

/// Sandbox settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sandbox {
    /// Sandbox tool processes when a backend is available.
    pub enabled: bool,
    /// Backend choice.
    pub backend: SandboxBackend,
    /// Policy.
    pub policy: SandboxPolicy,
    /// What one sandboxed call may use.
    pub limits: SandboxLimits,
}

/// What one sandboxed call may use (`0`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLimits {
    /// Processes alive at once.
    pub processes: u32,
    /// Memory of all its processes together, in MiB (each process's data segment too).
    pub memory: u64,
}

/// Sandbox backend choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxBackend {
    /// Pick the best available backend.
    Auto,
    /// Bubblewrap.
    Bwrap,
    /// No process sandbox.
    None,
}

/// Sandbox policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// Writable paths (URNs and `${VAR:-default}` unexpanded).
    pub rw_paths: Vec<String>,
    /// Network access for sandboxed commands (then they are no longer approved by the sandbox
    /// alone).
    pub network: bool,
    /// Privilege escalation.
    pub allow_privileged: bool,
    /// Whether tools may write inside `.git` directories.
    pub git_writable: bool,
}

/// Which chats' frontmatter is trusted (`[trust]`); see [`crate::chat_trust`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustSettings {
    /// Paths and globs of trusted chats (`~/` not yet expanded).
    pub paths: Vec<String>,
    /// Restricted Mode: no chat is trusted.
    pub restricted: bool,
}

/// Document editing settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Editing {
    /// Compact tool headers.
    pub compact_headers: bool,
    /// Edit coalescing window in milliseconds.
    pub coalesce_ms: u64,
}

/// Credential resolver settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secrets {
    /// The gcloud resolver.
    pub gcloud: GcloudSecrets,
    /// The ChatGPT login of the Codex CLI (provider `codex`).
    pub chatgpt: ChatgptSecrets,
}

/// Where the ChatGPT login is read (and its refreshed tokens written back).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatgptSecrets {
    /// The `auth.json` `codex login` writes (unset: `$CODEX_HOME/auth.json`, else
    /// `~/.codex/auth.json`).
    #[serde(default)]
    pub auth_file: Option<String>,
}

/// The gcloud resolver settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcloudSecrets {
    /// The gcloud executable.
    pub path: String,
}

/// Logging settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Log {
    /// Level name.
    pub level: String,
    /// Log file (stderr when unset).
    #[serde(default)]
    pub file: Option<String>,
}

/// The context window: the meter's warning, compaction (docs/context.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// The share of the window past which the next request is warned about (0.0–1.0).
    pub warn_at: f64,
    /// The share of the window at which autopilot compacts; `None` (`false`) never.
    #[serde(with = "share_or_false")]
    pub compact_at: Option<f64>,
    /// The model that writes a compaction's summary (a model string or `$preset`); unset: the
    /// chat's own.
    #[serde(default)]
    pub compact_model: Option<String>,
    /// The exchanges (a `@You:` and what answers it) a compaction keeps verbatim at the end.
    pub keep: u64,
    /// Tool results older than this many tool cycles are left out of requests (a placeholder
    /// says where they are); 0 keeps them all.
    pub prune_after: u64,
}

/// A share of the window, or `false` for never.
mod share_or_false {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(share) => share.serialize(serializer),
            None => false.serialize(serializer),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<f64>, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(false) => Ok(None),
            Value::Number(number) => number
                .as_f64()
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom("not a number")),
            other => Err(serde::de::Error::custom(format!(
                "{other} is neither a share of the window (0.0-1.0) nor false"
            ))),
        }
    }
}

#[cfg(test)]
mod named_enum_tests {
    use super::*;

    fn serde_name<T: Serialize>(value: T) -> String {
        match serde_json::to_value(value) {
            Ok(Value::String(name)) => name,
            other => panic!("not a unit enum: {other:?}"),
        }
    }

    #[test]
    fn display_from_str_and_serde_agree() {
        for &level in ThinkingLevel::VALUES {
            assert_eq!(level.to_string(), serde_name(level));
            assert_eq!(level.as_str().parse::<ThinkingLevel>(), Ok(level));
        }
        for &retention in CacheRetention::VALUES {
            assert_eq!(retention.to_string(), serde_name(retention));
            assert_eq!(retention.as_str().parse::<CacheRetention>(), Ok(retention));
        }
        for &effort in ReasoningEffort::VALUES {
            assert_eq!(effort.to_string(), serde_name(effort));
        }
        for &summary in ReasoningSummary::VALUES {
            assert_eq!(summary.to_string(), serde_name(summary));
        }
        for provider in Provider::ALL {
            assert_eq!(provider.to_string(), serde_name(provider));
            assert_eq!(provider.as_str().parse::<Provider>(), Ok(provider));
        }
        let error = "hgih".parse::<ThinkingLevel>().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("minimal, low, medium, high, max"),
            "{error}"
        );
    }
}
