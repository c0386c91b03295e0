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
use ProviderKind::{Anthropic, Codex, Gemini, Moonshot, OpenAi};

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

/// GPT-5.2 and later: `xhigh` above `high`, no `minimal`.
const GPT_52_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh"];
/// GPT-5.6 Sol: `max` above `xhigh`.
const GPT_56_SOL_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];
/// Kimi K3's top-level `reasoning_effort`.
const KIMI_K3_EFFORTS: &[&str] = &["low", "high", "max"];

/// The built-in table as data: `models.toml` (its header says what each field means).
const BUILTIN_TOML: &str = include_str!("models.toml");

/// The built-in table, parsed once.
static BUILTIN: std::sync::LazyLock<Vec<ModelSpec>> = std::sync::LazyLock::new(|| {
    // The embedded file is checked by the tests (`the_builtin_table_parses`): a failure here
    // is a bug in this crate, not input.
    parse_table(BUILTIN_TOML).unwrap_or_else(|error| panic!("models.toml: {error}"))
});

/// One `[[model]]` of `models.toml`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    provider: String,
    id: String,
    prices: [f64; 3],
    context: u64,
    max_output: u64,
    #[serde(default)]
    thinking: bool,
    #[serde(default)]
    adaptive: bool,
    #[serde(default)]
    thinking_off: Option<String>,
    #[serde(default)]
    efforts: Option<String>,
    #[serde(default)]
    long_context: Option<LongRow>,
    #[serde(default)]
    subscription: bool,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LongRow {
    above: u64,
    prices: [f64; 3],
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    model: Vec<Row>,
}

/// The models of a catalogue file; the error names the entry and what is wrong with it.
fn parse_table(text: &str) -> Result<Vec<ModelSpec>, String> {
    let table: Table = toml::from_str(text).map_err(|error| error.to_string())?;
    table
        .model
        .into_iter()
        .map(|row| {
            let id = row.id.clone();
            ModelSpec::from_row(row).map_err(|error| format!("model `{id}`: {error}"))
        })
        .collect()
}

impl ModelSpec {
    fn from_row(row: Row) -> Result<Self, String> {
        let provider = match row.provider.as_str() {
            "anthropic" => Anthropic,
            "openai" => OpenAi,
            "codex" => Codex,
            "gemini" => Gemini,
            "moonshot" => Moonshot,
            other => return Err(format!("unknown provider `{other}`")),
        };
        let thinking_off = match row.thinking_off.as_deref() {
            None | Some("omit") => ThinkingOff::Omit,
            Some("disable") => ThinkingOff::Disable,
            Some("forced") => ThinkingOff::Forced,
            Some(other) => return Err(format!("unknown thinking_off `{other}`")),
        };
        let reasoning_efforts = match row.efforts.as_deref() {
            None => &[][..],
            Some("gpt-5.2") => GPT_52_EFFORTS,
            Some("gpt-5.6-sol") => GPT_56_SOL_EFFORTS,
            Some("kimi-k3") => KIMI_K3_EFFORTS,
            Some(other) => return Err(format!("unknown efforts `{other}`")),
        };
        let [input, output, cache_read] = row.prices;
        let (cache_write_5m, cache_write_1h) = if provider == Anthropic {
            (input * 1.25, input * 2.0)
        } else {
            (input, input)
        };
        Ok(ModelSpec {
            provider,
            id: row.id,
            input,
            output,
            cache_read,
            cache_write_5m,
            cache_write_1h,
            context_window: row.context,
            max_output_tokens: row.max_output,
            thinking: row.thinking,
            adaptive_thinking: row.adaptive,
            thinking_off,
            reasoning_efforts,
            long_context: row.long_context.map(|long| LongContextPrices {
                above_input_tokens: long.above,
                input: long.prices[0],
                output: long.prices[1],
                cache_read: long.prices[2],
            }),
            subscription: row.subscription,
        })
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
            models: BUILTIN.clone(),
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

    #[test]
    fn the_builtin_table_parses_and_each_entry_is_sound() {
        let models = parse_table(BUILTIN_TOML).unwrap_or_else(|error| panic!("{error}"));
        assert!(models.len() > 40, "{} models", models.len());
        let mut seen = std::collections::HashSet::new();
        for model in &models {
            assert!(
                seen.insert((model.provider, model.id.clone())),
                "`{}` twice",
                model.id
            );
            assert!(!model.id.is_empty() && model.id.trim() == model.id);
            assert!(
                model.input >= 0.0 && model.output >= model.input,
                "{}",
                model.id
            );
            assert!(model.cache_read <= model.input, "{}", model.id);
            assert!(
                model.max_output_tokens <= model.context_window,
                "{}",
                model.id
            );
            assert!(
                model.reasoning_efforts.is_empty() || model.thinking,
                "{}: efforts without thinking",
                model.id
            );
            if let Some(long) = model.long_context {
                assert!(
                    long.input >= model.input && long.output >= model.output,
                    "{}",
                    model.id
                );
            }
        }
        assert_eq!(Catalogue::builtin().models(), &models[..]);
    }

    #[test]
    fn a_bad_entry_is_named_with_what_is_wrong() {
        let entry = |extra: &str| {
            format!(
                "[[model]]\nprovider = \"openai\"\nid = \"m\"\nprices = [1.0, 2.0, 0.1]\ncontext = 10\nmax_output = 5\n{extra}"
            )
        };
        assert_eq!(parse_table(&entry("")).map(|m| m.len()), Ok(1));
        let error = parse_table(&entry("efforts = \"huge\"\n")).unwrap_err();
        assert_eq!(error, "model `m`: unknown efforts `huge`");
        let error = parse_table(&entry("thinking_off = \"never\"\n")).unwrap_err();
        assert_eq!(error, "model `m`: unknown thinking_off `never`");
        let error = parse_table(&entry("").replace("openai", "nobody")).unwrap_err();
        assert_eq!(error, "model `m`: unknown provider `nobody`");
        assert!(
            parse_table(&entry("colour = 1\n"))
                .unwrap_err()
                .contains("colour")
        );
    }

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
