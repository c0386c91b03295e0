//! What a request costs: the one cost function of flemmad.
//!
//! Every place that reports a cost (the engine's per-request and per-document totals, the CLI's
//! summary, `flemma/usage`, the catalogue's helpers) goes through [`Prices::cost`], on the
//! normalised [`Usage`] the decoders produce. The providers count cached input differently on
//! the wire, and the decoders make it one shape:
//!
//! * Anthropic reports `input_tokens` *without* the cache: the decoder adds
//!   `cache_read_input_tokens` and `cache_creation_input_tokens` to it;
//! * OpenAI (Responses and Chat Completions) reports `input_tokens` / `prompt_tokens` *with*
//!   `cached_tokens` inside;
//! * Gemini reports `promptTokenCount` *with* `cachedContentTokenCount` inside.
//!
//! So `usage.input_tokens` is every prompt token, and the uncached part is `input − cache read −
//! cache write`: each token is billed once, at its own price.

use flemma_conversation::Usage;

/// Prices for prompts above a size threshold (Gemini Pro and Anthropic 1M-context pricing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongContextPrices {
    /// Prompts with more input tokens than this use these prices.
    pub above_input_tokens: u64,
    /// Input price per million tokens.
    pub input: f64,
    /// Output price per million tokens.
    pub output: f64,
    /// Cache read price per million tokens.
    pub cache_read: f64,
}

/// The prices of one model for one request, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prices {
    /// Uncached input.
    pub input: f64,
    /// Output, thinking included.
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache (Anthropic: 1.25× input for 5 minutes, 2× for an
    /// hour; the others bill writes as input).
    pub cache_write: f64,
    /// Higher prices for long prompts.
    pub long_context: Option<LongContextPrices>,
}

/// What the prompt cache did for a request (or a sum of requests).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CacheEffect {
    /// Share of the input read from the cache, 0 to 1 (0 when there was no input).
    pub hit_rate: f64,
    /// Dollars the cache saved: cache reads at the input price minus what they cost, less the
    /// surcharge of cache writes (negative when writing cost more than reading saved).
    pub saved: f64,
}

impl Prices {
    /// The prices that apply to a request with `input_tokens` prompt tokens.
    fn tier(&self, input_tokens: u64) -> (f64, f64, f64) {
        match self.long_context {
            Some(tier) if input_tokens > tier.above_input_tokens => {
                (tier.input, tier.output, tier.cache_read)
            }
            _ => (self.input, self.output, self.cache_read),
        }
    }

    /// The cost in US dollars of one request: uncached input, cache reads, cache writes and
    /// output each at their own price (see the module documentation for the token counts).
    pub fn cost(&self, usage: &Usage) -> f64 {
        let (input, output, read) = self.tier(usage.input_tokens);
        per_million(uncached_input(usage), input)
            + per_million(usage.cache_read_tokens, read)
            + per_million(usage.cache_write_tokens, self.cache_write)
            + per_million(usage.output_tokens, output)
    }

    /// What the cache did for one request: its hit rate and the dollars it saved.
    pub fn cache_effect(&self, usage: &Usage) -> CacheEffect {
        let (input, _, read) = self.tier(usage.input_tokens);
        CacheEffect {
            hit_rate: hit_rate(usage),
            saved: per_million(usage.cache_read_tokens, input - read)
                - per_million(usage.cache_write_tokens, self.cache_write - input),
        }
    }
}

/// The prompt tokens neither read from nor written to the cache.
pub fn uncached_input(usage: &Usage) -> u64 {
    usage
        .input_tokens
        .saturating_sub(usage.cache_read_tokens)
        .saturating_sub(usage.cache_write_tokens)
}

/// Share of the input read from the cache, 0 to 1.
pub fn hit_rate(usage: &Usage) -> f64 {
    if usage.input_tokens == 0 {
        0.0
    } else {
        (usage.cache_read_tokens as f64 / usage.input_tokens as f64).min(1.0)
    }
}

fn per_million(tokens: u64, price: f64) -> f64 {
    tokens as f64 * price / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sonnet() -> Prices {
        Prices {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
            long_context: None,
        }
    }

    /// Issue 31's example: 120 uncached input tokens, 2,048 read from the cache, 57 output
    /// (Anthropic's `input_tokens: 120`, normalised to 2,168 prompt tokens). Flemma says
    /// $0.0018; billing the cached tokens as input too gave $0.0080.
    #[test]
    fn cached_tokens_are_billed_once_at_the_cache_price() {
        let usage = Usage {
            input_tokens: 120 + 2048,
            output_tokens: 57,
            cache_read_tokens: 2048,
            ..Usage::default()
        };
        let cost = sonnet().cost(&usage);
        let expected = (120.0 * 3.0 + 2048.0 * 0.3 + 57.0 * 15.0) / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost}");
        assert_eq!(format!("{cost:.4}"), "0.0018");
        let effect = sonnet().cache_effect(&usage);
        assert!((effect.hit_rate - 2048.0 / 2168.0).abs() < 1e-12);
        assert!((effect.saved - 2048.0 * 2.7 / 1e6).abs() < 1e-12);
    }

    #[test]
    fn cache_writes_cost_their_surcharge() {
        let usage = Usage {
            input_tokens: 1000,
            cache_write_tokens: 1000,
            ..Usage::default()
        };
        let effect = sonnet().cache_effect(&usage);
        assert_eq!(effect.hit_rate, 0.0);
        assert!((effect.saved + 1000.0 * 0.75 / 1e6).abs() < 1e-12);
        assert!((sonnet().cost(&usage) - 1000.0 * 3.75 / 1e6).abs() < 1e-12);
    }

    #[test]
    fn long_prompts_use_the_long_context_tier() {
        let prices = Prices {
            long_context: Some(LongContextPrices {
                above_input_tokens: 200_000,
                input: 6.0,
                output: 22.5,
                cache_read: 0.6,
            }),
            ..sonnet()
        };
        let usage = Usage {
            input_tokens: 300_000,
            output_tokens: 1000,
            ..Usage::default()
        };
        let expected = (300_000.0 * 6.0 + 1000.0 * 22.5) / 1e6;
        assert!((prices.cost(&usage) - expected).abs() < 1e-9);
        assert_eq!(hit_rate(&Usage::default()), 0.0);
    }
}
