//! When and how long to wait before retrying a request (`harness.md` §6).
//!
//! Retried: HTTP 429, 529 and 500-504, and connection errors, only before the first byte of a
//! streamed reply; at most [`RetryPolicy::max_retries`] times, with exponential backoff (base 1 s,
//! cap 30 s, jitter) unless the provider says how long to wait (`retry-after` in seconds or as an
//! HTTP date, `retry-after-ms`, Gemini `details[RetryInfo].retryDelay`).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// Retry settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 3).
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time (default 1 s).
    pub base_delay: Duration,
    /// Longest computed backoff (default 30 s).
    pub max_delay: Duration,
    /// Longest wait the provider may ask for; a longer `retry-after` is not waited for and the
    /// error is reported instead (default 60 s).
    pub max_hinted_delay: Duration,
    /// Spread the computed backoff randomly over its upper quarter downwards (default on).
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_hinted_delay: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The computed backoff before retry number `retry` (1-based): `base × 2^(retry-1)`, capped
    /// at `max_delay`, minus up to 25 % when jitter is on.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exponent = retry.saturating_sub(1).min(20);
        let delay = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        if self.jitter {
            delay.mul_f64(1.0 - 0.25 * fastrand::f64())
        } else {
            delay
        }
    }

    /// How long to wait before retry number `retry`, given the provider's hint. `None`: do not
    /// retry (no retries left, or the provider asks for a longer wait than `max_hinted_delay`).
    pub fn delay_before(&self, retry: u32, hint: Option<Duration>) -> Option<Duration> {
        if retry > self.max_retries {
            return None;
        }
        match hint {
            Some(hint) if hint > self.max_hinted_delay => None,
            Some(hint) => Some(hint),
            None => Some(self.backoff(retry)),
        }
    }
}

/// Statuses worth retrying: rate limited (429), overloaded (529), server errors 500-504.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 429 | 529 | 500..=504)
}

/// The wait a provider asks for, from the response headers (`retry-after-ms`, then
/// `retry-after` as seconds or an HTTP date relative to `now`) or a Gemini error body
/// (`error.details[@type=…RetryInfo].retryDelay`, e.g. `"41s"`).
pub fn retry_hint(headers: &HeaderMap, body: &[u8], now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    if let Some(value) = header("retry-after") {
        if let Ok(seconds) = value.parse::<f64>()
            && seconds.is_finite()
            && seconds >= 0.0
        {
            return Some(Duration::from_secs_f64(seconds));
        }
        if let Ok(date) = httpdate::parse_http_date(value) {
            return Some(date.duration_since(now).unwrap_or(Duration::ZERO));
        }
    }
    gemini_retry_delay(body)
}

/// `error.details[…RetryInfo].retryDelay` of a Google error body.
fn gemini_retry_delay(body: &[u8]) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let details = value.get("error")?.get("details")?.as_array()?;
    details
        .iter()
        .filter(|detail| {
            detail
                .get("@type")
                .and_then(|t| t.as_str())
                .is_some_and(|t| t.ends_with("RetryInfo"))
        })
        .find_map(|detail| parse_google_duration(detail.get("retryDelay")?.as_str()?))
}

/// Parses a protobuf JSON duration (`"41s"`, `"0.01s"`).
fn parse_google_duration(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retryable_statuses() {
        for status in [429, 529, 500, 501, 502, 503, 504] {
            assert!(is_retryable_status(status), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 413, 505, 520] {
            assert!(!is_retryable_status(status), "{status}");
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        assert_eq!(policy.backoff(1), Duration::from_secs(1));
        assert_eq!(policy.backoff(2), Duration::from_secs(2));
        assert_eq!(policy.backoff(3), Duration::from_secs(4));
        assert_eq!(policy.backoff(6), Duration::from_secs(30));
        assert_eq!(policy.backoff(60), Duration::from_secs(30));
    }

    #[test]
    fn jitter_stays_within_the_upper_quarter() {
        let policy = RetryPolicy::default();
        for _ in 0..200 {
            let delay = policy.backoff(3);
            assert!(delay <= Duration::from_secs(4));
            assert!(delay >= Duration::from_secs(3));
        }
    }

    #[test]
    fn hints_win_and_retries_run_out() {
        let policy = RetryPolicy::default();
        let five = Some(Duration::from_secs(5));
        assert_eq!(policy.delay_before(1, five), five);
        assert_eq!(policy.delay_before(3, five), five);
        assert_eq!(policy.delay_before(4, five), None);
        assert_eq!(
            policy.delay_before(1, Some(Duration::from_secs(3600))),
            None
        );
        assert_eq!(RetryPolicy::none().delay_before(1, None), None);
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(
            retry_hint(&headers(&[("retry-after", "17")]), b"", now),
            Some(Duration::from_secs(17))
        );
        assert_eq!(
            retry_hint(
                &headers(&[("retry-after", "17"), ("retry-after-ms", "1500")]),
                b"",
                now
            ),
            Some(Duration::from_millis(1500))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(42));
        assert_eq!(
            retry_hint(&headers(&[("retry-after", &date)]), b"", now),
            Some(Duration::from_secs(42))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(42));
        assert_eq!(
            retry_hint(&headers(&[("retry-after", &past)]), b"", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_hint(&headers(&[("retry-after", "soon")]), b"", now),
            None
        );
    }

    #[test]
    fn gemini_retry_info() {
        let body = br#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED",
          "details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},
                     {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]}}"#;
        assert_eq!(
            retry_hint(&HeaderMap::new(), body, SystemTime::now()),
            Some(Duration::from_secs(41))
        );
        let body = br#"{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.01s"}]}}"#;
        assert_eq!(
            retry_hint(&HeaderMap::new(), body, SystemTime::now()),
            Some(Duration::from_millis(10))
        );
        assert_eq!(
            retry_hint(&HeaderMap::new(), b"<html>", SystemTime::now()),
            None
        );
    }
}
