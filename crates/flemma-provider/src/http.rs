//! The HTTP edge: sends built requests with authentication, retries before the first byte,
//! streams the body through the provider's decoder, and explains failures.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flemma_conversation::{Conversation, StopReason, StreamEvent, Usage};
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::credentials::{CredentialEnvironment, CredentialResolver, Secret, env_var_name};
use crate::explain::{
    ProviderError, explain_http_error, explain_not_found, explain_usage_refusal, redact,
    stop_warning,
};
use crate::retry::{RetryPolicy, is_retryable_status, retry_hint};
use crate::{
    ModelInfo, ProviderKind, RequestOptions, ToolNames, WireRequest, build_request,
    count_tokens_request, decoder_for, list_models_request, parse_count_tokens, parse_models,
    vertex_default_base_url,
};

/// Timeouts and retries of a [`ProviderClient`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Time to establish a connection (`connect_timeout`, default 10 s).
    pub connect_timeout: Duration,
    /// Time for a whole request including the streamed body (`timeout`, default 600 s).
    pub timeout: Duration,
    /// The watchdog: the longest silence — waiting for the response, or between two pieces of
    /// its body — before the reply is stopped (`idle_timeout`, default 300 s).
    pub idle_timeout: Duration,
    /// When to retry.
    pub retry: RetryPolicy,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
        }
    }
}

/// Where to send a provider's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Base URL without trailing slash; the wire paths are appended to it (Anthropic and Gemini
    /// without a version, OpenAI-style bases with `/v1`).
    pub base_url: String,
    /// A credential to use instead of the resolver chain (tests, config).
    pub credential: Option<Secret>,
}

impl Endpoint {
    /// An endpoint at `base_url` whose credential comes from the resolver chain.
    pub fn new(base_url: impl Into<String>) -> Self {
        Endpoint {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            credential: None,
        }
    }

    /// Uses this credential instead of the resolver chain.
    pub fn with_credential(mut self, credential: Secret) -> Self {
        self.credential = Some(credential);
        self
    }

    /// The endpoint of a provider: the configured base URL, else the conventional variable
    /// ([`base_url_env_var`]), else the provider's real default ([`default_base_url`]).
    pub fn for_provider(
        kind: ProviderKind,
        configured: Option<&str>,
        environment: &CredentialEnvironment,
        vertex_location: &str,
    ) -> Self {
        let from_env = environment
            .var(base_url_env_var(kind))
            .map(str::trim)
            .filter(|value| !value.is_empty());
        let base = configured
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .or(from_env)
            .map_or_else(|| default_base_url(kind, vertex_location), str::to_string);
        Endpoint::new(base)
    }
}

/// The variable the official SDKs read for a provider's base URL.
pub fn base_url_env_var(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
        ProviderKind::OpenAi => "OPENAI_BASE_URL",
        ProviderKind::OpenAiCompatible => "OPENAI_COMPATIBLE_BASE_URL",
        ProviderKind::Moonshot => "MOONSHOT_BASE_URL",
        ProviderKind::Gemini => "GEMINI_BASE_URL",
        ProviderKind::Vertex => "VERTEX_BASE_URL",
        ProviderKind::Codex => "CODEX_BASE_URL",
    }
}

/// The real base URL of a provider (OpenAI-compatible: a local Ollama).
pub fn default_base_url(kind: ProviderKind, vertex_location: &str) -> String {
    match kind {
        ProviderKind::Anthropic => "https://api.anthropic.com".to_string(),
        ProviderKind::OpenAi => "https://api.openai.com/v1".to_string(),
        ProviderKind::OpenAiCompatible => "http://127.0.0.1:11434/v1".to_string(),
        ProviderKind::Moonshot => "https://api.moonshot.ai/v1".to_string(),
        ProviderKind::Gemini => "https://generativelanguage.googleapis.com".to_string(),
        ProviderKind::Vertex => vertex_default_base_url(vertex_location),
        ProviderKind::Codex => "https://chatgpt.com/backend-api/codex".to_string(),
    }
}

/// The `(service, kind)` of the credential a provider needs (`("anthropic", "api_key")`,
/// `("vertex", "access_token")`; `codex` uses the ChatGPT login instead, see
/// [`crate::chatgpt`]).
pub fn credential_for(kind: ProviderKind) -> (&'static str, &'static str) {
    match kind {
        ProviderKind::Vertex => ("vertex", "access_token"),
        ProviderKind::Codex => ("codex", "chatgpt_subscription"),
        other => (other.name(), "api_key"),
    }
}

