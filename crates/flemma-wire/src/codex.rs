//! What the Codex backend (a ChatGPT subscription) says besides the Responses stream: the
//! rate-limit windows in its response headers and the body of a request refused because a
//! window is spent. Pure: the edge hands the headers and the body in.
//!
//! The names are the Codex CLI's (`codex-rs/codex-api/src/rate_limits.rs`,
//! `api_bridge.rs`): `x-codex-primary-used-percent`, `x-codex-primary-window-minutes`,
//! `x-codex-primary-reset-at` (seconds since the Unix epoch), the same for `secondary`; an HTTP
//! 429 with `{"error": {"type": "usage_limit_reached", "plan_type", "resets_at"}}` (or
//! `usage_not_included` when the plan has no Codex).

use flemma_conversation::{RateLimitWindow, RateLimits};
use serde_json::Value;

/// The windows the backend reports, in order.
const WINDOWS: [&str; 2] = ["primary", "secondary"];

/// The rate-limit windows of a response's headers (names in any case), `None` when it reports
/// none.
pub fn rate_limits(headers: &[(String, String)]) -> Option<RateLimits> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim())
    };
    let windows: Vec<RateLimitWindow> = WINDOWS
        .iter()
        .filter_map(|window| {
            let used_percent = header(&format!("x-codex-{window}-used-percent"))?
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())?;
            Some(RateLimitWindow {
                name: (*window).to_owned(),
                used_percent,
                window_minutes: header(&format!("x-codex-{window}-window-minutes"))
                    .and_then(|v| v.parse().ok()),
                resets_at: header(&format!("x-codex-{window}-reset-at"))
                    .and_then(|v| v.parse().ok()),
            })
        })
        .collect();
    (!windows.is_empty()).then_some(RateLimits { windows })
}

/// Why the backend refused a request with HTTP 429.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageRefusal {
    /// A window of the plan is spent until `resets_at` (seconds since the Unix epoch).
    LimitReached {
        /// The plan (`plus`, `pro`, `team`…), when the body names it.
        plan: Option<String>,
        /// When the spent window resets.
        resets_at: Option<i64>,
    },
    /// The plan does not include Codex.
    NotIncluded {
        /// The plan, when the body names it.
        plan: Option<String>,
    },
}

/// The refusal a 429 body describes; `None` for any other body (a plain rate limit).
pub fn usage_refusal(body: &[u8]) -> Option<UsageRefusal> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let error = json.get("error")?;
    let plan = error
        .get("plan_type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match error.get("type").and_then(Value::as_str)? {
        "usage_limit_reached" => Some(UsageRefusal::LimitReached {
            plan,
            resets_at: error.get("resets_at").and_then(Value::as_i64),
        }),
        "usage_not_included" => Some(UsageRefusal::NotIncluded { plan }),
        _ => None,
    }
}

/// A length of time in words, to the minute: `4m`, `3h 12m`, `5d 2h`.
pub fn span(minutes: i64) -> String {
    let minutes = minutes.max(0);
    match (minutes / 1440, minutes / 60 % 24) {
        (0, 0) => format!("{minutes}m"),
        (0, hours) => format!("{hours}h {}m", minutes % 60),
        (days, hours) => format!("{days}d {hours}h"),
    }
}

/// When `at` comes, seen from `now` (both in seconds since the Unix epoch): `in 3h 12m`
/// (minutes rounded up), or `now` once it passed.
pub fn resets(at: i64, now: i64) -> String {
    let seconds = at - now;
    if seconds <= 0 {
        return "now".to_owned();
    }
    format!("in {}", span((seconds + 59) / 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn both_windows_are_read() {
        let limits = rate_limits(&headers(&[
            ("X-Codex-Primary-Used-Percent", "42.5"),
            ("x-codex-primary-window-minutes", "300"),
            ("x-codex-primary-reset-at", "1800000000"),
            ("x-codex-secondary-used-percent", "12"),
            ("x-codex-secondary-window-minutes", "10080"),
            ("content-type", "text/event-stream"),
        ]))
        .unwrap();
        assert_eq!(limits.windows.len(), 2);
        assert_eq!(limits.windows[0].used_percent, 42.5);
        assert_eq!(limits.windows[0].window_minutes, Some(300));
        assert_eq!(limits.windows[0].resets_at, Some(1_800_000_000));
        assert_eq!(limits.windows[0].label(), "5-hour");
        assert_eq!(limits.windows[1].label(), "weekly");
        assert_eq!(limits.windows[1].resets_at, None);
        assert_eq!(rate_limits(&headers(&[("x-request-id", "r")])), None);
        assert_eq!(
            rate_limits(&headers(&[("x-codex-primary-used-percent", "lots")])),
            None
        );
    }

    #[test]
    fn refusals_are_read_from_the_body() {
        let body = br#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":1800000000}}"#;
        assert_eq!(
            usage_refusal(body),
            Some(UsageRefusal::LimitReached {
                plan: Some("plus".into()),
                resets_at: Some(1_800_000_000)
            })
        );
        assert_eq!(
            usage_refusal(br#"{"error":{"type":"usage_not_included"}}"#),
            Some(UsageRefusal::NotIncluded { plan: None })
        );
        assert_eq!(
            usage_refusal(br#"{"error":{"type":"rate_limit_exceeded"}}"#),
            None
        );
        assert_eq!(usage_refusal(b"<html>"), None);
    }

    #[test]
    fn times_in_words() {
        assert_eq!(resets(100, 200), "now");
        assert_eq!(resets(250, 200), "in 1m");
        assert_eq!(resets(1000 + 3 * 3600 + 12 * 60, 1000), "in 3h 12m");
        assert_eq!(resets(1000 + 5 * 86_400 + 2 * 3600, 1000), "in 5d 2h");
    }
}
