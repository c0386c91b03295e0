//! Provider failures explained: every [`ProviderError`] says what happened and what to do.
//!
//! [`explain_http_error`] reads a non-2xx response (status, headers, body) of any provider;
//! [`stop_warning`] and [`stop_error`] turn a stop reason into the "Response truncated" warning
//! or a refusal error.

use std::time::Duration;

use flemma_conversation::StopReason;
use reqwest::header::HeaderMap;

use crate::credentials::{CredentialError, Secret};
use crate::{BuildError, ProviderKind};

/// How many characters of an unexpected body are quoted in an error.
pub const BODY_EXCERPT_CHARS: usize = 300;

/// What to do about a request that does not fit the model's context window: said by the
/// provider's refusal and by flemmad's own before sending (docs/context.md).
pub const CONTEXT_FIX: &str = "Compact the chat (`flemmad compact FILE` summarises the older turns into the chat and keeps them whole in an archive; `--undo` restores them), remove large tool results or attachments, or use a model with a larger context window, then send again";

/// Everything that can go wrong talking to a provider.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The conversation does not fit the model's context window.
    #[error(
        "{provider}: the conversation is too long for the model's context window ({message}). {}",
        CONTEXT_FIX
    )]
    ContextOverflow {
        /// Provider name.
        provider: &'static str,
        /// The provider's own words.
        message: String,
    },
    /// The provider refused the credential (401/403).
    #[error(
        "{provider} rejected the credential {credential} (HTTP {status}: {message}). Check that {credential} holds a valid, active key with access to this model, then send again"
    )]
    Authentication {
        /// Provider name.
        provider: &'static str,
        /// HTTP status (401 or 403).
        status: u16,
        /// Which credential was used: the environment variable name (never the value).
        credential: String,
        /// The provider's own words.
        message: String,
    },
    /// Rate limited (429) and retries did not help.
    #[error("{provider} rate limit reached (HTTP {status}: {message}).{}{} Wait and send again, or lower the request rate", retry_after_text(.retry_after), limits_text(.limits))]
    RateLimited {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// The provider's own words.
        message: String,
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
        /// The rate-limit headers (`anthropic-ratelimit-*`, `x-ratelimit-*`) as sent.
        limits: Vec<(String, String)>,
    },
    /// The provider is overloaded or failing (5xx, 529) and retries did not help.
    #[error(
        "{provider} is unavailable (HTTP {status}: {message}). This is on the provider's side; try again in a few minutes"
    )]
    Unavailable {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// The provider's own words.
        message: String,
    },
    /// The provider rejected the request (other 4xx).
    #[error("{provider} rejected the request (HTTP {status}: {message}). {advice}")]
    Rejected {
        /// Provider name.
        provider: &'static str,
        /// HTTP status.
        status: u16,
        /// The provider's own words.
        message: String,
        /// What to do about it.
        advice: &'static str,
    },
    /// HTTP 404: the URL called does not exist there (a base URL without `/v1`, a wrong model).
    #[error("{provider} answered HTTP 404 (not found) for {url}: {message}. {hint}")]
    NotFound {
        /// Provider name.
        provider: &'static str,
        /// The URL that was called.
        url: String,
        /// The provider's own words (or the start of its body).
        message: String,
        /// What to check.
        hint: String,
    },
    /// An HTML or non-JSON body where JSON was expected (a proxy, a captive portal, a wrong URL).
    #[error(
        "Unexpected API response: {status} {excerpt} (is the base URL right, and is a proxy in the way?)"
    )]
    UnexpectedResponse {
        /// HTTP status.
        status: u16,
        /// The first 300 characters of the body.
        excerpt: String,
    },
    /// The provider reported an error in the middle of the stream.
    #[error("{provider} reported an error during the reply: {message}.{}", partial_text(*.partial))]
    Stream {
        /// Provider name.
        provider: &'static str,
        /// The provider's own words.
        message: String,
        /// Content had already been streamed.
        partial: bool,
    },
    /// The connection dropped after the reply had started.
    #[error(
        "the connection to {provider} dropped during the reply ({message}); the content received so far may be partial. Send again to continue"
    )]
    Interrupted {
        /// Provider name.
        provider: &'static str,
        /// What the transport said.
        message: String,
    },
    /// A tool call's streamed arguments ran away (flemmad's check, not the provider's words):
    /// the seed's text as it is.
    #[error("{message}")]
    Runaway {
        /// `[error: the model's tool call ran away: …]`.
        message: String,
    },
    /// The watchdog: the provider sent nothing for `parameters.idle_timeout` seconds.
    #[error(
        "{provider} sent nothing for {seconds} s {when} (the watchdog, `parameters.idle_timeout`); the reply was stopped and what arrived before is kept. Send again to retry, or raise `parameters.idle_timeout` for a model that thinks silently for longer"
    )]
    Silent {
        /// Provider name.
        provider: &'static str,
        /// The watchdog's limit.
        seconds: u64,
        /// `before answering` or `in the middle of the reply`.
        when: &'static str,
    },
    /// The provider could not be reached (after retries).
    #[error(
        "could not reach {provider} at {url} ({message}). Check the network and the base URL (config or the *_BASE_URL variable)"
    )]
    Connection {
        /// Provider name.
        provider: &'static str,
        /// The URL tried (never carries credentials).
        url: String,
        /// What the transport said.
        message: String,
    },
    /// The model refused, or a safety filter stopped the reply.
    #[error(
        "the model refused to answer: {reason}. Rephrase the request or remove the content that triggered it"
    )]
    Refusal {
        /// The provider's reason (category, explanation or finish reason).
        reason: String,
    },
    /// The request was cancelled.
    #[error("the request was cancelled")]
    Cancelled,
    /// No credential could be found.
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    /// The ChatGPT login (provider `codex`) cannot be used.
    #[error(transparent)]
    Login(#[from] crate::chatgpt::LoginError),
    /// A subscription's usage is spent or not included (the Codex backend's HTTP 429): not
    /// retried, it says when the window resets.
    #[error("{provider}: {message}")]
    UsageLimit {
        /// Provider name.
        provider: &'static str,
        /// What is spent, and when it resets.
        message: String,
        /// When the spent window resets, in seconds since the Unix epoch.
        resets_at: Option<i64>,
    },
    /// The request could not be built, or a response body could not be read.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The HTTP client could not be set up.
    #[error("could not set up the HTTP client: {0}")]
    Client(String),
}

