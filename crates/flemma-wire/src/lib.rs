//! Provider wire formats for flemmad: pure request builders, sans-IO stream decoders and the
//! reply renderer (events → `.chat` text).
//!
//! Invariant: nothing here does IO — no HTTP, no processes, no environment, no clock. The edge
//! (`flemma-provider`) sends what this crate builds and feeds it what comes back.
//!
//! [`build_request`] turns a provider-neutral [`Conversation`] into the exact HTTP request a
//! provider expects (without authentication); [`decoder`] returns an incremental decoder that
//! turns the streamed response body into [`StreamEvent`]s. Nothing in the wire modules does IO.

pub use flemma_conversation::{Conversation, StopReason, StreamEvent, Usage};
pub use sse::{SseDecoder, SseEvent};
pub use tools::{
    ToolNames, decode_tool_name, encode_tool_name, inject_harness_parameters,
    name_from_synthetic_id, normalize_tool_id, synthetic_tool_id,
};

pub use anthropic_build::{DEFAULT_ANTHROPIC_VERSION, anthropic_level_budget};
pub use estimate::{Meter, estimate_input_tokens};
pub use gemini_build::{
    FOREIGN_CALL_SIGNATURE, gemini_level_budget, gemini_level_name, is_gemini_call_id,
};
pub use prepare::MISSING_RESULT_TEXT;
pub use pricing::{CacheEffect, LongContextPrices, Prices};
pub use prune::prune_tool_results;
pub use responses_build::{openai_budget_effort, openai_level_effort};

mod anthropic_build;
mod anthropic_decode;
mod chat_build;
mod chat_decode;
pub mod check;
pub mod codex;
pub mod estimate;
mod gemini_build;
mod gemini_decode;
mod prepare;
pub mod pricing;
pub mod prune;
mod responses_build;
mod responses_decode;
pub mod sse;
pub mod tools;

/// The wire format families flemmad speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Responses API.
    OpenAi,
    /// Any server speaking OpenAI Chat Completions.
    OpenAiCompatible,
    /// Moonshot (Kimi): a Chat Completions preset.
    Moonshot,
    /// Google Gemini API (generativelanguage.googleapis.com).
    Gemini,
    /// Google Vertex AI (same model family and body as Gemini).
    Vertex,
    /// The Codex backend of a ChatGPT subscription: OpenAI Responses as that backend takes it.
    Codex,
}

impl ProviderKind {
    /// Every provider kind, in a stable order.
    pub const ALL: [ProviderKind; 7] = [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiCompatible,
        ProviderKind::Moonshot,
        ProviderKind::Gemini,
        ProviderKind::Vertex,
        ProviderKind::Codex,
    ];

    /// Parses the provider name used in configuration (`anthropic`, `openai`,
    /// `openai-compatible`, `moonshot`, `gemini`, `vertex`).
    pub fn from_name(name: &str) -> Option<Self> {
        flemma_config::Provider::from_name(name).map(Self::from)
    }

    /// The configuration name of this provider kind (`openai-compatible`): the one spelling,
    /// owned by [`flemma_config::Provider`].
    pub fn name(&self) -> &'static str {
        flemma_config::Provider::from(*self).as_str()
    }

    /// Whether the provider has a token counting endpoint ([`count_tokens_request`]); the
    /// others get a local estimate ([`estimate_input_tokens`]).
    pub fn counts_tokens(&self) -> bool {
        !matches!(
            self,
            ProviderKind::OpenAiCompatible | ProviderKind::Moonshot | ProviderKind::Codex
        )
    }

    /// The provider word written in `<thinking PROVIDER:signature="…">` for signatures this
    /// kind produces and accepts back; empty for kinds without signed thinking.
    pub fn signature_provider(&self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            // Encrypted reasoning of a ChatGPT account goes back to the Codex backend only.
            ProviderKind::Codex => "codex",
            ProviderKind::Gemini | ProviderKind::Vertex => "vertex",
            ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => "",
        }
    }
}

impl From<flemma_config::Provider> for ProviderKind {
    fn from(provider: flemma_config::Provider) -> Self {
        use flemma_config::Provider;
        match provider {
            Provider::Anthropic => ProviderKind::Anthropic,
            Provider::Openai => ProviderKind::OpenAi,
            Provider::OpenaiCompatible => ProviderKind::OpenAiCompatible,
            Provider::Moonshot => ProviderKind::Moonshot,
            Provider::Gemini => ProviderKind::Gemini,
            Provider::Vertex => ProviderKind::Vertex,
            Provider::Codex => ProviderKind::Codex,
        }
    }
}

