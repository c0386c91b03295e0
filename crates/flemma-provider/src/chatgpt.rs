//! The ChatGPT login of the Codex CLI, which provider `codex` uses instead of an API key.
//!
//! `codex login` writes `$CODEX_HOME/auth.json` (`~/.codex/auth.json` by default): the
//! OAuth tokens of the user's ChatGPT account (`tokens.id_token`, `tokens.access_token`,
//! `tokens.refresh_token`, `tokens.account_id`) and `last_refresh`. flemmad reads the file on
//! every request (the Codex CLI may have refreshed it), and when the access token has expired
//! (its JWT `exp`), or the backend refuses it, refreshes it as the Codex CLI does: `POST
//! https://auth.openai.com/oauth/token` with `{"client_id", "grant_type": "refresh_token",
//! "refresh_token"}` (`CODEX_REFRESH_TOKEN_URL_OVERRIDE` replaces the URL, as for the Codex
//! CLI), and writes the new tokens back into the same file, keeping every other field, with a
//! new `last_refresh`, so that both programs keep working: refresh tokens are used once, and the
//! one on disk must be the newest. The file is replaced atomically (a temporary file in the
//! same folder, `0600`, synced, renamed over it; a symbolic link is followed, not replaced).
//!
//! Before refreshing, the file is read again: when its access token is no longer the one that
//! expired or was refused, another program refreshed it and that one is used.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::environment::{CredentialEnvironment, Secret};

/// The Codex CLI's token endpoint.
pub const REFRESH_URL: &str = "https://auth.openai.com/oauth/token";
/// The variable that replaces [`REFRESH_URL`] (the Codex CLI reads the same one).
pub const REFRESH_URL_OVERRIDE: &str = "CODEX_REFRESH_TOKEN_URL_OVERRIDE";
/// The OAuth client of the Codex CLI, whose tokens `codex login` issued.
pub const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";

/// A token that expires within this margin is refreshed before it is used.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// What a request to the Codex backend authenticates with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatGptTokens {
    /// `Authorization: Bearer …`.
    pub access_token: Secret,
    /// `chatgpt-account-id` (the workspace), when the login names one.
    pub account_id: Option<String>,
}

