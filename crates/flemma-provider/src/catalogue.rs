//! The model catalogue: prices, context and output limits and thinking support of the current
//! models of each provider, and the cost of a request.
//!
//! Prices are US dollars per million tokens, as published by the providers (list prices for the
//! standard tier, checked when this table was written; providers change them, so every entry can
//! be overridden from config with a [`ModelOverride`]).
//! [`Catalogue::lookup`] accepts dated ids (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`,
//! `claude-3-7-sonnet@20250219`, `models/gemini-2.5-flash`).

use flemma_conversation::Usage;

pub use crate::LongContextPrices;
use crate::{CacheRetention, Prices, ProviderKind, ThinkingOff};

/// What flemmad knows about one model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// The provider family (`Gemini` entries also serve `Vertex`; `OpenAiCompatible` has none).
    pub provider: ProviderKind,
    /// The model id without date suffix.
    pub id: String,
    /// Input price per million tokens (uncached).
    pub input: f64,
    /// Output price per million tokens (thinking included).
    pub output: f64,
    /// Cache read price per million tokens.
    pub cache_read: f64,
    /// Cache write price per million tokens, 5-minute retention (Anthropic; others: input).
    pub cache_write_5m: f64,
    /// Cache write price per million tokens, 1-hour retention (Anthropic; others: input).
    pub cache_write_1h: f64,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens per request.
    pub max_output_tokens: u64,
    /// The model can think (extended thinking, reasoning effort, thinking budget).
    pub thinking: bool,
    /// Anthropic adaptive thinking (`{"type":"adaptive"}` + effort) instead of budgets.
    pub adaptive_thinking: bool,
    /// How a request turns thinking off for this model (leave it out, say so, or not at all).
    pub thinking_off: ThinkingOff,
    /// The reasoning effort values the model takes (`low`, `high`, `max` for Kimi K3); empty
    /// for the provider's usual mapping.
    pub reasoning_efforts: &'static [&'static str],
    /// Higher prices for long prompts.
    pub long_context: Option<LongContextPrices>,
    /// Paid by a subscription (`codex`: a ChatGPT plan), not per token: the prices are the API's
    /// for the same model, shown for comparison, and no cost is reported.
    pub subscription: bool,
}

/// A config entry that changes or adds a model (`[[models]]` in the user config; the lead maps
/// flemma-config onto it). Unset fields keep the built-in value; a new model starts from
/// zero prices, a 128k context and 8192 output tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOverride {
    /// The provider whose model this is.
    pub provider: ProviderKind,
    /// Model id (exact, without date suffix).
    pub model: String,
    /// Input price per million tokens.
    pub input: Option<f64>,
    /// Output price per million tokens.
    pub output: Option<f64>,
    /// Cache read price per million tokens.
    pub cache_read: Option<f64>,
    /// Cache write price (5 minutes) per million tokens.
    pub cache_write_5m: Option<f64>,
    /// Cache write price (1 hour) per million tokens.
    pub cache_write_1h: Option<f64>,
    /// Context window in tokens.
    pub context_window: Option<u64>,
    /// Maximum output tokens.
    pub max_output_tokens: Option<u64>,
    /// Thinking support.
    pub thinking: Option<bool>,
    /// Anthropic adaptive thinking.
    pub adaptive_thinking: Option<bool>,
}

impl ModelOverride {
    /// An override of `model` that changes nothing yet.
    pub fn new(provider: ProviderKind, model: impl Into<String>) -> Self {
        ModelOverride {
            provider,
            model: model.into(),
            input: None,
            output: None,
            cache_read: None,
            cache_write_5m: None,
            cache_write_1h: None,
            context_window: None,
            max_output_tokens: None,
            thinking: None,
            adaptive_thinking: None,
        }
    }
}

/// The built-in table plus config overrides.
#[derive(Debug, Clone)]
pub struct Catalogue {
    models: Vec<ModelSpec>,
}