fn retry_after_text(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(delay) => format!(
            " The provider asks to retry after {} s.",
            delay.as_secs_f64()
        ),
        None => String::new(),
    }
}

fn limits_text(limits: &[(String, String)]) -> String {
    if limits.is_empty() {
        return String::new();
    }
    let list: Vec<String> = limits
        .iter()
        .map(|(name, value)| format!("{name}: {value}"))
        .collect();
    format!(" Limits: {}.", list.join(", "))
}

fn partial_text(partial: bool) -> &'static str {
    if partial {
        " The content received so far may be partial; send again to continue"
    } else {
        " Send again to retry"
    }
}

/// Turns a non-2xx response into a [`ProviderError`]. `credential` names the credential used
/// (the environment variable), `secret` is removed from any text quoted from the body.
pub fn explain_http_error(
    kind: ProviderKind,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    credential: &str,
    secret: Option<&Secret>,
    retry_after: Option<Duration>,
) -> ProviderError {
    let provider = kind.name();
    let text = redact(&String::from_utf8_lossy(body), secret);
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return ProviderError::UnexpectedResponse {
            status,
            excerpt: excerpt(&text),
        };
    };
    let error = json.get("error").unwrap_or(&json);
    // `{"detail": "…"}`: the Codex backend's answer to a body it does not take.
    let message = error
        .get("message")
        .and_then(|m| m.as_str())
        .or_else(|| error.as_str())
        .or_else(|| json.get("detail").and_then(|d| d.as_str()))
        .map(str::to_string);
    let Some(message) = message else {
        return ProviderError::UnexpectedResponse {
            status,
            excerpt: excerpt(&text),
        };
    };
    let code = ["type", "code", "status"]
        .iter()
        .filter_map(|key| error.get(*key))
        .filter_map(|value| value.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let described = if code.is_empty() {
        message.clone()
    } else {
        format!("{code}: {message}")
    };
    if is_context_overflow(status, &code, &message) {
        return ProviderError::ContextOverflow {
            provider,
            message: described,
        };
    }
    // Google answers a bad API key with 400 INVALID_ARGUMENT / reason API_KEY_INVALID.
    let bad_google_key = status == 400
        && (text.contains("API_KEY_INVALID")
            || message.to_ascii_lowercase().contains("api key not valid"));
    match status {
        _ if bad_google_key => ProviderError::Authentication {
            provider,
            status,
            credential: credential.to_string(),
            message: described,
        },
        401 | 403 => ProviderError::Authentication {
            provider,
            status,
            credential: credential.to_string(),
            message: described,
        },
        429 => ProviderError::RateLimited {
            provider,
            status,
            message: described,
            retry_after,
            limits: rate_limit_headers(headers),
        },
        500..=599 => ProviderError::Unavailable {
            provider,
            status,
            message: described,
        },
        400 if kind == ProviderKind::OpenAi && refuses_reasoning(&message) => {
            ProviderError::Rejected {
                provider,
                status,
                message: described,
                advice: "This model takes no reasoning parameters: set `parameters.thinking` to false (`flemma.opt.thinking` in the frontmatter), or add the model to `models` with thinking = false",
            }
        }
        _ => ProviderError::Rejected {
            provider,
            status,
            message: described,
            advice: advice_for(status),
        },
    }
}

