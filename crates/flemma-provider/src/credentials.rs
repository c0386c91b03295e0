//! Credential resolution: a chain of resolvers (environment, `secret-tool`, the macOS keychain,
//! a Google service-account key, `gcloud`) tried in priority order, with a TTL cache.
//!
//! The environment and `PATH` are injected ([`CredentialEnvironment`]) so tests can point the
//! chain at fake `secret-tool`/`gcloud` scripts in a temporary directory. A resolved value is a
//! [`Secret`], whose `Debug` and `Display` print `[redacted]`: a key never reaches a log line, an
//! event, an error message or a file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use crate::chatgpt::{ChatGptLogin, LoginError};
pub use crate::environment::{CredentialEnvironment, Secret};
use crate::service_account::ServiceAccountKey;

/// How long a `gcloud` access token is kept (tokens live one hour; refresh a little early).
pub const GCLOUD_TOKEN_TTL: Duration = Duration::from_secs(55 * 60);

/// How long one resolver subprocess may run before it is killed.
pub const DEFAULT_SUBPROCESS_TIMEOUT: Duration = Duration::from_secs(10);

/// Every resolver failed. The message lists each resolver and why it could not help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no {kind} found for {service}: {}. Set {env_var} (or store the {kind} with one of the tools above) and try again",
    attempts.join("; ")
)]
pub struct CredentialError {
    /// The service (`anthropic`, `openai`, `vertex`, …).
    pub service: String,
    /// The credential kind (`api_key`, `access_token`).
    pub kind: String,
    /// The conventional environment variable for this credential.
    pub env_var: String,
    /// One line per resolver tried: what it checked and why it did not help.
    pub attempts: Vec<String>,
}

/// Options of the built-in resolvers (config namespace `secrets`).
#[derive(Debug, Clone)]
pub struct ResolverOptions {
    /// `secrets.gcloud.path`: the `gcloud` executable (default: `gcloud` on `PATH`).
    pub gcloud_path: Option<String>,
    /// How long one subprocess may run.
    pub subprocess_timeout: Duration,
    /// `secrets.chatgpt.auth_file`: the Codex CLI's `auth.json` (default:
    /// `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`).
    pub chatgpt_auth_file: Option<String>,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        ResolverOptions {
            gcloud_path: None,
            subprocess_timeout: DEFAULT_SUBPROCESS_TIMEOUT,
            chatgpt_auth_file: None,
        }
    }
}

/// The conventional environment variable of a credential: `{SERVICE}_{KIND}` upper-cased,
/// `-` becoming `_` (`openai-compatible` + `api_key` → `OPENAI_COMPATIBLE_API_KEY`).
pub fn env_var_name(service: &str, kind: &str) -> String {
    format!("{service}_{kind}")
        .to_ascii_uppercase()
        .replace('-', "_")
}

/// Alternative variables checked after the conventional one.
pub fn env_aliases(service: &str, kind: &str) -> &'static [&'static str] {
    match (service, kind) {
        ("gemini", "api_key") => &["GOOGLE_API_KEY"],
        ("vertex", "access_token") => &["VERTEX_AI_ACCESS_TOKEN"],
        _ => &[],
    }
}

#[derive(Debug, Clone)]
struct CachedSecret {
    secret: Secret,
    source: String,
    expires_at: Option<Instant>,
}

/// One successful lookup: the value, which resolver found it, and how long it may be cached
/// (`None`: until invalidated).
struct Found {
    secret: Secret,
    source: String,
    ttl: Option<Duration>,
}

/// The resolver chain with its cache. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct CredentialResolver {
    environment: CredentialEnvironment,
    options: ResolverOptions,
    cache: Mutex<HashMap<String, CachedSecret>>,
    /// The Codex CLI's ChatGPT login (provider `codex`), when a home directory tells where.
    chatgpt: Option<ChatGptLogin>,
}

impl CredentialResolver {
    /// A resolver over the given environment.
    pub fn new(environment: CredentialEnvironment, options: ResolverOptions) -> Self {
        let chatgpt =
            ChatGptLogin::from_environment(options.chatgpt_auth_file.as_deref(), &environment);
        CredentialResolver {
            environment,
            options,
            cache: Mutex::new(HashMap::new()),
            chatgpt,
        }
    }