impl From<ProviderKind> for flemma_config::Provider {
    fn from(kind: ProviderKind) -> Self {
        use flemma_config::Provider;
        match kind {
            ProviderKind::Anthropic => Provider::Anthropic,
            ProviderKind::OpenAi => Provider::Openai,
            ProviderKind::OpenAiCompatible => Provider::OpenaiCompatible,
            ProviderKind::Moonshot => Provider::Moonshot,
            ProviderKind::Gemini => Provider::Gemini,
            ProviderKind::Vertex => Provider::Vertex,
            ProviderKind::Codex => Provider::Codex,
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = flemma_config::UnknownName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse::<flemma_config::Provider>().map(Self::from)
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// The tool name, namespaced with `.` (`flemma.jobs.status`).
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema of the input object (without the harness parameters).
    pub input_schema: serde_json::Value,
    /// Strict schema mode (OpenAI `strict: true`; harness parameters become nullable+required).
    pub strict: bool,
    /// Capability words; `disables_background` and `disables_save_to` suppress the harness
    /// parameters.
    pub capabilities: Vec<String>,
    /// The tool can run in the background (gets the `flemma.background` parameter).
    pub is_async: bool,
}

pub use flemma_config::{CacheRetention, ReasoningEffort, ReasoningSummary, ThinkingLevel};

/// How much the model should think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Thinking {
    /// No reasoning.
    #[default]
    Off,
    /// A named effort level, mapped per provider.
    Level(ThinkingLevel),
    /// An explicit token budget.
    Budget(u32),
}

/// How a request says "no thinking" to a model (a per-model request shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThinkingOff {
    /// Leave the thinking fields out (the model does not think unless asked).
    #[default]
    Omit,
    /// Say it: the model thinks unless told not to (Claude Sonnet 5 `{"type":"disabled"}`,
    /// Kimi K2.5/K2.6 `thinking: {"type": "disabled"}`).
    Disable,
    /// The model always thinks (Claude Fable 5, Kimi K3): thinking cannot be turned off, so
    /// the caller asks for the lowest effort instead.
    Forced,
}

/// The effort among `available` (in increasing order) for `level`: the lowest one at or above
/// the level, else the highest (`max` → `xhigh` on GPT-5.2+, `medium` → `high` on Kimi K3).
pub fn nearest_effort(level: ThinkingLevel, available: &[&'static str]) -> Option<&'static str> {
    fn rank(effort: &str) -> u8 {
        match effort {
            "none" => 0,
            "minimal" => 1,
            "low" => 2,
            "medium" => 3,
            "high" => 4,
            "xhigh" => 5,
            _ => 6,
        }
    }
    let wanted = match level {
        ThinkingLevel::Minimal => 1,
        ThinkingLevel::Low => 2,
        ThinkingLevel::Medium => 3,
        ThinkingLevel::High => 4,
        ThinkingLevel::Max => 6,
    };
    available
        .iter()
        .copied()
        .find(|effort| rank(effort) >= wanted)
        .or_else(|| available.last().copied())
}

/// The named level closest to a token budget (for models that take levels, not budgets).
pub fn level_for_budget(budget: u32) -> ThinkingLevel {
    match budget {
        0..=1024 => ThinkingLevel::Minimal,
        1025..=2048 => ThinkingLevel::Low,
        2049..=8192 => ThinkingLevel::Medium,
        8193..=32768 => ThinkingLevel::High,
        _ => ThinkingLevel::Max,
    }
}

/// Everything besides the conversation that shapes a request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestOptions {
    /// The model id sent to the provider.
    pub model: String,
    /// Maximum output tokens.
    pub max_tokens: u32,
    /// Sampling temperature (omitted for Anthropic when thinking is on).
    pub temperature: Option<f64>,
    /// Reasoning effort.
    pub thinking: Thinking,
    /// Prompt cache retention.
    pub cache_retention: CacheRetention,
    /// Tools offered to the model.
    pub tools: Vec<ToolDefinition>,
    /// OpenAI `prompt_cache_key` (flemmad uses the chat file path).
    pub prompt_cache_key: Option<String>,
    /// Anthropic `anthropic-version` header.
    pub anthropic_version: String,
    /// Anthropic `anthropic-beta` header values.
    pub anthropic_beta: Vec<String>,
    /// Overrides the Anthropic thinking budget derived from `thinking`.
    pub anthropic_thinking_budget: Option<u32>,
    /// Overrides the OpenAI `reasoning.effort` derived from `thinking`.
    pub openai_reasoning: Option<ReasoningEffort>,
    /// Overrides the OpenAI `reasoning.summary` (default `auto`).
    pub openai_reasoning_summary: Option<ReasoningSummary>,
    /// Overrides the Gemini `thinkingBudget` derived from `thinking` (`-1` = dynamic).
    pub gemini_thinking_budget: Option<i32>,
    /// Vertex AI project id (required for Vertex).
    pub vertex_project: Option<String>,
    /// Vertex AI location (`global`, `us-central1`, …).
    pub vertex_location: String,
    /// The model takes Anthropic adaptive thinking (`{"type":"adaptive"}` + effort).
    pub supports_adaptive_thinking: bool,
    /// How this model is told not to think.
    pub thinking_off: ThinkingOff,
    /// The reasoning effort values the model takes (the catalogue's word; empty: the
    /// provider's usual mapping). Kimi K3 gets a top-level `reasoning_effort` from them.
    pub reasoning_efforts: &'static [&'static str],
}