/// Explains the Codex backend's refusal of a request because the plan's usage is spent or
/// does not include Codex: what is spent and when it resets (`now`: for "in 2h 14m").
pub fn explain_usage_refusal(
    kind: ProviderKind,
    refusal: &crate::codex::UsageRefusal,
    limits: Option<&flemma_conversation::RateLimits>,
    now: std::time::SystemTime,
) -> ProviderError {
    use crate::codex::UsageRefusal;
    let plan = |plan: &Option<String>| match plan {
        Some(plan) => format!("ChatGPT {plan} plan"),
        None => "ChatGPT plan".to_owned(),
    };
    match refusal {
        UsageRefusal::NotIncluded { plan: name } => ProviderError::UsageLimit {
            provider: kind.name(),
            message: format!(
                "your {} does not include Codex. Use a plan that does, or another provider (`openai` with an API key)",
                plan(name)
            ),
            resets_at: None,
        },
        UsageRefusal::LimitReached {
            plan: name,
            resets_at,
        } => {
            let spent = limits.and_then(flemma_conversation::RateLimits::spent);
            let window = spent.map_or(String::new(), |w| {
                format!(" (its {} window is {}% used)", w.label(), w.used_percent)
            });
            let resets_at = resets_at.or(spent.and_then(|w| w.resets_at));
            let now = now
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let when = match resets_at {
                Some(at) => format!(
                    "it resets {} (at {})",
                    crate::codex::resets(at, now),
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH
                            + Duration::from_secs(u64::try_from(at).unwrap_or_default())
                    )
                ),
                None => "the backend did not say when it resets".to_owned(),
            };
            ProviderError::UsageLimit {
                provider: kind.name(),
                message: format!(
                    "the usage limit of your {} is reached{window}; {when}. Send again then, or switch to another provider meanwhile",
                    plan(name)
                ),
                resets_at,
            }
        }
    }
}