    /// The ChatGPT login provider `codex` authenticates with.
    pub fn chatgpt(&self) -> Result<&ChatGptLogin, LoginError> {
        self.chatgpt.as_ref().ok_or_else(|| LoginError::Unusable {
            path: PathBuf::from("~/.codex/auth.json"),
            message: "neither CODEX_HOME nor HOME is set, so it cannot be found".into(),
        })
    }

    /// Resolves `kind` for `service` (`resolve("anthropic", "api_key")`): the cache first, then
    /// environment (priority 100), `secret-tool` (50, Linux), keychain (50, macOS), and for
    /// `vertex` access tokens the service-account key of `GOOGLE_APPLICATION_CREDENTIALS` (30)
    /// and `gcloud` (25). The first value found wins and is cached.
    pub async fn resolve(&self, service: &str, kind: &str) -> Result<Secret, CredentialError> {
        self.resolve_with_source(service, kind)
            .await
            .map(|(secret, _)| secret)
    }

    /// Like [`CredentialResolver::resolve`], and also names the resolver that found the value
    /// (`environment variable ANTHROPIC_API_KEY`, `secret-tool lookup service anthropic key
    /// api_key`, …), for `flemmad doctor`. The name never contains the value.
    pub async fn resolve_with_source(
        &self,
        service: &str,
        kind: &str,
    ) -> Result<(Secret, String), CredentialError> {
        let key = cache_key(service, kind);
        if let Some(cached) = self.cached(&key) {
            return Ok(cached);
        }
        let mut attempts = Vec::new();
        let found = match self.lookup_environment(service, kind, &mut attempts) {
            Some(found) => Some(found),
            None => self.lookup_tools(service, kind, &mut attempts).await,
        };
        match found {
            Some(found) => {
                let expires_at = found.ttl.map(|ttl| Instant::now() + ttl);
                if let Ok(mut cache) = self.cache.lock() {
                    cache.insert(
                        key,
                        CachedSecret {
                            secret: found.secret.clone(),
                            source: found.source.clone(),
                            expires_at,
                        },
                    );
                }
                Ok((found.secret, found.source))
            }
            None => Err(CredentialError {
                service: service.to_string(),
                kind: kind.to_string(),
                env_var: env_var_name(service, kind),
                attempts,
            }),
        }
    }