struct Row {
    provider: ProviderKind,
    id: &'static str,
    input: f64,
    output: f64,
    cache_read: f64,
    context_window: u64,
    max_output_tokens: u64,
    thinking: bool,
    adaptive_thinking: bool,
    thinking_off: ThinkingOff,
    reasoning_efforts: &'static [&'static str],
    long_context: Option<LongContextPrices>,
    subscription: bool,
}

const fn row(
    provider: ProviderKind,
    id: &'static str,
    prices: (f64, f64, f64),
    context_window: u64,
    max_output_tokens: u64,
    thinking: bool,
) -> Row {
    Row {
        provider,
        id,
        input: prices.0,
        output: prices.1,
        cache_read: prices.2,
        context_window,
        max_output_tokens,
        thinking,
        adaptive_thinking: false,
        thinking_off: ThinkingOff::Omit,
        reasoning_efforts: &[],
        long_context: None,
        subscription: false,
    }
}

/// A model of a subscription (`codex`): its prices are the API's, for comparison only.
const fn subscription(mut base: Row) -> Row {
    base.subscription = true;
    base
}

const fn long(mut base: Row, above: u64, prices: (f64, f64, f64)) -> Row {
    base.long_context = Some(LongContextPrices {
        above_input_tokens: above,
        input: prices.0,
        output: prices.1,
        cache_read: prices.2,
    });
    base
}

/// Anthropic adaptive thinking (`{"type":"adaptive"}` + effort; budgets are refused).
const fn adaptive(mut base: Row) -> Row {
    base.adaptive_thinking = true;
    base
}

/// How a request says "no thinking" to this model.
const fn off(mut base: Row, thinking_off: ThinkingOff) -> Row {
    base.thinking_off = thinking_off;
    base
}

/// The reasoning effort values the model takes.
const fn efforts(mut base: Row, values: &'static [&'static str]) -> Row {
    base.reasoning_efforts = values;
    base
}

use ProviderKind::{Anthropic, Codex, Gemini, Moonshot, OpenAi};

/// GPT-5.2 and later: `xhigh` above `high`, no `minimal`.
const GPT_52_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh"];
/// GPT-5.6 Sol: `max` above `xhigh`.
const GPT_56_SOL_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];
/// Kimi K3's top-level `reasoning_effort`.
const KIMI_K3_EFFORTS: &[&str] = &["low", "high", "max"];