/// Why the ChatGPT login cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// No `auth.json`.
    #[error(
        "not logged in to ChatGPT: {} does not exist. Run `codex login` (the Codex CLI) and sign in with your ChatGPT account, then send again (if the Codex CLI keeps its login in the keyring, set `cli_auth_credentials_store = \"file\"` in ~/.codex/config.toml and log in again; `secrets.chatgpt.auth_file` names another file)",
        path.display()
    )]
    NotLoggedIn {
        /// Where the login was looked for.
        path: PathBuf,
    },
    /// The file holds an API key, not a ChatGPT login.
    #[error(
        "{} holds an OpenAI API key, not a ChatGPT login: run `codex login` and choose \"Sign in with ChatGPT\" to use your subscription, or use provider `openai` with the key",
        path.display()
    )]
    ApiKeyOnly {
        /// The file.
        path: PathBuf,
    },
    /// The file cannot be read or is not what `codex login` writes.
    #[error(
        "the ChatGPT login in {} cannot be used ({message}); run `codex login` again",
        path.display()
    )]
    Unusable {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The token endpoint refused the refresh token: the login is over.
    #[error(
        "your ChatGPT login could not be refreshed ({message}); run `codex login` again, then send again"
    )]
    RefreshRefused {
        /// The endpoint's words.
        message: String,
    },
    /// The token endpoint could not be reached or answered something else.
    #[error(
        "the ChatGPT access token expired and refreshing it failed ({message}); check the network and send again"
    )]
    RefreshFailed {
        /// What went wrong.
        message: String,
    },
    /// The refreshed tokens could not be written back.
    #[error(
        "the ChatGPT login was refreshed but {} could not be updated ({message}); the Codex CLI may need `codex login` again. Check the file's folder is writable",
        path.display()
    )]
    WriteBack {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Where the login is: the configured file (`secrets.chatgpt.auth_file`, `~/` expanded), else
/// `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`; `None` without a home directory.
pub fn auth_file(configured: Option<&str>, environment: &CredentialEnvironment) -> Option<PathBuf> {
    let home = environment
        .var("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    if let Some(path) = configured.map(str::trim).filter(|p| !p.is_empty()) {
        return match path.strip_prefix("~/") {
            Some(rest) => home.map(|home| home.join(rest)),
            None => Some(PathBuf::from(path)),
        };
    }
    if let Some(codex_home) = environment.var("CODEX_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(codex_home).join("auth.json"));
    }
    home.map(|home| home.join(".codex").join("auth.json"))
}

/// The login of one `auth.json`, shared by every request of a process (refreshes are one at a
/// time).
#[derive(Debug)]
pub struct ChatGptLogin {
    path: PathBuf,
    refresh_url: String,
    refreshing: tokio::sync::Mutex<()>,
}

/// The file as read: its whole JSON (written back with every field kept) and its tokens.
struct AuthFile {
    json: Value,
    access_token: String,
    refresh_token: String,
    account_id: Option<String>,
}

impl ChatGptLogin {
    /// The login in `path`, refreshed at `refresh_url`.
    pub fn new(path: PathBuf, refresh_url: impl Into<String>) -> Self {
        ChatGptLogin {
            path,
            refresh_url: refresh_url.into(),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The login of `environment` ([`auth_file`], [`REFRESH_URL_OVERRIDE`]).
    pub fn from_environment(
        configured: Option<&str>,
        environment: &CredentialEnvironment,
    ) -> Option<Self> {
        let path = auth_file(configured, environment)?;
        let refresh_url = environment
            .var(REFRESH_URL_OVERRIDE)
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .unwrap_or(REFRESH_URL);
        Some(Self::new(path, refresh_url))
    }

    /// The file the login is read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the login can be used, without refreshing it: `Ok(true)` when its access token
    /// has expired (the next request refreshes it), `Ok(false)` when it is current.
    pub fn check(&self) -> Result<bool, LoginError> {
        let file = self.read()?;
        Ok(self.stale(&file, None))
    }

    /// Tokens for a request: the file's, refreshed first when the access token has expired
    /// or is `refused` (the one the backend just answered 401 to).
    pub async fn tokens(
        &self,
        http: &reqwest::Client,
        refused: Option<&Secret>,
    ) -> Result<ChatGptTokens, LoginError> {
        let file = self.read()?;
        if !self.stale(&file, refused) {
            return Ok(file.tokens());
        }
        let _one_at_a_time = self.refreshing.lock().await;
        // Another request of this process, or the Codex CLI, may have refreshed meanwhile.
        let file = self.read()?;
        if !self.stale(&file, refused) {
            return Ok(file.tokens());
        }
        let fresh = match self.refresh(http, &file.refresh_token).await {
            Ok(fresh) => fresh,
            Err(refused @ LoginError::RefreshRefused { .. }) => {
                return self.refreshed_elsewhere(&file, refused).await;
            }
            Err(error) => return Err(error),
        };
        self.write_back(&fresh)
    }

    /// The refresh token was refused: another program (the Codex CLI, another flemmad) may
    /// have used it a moment earlier and be writing its new tokens. Their tokens are used
    /// when they appear within a second; else the refusal stands.
    async fn refreshed_elsewhere(
        &self,
        before: &AuthFile,
        refused: LoginError,
    ) -> Result<ChatGptTokens, LoginError> {
        for _ in 0..5 {
            if let Ok(now) = self.read()
                && now.refresh_token != before.refresh_token
                && !self.stale(&now, None)
            {
                return Ok(now.tokens());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(refused)
    }

    fn stale(&self, file: &AuthFile, refused: Option<&Secret>) -> bool {
        refused.is_some_and(|token| token.expose() == file.access_token)
            || expires_at(&file.access_token)
                .is_some_and(|at| at <= SystemTime::now() + EXPIRY_MARGIN)
    }

    fn read(&self) -> Result<AuthFile, LoginError> {
        let unusable = |message: String| LoginError::Unusable {
            path: self.path.clone(),
            message,
        };
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(LoginError::NotLoggedIn {
                    path: self.path.clone(),
                });
            }
            Err(error) => return Err(unusable(error.to_string())),
        };
        let json: Value = serde_json::from_str(&text)
            .map_err(|error| unusable(format!("it is not JSON: {error}")))?;
        let tokens = json.get("tokens").filter(|t| t.is_object());
        let text_of = |key: &str| {
            tokens
                .and_then(|t| t.get(key))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let Some(access_token) = text_of("access_token") else {
            let has_key = json
                .get("OPENAI_API_KEY")
                .and_then(Value::as_str)
                .is_some_and(|k| !k.is_empty());
            return Err(if has_key {
                LoginError::ApiKeyOnly {
                    path: self.path.clone(),
                }
            } else {
                unusable("it has no `tokens.access_token`".into())
            });
        };
        let account_id = text_of("account_id").or_else(|| {
            text_of("id_token")
                .and_then(|jwt| claims(&jwt))
                .and_then(|claims| {
                    claims
                        .get("https://api.openai.com/auth")?
                        .get("chatgpt_account_id")?
                        .as_str()
                        .map(str::to_owned)
                })
        });
        Ok(AuthFile {
            access_token,
            refresh_token: text_of("refresh_token").unwrap_or_default(),
            account_id,
            json,
        })
    }

    async fn refresh(
        &self,
        http: &reqwest::Client,
        refresh_token: &str,
    ) -> Result<Value, LoginError> {
        if refresh_token.is_empty() {
            return Err(LoginError::RefreshRefused {
                message: format!("{} has no refresh token", self.path.display()),
            });
        }
        let failed = |message: String| LoginError::RefreshFailed { message };
        let response = http
            .post(&self.refresh_url)
            .header("content-type", "application/json")
            .json(&json!({
                "client_id": CLIENT_ID,
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
            }))
            .send()
            .await
            .map_err(|error| failed(error.to_string()))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|error| failed(error.to_string()))?;
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if !(200..300).contains(&status) {
            let code = json.as_ref().and_then(error_code);
            let refused = status == 401
                || matches!(
                    code.as_deref(),
                    Some(
                        "refresh_token_expired"
                            | "refresh_token_reused"
                            | "refresh_token_invalidated"
                    )
                );
            let message = match code.as_deref() {
                Some("refresh_token_expired") => "the refresh token has expired".to_owned(),
                Some("refresh_token_reused") => {
                    "the refresh token was already used, by another program or an older copy of the file".to_owned()
                }
                Some("refresh_token_invalidated") => "the refresh token was revoked".to_owned(),
                Some(code) => format!("HTTP {status}: {code}"),
                None => format!("HTTP {status}"),
            };
            return Err(if refused {
                LoginError::RefreshRefused { message }
            } else {
                failed(message)
            });
        }
        match json {
            Some(json)
                if json
                    .get("access_token")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.is_empty()) =>
            {
                Ok(json)
            }
            _ => Err(failed(format!(
                "the token endpoint answered without an access token: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ))),
        }
    }

    /// Writes the refreshed tokens into the file as it is now (other fields kept, new
    /// `last_refresh`), and returns them.
    fn write_back(&self, fresh: &Value) -> Result<ChatGptTokens, LoginError> {
        let failed = |message: String| LoginError::WriteBack {
            path: self.path.clone(),
            message,
        };
        let mut file = self.read()?;
        let Some(tokens) = file.json.get_mut("tokens").and_then(Value::as_object_mut) else {
            return Err(failed("it no longer has `tokens`".into()));
        };
        for key in ["id_token", "access_token", "refresh_token"] {
            if let Some(value) = fresh
                .get(key)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
            {
                tokens.insert(key.into(), json!(value));
            }
        }
        if let Some(object) = file.json.as_object_mut() {
            object.insert("last_refresh".into(), json!(rfc3339(SystemTime::now())));
        }
        let text =
            serde_json::to_string_pretty(&file.json).map_err(|error| failed(error.to_string()))?;
        write_private(&self.path, &text).map_err(|error| failed(error.to_string()))?;
        let file = self.read()?;
        Ok(file.tokens())
    }
}

impl AuthFile {
    fn tokens(&self) -> ChatGptTokens {
        ChatGptTokens {
            access_token: Secret::new(self.access_token.clone()),
            account_id: self.account_id.clone(),
        }
    }
}

/// The `error.code` (or `error` when it is a string, or `code`) of a token endpoint's answer.
fn error_code(json: &Value) -> Option<String> {
    let error = json.get("error");
    error
        .and_then(|e| e.get("code"))
        .or(error.filter(|e| e.is_string()))
        .or_else(|| json.get("code"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
}

/// The claims of a JWT (its payload, not verified: the backend verifies it).
fn claims(jwt: &str) -> Option<Value> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// When a JWT access token expires (its `exp`), when it says.
fn expires_at(jwt: &str) -> Option<SystemTime> {
    let exp = claims(jwt)?.get("exp")?.as_u64()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(exp))
}

/// Replaces `path` with `text`: a temporary `0600` file in the same folder, synced, renamed
/// over it (a symbolic link is followed: its target is replaced).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // tempfile creates the file 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".auth.json.")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(&target).map_err(|error| error.error)?;
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
    Ok(())
}

/// RFC 3339 in UTC with microseconds (`2026-07-01T12:34:56.123456Z`), as `last_refresh` is
/// written.
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_micros(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let time = UNIX_EPOCH + Duration::from_micros(1_782_321_689_123_456);
        assert_eq!(rfc3339(time), "2026-06-24T17:21:29.123456Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn the_file_is_found_like_the_codex_cli_finds_it() {
        let env = CredentialEnvironment::from_vars([("HOME", "/home/me")]);
        assert_eq!(
            auth_file(None, &env),
            Some(PathBuf::from("/home/me/.codex/auth.json"))
        );
        let env = CredentialEnvironment::from_vars([("HOME", "/home/me"), ("CODEX_HOME", "/c")]);
        assert_eq!(auth_file(None, &env), Some(PathBuf::from("/c/auth.json")));
        assert_eq!(
            auth_file(Some("~/work/auth.json"), &env),
            Some(PathBuf::from("/home/me/work/auth.json"))
        );
    }

    #[test]
    fn expiry_is_read_from_the_token() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            br#"{"exp":1800000000,"https://api.openai.com/auth":{"chatgpt_account_id":"acct"}}"#,
        );
        let jwt = format!("e30.{payload}.sig");
        assert_eq!(
            expires_at(&jwt),
            Some(UNIX_EPOCH + Duration::from_secs(1_800_000_000))
        );
        assert_eq!(expires_at("not-a-jwt"), None);
        assert_eq!(
            claims(&jwt).unwrap()["https://api.openai.com/auth"]["chatgpt_account_id"],
            "acct"
        );
    }
}
