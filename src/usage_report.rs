//! What a chat's requests used, as every front end of the binary tells it: the totals
//! (`flemma/usage`, `flemma/status`), the usage line after a send (tokens, the cache's share and
//! what it saved, the cost, a subscription's rate limits), and the rate limits a subscription
//! last reported, kept on disk so that `flemmad status` can show them after the send ended.
//!
//! Costs come from the engine, which has them from the one cost function
//! (`flemma_wire::Prices::cost`); this module only says them.

use std::path::{Path, PathBuf};

use flemma_protocol::engine::{RateLimits, UsageTotals};

use crate::user_dirs::UserDirs;

/// The totals of a document's requests, in the protocol's form.
pub fn totals(
    usage: &flemma_conversation::Usage,
    cost: Option<f64>,
    cache_saved: Option<f64>,
    rate_limits: Option<&flemma_conversation::RateLimits>,
) -> UsageTotals {
    UsageTotals {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        thinking_tokens: usage.thinking_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        cost,
        cache_saved,
        rate_limits: rate_limits.cloned(),
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The usage line of a send: `2168 input (2048 from the cache, 94%), 57 output tokens, $0.0018
/// (the cache saved $0.0055)`, and a subscription's windows (`5-hour window 42% used, resets
/// in 3h 12m; weekly …`). `now` is in seconds since the Unix epoch.
pub fn line(totals: &UsageTotals, now: i64) -> String {
    let mut text = format!("{} input", totals.input_tokens);
    let mut cache = Vec::new();
    if totals.cache_read_tokens > 0 {
        cache.push(format!(
            "{} from the cache, {}",
            totals.cache_read_tokens,
            percent(totals.cache_read_tokens, totals.input_tokens)
        ));
    }
    if totals.cache_write_tokens > 0 {
        cache.push(format!("{} written to it", totals.cache_write_tokens));
    }
    if !cache.is_empty() {
        text.push_str(&format!(" ({})", cache.join(", ")));
    }
    text.push_str(&format!(", {} output tokens", totals.output_tokens));
    if let Some(cost) = totals.cost {
        text.push_str(&format!(", {}", dollars(cost)));
        match totals.cache_saved {
            Some(saved) if saved >= 0.00005 => {
                text.push_str(&format!(" (the cache saved {})", dollars(saved)));
            }
            Some(saved) if saved <= -0.00005 => {
                text.push_str(&format!(
                    " (writing the cache cost {} more)",
                    dollars(-saved)
                ));
            }
            _ => {}
        }
    }
    if let Some(limits) = &totals.rate_limits
        && !limits.windows.is_empty()
    {
        text.push_str(&format!("; subscription: {}", windows(limits, now)));
    }
    text
}

/// The windows of a subscription: `5-hour window 42% used, resets in 3h 12m; weekly window 12%
/// used, resets in 5d 2h`.
pub fn windows(limits: &RateLimits, now: i64) -> String {
    limits
        .windows
        .iter()
        .map(|w| {
            let mut text = format!(
                "{} window {}% used",
                w.label(),
                trim_percent(w.used_percent)
            );
            if let Some(at) = w.resets_at {
                text.push_str(&format!(
                    ", resets {}",
                    flemma_provider::codex::resets(at, now)
                ));
            }
            text
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".to_owned();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

fn trim_percent(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn dollars(amount: f64) -> String {
    format!("${amount:.4}")
}

/// Where the rate limits a provider last reported are kept:
/// `$XDG_STATE_HOME/flemma/rate-limits/<provider>.json`.
fn file(dirs: &UserDirs, provider: &str) -> Option<PathBuf> {
    Some(
        dirs.flemma_state()?
            .join("rate-limits")
            .join(format!("{provider}.json")),
    )
}

/// The rate limits a provider last reported, and when (seconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    pub provider: String,
    pub observed_at: i64,
    pub rate_limits: RateLimits,
}

/// Keeps what `provider` reported (best effort: a failure is logged, nothing else depends on
/// it).
pub fn remember(dirs: &UserDirs, provider: &str, limits: &flemma_conversation::RateLimits) {
    let Some(path) = file(dirs, provider) else {
        return;
    };
    let observed = Observed {
        provider: provider.to_owned(),
        observed_at: unix_now(),
        rate_limits: limits.clone(),
    };
    let result = (|| -> anyhow::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        crate::fsutil::write_atomic(&path, &serde_json::to_string_pretty(&observed)?)?;
        Ok(())
    })();
    if let Err(error) = result {
        tracing::warn!(
            "cannot keep the rate limits in {}: {error:#}",
            path.display()
        );
    }
}

/// What `provider` last reported, when flemmad kept it.
pub fn last(dirs: &UserDirs, provider: &str) -> Option<Observed> {
    let text = std::fs::read_to_string(file(dirs, provider)?).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_protocol::engine::RateLimitWindow;

    #[test]
    fn the_line_says_the_cache_and_the_cost() {
        let totals = UsageTotals {
            input_tokens: 2168,
            output_tokens: 57,
            cache_read_tokens: 2048,
            cost: Some(0.0018294),
            cache_saved: Some(0.0055296),
            ..UsageTotals::default()
        };
        assert_eq!(
            line(&totals, 0),
            "2168 input (2048 from the cache, 94%), 57 output tokens, $0.0018 (the cache saved $0.0055)"
        );
        let plain = UsageTotals {
            input_tokens: 10,
            output_tokens: 2,
            ..UsageTotals::default()
        };
        assert_eq!(line(&plain, 0), "10 input, 2 output tokens");
    }

    #[test]
    fn windows_say_when_they_reset() {
        let limits = RateLimits {
            windows: vec![
                RateLimitWindow {
                    name: "primary".into(),
                    used_percent: 42.0,
                    window_minutes: Some(300),
                    resets_at: Some(1000 + 3 * 3600 + 12 * 60),
                },
                RateLimitWindow {
                    name: "secondary".into(),
                    used_percent: 12.5,
                    window_minutes: Some(10_080),
                    resets_at: Some(1000 + 5 * 86_400 + 2 * 3600),
                },
            ],
        };
        assert_eq!(
            windows(&limits, 1000),
            "5-hour window 42% used, resets in 3h 12m; weekly window 12.5% used, resets in 5d 2h"
        );
    }
}