/// An HTTP request ready to send, without authentication headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRequest {
    /// HTTP method (`POST` or `GET`).
    pub method: &'static str,
    /// Path and query appended to the provider base URL.
    pub path_and_query: String,
    /// Headers besides authentication.
    pub headers: Vec<(String, String)>,
    /// The request body (empty for `GET`).
    pub body: Vec<u8>,
}

/// A built request plus what the builder had to adapt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltRequest {
    /// The request.
    pub request: WireRequest,
    /// Human-readable notes about adaptations (unsupported attachments sent as text, …).
    pub warnings: Vec<String>,
}

/// A model listed by a provider's models endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The model id to put in requests.
    pub id: String,
    /// A display name when the provider gives one.
    pub display_name: Option<String>,
    /// Context window in tokens when the provider gives it.
    pub context_window: Option<u64>,
    /// Maximum output tokens when the provider gives it.
    pub max_output_tokens: Option<u64>,
}

/// Why a request could not be built or a response body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    /// A required option is missing.
    #[error("{0}")]
    MissingOption(String),
    /// The provider does not offer this operation.
    #[error("{0}")]
    Unsupported(String),
    /// A response body was not what the provider documents.
    #[error("{0}")]
    InvalidResponse(String),
    /// The request could not be serialised (a bug).
    #[error("{0}")]
    InvalidRequest(String),
}

/// An incremental, sans-IO decoder of a streamed response body.
pub trait StreamDecoder {
    /// Feeds the next chunk of the body (any split, even inside a UTF-8 sequence) and returns
    /// the events completed by it.
    fn feed(&mut self, bytes: &[u8]) -> Vec<StreamEvent>;
    /// Signals the end of the body. A stream that ended without the provider's terminal event
    /// yields [`StreamEvent::Error`] "stream ended before the provider finished (truncated)".
    fn finish(&mut self) -> Vec<StreamEvent>;
}

/// The default Vertex AI base URL for a location (`global` uses the location-less host).
pub fn vertex_default_base_url(location: &str) -> String {
    if location.is_empty() || location == "global" {
        "https://aiplatform.googleapis.com".to_string()
    } else {
        format!("https://{location}-aiplatform.googleapis.com")
    }
}

/// Builds the streaming request for `conversation`.
///
/// The body is byte-stable: the same conversation and options always give the same bytes, and
/// a conversation that extends a previous one gives a body whose messages start with the
/// previous ones unchanged (tools sorted by name, keys in a fixed order, OpenAI argument strings
/// replayed verbatim).
pub fn build_request(
    kind: ProviderKind,
    conversation: &Conversation,
    options: &RequestOptions,
) -> Result<BuiltRequest, BuildError> {
    check_options(kind, options)?;
    let mut warnings = Vec::new();
    let prepared = prepare::prepare(conversation, &mut warnings);
    let request = match kind {
        ProviderKind::Anthropic => {
            let body = anthropic_build::body(&prepared, options, &mut warnings);
            WireRequest {
                method: "POST",
                path_and_query: "/v1/messages".into(),
                headers: anthropic_build::headers(options),
                body: to_bytes(&serde_json::Value::Object(body))?,
            }
        }
        ProviderKind::OpenAi => {
            let body = responses_build::body(&prepared, options, &mut warnings);
            WireRequest {
                method: "POST",
                path_and_query: "/responses".into(),
                headers: responses_build::headers(),
                body: to_bytes(&serde_json::Value::Object(body))?,
            }
        }
        ProviderKind::Codex => {
            let body = responses_build::codex_body(&prepared, options, &mut warnings);
            WireRequest {
                method: "POST",
                path_and_query: "/responses".into(),
                headers: responses_build::codex_headers(),
                body: to_bytes(&serde_json::Value::Object(body))?,
            }
        }
        ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
            let body = chat_build::body(kind, &prepared, options, &mut warnings);
            WireRequest {
                method: "POST",
                path_and_query: "/chat/completions".into(),
                headers: chat_build::headers(),
                body: to_bytes(&serde_json::Value::Object(body))?,
            }
        }
        ProviderKind::Gemini | ProviderKind::Vertex => {
            let path = gemini_build::model_path(kind, options)?;
            let body = gemini_build::body(kind, &prepared, options);
            WireRequest {
                method: "POST",
                path_and_query: format!("{path}:streamGenerateContent?alt=sse"),
                headers: gemini_build::headers(),
                body: to_bytes(&serde_json::Value::Object(body))?,
            }
        }
    };
    Ok(BuiltRequest { request, warnings })
}