/// Explains an HTTP 404 from `url` (built from `base_url`). `listing` is true for the models
/// request, whose 404 cannot be about the model name.
pub fn explain_not_found(
    kind: ProviderKind,
    base_url: &str,
    url: &str,
    body: &[u8],
    secret: Option<&Secret>,
    listing: bool,
) -> ProviderError {
    let text = redact(&String::from_utf8_lossy(body), secret);
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|json| {
            let error = json.get("error").unwrap_or(&json);
            error
                .get("message")
                .and_then(|m| m.as_str())
                .or_else(|| error.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| excerpt(text.trim()));
    // An empty body would read `…/models?limit=1000: . Check…`.
    let message = if message.trim().is_empty() {
        "the server sent no explanation".to_owned()
    } else {
        message
    };
    let openai_style = matches!(
        kind,
        ProviderKind::OpenAi | ProviderKind::OpenAiCompatible | ProviderKind::Moonshot
    );
    let trimmed = base_url.trim_end_matches('/');
    let has_version = trimmed.rsplit('/').next().is_some_and(|last| {
        last.starts_with('v') && last[1..].starts_with(|c: char| c.is_ascii_digit())
    });
    let mut hint = String::new();
    if openai_style && !has_version {
        hint.push_str(&format!(
            "The base URL {trimmed} has no `/v1`; OpenAI-style servers usually need it (try {trimmed}/v1). "
        ));
    }
    if listing {
        hint.push_str(
            "Check the base URL (config `providers.<name>.base_url` or the *_BASE_URL variable)",
        );
    } else {
        hint.push_str(&format!(
            "Check the base URL and the model name (`flemmad models {}` lists them)",
            kind.name()
        ));
    }
    ProviderError::NotFound {
        provider: kind.name(),
        url: url.to_string(),
        message,
        hint,
    }
}

/// OpenAI's refusal of `reasoning`/`include` on a model without reasoning.
fn refuses_reasoning(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    (message.contains("reasoning") || message.contains("reasoning.encrypted_content"))
        && (message.contains("not supported") || message.contains("unsupported"))
}

fn advice_for(status: u16) -> &'static str {
    match status {
        402 => "Check the account's billing and credit balance",
        404 => "Check the model name (`flemmad models PROVIDER` lists them) and the base URL",
        413 => "The request is too large: remove large attachments or tool results",
        _ => "Check the model name and parameters in the frontmatter or config",
    }
}

fn is_context_overflow(status: u16, code: &str, message: &str) -> bool {
    if !matches!(status, 400 | 413) {
        return false;
    }
    let message = message.to_ascii_lowercase();
    code.contains("context_length_exceeded")
        || [
            "prompt is too long",
            "context length",
            "context window",
            "maximum context",
            "too many tokens",
            "input token count",
            "exceeds the maximum number of tokens",
        ]
        .iter()
        .any(|needle| message.contains(needle))
}

/// The rate-limit headers of a response, in the order received.
pub fn rate_limit_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            name.starts_with("anthropic-ratelimit-") || name.starts_with("x-ratelimit-")
        })
        .filter_map(|(name, value)| {
            Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
        })
        .collect()
}

/// The first [`BODY_EXCERPT_CHARS`] characters of a body, trimmed.
pub fn excerpt(text: &str) -> String {
    text.trim().chars().take(BODY_EXCERPT_CHARS).collect()
}

/// Removes a secret's value from a text (providers sometimes echo part of a key).
pub fn redact(text: &str, secret: Option<&Secret>) -> String {
    match secret {
        Some(secret) if secret.expose().len() >= MIN_REDACTED_SECRET_LEN => {
            redact_whole(text, secret.expose())
        }
        _ => text.to_string(),
    }
}

/// Secrets shorter than this are not real credentials (a test key `k`); replacing them would
/// mangle every word that contains their characters.
pub const MIN_REDACTED_SECRET_LEN: usize = 8;

/// Replaces whole occurrences of `secret`: not where it is part of a longer token.
fn redact_whole(text: &str, secret: &str) -> String {
    let token_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(secret) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + secret.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(token_char) || after.is_some_and(token_char) {
            out.push_str(secret);
        } else {
            out.push_str("[redacted]");
        }
        rest = &rest[at + secret.len()..];
    }
    out.push_str(rest);
    out
}