    /// Forgets the cached value (call it when the provider answers 401).
    pub fn invalidate(&self, service: &str, kind: &str) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.remove(&cache_key(service, kind));
        }
    }

    fn cached(&self, key: &str) -> Option<(Secret, String)> {
        let mut cache = self.cache.lock().ok()?;
        let entry = cache.get(key)?;
        match entry.expires_at {
            Some(expires_at) if Instant::now() >= expires_at => {
                cache.remove(key);
                None
            }
            _ => Some((entry.secret.clone(), entry.source.clone())),
        }
    }

    fn lookup_environment(
        &self,
        service: &str,
        kind: &str,
        attempts: &mut Vec<String>,
    ) -> Option<Found> {
        let conventional = env_var_name(service, kind);
        let names = std::iter::once(conventional.as_str())
            .chain(env_aliases(service, kind).iter().copied());
        let mut tried = Vec::new();
        for name in names {
            match self.environment.var(name).map(str::trim) {
                Some(value) if !value.is_empty() => {
                    return Some(Found {
                        secret: Secret::new(value),
                        source: format!("environment variable {name}"),
                        ttl: None,
                    });
                }
                Some(_) => tried.push(format!("{name} is empty")),
                None => tried.push(format!("{name} not set")),
            }
        }
        attempts.push(tried.join(", "));
        None
    }

    async fn lookup_tools(
        &self,
        service: &str,
        kind: &str,
        attempts: &mut Vec<String>,
    ) -> Option<Found> {
        if self.environment.is_linux {
            let args = ["lookup", "service", service, "key", kind];
            if let Some(value) = self.run_tool("secret-tool", &args, attempts).await {
                return Some(Found {
                    secret: value,
                    source: format!("secret-tool {}", args.join(" ")),
                    ttl: None,
                });
            }
        }
        if self.environment.is_macos {
            let args = ["find-generic-password", "-s", service, "-a", kind, "-w"];
            if let Some(value) = self.run_tool("security", &args, attempts).await {
                return Some(Found {
                    secret: value,
                    source: format!("the macOS keychain (security -s {service} -a {kind})"),
                    ttl: None,
                });
            }
        }
        if service == "vertex" && kind == "access_token" {
            if let Some(found) = self.lookup_service_account(attempts).await {
                return Some(found);
            }
            let gcloud = self.options.gcloud_path.as_deref().unwrap_or("gcloud");
            for args in [
                &["auth", "print-access-token"][..],
                &["auth", "application-default", "print-access-token"][..],
            ] {
                if let Some(value) = self.run_tool(gcloud, args, attempts).await {
                    return Some(Found {
                        secret: value,
                        source: format!("{gcloud} {}", args.join(" ")),
                        ttl: Some(GCLOUD_TOKEN_TTL),
                    });
                }
            }
        }
        None
    }

    /// A Vertex access token from the service-account key `GOOGLE_APPLICATION_CREDENTIALS`
    /// names (a signed JWT exchanged at the key's `token_uri`; no `gcloud` needed), cached for
    /// the token's lifetime.
    async fn lookup_service_account(&self, attempts: &mut Vec<String>) -> Option<Found> {
        const VARIABLE: &str = "GOOGLE_APPLICATION_CREDENTIALS";
        let Some(path) = self
            .environment
            .var(VARIABLE)
            .map(str::trim)
            .filter(|path| !path.is_empty())
        else {
            attempts.push(format!("{VARIABLE} not set"));
            return None;
        };
        let key = match ServiceAccountKey::from_file(Path::new(path)) {
            Ok(key) => key,
            Err(error) => {
                attempts.push(format!("{VARIABLE}: {error}"));
                return None;
            }
        };
        // Fails only when a TLS provider is already installed, which is what we want anyway.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = match reqwest::Client::builder()
            .connect_timeout(self.options.subprocess_timeout)
            .timeout(self.options.subprocess_timeout)
            .user_agent(concat!("flemmad/", env!("CARGO_PKG_VERSION")))
            .build()
        {
            Ok(http) => http,
            Err(error) => {
                attempts.push(format!("{VARIABLE}: no HTTP client ({error})"));
                return None;
            }
        };
        match key.access_token(&http).await {
            Ok((secret, ttl)) => Some(Found {
                secret,
                source: format!(
                    "the service account {} ({VARIABLE}={path})",
                    key.client_email
                ),
                ttl: Some(ttl),
            }),
            Err(error) => {
                attempts.push(format!("{VARIABLE}={path}: {error}"));
                None
            }
        }
    }

    /// Runs one lookup tool; its trimmed stdout is the value. Records why it failed otherwise.
    async fn run_tool(
        &self,
        program: &str,
        args: &[&str],
        attempts: &mut Vec<String>,
    ) -> Option<Secret> {
        let label = Path::new(program)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| program.to_string());
        let Some(path) = self.environment.find_executable(program) else {
            let place = if program.contains('/') {
                format!("{program} is not an executable file")
            } else {
                "not found on PATH".to_string()
            };
            attempts.push(format!("{label}: {place}"));
            return None;
        };
        let mut command = Command::new(&path);
        command
            .args(args)
            // Never a project's folder (docs/security.md, invariant III).
            .current_dir("/")
            .env_clear()
            .envs(&self.environment.vars)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let shown = format!("{label} {}", args.join(" "));
        let output =
            match tokio::time::timeout(self.options.subprocess_timeout, command.output()).await {
                Err(_) => {
                    attempts.push(format!(
                        "{shown}: timed out after {} s",
                        self.options.subprocess_timeout.as_secs_f64()
                    ));
                    return None;
                }
                Ok(Err(error)) => {
                    attempts.push(format!("{shown}: could not run ({error})"));
                    return None;
                }
                Ok(Ok(output)) => output,
            };
        if !output.status.success() {
            let code = output
                .status
                .code()
                .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"));
            // stderr of these tools says things like "no such secret"; it never holds the value.
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stderr = stderr.trim();
            let stderr: String = stderr.chars().take(200).collect();
            if stderr.is_empty() {
                attempts.push(format!("{shown}: {code}"));
            } else {
                attempts.push(format!("{shown}: {code}: {stderr}"));
            }
            return None;
        }
        let value = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if value.is_empty() {
            attempts.push(format!("{shown}: printed nothing"));
            return None;
        }
        Some(Secret::new(value))
    }
}