fn check_model(kind: ProviderKind, options: &RequestOptions) -> Result<(), BuildError> {
    if options.model.trim().is_empty() {
        return Err(BuildError::MissingOption(format!(
            "no model is set for {}: choose one in the frontmatter or the config (model = \"…\")",
            kind.name()
        )));
    }
    Ok(())
}

fn check_options(kind: ProviderKind, options: &RequestOptions) -> Result<(), BuildError> {
    check_model(kind, options)?;
    if options.max_tokens == 0 {
        return Err(BuildError::MissingOption(format!(
            "max_tokens is 0 for {} model {}: set max_tokens to a positive number or a percentage of the model's output limit",
            kind.name(),
            options.model
        )));
    }
    Ok(())
}

/// Tools sorted by name (stable prompt-cache prefix).
pub(crate) fn sorted_tools(tools: &[ToolDefinition]) -> Vec<&ToolDefinition> {
    let mut sorted: Vec<&ToolDefinition> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted
}

pub(crate) fn to_bytes(value: &serde_json::Value) -> Result<Vec<u8>, BuildError> {
    serde_json::to_vec(value).map_err(|error| {
        BuildError::InvalidRequest(format!(
            "the request body could not be serialised ({error}); this is a bug in flemmad, please report it"
        ))
    })
}

/// One provider's event handling on top of the shared SSE framing.
pub(crate) trait SseFormat {
    /// One SSE event (`event` is empty when the stream sends no `event:` lines).
    fn handle(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>);
    /// The body ended: emit what a complete stream still owes, or the truncation error.
    fn end(&mut self, out: &mut Vec<StreamEvent>);
}

/// SSE framing plus a provider format: the [`StreamDecoder`] every provider uses. Its events
/// pass [`check::ReplyCheck`]: a tool call whose id or name the chat cannot hold refuses the
/// reply.
struct SseStream<F> {
    sse: SseDecoder,
    format: F,
    check: check::ReplyCheck,
}

impl<F> SseStream<F> {
    fn new(sse: SseDecoder, format: F) -> Self {
        Self {
            sse,
            format,
            check: check::ReplyCheck::default(),
        }
    }
}

impl<F: SseFormat> StreamDecoder for SseStream<F> {
    fn feed(&mut self, bytes: &[u8]) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        let Self { sse, format, .. } = self;
        sse.feed_with(bytes, &mut |event, data| {
            format.handle(event, data, &mut out)
        });
        self.check.filter(out)
    }

    fn finish(&mut self) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        let Self { sse, format, .. } = self;
        sse.finish_with(&mut |event, data| {
            // An event the body ends in the middle of is the truncation `end` reports, not a
            // malformed event; a whole one without its blank line is taken as it is.
            let whole = data.trim() == "[DONE]"
                || serde_json::from_str::<serde::de::IgnoredAny>(data).is_ok();
            if whole {
                format.handle(event, data, &mut out);
            }
        });
        format.end(&mut out);
        self.check.filter(out)
    }
}

/// Returns a fresh stream decoder for `kind`.
///
/// Tool-call `index` values in the events are the 0-based position of the call in the reply
/// (not the provider's content-block index). Every stream ends with exactly one `Stop` (preceded
/// by one `Usage` when the provider reported usage) or one `Error`.
pub fn decoder(kind: ProviderKind) -> Box<dyn StreamDecoder + Send> {
    decoder_for(kind, ToolNames::default())
}