/// (input, output, cache read) per million tokens. Anthropic cache writes are derived: 1.25×
/// input (5 minutes) and 2× input (1 hour).
///
/// The list follows Flemma 0.14's model list as far as it is public: Flemma's model tables
/// (0.11) for the models they list, and the providers' own announcements and price pages (as of
/// July 2026) for the models released since (Claude Opus 4.8, Sonnet 5, Fable 5; GPT-5.6;
/// Gemini 3.5/3.6; Kimi K3). Retired models are not listed (they get the "did you mean" warning).
const BUILTIN: &[Row] = &[
    // Codex (a ChatGPT subscription): the models of the Codex backend, with their API prices
    // for comparison (the plan pays); its context is 272k whatever the API offers.
    subscription(efforts(
        row(Codex, "gpt-5.5", (5.0, 30.0, 0.5), 272_000, 128_000, true),
        GPT_52_EFFORTS,
    )),
    subscription(efforts(
        row(Codex, "gpt-5.4", (2.5, 15.0, 0.25), 272_000, 128_000, true),
        GPT_52_EFFORTS,
    )),
    subscription(efforts(
        row(
            Codex,
            "gpt-5.4-mini",
            (0.75, 4.5, 0.075),
            272_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    )),
    subscription(efforts(
        row(
            Codex,
            "gpt-5.3-codex-spark",
            (1.75, 14.0, 0.175),
            128_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    )),
    // Anthropic. Fable 5 always thinks; Sonnet 5 thinks unless told `{"type":"disabled"}`;
    // from the 4.6 generation on, thinking is adaptive (budgets are refused by 4.7 and later).
    off(
        adaptive(row(
            Anthropic,
            "claude-fable-5",
            (10.0, 50.0, 1.0),
            1_000_000,
            128_000,
            true,
        )),
        ThinkingOff::Forced,
    ),
    adaptive(row(
        Anthropic,
        "claude-opus-4-8",
        (5.0, 25.0, 0.5),
        1_000_000,
        128_000,
        true,
    )),
    adaptive(row(
        Anthropic,
        "claude-opus-4-7",
        (5.0, 25.0, 0.5),
        1_000_000,
        128_000,
        true,
    )),
    adaptive(row(
        Anthropic,
        "claude-opus-4-6",
        (5.0, 25.0, 0.5),
        1_000_000,
        128_000,
        true,
    )),
    off(
        adaptive(row(
            Anthropic,
            "claude-sonnet-5",
            (3.0, 15.0, 0.3),
            1_000_000,
            128_000,
            true,
        )),
        ThinkingOff::Disable,
    ),
    adaptive(row(
        Anthropic,
        "claude-sonnet-4-6",
        (3.0, 15.0, 0.3),
        1_000_000,
        64_000,
        true,
    )),
    row(
        Anthropic,
        "claude-opus-4-5",
        (5.0, 25.0, 0.5),
        200_000,
        64_000,
        true,
    ),
    long(
        row(
            Anthropic,
            "claude-sonnet-4-5",
            (3.0, 15.0, 0.3),
            200_000,
            64_000,
            true,
        ),
        200_000,
        (6.0, 22.5, 0.6),
    ),
    row(
        Anthropic,
        "claude-haiku-4-5",
        (1.0, 5.0, 0.1),
        200_000,
        64_000,
        true,
    ),
    row(
        Anthropic,
        "claude-opus-4-1",
        (15.0, 75.0, 1.5),
        200_000,
        32_000,
        true,
    ),
    row(
        Anthropic,
        "claude-opus-4",
        (15.0, 75.0, 1.5),
        200_000,
        32_000,
        true,
    ),
    long(
        row(
            Anthropic,
            "claude-sonnet-4",
            (3.0, 15.0, 0.3),
            200_000,
            64_000,
            true,
        ),
        200_000,
        (6.0, 22.5, 0.6),
    ),
    // OpenAI (cache read = cached input)
    efforts(
        row(
            OpenAi,
            "gpt-5.6-sol",
            (5.0, 30.0, 0.5),
            1_050_000,
            128_000,
            true,
        ),
        GPT_56_SOL_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.6-terra",
            (2.5, 15.0, 0.25),
            1_050_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.6-luna",
            (1.0, 6.0, 0.1),
            1_050_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.5",
            (5.0, 30.0, 0.5),
            1_050_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.5-pro",
            (30.0, 180.0, 30.0),
            1_050_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.4",
            (2.5, 15.0, 0.25),
            1_050_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.4-pro",
            (30.0, 180.0, 30.0),
            1_050_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.4-mini",
            (0.75, 4.5, 0.075),
            400_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.4-nano",
            (0.2, 1.25, 0.02),
            400_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.3-codex",
            (1.75, 14.0, 0.175),
            400_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.2",
            (1.75, 14.0, 0.175),
            400_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    efforts(
        row(
            OpenAi,
            "gpt-5.2-pro",
            (21.0, 168.0, 21.0),
            400_000,
            128_000,
            true,
        ),
        GPT_52_EFFORTS,
    ),
    row(
        OpenAi,
        "gpt-5.1",
        (1.25, 10.0, 0.125),
        400_000,
        128_000,
        true,
    ),
    row(OpenAi, "gpt-5", (1.25, 10.0, 0.125), 400_000, 128_000, true),
    row(
        OpenAi,
        "gpt-5-mini",
        (0.25, 2.0, 0.025),
        400_000,
        128_000,
        true,
    ),
    row(
        OpenAi,
        "gpt-5-nano",
        (0.05, 0.4, 0.005),
        400_000,
        128_000,
        true,
    ),
    row(
        OpenAi,
        "gpt-5-pro",
        (15.0, 120.0, 15.0),
        400_000,
        272_000,
        true,
    ),
    row(OpenAi, "gpt-4.1", (2.0, 8.0, 0.5), 1_047_576, 32_768, false),
    row(
        OpenAi,
        "gpt-4.1-mini",
        (0.4, 1.6, 0.1),
        1_047_576,
        32_768,
        false,
    ),
    row(
        OpenAi,
        "gpt-4.1-nano",
        (0.1, 0.4, 0.025),
        1_047_576,
        32_768,
        false,
    ),
    row(OpenAi, "gpt-4o", (2.5, 10.0, 1.25), 128_000, 16_384, false),
    row(
        OpenAi,
        "gpt-4o-mini",
        (0.15, 0.6, 0.075),
        128_000,
        16_384,
        false,
    ),
    row(OpenAi, "o3", (2.0, 8.0, 0.5), 200_000, 100_000, true),
    row(OpenAi, "o3-pro", (20.0, 80.0, 20.0), 200_000, 100_000, true),
    row(OpenAi, "o4-mini", (1.1, 4.4, 0.275), 200_000, 100_000, true),
    row(OpenAi, "o3-mini", (1.1, 4.4, 0.55), 200_000, 100_000, true),
    row(OpenAi, "o1", (15.0, 60.0, 7.5), 200_000, 100_000, true),
    // Gemini API and Vertex AI (thoughts are billed as output)
    row(
        Gemini,
        "gemini-3.6-flash",
        (1.5, 7.5, 0.15),
        1_048_576,
        65_536,
        true,
    ),
    row(
        Gemini,
        "gemini-3.5-flash",
        (1.5, 9.0, 0.15),
        1_048_576,
        65_536,
        true,
    ),
    row(
        Gemini,
        "gemini-3.5-flash-lite",
        (0.3, 2.5, 0.03),
        1_048_576,
        65_536,
        true,
    ),
    long(
        row(
            Gemini,
            "gemini-3.1-pro-preview",
            (2.0, 12.0, 0.2),
            1_048_576,
            65_536,
            true,
        ),
        200_000,
        (4.0, 18.0, 0.4),
    ),
    row(
        Gemini,
        "gemini-3.1-flash-lite",
        (0.25, 1.5, 0.025),
        1_048_576,
        65_536,
        true,
    ),
    row(
        Gemini,
        "gemini-3-flash-preview",
        (0.5, 3.0, 0.05),
        1_048_576,
        65_536,
        true,
    ),
    long(
        row(
            Gemini,
            "gemini-2.5-pro",
            (1.25, 10.0, 0.125),
            1_048_576,
            65_536,
            true,
        ),
        200_000,
        (2.5, 15.0, 0.25),
    ),
    row(
        Gemini,
        "gemini-2.5-flash",
        (0.3, 2.5, 0.03),
        1_048_576,
        65_536,
        true,
    ),
    row(
        Gemini,
        "gemini-2.5-flash-lite",
        (0.1, 0.4, 0.01),
        1_048_576,
        65_536,
        true,
    ),
    // Moonshot (Kimi). K3 always thinks and takes `reasoning_effort`; K2.5/K2.6 think unless
    // told `thinking: {"type": "disabled"}`. The K2 preview, turbo and thinking models were
    // retired on May 25, 2026.
    off(
        efforts(
            row(
                Moonshot,
                "kimi-k3",
                (3.0, 15.0, 0.3),
                1_048_576,
                65_536,
                true,
            ),
            KIMI_K3_EFFORTS,
        ),
        ThinkingOff::Forced,
    ),
    off(
        row(
            Moonshot,
            "kimi-k2.6",
            (0.95, 4.0, 0.16),
            262_144,
            65_536,
            true,
        ),
        ThinkingOff::Disable,
    ),
    off(
        row(
            Moonshot,
            "kimi-k2.5",
            (0.6, 3.0, 0.1),
            262_144,
            65_536,
            true,
        ),
        ThinkingOff::Disable,
    ),
];

impl ModelSpec {
    fn from_row(row: &Row) -> Self {
        let (cache_write_5m, cache_write_1h) = if row.provider == Anthropic {
            (row.input * 1.25, row.input * 2.0)
        } else {
            (row.input, row.input)
        };
        ModelSpec {
            provider: row.provider,
            id: row.id.to_string(),
            input: row.input,
            output: row.output,
            cache_read: row.cache_read,
            cache_write_5m,
            cache_write_1h,
            context_window: row.context_window,
            max_output_tokens: row.max_output_tokens,
            thinking: row.thinking,
            adaptive_thinking: row.adaptive_thinking,
            thinking_off: row.thinking_off,
            reasoning_efforts: row.reasoning_efforts,
            long_context: row.long_context,
            subscription: row.subscription,
        }
    }

    /// The model's prices for a request whose cache writes are kept `retention` long (the
    /// 5-minute write price for `short` and `none`, the 1-hour one for `long`).
    pub fn prices(&self, retention: CacheRetention) -> Prices {
        Prices {
            input: self.input,
            output: self.output,
            cache_read: self.cache_read,
            cache_write: match retention {
                CacheRetention::Long => self.cache_write_1h,
                CacheRetention::Short | CacheRetention::None => self.cache_write_5m,
            },
            long_context: self.long_context,
        }
    }
}

impl Default for Catalogue {
    fn default() -> Self {
        Catalogue::builtin()
    }
}

/// The catalogue family a provider kind looks models up in.
fn family(kind: ProviderKind) -> ProviderKind {
    match kind {
        ProviderKind::Vertex => ProviderKind::Gemini,
        other => other,
    }
}

impl Catalogue {
    /// The built-in table.
    pub fn builtin() -> Self {
        Catalogue {
            models: BUILTIN.iter().map(ModelSpec::from_row).collect(),
        }
    }

    /// Applies config overrides (changing a known model or adding a new one).
    pub fn with_overrides(mut self, overrides: &[ModelOverride]) -> Self {
        for entry in overrides {
            let provider = family(entry.provider);
            let index = match self
                .models
                .iter()
                .position(|m| m.provider == provider && m.id == entry.model)
            {
                Some(index) => index,
                None => {
                    self.models.push(ModelSpec {
                        provider,
                        id: entry.model.clone(),
                        input: 0.0,
                        output: 0.0,
                        cache_read: 0.0,
                        cache_write_5m: 0.0,
                        cache_write_1h: 0.0,
                        context_window: 128_000,
                        max_output_tokens: 8_192,
                        thinking: false,
                        adaptive_thinking: false,
                        thinking_off: ThinkingOff::Omit,
                        reasoning_efforts: &[],
                        long_context: None,
                        subscription: entry.provider == ProviderKind::Codex,
                    });
                    self.models.len() - 1
                }
            };
            let spec = &mut self.models[index];
            if let Some(input) = entry.input {
                spec.input = input;
                if provider != Anthropic {
                    spec.cache_write_5m = input;
                    spec.cache_write_1h = input;
                } else {
                    spec.cache_write_5m = input * 1.25;
                    spec.cache_write_1h = input * 2.0;
                }
            }
            set(&mut spec.output, entry.output);
            set(&mut spec.cache_read, entry.cache_read);
            set(&mut spec.cache_write_5m, entry.cache_write_5m);
            set(&mut spec.cache_write_1h, entry.cache_write_1h);
            set(&mut spec.context_window, entry.context_window);
            set(&mut spec.max_output_tokens, entry.max_output_tokens);
            set(&mut spec.thinking, entry.thinking);
            set(&mut spec.adaptive_thinking, entry.adaptive_thinking);
        }
        self
    }

    /// Every model of the catalogue.
    pub fn models(&self) -> &[ModelSpec] {
        &self.models
    }

    /// Finds a model: the exact id, else the longest catalogue id that the given id extends with
    /// a date or version suffix (`-20250514`, `-2025-08-07`, `@20250219`, `-latest`,
    /// `-preview-09-2025`). A `models/` prefix is ignored. Vertex uses the Gemini entries.
    pub fn lookup(&self, kind: ProviderKind, model: &str) -> Option<&ModelSpec> {
        let provider = family(kind);
        let model = model.trim();
        let model = model.strip_prefix("models/").unwrap_or(model);
        let candidates = self.models.iter().filter(|m| m.provider == provider);
        let mut best: Option<&ModelSpec> = None;
        for spec in candidates {
            if spec.id == model {
                return Some(spec);
            }
            let Some(rest) = model.strip_prefix(spec.id.as_str()) else {
                continue;
            };
            let Some(suffix) = rest.strip_prefix(['-', '@']) else {
                continue;
            };
            if is_version_suffix(suffix) && best.is_none_or(|b| spec.id.len() > b.id.len()) {
                best = Some(spec);
            }
        }
        best
    }
}

impl Catalogue {
    /// Whether `model` takes reasoning/thinking parameters: the catalogue's word for a known
    /// model; for an unknown one, its family decides ([`unknown_model_reasons`]).
    pub fn supports_thinking(&self, kind: ProviderKind, model: &str) -> bool {
        self.lookup(kind, model)
            .map_or_else(|| unknown_model_reasons(kind, model), |spec| spec.thinking)
    }

    /// A non-blocking warning for a model the catalogue does not know, with the closest known
    /// id ("did you mean"). `None` for known models and for `openai-compatible`, whose servers
    /// run models of any name.
    pub fn unknown_model_warning(&self, kind: ProviderKind, model: &str) -> Option<String> {
        if kind == ProviderKind::OpenAiCompatible || model.trim().is_empty() {
            return None;
        }
        if self.lookup(kind, model).is_some() {
            return None;
        }
        let provider = family(kind);
        let closest = self
            .models
            .iter()
            .filter(|m| m.provider == provider)
            .map(|m| (strsim::damerau_levenshtein(model, &m.id), m.id.as_str()))
            .min_by_key(|(distance, _)| *distance)
            .filter(|(distance, id)| *distance <= id.len().max(model.len()) / 2);
        let did_you_mean = closest
            .map(|(_, id)| format!(" (did you mean `{id}`?)"))
            .unwrap_or_default();
        Some(format!(
            "model `{model}` is not in flemmad's {} catalogue{did_you_mean}; it is sent as written, and its limits and prices are unknown",
            kind.name()
        ))
    }
}

/// [`Catalogue::unknown_model_warning`] on the built-in catalogue.
pub fn unknown_model_warning(kind: ProviderKind, model: &str) -> Option<String> {
    Catalogue::builtin().unknown_model_warning(kind, model)
}

/// Whether a model the catalogue does not know is assumed to reason. OpenAI rejects reasoning
/// parameters on non-reasoning models, so only its reasoning families (`o1`, `o3`, `o4`,
/// `gpt-5…`) get them; other providers ignore or tolerate them for unknown models.
pub fn unknown_model_reasons(kind: ProviderKind, model: &str) -> bool {
    match kind {
        ProviderKind::OpenAi => {
            let model = model.trim();
            ["o1", "o3", "o4"].iter().any(|family| {
                model == *family
                    || model
                        .strip_prefix(family)
                        .is_some_and(|rest| rest.starts_with('-'))
            }) || model.starts_with("gpt-5")
        }
        _ => true,
    }
}

fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *target = value;
    }
}

/// A date (`20250514`, `2025-08-07`, `0905-preview`) or a release word after a model id.
fn is_version_suffix(suffix: &str) -> bool {
    let digits = suffix.chars().take_while(char::is_ascii_digit).count();
    digits >= 4
        || ["latest", "preview", "exp"]
            .iter()
            .any(|word| suffix.starts_with(word))
}

/// The cost in US dollars of one request with 5-minute cache writes. See [`cost_with`].
pub fn cost(usage: &Usage, model: &ModelSpec) -> f64 {
    cost_with(usage, model, CacheRetention::Short)
}

/// The cost in US dollars of one request: [`Prices::cost`] with the model's prices for
/// `retention` (the one cost function; see [`crate::pricing`]).
pub fn cost_with(usage: &Usage, model: &ModelSpec, retention: CacheRetention) -> f64 {
    model.prices(retention).cost(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn lookup_handles_dates_and_prefixes() {
        let catalogue = Catalogue::builtin();
        let find = |kind, model| catalogue.lookup(kind, model).map(|m| m.id.as_str());
        assert_eq!(
            find(Anthropic, "claude-sonnet-4-5-20250929"),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(
            find(Anthropic, "claude-sonnet-4-20250514"),
            Some("claude-sonnet-4")
        );
        assert_eq!(
            find(Anthropic, "claude-opus-4-5@20251101"),
            Some("claude-opus-4-5")
        );
        // Retired models are gone (they get the "did you mean" warning).
        assert_eq!(find(Anthropic, "claude-3-7-sonnet"), None);
        assert_eq!(find(Moonshot, "kimi-k2-thinking"), None);
        assert_eq!(find(Anthropic, "claude-opus-4-1"), Some("claude-opus-4-1"));
        assert_eq!(find(Anthropic, "claude-sonnet-4-7"), None);
        assert_eq!(find(OpenAi, "gpt-5-2025-08-07"), Some("gpt-5"));
        assert_eq!(find(OpenAi, "gpt-5-mini-2025-08-07"), Some("gpt-5-mini"));
        assert_eq!(find(OpenAi, "o3"), Some("o3"));
        assert_eq!(
            find(ProviderKind::Vertex, "gemini-2.5-flash"),
            Some("gemini-2.5-flash")
        );
        assert_eq!(
            find(Gemini, "models/gemini-2.5-flash-preview-09-2025"),
            Some("gemini-2.5-flash")
        );
        assert_eq!(find(Moonshot, "kimi-k3"), Some("kimi-k3"));
        assert_eq!(
            find(Gemini, "gemini-3.1-flash-lite-preview"),
            Some("gemini-3.1-flash-lite")
        );
        assert_eq!(find(ProviderKind::OpenAiCompatible, "llama3.2"), None);
        assert_eq!(find(Anthropic, "gpt-5"), None);
    }

    #[test]
    fn anthropic_cost_counts_cache_writes_and_reads() {
        let catalogue = Catalogue::builtin();
        let sonnet = catalogue.lookup(Anthropic, "claude-sonnet-4-5").unwrap();
        // 1M uncached + 1M read + 1M written, 1M out.
        let usage = Usage {
            input_tokens: 3_000_000 - 1,
            output_tokens: 1_000_000,
            thinking_tokens: 0,
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 1_000_000,
        };
        // Long-context tier does not apply to the sum check below; use a small request instead.
        let small = Usage {
            input_tokens: 1_000 + 2_000 + 4_000,
            output_tokens: 500,
            thinking_tokens: 100,
            cache_read_tokens: 2_000,
            cache_write_tokens: 4_000,
        };
        let expected = (1_000.0 * 3.0 + 2_000.0 * 0.3 + 4_000.0 * 3.75 + 500.0 * 15.0) / 1e6;
        assert!(
            close(cost(&small, sonnet), expected),
            "{}",
            cost(&small, sonnet)
        );
        let expected_long = (1_000.0 * 3.0 + 2_000.0 * 0.3 + 4_000.0 * 6.0 + 500.0 * 15.0) / 1e6;
        assert!(close(
            cost_with(&small, sonnet, CacheRetention::Long),
            expected_long
        ));
        // Above 200k input tokens the long-context prices apply.
        let expected_tier = (999_999.0 * 6.0 + 1e6 * 0.6 + 1e6 * 3.75 + 1e6 * 22.5) / 1e6;
        assert!(
            close(cost(&usage, sonnet), expected_tier),
            "{}",
            cost(&usage, sonnet)
        );
    }

    #[test]
    fn openai_and_gemini_cost() {
        let catalogue = Catalogue::builtin();
        let gpt5 = catalogue.lookup(OpenAi, "gpt-5").unwrap();
        let usage = Usage {
            input_tokens: 10_000,
            output_tokens: 2_000,
            thinking_tokens: 1_500,
            cache_read_tokens: 8_000,
            cache_write_tokens: 0,
        };
        let expected = (2_000.0 * 1.25 + 8_000.0 * 0.125 + 2_000.0 * 10.0) / 1e6;
        assert!(close(cost(&usage, gpt5), expected));

        let flash = catalogue
            .lookup(ProviderKind::Vertex, "gemini-2.5-flash")
            .unwrap();
        // Thoughts are part of output_tokens (normalised usage) and billed as output.
        let usage = Usage {
            input_tokens: 11,
            output_tokens: 2 + 21,
            thinking_tokens: 21,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        };
        let expected = (11.0 * 0.3 + 23.0 * 2.5) / 1e6;
        assert!(close(cost(&usage, flash), expected));
    }

    #[test]
    fn overrides_change_and_add_models() {
        let catalogue = Catalogue::builtin().with_overrides(&[
            ModelOverride {
                input: Some(2.0),
                adaptive_thinking: Some(true),
                ..ModelOverride::new(Anthropic, "claude-haiku-4-5")
            },
            ModelOverride {
                context_window: Some(32_768),
                max_output_tokens: Some(4_096),
                thinking: Some(true),
                ..ModelOverride::new(ProviderKind::OpenAiCompatible, "qwen3:8b")
            },
        ]);
        let haiku = catalogue
            .lookup(Anthropic, "claude-haiku-4-5-20251001")
            .unwrap();
        assert!(close(haiku.input, 2.0));
        assert!(close(haiku.cache_write_5m, 2.5));
        assert!(haiku.adaptive_thinking);
        let qwen = catalogue
            .lookup(ProviderKind::OpenAiCompatible, "qwen3:8b")
            .unwrap();
        assert_eq!(qwen.max_output_tokens, 4_096);
        assert!(close(cost(&Usage::default(), qwen), 0.0));
    }

    #[test]
    fn unknown_openai_models_reason_only_in_reasoning_families() {
        let catalogue = Catalogue::builtin();
        for model in [
            "gpt-4o-mini",
            "gpt-4.1",
            "gpt-4.1-nano",
            "gpt-4.1-2025-04-14",
            "gpt-4o-2024-08-06",
        ] {
            assert!(catalogue.lookup(OpenAi, model).is_some(), "{model}");
            assert!(!catalogue.supports_thinking(OpenAi, model), "{model}");
        }
        for model in ["gpt-5.2-pro", "o3-pro", "o1", "o4-mini-deep-research"] {
            assert!(catalogue.supports_thinking(OpenAi, model), "{model}");
        }
        for model in ["gpt-4.5-preview", "chatgpt-4o-latest", "o30-ish"] {
            assert!(!catalogue.supports_thinking(OpenAi, model), "{model}");
        }
        assert!(catalogue.supports_thinking(Anthropic, "claude-future-9"));
    }

    #[test]
    fn unknown_models_get_a_did_you_mean_warning() {
        let warning = unknown_model_warning(Anthropic, "claude-sonet-4-5").unwrap_or_default();
        assert!(
            warning.contains("did you mean `claude-sonnet-4-5`?"),
            "{warning}"
        );
        let warning = unknown_model_warning(Anthropic, "claude-sonet-9").unwrap_or_default();
        assert!(
            warning.contains("`claude-sonet-9` is not in flemmad's anthropic catalogue"),
            "{warning}"
        );
        assert!(
            warning.contains("did you mean `claude-sonnet-"),
            "{warning}"
        );
        assert_eq!(
            unknown_model_warning(Anthropic, "claude-sonnet-4-5-20250929"),
            None
        );
        assert_eq!(
            unknown_model_warning(ProviderKind::OpenAiCompatible, "qwen3:8b"),
            None
        );
        let far = unknown_model_warning(OpenAi, "totally-different-thing").unwrap_or_default();
        assert!(!far.contains("did you mean"), "{far}");
    }
}