/// What the client reports while a request runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// A retryable failure before the first byte; the client waits `delay` and tries again.
    Retrying {
        /// The retry number (1 for the first retry).
        attempt: u32,
        /// How long the client waits before it.
        delay: Duration,
        /// Why (`HTTP 429`, `connection error: …`).
        reason: String,
    },
    /// The first byte of the reply body arrived (from now on nothing is retried).
    FirstByte,
    /// A decoded event, as soon as its bytes arrived. [`StreamEvent::Error`] is never
    /// forwarded: it ends the stream with an `Err`.
    Event(StreamEvent),
}

/// How a streamed reply ended.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSummary {
    /// The last usage the provider reported.
    pub usage: Usage,
    /// Why the model stopped.
    pub stop: StopReason,
    /// The provider's request id (`request-id`, `x-request-id`), for support requests.
    pub request_id: Option<String>,
    /// Things the user should know: adaptations made by the request builder and the "Response
    /// truncated" warning.
    pub warnings: Vec<String>,
    /// How many retries it took.
    pub retries: u32,
}

impl StreamSummary {
    /// The error a refusal or safety stop amounts to (see [`crate::explain::stop_error`]).
    pub fn stop_error(&self) -> Option<ProviderError> {
        crate::explain::stop_error(&self.stop)
    }
}

/// The HTTP client for every provider.
#[derive(Debug, Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
    credentials: Arc<CredentialResolver>,
    retry: RetryPolicy,
    timeout: Duration,
    idle_timeout: Duration,
}

/// A successful response and the retries it took.
struct Sent {
    response: reqwest::Response,
    secret: Option<Secret>,
    retries: u32,
}

/// What a request authenticates with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Auth {
    secret: Option<Secret>,
    /// `chatgpt-account-id` (provider `codex`).
    account: Option<String>,
}