/// [`decoder`] for a request that offered the tools of `names`: tool calls decode to exactly
/// those names (see [`encode_tool_name`]).
pub fn decoder_for(kind: ProviderKind, names: ToolNames) -> Box<dyn StreamDecoder + Send> {
    match kind {
        ProviderKind::Anthropic => {
            let mut format = anthropic_decode::AnthropicDecoder::default();
            format.names = names;
            Box::new(SseStream::new(SseDecoder::default(), format))
        }
        ProviderKind::OpenAi | ProviderKind::Codex => {
            let mut format = responses_decode::ResponsesDecoder::default();
            format.names = names;
            format.signature_provider = kind.signature_provider();
            Box::new(SseStream::new(SseDecoder::default(), format))
        }
        ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
            let mut format = chat_decode::ChatDecoder::default();
            format.names = names;
            Box::new(SseStream::new(SseDecoder::default(), format))
        }
        ProviderKind::Gemini | ProviderKind::Vertex => {
            let mut format = gemini_decode::GeminiDecoder::default();
            format.names = names;
            Box::new(SseStream::new(SseDecoder::with_bare_json(), format))
        }
    }
}

/// The error of a stream event a decoder could not read into its format's type, or `None`
/// when it may be passed over: an empty `data:` field, or an event of a kind the decoder does
/// not act on (`handles` says which it does: a newer API's event need not have the shape this
/// one knows). Anything else cuts the reply there, so that its text is never lost without a
/// word: data that is not JSON, or an event the decoder acts on in another shape. `kind` is
/// the event's `type` when its JSON has one, else `sse_event`.
pub(crate) fn unreadable_event(
    sse_event: &str,
    data: &str,
    error: &serde_json::Error,
    handles: impl Fn(&str) -> bool,
) -> Option<String> {
    const PREVIEW: usize = 160;
    let trimmed = data.trim();
    if trimmed.is_empty() {
        return None;
    }
    let why = match serde_json::from_str::<serde_json::Value>(trimmed) {
        Err(json) => format!("not JSON: {json}"),
        Ok(value) => {
            let kind = value
                .get("type")
                .and_then(serde_json::Value::as_str)
                .filter(|kind| !kind.is_empty())
                .unwrap_or(sse_event);
            if !handles(kind) {
                return None;
            }
            match kind {
                "" => format!("not the expected shape: {error}"),
                kind => format!("a `{kind}` event not in the expected shape: {error}"),
            }
        }
    };
    let mut end = trimmed.len().min(PREVIEW);
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    let more = if end < trimmed.len() { "…" } else { "" };
    Some(format!(
        "malformed stream event ({why}): `{}{more}`",
        &trimmed[..end]
    ))
}

/// The error message of a stream that ended without the provider's terminal event.
pub const TRUNCATED_STREAM_MESSAGE: &str = "stream ended before the provider finished (truncated)";

pub(crate) fn truncated_error() -> String {
    TRUNCATED_STREAM_MESSAGE.to_string()
}

/// Builds the token-counting request for `conversation` (Anthropic, OpenAI Responses, Gemini,
/// Vertex; Chat Completions servers have no such endpoint).
pub fn count_tokens_request(
    kind: ProviderKind,
    conversation: &Conversation,
    options: &RequestOptions,
) -> Result<WireRequest, BuildError> {
    check_model(kind, options)?;
    let prepared = prepare::prepare(conversation, &mut Vec::new());
    match kind {
        ProviderKind::Anthropic => anthropic_build::count_tokens(&prepared, options),
        ProviderKind::OpenAi => responses_build::count_tokens(&prepared, options),
        ProviderKind::OpenAiCompatible | ProviderKind::Moonshot => {
            Err(BuildError::Unsupported(format!(
                "{} (Chat Completions) has no token counting endpoint; use a provider with one (anthropic, openai, gemini, vertex)",
                kind.name()
            )))
        }
        ProviderKind::Codex => Err(BuildError::Unsupported(
            "the Codex backend has no token counting endpoint".into(),
        )),
        ProviderKind::Gemini | ProviderKind::Vertex => {
            let path = gemini_build::model_path(kind, options)?;
            let mut body = gemini_build::body(kind, &prepared, options);
            let body = if kind == ProviderKind::Gemini {
                body.insert(
                    "model".into(),
                    serde_json::json!(format!("models/{}", gemini_build::model_id(&options.model))),
                );
                body.shift_remove("generationConfig");
                serde_json::json!({ "generateContentRequest": body })
            } else {
                body.shift_remove("generationConfig");
                serde_json::Value::Object(body)
            };
            Ok(WireRequest {
                method: "POST",
                path_and_query: format!("{path}:countTokens"),
                headers: gemini_build::headers(),
                body: to_bytes(&body)?,
            })
        }
    }
}