fn cache_key(service: &str, kind: &str) -> String {
    format!("{kind}:{service}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn resolver(vars: Vec<(&str, String)>) -> CredentialResolver {
        CredentialResolver::new(
            CredentialEnvironment::from_vars(vars),
            ResolverOptions::default(),
        )
    }

    #[test]
    fn secret_never_prints_its_value() {
        let secret = Secret::new("sk-ant-very-secret");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some([redacted])");
        assert_eq!(secret.expose(), "sk-ant-very-secret");
    }

    #[test]
    fn env_var_names_follow_the_convention() {
        assert_eq!(env_var_name("anthropic", "api_key"), "ANTHROPIC_API_KEY");
        assert_eq!(
            env_var_name("openai-compatible", "api_key"),
            "OPENAI_COMPATIBLE_API_KEY"
        );
        assert_eq!(
            env_var_name("vertex", "access_token"),
            "VERTEX_ACCESS_TOKEN"
        );
    }

    #[tokio::test]
    async fn environment_wins_and_aliases_are_checked() {
        let chain = resolver(vec![("ANTHROPIC_API_KEY", "sk-env".to_string())]);
        let secret = chain.resolve("anthropic", "api_key").await.unwrap();
        assert_eq!(secret.expose(), "sk-env");

        let chain = resolver(vec![("GOOGLE_API_KEY", "g-alias".to_string())]);
        let secret = chain.resolve("gemini", "api_key").await.unwrap();
        assert_eq!(secret.expose(), "g-alias");

        let chain = resolver(vec![("VERTEX_AI_ACCESS_TOKEN", "ya29.legacy".to_string())]);
        let secret = chain.resolve("vertex", "access_token").await.unwrap();
        assert_eq!(secret.expose(), "ya29.legacy");
    }

    #[tokio::test]
    async fn all_failures_are_listed_in_one_error() {
        let empty = tempfile::tempdir().unwrap();
        let chain = resolver(vec![("PATH", empty.path().display().to_string())]);
        let error = chain.resolve("anthropic", "api_key").await.unwrap_err();
        let message = error.to_string();
        assert!(message.contains("ANTHROPIC_API_KEY not set"), "{message}");
        if cfg!(target_os = "linux") {
            assert!(
                message.contains("secret-tool: not found on PATH"),
                "{message}"
            );
        }
        assert!(message.contains("Set ANTHROPIC_API_KEY"), "{message}");
    }

    #[tokio::test]
    async fn secret_tool_is_a_real_subprocess_with_the_right_arguments() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "secret-tool",
            r#"[ "$*" = "lookup service openai key api_key" ] && [ ! -t 0 ] && echo "sk-from-keyring" && exit 0
echo "No matching secret" >&2; exit 1"#,
        );
        let chain = resolver(vec![("PATH", dir.path().display().to_string())]);
        let secret = chain.resolve("openai", "api_key").await.unwrap();
        assert_eq!(secret.expose(), "sk-from-keyring");

        let error = chain.resolve("moonshot", "api_key").await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(
                "secret-tool lookup service moonshot key api_key: exit 1: No matching secret"
            ),
            "{message}"
        );
    }

    #[tokio::test]
    async fn the_source_names_the_resolver_and_never_the_value() {
        let chain = resolver(vec![("GOOGLE_API_KEY", "g-alias-value".to_string())]);
        let (secret, source) = chain
            .resolve_with_source("gemini", "api_key")
            .await
            .unwrap();
        assert_eq!(secret.expose(), "g-alias-value");
        assert_eq!(source, "environment variable GOOGLE_API_KEY");
        // The cache remembers the source too.
        let (_, again) = chain
            .resolve_with_source("gemini", "api_key")
            .await
            .unwrap();
        assert_eq!(again, source);

        if cfg!(target_os = "linux") {
            let dir = tempfile::tempdir().unwrap();
            script(dir.path(), "secret-tool", "echo sk-keyring-value");
            let chain = resolver(vec![("PATH", dir.path().display().to_string())]);
            let (_, source) = chain
                .resolve_with_source("anthropic", "api_key")
                .await
                .unwrap();
            assert_eq!(source, "secret-tool lookup service anthropic key api_key");
            assert!(!source.contains("sk-keyring-value"));
        }
    }

    /// Moves the tokio clock forward without leaving it paused (a paused clock would fire the
    /// subprocess timeout while the runtime waits for the child).
    async fn skip(duration: Duration) {
        tokio::time::pause();
        tokio::time::advance(duration).await;
        tokio::time::resume();
    }

    #[test]
    fn relative_path_entries_find_no_executable() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "gcloud", "exit 0");
        // The same folder as a relative entry (from this process's directory): never searched.
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count().saturating_sub(1));
        let relative_dir = format!(
            "{up}{}",
            dir.path().display().to_string().trim_start_matches('/')
        );
        assert!(
            Path::new(&relative_dir).join("gcloud").is_file(),
            "{relative_dir}"
        );
        let relative = CredentialEnvironment::from_vars([("PATH", format!(".::{relative_dir}"))]);
        assert_eq!(relative.find_executable("gcloud"), None);
        let absolute =
            CredentialEnvironment::from_vars([("PATH", dir.path().display().to_string())]);
        assert_eq!(
            absolute.find_executable("gcloud"),
            Some(dir.path().join("gcloud"))
        );
    }

    #[tokio::test]
    async fn gcloud_tokens_are_cached_for_55_minutes_and_invalidated() {
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("count");
        script(
            dir.path(),
            "gcloud",
            &format!(
                r#"echo x >> "{}"
[ "$*" = "auth print-access-token" ] && echo "ya29.token-$(wc -l < "{}" | tr -d ' ')" && exit 0
exit 1"#,
                counter.display(),
                counter.display()
            ),
        );
        let chain = resolver(vec![(
            "PATH",
            format!("{}:/usr/bin:/bin", dir.path().display()),
        )]);
        let first = chain.resolve("vertex", "access_token").await.unwrap();
        assert_eq!(first.expose(), "ya29.token-1");
        skip(Duration::from_secs(54 * 60)).await;
        let cached = chain.resolve("vertex", "access_token").await.unwrap();
        assert_eq!(cached.expose(), "ya29.token-1");
        skip(Duration::from_secs(2 * 60)).await;
        let refreshed = chain.resolve("vertex", "access_token").await.unwrap();
        assert_eq!(refreshed.expose(), "ya29.token-2");
        chain.invalidate("vertex", "access_token");
        let after_invalidate = chain.resolve("vertex", "access_token").await.unwrap();
        assert_eq!(after_invalidate.expose(), "ya29.token-3");
    }

    #[tokio::test]
    async fn gcloud_falls_back_to_application_default_and_honours_the_configured_path() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "my-gcloud",
            r#"[ "$*" = "auth application-default print-access-token" ] && echo "ya29.adc" && exit 0
echo "You do not currently have an active account selected." >&2; exit 1"#,
        );
        let chain = CredentialResolver::new(
            CredentialEnvironment::from_vars([("PATH", "/nonexistent")]),
            ResolverOptions {
                gcloud_path: Some(dir.path().join("my-gcloud").display().to_string()),
                ..ResolverOptions::default()
            },
        );
        let secret = chain.resolve("vertex", "access_token").await.unwrap();
        assert_eq!(secret.expose(), "ya29.adc");
    }

    #[tokio::test]
    async fn a_hanging_tool_is_killed_after_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        script(dir.path(), "gcloud", "exec sleep 30");
        let chain = CredentialResolver::new(
            CredentialEnvironment::from_vars([(
                "PATH",
                format!("{}:/usr/bin:/bin", dir.path().display()),
            )]),
            ResolverOptions {
                subprocess_timeout: Duration::from_millis(200),
                ..ResolverOptions::default()
            },
        );
        let started = std::time::Instant::now();
        let error = chain.resolve("vertex", "access_token").await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            error
                .to_string()
                .contains("gcloud auth print-access-token: timed out"),
            "{error}"
        );
    }
}