impl ProviderClient {
    /// Builds the client (installs the `ring` TLS provider as the process default if none is).
    pub fn new(
        config: ClientConfig,
        credentials: Arc<CredentialResolver>,
    ) -> Result<Self, ProviderError> {
        // Fails only when a provider is already installed, which is what we want anyway.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.timeout)
            .user_agent(concat!("flemmad/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ProviderError::Client(error.to_string()))?;
        Ok(ProviderClient {
            http,
            credentials,
            retry: config.retry,
            timeout: config.timeout,
            idle_timeout: config.idle_timeout,
        })
    }

    /// Sends `conversation` and streams the reply: every decoded event goes to `observer` as
    /// its bytes arrive. Retries (reported as [`ClientEvent::Retrying`]) happen only before the
    /// first byte. Cancelling `cancel` drops the connection at once and returns
    /// [`ProviderError::Cancelled`].
    pub async fn stream(
        &self,
        kind: ProviderKind,
        conversation: &Conversation,
        options: &RequestOptions,
        endpoint: &Endpoint,
        cancel: CancellationToken,
        observer: &mut dyn FnMut(ClientEvent),
    ) -> Result<StreamSummary, ProviderError> {
        let built = build_request(kind, conversation, options)?;
        let sent = self
            .send(kind, &built.request, endpoint, &cancel, observer)
            .await?;
        let request_id = request_id(sent.response.headers());
        let mut response = sent.response;
        let mut stream_decoder = decoder_for(kind, ToolNames::of(&options.tools));
        let mut summary = StreamSummary {
            usage: Usage::default(),
            stop: StopReason::EndTurn,
            request_id,
            warnings: built.warnings,
            retries: sent.retries,
        };
        let mut first_byte = true;
        let mut content = false;
        let mut stopped = false;
        loop {
            let chunk = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                chunk = tokio::time::timeout(self.idle_timeout, response.chunk()) => match chunk {
                    Ok(chunk) => chunk,
                    Err(_) => return Err(self.silent(kind, if first_byte {
                        "before answering"
                    } else {
                        "in the middle of the reply"
                    })),
                },
            };
            let (events, done) = match chunk {
                Ok(Some(bytes)) => {
                    if first_byte {
                        first_byte = false;
                        observer(ClientEvent::FirstByte);
                    }
                    (stream_decoder.feed(&bytes), false)
                }
                Ok(None) => (stream_decoder.finish(), true),
                Err(error) => {
                    let message = if error.is_timeout() {
                        format!("no complete reply within {} s", self.timeout.as_secs())
                    } else {
                        transport_message(&error)
                    };
                    return Err(ProviderError::Interrupted {
                        provider: kind.name(),
                        message,
                    });
                }
            };
            for event in events {
                match event {
                    StreamEvent::Error { message } if flemma_wire::check::is_runaway(&message) => {
                        return Err(ProviderError::Runaway { message });
                    }
                    StreamEvent::Error { message } => {
                        return Err(ProviderError::Stream {
                            provider: kind.name(),
                            message: redact(&message, sent.secret.as_ref()),
                            partial: content,
                        });
                    }
                    StreamEvent::Usage { usage } => {
                        summary.usage = usage;
                        observer(ClientEvent::Event(StreamEvent::Usage { usage }));
                    }
                    StreamEvent::Stop { reason } => {
                        summary.stop = reason.clone();
                        stopped = true;
                        observer(ClientEvent::Event(StreamEvent::Stop { reason }));
                    }
                    other => {
                        content = true;
                        observer(ClientEvent::Event(other));
                    }
                }
            }
            // The decoders end every stream with exactly one `Stop` (after its usage): the reply
            // is complete, so stop reading. A server that keeps the connection open after the
            // terminal event (OpenAI `response.completed`) must not hold the reply up; dropping
            // the response closes the connection.
            if done || stopped {
                break;
            }
        }
        if let Some(warning) = stop_warning(&summary.stop) {
            summary.warnings.push(warning);
        }
        Ok(summary)
    }

    /// Counts the input tokens of `conversation` with the provider's counting endpoint.
    pub async fn count_tokens(
        &self,
        kind: ProviderKind,
        conversation: &Conversation,
        options: &RequestOptions,
        endpoint: &Endpoint,
        cancel: CancellationToken,
    ) -> Result<u64, ProviderError> {
        let request = count_tokens_request(kind, conversation, options)?;
        let body = self
            .fetch(kind, &request, endpoint, &cancel, &mut |_| {})
            .await?;
        Ok(parse_count_tokens(kind, &body)?)
    }

    /// Lists the models the provider offers.
    pub async fn list_models(
        &self,
        kind: ProviderKind,
        options: &RequestOptions,
        endpoint: &Endpoint,
        cancel: CancellationToken,
    ) -> Result<Vec<ModelInfo>, ProviderError> {
        let request = list_models_request(kind, options);
        let body = self
            .fetch(kind, &request, endpoint, &cancel, &mut |_| {})
            .await?;
        Ok(parse_models(kind, &body)?)
    }

    /// Sends a non-streaming request and reads the whole body.
    async fn fetch(
        &self,
        kind: ProviderKind,
        request: &WireRequest,
        endpoint: &Endpoint,
        cancel: &CancellationToken,
        observer: &mut dyn FnMut(ClientEvent),
    ) -> Result<Vec<u8>, ProviderError> {
        let sent = self.send(kind, request, endpoint, cancel, observer).await?;
        let body = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            body = sent.response.bytes() => body,
        };
        body.map(|bytes| bytes.to_vec())
            .map_err(|error| ProviderError::Interrupted {
                provider: kind.name(),
                message: transport_message(&error),
            })
    }

    /// The credential for a request: the endpoint's own, else the resolver chain
    /// (OpenAI-compatible servers may have none), else for `codex` the ChatGPT login (its
    /// tokens refreshed first when they expired, or when the backend `refused` them).
    async fn credential(
        &self,
        kind: ProviderKind,
        endpoint: &Endpoint,
        refused: Option<&Secret>,
    ) -> Result<Auth, ProviderError> {
        if let Some(secret) = &endpoint.credential {
            return Ok(Auth {
                secret: Some(secret.clone()),
                account: None,
            });
        }
        if kind == ProviderKind::Codex {
            let tokens = self
                .credentials
                .chatgpt()?
                .tokens(&self.http, refused)
                .await?;
            return Ok(Auth {
                secret: Some(tokens.access_token),
                account: tokens.account_id,
            });
        }
        let (service, credential_kind) = credential_for(kind);
        match self.credentials.resolve(service, credential_kind).await {
            Ok(secret) => Ok(Auth {
                secret: Some(secret),
                account: None,
            }),
            Err(_) if kind == ProviderKind::OpenAiCompatible => Ok(Auth::default()),
            Err(error) => Err(error.into()),
        }
    }