fn parse_json(kind: ProviderKind, body: &[u8]) -> Result<serde_json::Value, BuildError> {
    serde_json::from_slice(body).map_err(|error| {
        let preview: String = String::from_utf8_lossy(body).chars().take(300).collect();
        BuildError::InvalidResponse(format!(
            "{} returned a body that is not JSON ({error}): {preview}",
            kind.name()
        ))
    })
}

/// Reads the token count from a token-counting response body.
pub fn parse_count_tokens(kind: ProviderKind, body: &[u8]) -> Result<u64, BuildError> {
    let value = parse_json(kind, body)?;
    let field = match kind {
        ProviderKind::Gemini | ProviderKind::Vertex => "totalTokens",
        _ => "input_tokens",
    };
    value
        .get(field)
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| {
            BuildError::InvalidResponse(format!(
                "{} token count response has no numeric `{field}`: {}",
                kind.name(),
                value.to_string().chars().take(300).collect::<String>()
            ))
        })
}

/// Builds the request listing the provider's models (first page, as large as the API allows).
pub fn list_models_request(kind: ProviderKind, options: &RequestOptions) -> WireRequest {
    let (path, headers) = match kind {
        ProviderKind::Anthropic => (
            "/v1/models?limit=1000".to_string(),
            anthropic_build::headers(options)
                .into_iter()
                .filter(|(name, _)| name != "content-type")
                .collect(),
        ),
        // The Codex backend's list depends on the client's version; `flemmad models codex`
        // shows the catalogue instead.
        ProviderKind::OpenAi
        | ProviderKind::OpenAiCompatible
        | ProviderKind::Moonshot
        | ProviderKind::Codex => ("/models".to_string(), Vec::new()),
        ProviderKind::Gemini => ("/v1beta/models?pageSize=1000".to_string(), Vec::new()),
        ProviderKind::Vertex => ("/v1beta1/publishers/google/models".to_string(), Vec::new()),
    };
    WireRequest {
        method: "GET",
        path_and_query: path,
        headers,
        body: Vec::new(),
    }
}

/// Reads the model list from a models response body.
pub fn parse_models(kind: ProviderKind, body: &[u8]) -> Result<Vec<ModelInfo>, BuildError> {
    use serde_json::Value;
    let value = parse_json(kind, body)?;
    let key = match kind {
        ProviderKind::Gemini | ProviderKind::Vertex => {
            if value.get("models").is_some() {
                "models"
            } else {
                "publisherModels"
            }
        }
        _ => "data",
    };
    let Some(entries) = value.get(key).and_then(Value::as_array) else {
        return Err(BuildError::InvalidResponse(format!(
            "{} model list has no `{key}` array: {}",
            kind.name(),
            value.to_string().chars().take(300).collect::<String>()
        )));
    };
    let text = |entry: &Value, field: &str| {
        entry
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let number = |entry: &Value, field: &str| entry.get(field).and_then(Value::as_u64);
    let mut models = Vec::new();
    for entry in entries {
        let model = match kind {
            ProviderKind::Gemini | ProviderKind::Vertex => {
                let generates = entry
                    .get("supportedGenerationMethods")
                    .and_then(Value::as_array)
                    .is_none_or(|methods| {
                        methods
                            .iter()
                            .any(|m| m == "streamGenerateContent" || m == "generateContent")
                    });
                let Some(name) = text(entry, "name").filter(|_| generates) else {
                    continue;
                };
                let id = name.rsplit('/').next().unwrap_or(&name).to_string();
                ModelInfo {
                    id,
                    display_name: text(entry, "displayName"),
                    context_window: number(entry, "inputTokenLimit"),
                    max_output_tokens: number(entry, "outputTokenLimit"),
                }
            }
            _ => {
                let Some(id) = text(entry, "id") else {
                    continue;
                };
                ModelInfo {
                    id,
                    display_name: text(entry, "display_name"),
                    context_window: number(entry, "max_input_tokens")
                        .or_else(|| number(entry, "context_length")),
                    max_output_tokens: number(entry, "max_tokens"),
                }
            }
        };
        models.push(model);
    }
    Ok(models)
}
pub mod render;
