//! A ChatGPT account behind the Codex backend: what provider `codex` talks to with the login
//! `codex login` leaves in `auth.json`.
//!
//! * `POST /backend-api/codex/responses`: the OpenAI Responses stream as the Codex backend
//!   serves it. The request must carry the account's current access token (`Authorization:
//!   Bearer`, a JWT that has not expired) and its `chatgpt-account-id`; the body must have
//!   `instructions`, `store: false`, `stream: true`, and none of the parameters the backend
//!   refuses (`max_output_tokens`, `temperature`, `top_p`); every reasoning item sent back must
//!   carry encrypted content this server issued. Every answer has the rate-limit headers of
//!   the account's two windows (`x-codex-primary-*`: 5 hours, `x-codex-secondary-*`: a week);
//!   when a window is spent the request gets HTTP 429 `usage_limit_reached` with `resets_at`.
//! * `POST /oauth/token`: the refresh of the Codex CLI (`{"client_id", "grant_type":
//!   "refresh_token", "refresh_token"}` as JSON): a good refresh token gets a new access token
//!   and a new refresh token (the old one is used up: presenting it again gets HTTP 401
//!   `refresh_token_reused`).
//!
//! A test logs in with [`crate::MockProvider::chatgpt_login`] and writes
//! [`ChatGptLogin::auth_json`] where the client reads it.

use std::collections::HashSet;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::formats::{Reply, unix_now};

/// The OAuth client of the Codex CLI (the refresh must name it).
pub const CODEX_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";

/// How long an access token the server issues lives.
const ACCESS_LIFETIME_SECS: u64 = 3600;

/// The tokens of a login, as `codex login` writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatGptLogin {
    /// A JWT naming the account (`https://api.openai.com/auth.chatgpt_account_id`).
    pub id_token: String,
    /// A JWT with its `exp`.
    pub access_token: String,
    /// Opaque, good for one refresh.
    pub refresh_token: String,
    /// The ChatGPT account (workspace) id.
    pub account_id: String,
}

impl ChatGptLogin {
    /// The `auth.json` the Codex CLI writes for this login (pretty JSON, `last_refresh` in
    /// RFC 3339).
    pub fn auth_json(&self) -> String {
        let value = json!({
            "OPENAI_API_KEY": null,
            "tokens": {
                "id_token": self.id_token,
                "access_token": self.access_token,
                "refresh_token": self.refresh_token,
                "account_id": self.account_id,
            },
            "last_refresh": "2026-01-01T00:00:00.000000Z",
        });
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }
}

/// One rate-limit window of the account.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    pub used_percent: f64,
    pub minutes: u64,
    /// Seconds from now until it resets.
    pub resets_in: u64,
}

/// The account's state.
#[derive(Debug)]
pub(crate) struct Account {
    pub account_id: String,
    pub plan: String,
    access_token: Option<String>,
    access_expires: u64,
    refresh_token: Option<String>,
    used_refresh_tokens: HashSet<String>,
    issued: u64,
    /// Encrypted reasoning this server gave out (only these may come back).
    pub reasoning: HashSet<String>,
    pub windows: [Window; 2],
    /// The bodies of the refresh requests, oldest first.
    pub refreshes: Vec<String>,
}

impl Default for Account {
    fn default() -> Self {
        Account {
            account_id: "acct-mock-7f3a".into(),
            plan: "plus".into(),
            access_token: None,
            access_expires: 0,
            refresh_token: None,
            used_refresh_tokens: HashSet::new(),
            issued: 0,
            reasoning: HashSet::new(),
            windows: [
                Window {
                    used_percent: 12.0,
                    minutes: 300,
                    resets_in: 2 * 3600 + 14 * 60,
                },
                Window {
                    used_percent: 3.0,
                    minutes: 10_080,
                    resets_in: 4 * 86_400 + 5 * 3600,
                },
            ],
            refreshes: Vec::new(),
        }
    }
}

fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An unsigned-looking JWT with `claims` (the client does not verify signatures; the server
/// compares whole tokens).
fn jwt(claims: &Value) -> String {
    format!(
        "{}.{}.{}",
        base64url(br#"{"alg":"RS256","typ":"JWT"}"#),
        base64url(claims.to_string().as_bytes()),
        base64url(b"mock-signature")
    )
}

impl Account {
    /// Issues a new login (the previous tokens stop working); `expired`: its access token has
    /// already expired, so the first request must refresh it.
    pub fn log_in(&mut self, expired: bool) -> ChatGptLogin {
        let (access_token, refresh_token) = self.issue();
        if expired {
            self.access_expires = unix_now().saturating_sub(60);
            self.access_token = Some(self.access_token_with_exp(self.access_expires));
        }
        ChatGptLogin {
            id_token: jwt(&json!({
                "email": "me@example.com",
                "https://api.openai.com/auth": {
                    "chatgpt_account_id": self.account_id,
                    "chatgpt_plan_type": self.plan,
                },
            })),
            access_token: self.access_token.clone().unwrap_or(access_token),
            refresh_token,
            account_id: self.account_id.clone(),
        }
    }

    fn access_token_with_exp(&self, exp: u64) -> String {
        jwt(&json!({
            "exp": exp,
            "n": self.issued,
            "https://api.openai.com/auth": {"chatgpt_account_id": self.account_id},
        }))
    }

    /// A new access and refresh token pair.
    fn issue(&mut self) -> (String, String) {
        self.issued += 1;
        self.access_expires = unix_now() + ACCESS_LIFETIME_SECS;
        let access = self.access_token_with_exp(self.access_expires);
        let refresh = format!("rt-mock-{}", self.issued);
        if let Some(old) = self.refresh_token.replace(refresh.clone()) {
            self.used_refresh_tokens.insert(old);
        }
        self.access_token = Some(access.clone());
        (access, refresh)
    }

    /// `POST /oauth/token`.
    pub fn refresh(&mut self, body: &str) -> Reply {
        self.refreshes.push(body.to_owned());
        let refused = |status: u16, code: &str, message: &str| {
            Reply::json(
                status,
                vec![],
                &json!({"error": {"message": message, "type": "invalid_request_error", "code": code}}),
            )
        };
        let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let field = |key: &str| request.get(key).and_then(Value::as_str).unwrap_or_default();
        if field("client_id") != CODEX_CLIENT_ID {
            return refused(400, "invalid_client", "Unknown client_id.");
        }
        if field("grant_type") != "refresh_token" {
            return refused(
                400,
                "unsupported_grant_type",
                "grant_type must be refresh_token.",
            );
        }
        let presented = field("refresh_token");
        if self.used_refresh_tokens.contains(presented) {
            return refused(
                401,
                "refresh_token_reused",
                "Your refresh token has already been used to generate a new access token. Please try signing in again.",
            );
        }
        if self.refresh_token.as_deref() != Some(presented) || presented.is_empty() {
            return refused(
                401,
                "refresh_token_invalidated",
                "Your refresh token has been invalidated. Please try signing in again.",
            );
        }
        let (access_token, refresh_token) = self.issue();
        let id_token = jwt(&json!({
            "https://api.openai.com/auth": {
                "chatgpt_account_id": self.account_id,
                "chatgpt_plan_type": self.plan,
            },
        }));
        Reply::json(
            200,
            vec![],
            &json!({
                "id_token": id_token,
                "access_token": access_token,
                "refresh_token": refresh_token,
                "expires_in": ACCESS_LIFETIME_SECS,
            }),
        )
    }

    /// Why the request's credentials are refused, if they are.
    pub fn refuse_credentials(&self, bearer: Option<&str>, account: Option<&str>) -> Option<Reply> {
        let unauthorized = |message: &str, code: &str| {
            Reply::json(
                401,
                vec![],
                &json!({"error": {"message": message, "type": "invalid_request_error", "code": code}}),
            )
        };
        let Some(bearer) = bearer else {
            return Some(unauthorized(
                "Missing bearer authentication in header.",
                "missing_authorization",
            ));
        };
        if self.access_token.as_deref() != Some(bearer) {
            return Some(unauthorized(
                "Could not parse your authentication token. Please try signing in again.",
                "invalid_token",
            ));
        }
        if self.access_expires <= unix_now() {
            return Some(unauthorized(
                "Provided authentication token is expired. Please try signing in again.",
                "token_expired",
            ));
        }
        if account != Some(self.account_id.as_str()) {
            return Some(Reply::json(
                403,
                vec![],
                &json!({"error": {"message": "The chatgpt-account-id header does not name the token's workspace.", "type": "invalid_request_error", "code": "account_mismatch"}}),
            ));
        }
        None
    }

    /// The `x-codex-*` headers of the account's windows.
    pub fn rate_limit_headers(&self) -> Vec<(String, String)> {
        let now = unix_now();
        let mut headers = Vec::new();
        for (name, window) in ["primary", "secondary"].iter().zip(self.windows) {
            headers.push((
                format!("x-codex-{name}-used-percent"),
                format!("{}", window.used_percent),
            ));
            headers.push((
                format!("x-codex-{name}-window-minutes"),
                window.minutes.to_string(),
            ));
            headers.push((
                format!("x-codex-{name}-reset-at"),
                (now + window.resets_in).to_string(),
            ));
        }
        headers
    }

    /// HTTP 429 `usage_limit_reached` when a window is spent.
    pub fn refuse_spent(&self) -> Option<Reply> {
        let spent = self.windows.iter().find(|w| w.used_percent >= 100.0)?;
        let resets_at = unix_now() + spent.resets_in;
        let mut reply = Reply::json(
            429,
            self.rate_limit_headers(),
            &json!({"error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": self.plan,
                "resets_at": resets_at,
                "resets_in_seconds": spent.resets_in,
            }}),
        );
        reply
            .headers
            .push(("x-codex-active-limit".into(), "codex".into()));
        Some(reply)
    }
}

/// The backend's 400 for a body it does not take, if this one is such.
pub(crate) fn refuse_body(body: &Value, known_reasoning: &HashSet<String>) -> Option<Reply> {
    let detail = |message: String| Some(Reply::json(400, vec![], &json!({"detail": message})));
    if body.get("model").and_then(Value::as_str).is_none() {
        return detail("Model is required".into());
    }
    if body
        .get("instructions")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return detail("Instructions are required".into());
    }
    if body.get("store") != Some(&json!(false)) {
        return detail("Store must be set to false".into());
    }
    if body.get("stream") != Some(&json!(true)) {
        return detail("Stream must be set to true".into());
    }
    for refused in [
        "max_output_tokens",
        "temperature",
        "top_p",
        "previous_response_id",
    ] {
        if body.get(refused).is_some() {
            return detail(format!("Unsupported parameter: {refused}"));
        }
    }
    let items = body.get("input").and_then(Value::as_array)?;
    for item in items {
        if item.get("type").and_then(Value::as_str) != Some("reasoning") {
            continue;
        }
        let id = item.get("id").and_then(Value::as_str).unwrap_or("?");
        let verified = item
            .get("encrypted_content")
            .and_then(Value::as_str)
            .is_some_and(|blob| known_reasoning.contains(blob));
        if !verified {
            return Some(Reply::json(
                400,
                vec![],
                &json!({"error": {
                    "message": format!("The encrypted content for item {id} could not be verified."),
                    "type": "invalid_request_error",
                    "param": null,
                    "code": "invalid_encrypted_content",
                }}),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_rotates_the_tokens_and_a_used_one_is_refused() {
        let mut account = Account::default();
        let login = account.log_in(true);
        assert!(
            account
                .refuse_credentials(Some(&login.access_token), Some(&login.account_id))
                .is_some(),
            "an expired token is refused"
        );
        let body = json!({"client_id": CODEX_CLIENT_ID, "grant_type": "refresh_token", "refresh_token": login.refresh_token}).to_string();
        let fresh = account.refresh(&body);
        assert_eq!(fresh.status, 200);
        let fresh: Value = serde_json::from_slice(&fresh.frames[0]).unwrap();
        let access = fresh["access_token"].as_str().unwrap();
        assert!(
            account
                .refuse_credentials(Some(access), Some(&login.account_id))
                .is_none()
        );
        assert_eq!(
            account.refresh(&body).status,
            401,
            "the old refresh token is used up"
        );
    }

    #[test]
    fn the_backend_refuses_what_it_does_not_take() {
        let known = HashSet::new();
        let good = json!({"model": "gpt-5.5", "instructions": "x", "store": false, "stream": true, "input": []});
        assert!(refuse_body(&good, &known).is_none());
        let mut bad = good.clone();
        bad["max_output_tokens"] = json!(100);
        assert_eq!(refuse_body(&bad, &known).map(|r| r.status), Some(400));
        let mut unknown = good;
        unknown["input"] =
            json!([{"type": "reasoning", "id": "rs_1", "encrypted_content": "forged"}]);
        assert_eq!(refuse_body(&unknown, &known).map(|r| r.status), Some(400));
    }
}