    /// The watchdog's error: nothing came for `idle_timeout`.
    fn silent(&self, kind: ProviderKind, when: &'static str) -> ProviderError {
        ProviderError::Silent {
            provider: kind.name(),
            seconds: self.idle_timeout.as_secs().max(1),
            when,
        }
    }

    /// How an error names the credential a provider used.
    fn credential_name(&self, kind: ProviderKind) -> String {
        if kind == ProviderKind::Codex {
            return match self.credentials.chatgpt() {
                Ok(login) => format!(
                    "the ChatGPT login in {} (run `codex login` again)",
                    login.path().display()
                ),
                Err(_) => "the ChatGPT login (run `codex login`)".to_owned(),
            };
        }
        let (service, credential_kind) = credential_for(kind);
        env_var_name(service, credential_kind)
    }

    /// Sends a request until it gets a 2xx response, retrying as [`RetryPolicy`] says.
    async fn send(
        &self,
        kind: ProviderKind,
        wire: &WireRequest,
        endpoint: &Endpoint,
        cancel: &CancellationToken,
        observer: &mut dyn FnMut(ClientEvent),
    ) -> Result<Sent, ProviderError> {
        let mut auth = self.credential(kind, endpoint, None).await?;
        let mut refreshed = false;
        let (service, credential_kind) = credential_for(kind);
        let credential_name = self.credential_name(kind);
        let url = format!("{}{}", endpoint.base_url, wire.path_and_query);
        let method = reqwest::Method::from_bytes(wire.method.as_bytes())
            .map_err(|error| ProviderError::Client(error.to_string()))?;
        let mut retries = 0;
        loop {
            let mut request = self.http.request(method.clone(), &url);
            for (name, value) in &wire.headers {
                request = request.header(name, value);
            }
            if let Some(secret) = &auth.secret {
                request = match kind {
                    ProviderKind::Anthropic => request.header("x-api-key", secret.expose()),
                    ProviderKind::Gemini => request.header("x-goog-api-key", secret.expose()),
                    ProviderKind::OpenAi
                    | ProviderKind::OpenAiCompatible
                    | ProviderKind::Moonshot
                    | ProviderKind::Vertex
                    | ProviderKind::Codex => request.bearer_auth(secret.expose()),
                };
            }
            if let Some(account) = &auth.account {
                request = request.header("chatgpt-account-id", account);
            }
            if !wire.body.is_empty() {
                // The wire's headers name the content type; said again it would be sent twice.
                if !wire
                    .headers
                    .iter()
                    .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
                {
                    request = request.header("content-type", "application/json");
                }
                request = request.body(wire.body.clone());
            }
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                outcome = tokio::time::timeout(self.idle_timeout, request.send()) => match outcome {
                    Ok(outcome) => outcome,
                    Err(_) => return Err(self.silent(kind, "before answering")),
                },
            };
            if let Ok(response) = &outcome {
                report_rate_limits(kind, response.headers(), observer);
            }
            let (reason, hint, error) = match outcome {
                Ok(response) if response.status().is_success() => {
                    return Ok(Sent {
                        response,
                        secret: auth.secret,
                        retries,
                    });
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    let body = tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                        body = response.bytes() => body.map(|b| b.to_vec()).unwrap_or_default(),
                    };
                    if status == 404 {
                        return Err(explain_not_found(
                            kind,
                            &endpoint.base_url,
                            &url,
                            &body,
                            auth.secret.as_ref(),
                            wire.method == "GET",
                        ));
                    }
                    if kind == ProviderKind::Codex
                        && status == 429
                        && let Some(refusal) = crate::codex::usage_refusal(&body)
                    {
                        return Err(explain_usage_refusal(
                            kind,
                            &refusal,
                            crate::codex::rate_limits(&header_pairs(&headers)).as_ref(),
                            SystemTime::now(),
                        ));
                    }
                    let hint = retry_hint(&headers, &body, SystemTime::now());
                    let error = explain_http_error(
                        kind,
                        status,
                        &headers,
                        &body,
                        &credential_name,
                        auth.secret.as_ref(),
                        hint,
                    );
                    if matches!(error, ProviderError::Authentication { .. }) {
                        // A cached token may have expired (gcloud) or been revoked (a ChatGPT
                        // login another program refreshed): resolve it again, and when that
                        // gives a different credential, try once more at once.
                        self.credentials.invalidate(service, credential_kind);
                        if !refreshed && endpoint.credential.is_none() {
                            refreshed = true;
                            let fresh = self
                                .credential(kind, endpoint, auth.secret.as_ref())
                                .await?;
                            if fresh.secret.is_some() && fresh.secret != auth.secret {
                                auth = fresh;
                                observer(ClientEvent::Retrying {
                                    attempt: retries + 1,
                                    delay: std::time::Duration::ZERO,
                                    reason: format!(
                                        "HTTP {status}: {credential_name} was refused; retrying with a freshly resolved credential"
                                    ),
                                });
                                continue;
                            }
                        }
                    }
                    if !is_retryable_status(status) {
                        return Err(error);
                    }
                    (format!("HTTP {status}"), hint, error)
                }
                Err(error) => {
                    let message = transport_message(&error);
                    let failure = ProviderError::Connection {
                        provider: kind.name(),
                        url: url.clone(),
                        message: message.clone(),
                    };
                    // Connection failures (refused, reset, connect timeout) are retried; a
                    // request that used up the whole `timeout` is not.
                    let retryable =
                        error.is_connect() || (error.is_request() && !error.is_timeout());
                    if !retryable {
                        return Err(failure);
                    }
                    (format!("connection error: {message}"), None, failure)
                }
            };
            retries += 1;
            let Some(delay) = self.retry.delay_before(retries, hint) else {
                return Err(error);
            };
            observer(ClientEvent::Retrying {
                attempt: retries,
                delay,
                reason,
            });
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// The headers of a response as name–value pairs (values that are not text are left out).
fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

/// Tells the observer the rate limits a response reports (the Codex backend's windows), as
/// a [`StreamEvent::RateLimits`] before any of its content.
fn report_rate_limits(
    kind: ProviderKind,
    headers: &HeaderMap,
    observer: &mut dyn FnMut(ClientEvent),
) {
    if kind != ProviderKind::Codex {
        return;
    }
    if let Some(limits) = crate::codex::rate_limits(&header_pairs(headers)) {
        observer(ClientEvent::Event(StreamEvent::RateLimits { limits }));
    }
}

/// The request id of a response (`request-id` for Anthropic, `x-request-id` for OpenAI-style
/// servers, `x-goog-request-id` for Google).
fn request_id(headers: &HeaderMap) -> Option<String> {
    ["request-id", "x-request-id", "x-goog-request-id"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok().map(str::to_string))
}

/// A transport error with its causes (reqwest's top-level message alone says little).
fn transport_message(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_come_from_config_then_environment_then_defaults() {
        let env = CredentialEnvironment::from_vars([
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
            ("OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:11434/v1"),
        ]);
        let anthropic = Endpoint::for_provider(ProviderKind::Anthropic, None, &env, "global");
        assert_eq!(anthropic.base_url, "http://127.0.0.1:9");
        let configured = Endpoint::for_provider(
            ProviderKind::Anthropic,
            Some("https://proxy.example/"),
            &env,
            "global",
        );
        assert_eq!(configured.base_url, "https://proxy.example");
        let openai = Endpoint::for_provider(ProviderKind::OpenAi, None, &env, "global");
        assert_eq!(openai.base_url, "https://api.openai.com/v1");
        let vertex = Endpoint::for_provider(ProviderKind::Vertex, None, &env, "us-east5");
        assert_eq!(
            vertex.base_url,
            "https://us-east5-aiplatform.googleapis.com"
        );
        let compat = Endpoint::for_provider(ProviderKind::OpenAiCompatible, None, &env, "");
        assert_eq!(compat.base_url, "http://127.0.0.1:11434/v1");
    }

    #[test]
    fn credentials_per_provider() {
        assert_eq!(
            credential_for(ProviderKind::Anthropic),
            ("anthropic", "api_key")
        );
        assert_eq!(
            credential_for(ProviderKind::Vertex),
            ("vertex", "access_token")
        );
        let (service, kind) = credential_for(ProviderKind::OpenAiCompatible);
        assert_eq!(env_var_name(service, kind), "OPENAI_COMPATIBLE_API_KEY");
    }
}