/// The warning for a reply that stopped early without failing: `max_tokens` → "Response
/// truncated".
pub fn stop_warning(stop: &StopReason) -> Option<String> {
    match stop {
        StopReason::MaxTokens => Some(
            "Response truncated: the model reached the max_tokens limit. Raise max_tokens (e.g. \"80%\") or ask it to continue".to_string(),
        ),
        _ => None,
    }
}

/// The error for a reply the model refused or a safety filter stopped, naming the reason.
pub fn stop_error(stop: &StopReason) -> Option<ProviderError> {
    match stop {
        StopReason::Refusal { reason } => Some(ProviderError::Refusal {
            reason: if reason.is_empty() {
                "refusal".to_string()
            } else {
                reason.clone()
            },
        }),
        StopReason::ContextWindowExceeded => Some(ProviderError::ContextOverflow {
            provider: "the provider",
            message: "the model stopped at the context window limit".to_string(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn explain(kind: ProviderKind, status: u16, headers: &HeaderMap, body: &str) -> ProviderError {
        explain_http_error(
            kind,
            status,
            headers,
            body.as_bytes(),
            "ANTHROPIC_API_KEY",
            Some(&Secret::new("sk-ant-secret-123")),
            None,
        )
    }

    #[test]
    fn context_overflow_advises_trimming() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 205351 tokens > 200000 maximum"},"request_id":"req_1"}"#;
        let error = explain(ProviderKind::Anthropic, 400, &HeaderMap::new(), body);
        assert!(matches!(error, ProviderError::ContextOverflow { .. }));
        let text = error.to_string();
        assert!(text.contains("205351 tokens"), "{text}");
        assert!(text.contains("flemmad compact FILE"), "{text}");

        let body = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let error = explain(ProviderKind::OpenAi, 400, &HeaderMap::new(), body);
        assert!(matches!(error, ProviderError::ContextOverflow { .. }));

        // Gemini's 400 INVALID_ARGUMENT.
        let body = r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#;
        let error = explain(ProviderKind::Gemini, 400, &HeaderMap::new(), body);
        assert!(matches!(error, ProviderError::ContextOverflow { .. }));
        assert!(error.to_string().contains(CONTEXT_FIX), "{error}");
    }

    #[test]
    fn authentication_names_the_variable_never_the_value() {
        let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-secret-123"}}"#;
        let error = explain(ProviderKind::Anthropic, 401, &HeaderMap::new(), body);
        let text = error.to_string();
        assert!(text.contains("ANTHROPIC_API_KEY"), "{text}");
        assert!(text.contains("authentication_error"), "{text}");
        assert!(!text.contains("sk-ant-secret-123"), "{text}");
        assert!(!format!("{error:?}").contains("sk-ant-secret-123"));
    }

    #[test]
    fn rate_limit_lists_the_headers_and_the_wait() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("17"));
        headers.insert(
            "anthropic-ratelimit-requests-remaining",
            HeaderValue::from_static("0"),
        );
        headers.insert(
            "anthropic-ratelimit-requests-reset",
            HeaderValue::from_static("2026-08-21T12:00:17Z"),
        );
        headers.insert(
            "x-ratelimit-remaining-tokens",
            HeaderValue::from_static("0"),
        );
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Please try again later."}}"#;
        let error = explain_http_error(
            ProviderKind::Anthropic,
            429,
            &headers,
            body.as_bytes(),
            "ANTHROPIC_API_KEY",
            None,
            Some(Duration::from_secs(17)),
        );
        let text = error.to_string();
        assert!(text.contains("rate limit"), "{text}");
        assert!(text.contains("retry after 17 s"), "{text}");
        assert!(
            text.contains("anthropic-ratelimit-requests-reset: 2026-08-21T12:00:17Z"),
            "{text}"
        );
        assert!(text.contains("x-ratelimit-remaining-tokens: 0"), "{text}");
    }

    #[test]
    fn html_bodies_are_quoted_up_to_300_characters() {
        let body = format!(
            "<html><head><title>502 Bad Gateway</title></head><body>{}</body></html>",
            "x".repeat(1000)
        );
        let error = explain(ProviderKind::OpenAi, 502, &HeaderMap::new(), &body);
        let ProviderError::UnexpectedResponse { status, excerpt } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(*status, 502);
        assert_eq!(excerpt.chars().count(), 300);
        assert!(
            error
                .to_string()
                .starts_with("Unexpected API response: 502 <html><head><title>502 Bad Gateway")
        );
    }

    #[test]
    fn gemini_and_server_errors() {
        let body = r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#;
        let error = explain(ProviderKind::Gemini, 503, &HeaderMap::new(), body);
        assert!(matches!(
            error,
            ProviderError::Unavailable { status: 503, .. }
        ));
        assert!(
            error
                .to_string()
                .contains("UNAVAILABLE: The model is overloaded")
        );

        let body = r#"{"error":{"code":404,"message":"models/gemini-9 is not found","status":"NOT_FOUND"}}"#;
        let error = explain(ProviderKind::Gemini, 404, &HeaderMap::new(), body);
        assert!(
            error.to_string().contains("Check the model name"),
            "{error}"
        );
    }

    #[test]
    fn stop_reasons() {
        assert!(
            stop_warning(&StopReason::MaxTokens)
                .unwrap()
                .starts_with("Response truncated")
        );
        assert_eq!(stop_warning(&StopReason::EndTurn), None);
        let error = stop_error(&StopReason::Refusal {
            reason: "SAFETY".to_string(),
        })
        .unwrap();
        assert!(error.to_string().contains("SAFETY"));
        assert!(stop_error(&StopReason::ToolUse).is_none());
    }

    #[test]
    fn only_whole_long_secrets_are_redacted() {
        let short = Secret::new("k");
        assert_eq!(
            redact("mock provider key", Some(&short)),
            "mock provider key"
        );
        let key = Secret::new("sk-test-0123456789");
        assert_eq!(
            redact(
                "bad key sk-test-0123456789, and sk-test-0123456789x",
                Some(&key)
            ),
            "bad key [redacted], and sk-test-0123456789x"
        );
    }

    #[test]
    fn not_found_names_the_url_and_a_missing_v1() {
        let error = explain_not_found(
            ProviderKind::OpenAiCompatible,
            "http://localhost:11434",
            "http://localhost:11434/chat/completions",
            b"404 page not found",
            None,
            false,
        );
        let text = error.to_string();
        assert!(
            text.contains("for http://localhost:11434/chat/completions"),
            "{text}"
        );
        assert!(text.contains("has no `/v1`"), "{text}");
        assert!(text.contains("try http://localhost:11434/v1"), "{text}");
        assert!(
            text.contains("`flemmad models openai-compatible`"),
            "{text}"
        );

        let listing = explain_not_found(
            ProviderKind::Moonshot,
            "https://api.moonshot.ai/v1",
            "https://api.moonshot.ai/v1/models",
            br#"{"error":{"message":"no such route"}}"#,
            None,
            true,
        )
        .to_string();
        assert!(listing.contains("no such route"), "{listing}");
        assert!(!listing.contains("/v1`"), "{listing}");
        assert!(!listing.contains("flemmad models"), "{listing}");
    }

    #[test]
    fn a_not_found_with_an_empty_body_says_the_server_gave_no_reason() {
        let text = explain_not_found(
            ProviderKind::OpenAiCompatible,
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.1:8080/v1/models?limit=1000",
            b"",
            None,
            true,
        )
        .to_string();
        assert!(
            text.contains("?limit=1000: the server sent no explanation. Check the base URL"),
            "{text}"
        );
    }

    #[test]
    fn openai_refusing_reasoning_parameters_is_explained() {
        let body = r#"{"error":{"message":"Unsupported parameter: 'reasoning.effort' is not supported with this model.","type":"invalid_request_error","param":"reasoning.effort","code":"unsupported_parameter"}}"#;
        let text = explain(ProviderKind::OpenAi, 400, &HeaderMap::new(), body).to_string();
        assert!(text.contains("takes no reasoning parameters"), "{text}");
        assert!(text.contains("`parameters.thinking`"), "{text}");
    }
}
