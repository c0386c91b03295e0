//! The HTTP server: routing, authentication, recording, the control API and body pacing.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::formats::{self, ChatReasoningField, KeyProblem, Reply, RequestContext};
use crate::script::{Failure, Turn};

/// The wire format a request was answered in (chosen by its path).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireFormat {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Responses API (also `GET /v1/models` without Anthropic headers).
    OpenAiResponses,
    /// OpenAI Chat Completions and compatible servers.
    ChatCompletions,
    /// Gemini Developer API.
    Gemini,
    /// Vertex AI (Gemini models).
    Vertex,
    /// The Codex backend of a ChatGPT subscription (OpenAI Responses, [`crate::chatgpt`]).
    Codex,
}

/// One request received by a provider endpoint (control-API requests are not recorded).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// Path with query string, e.g. `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`.
    pub path: String,
    /// Headers in arrival order, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is empty or not JSON).
    pub body: Value,
    /// The body as text (lossy UTF-8).
    pub raw_body: String,
    /// The format of the endpoint that received it.
    pub format: WireFormat,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the server is started.
#[derive(Clone, Debug)]
pub struct MockConfig {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// When set, provider endpoints require this key (presented the way each API expects it)
    /// and answer the provider's real authentication error otherwise.
    pub require_key: Option<String>,
    /// With an empty queue, answer `You said: <last user text>` instead of an HTTP 500.
    pub echo_when_empty: bool,
    /// Field Chat Completions streams use for thinking text.
    pub chat_reasoning_field: ChatReasoningField,
    /// The public key (PKCS#1 DER, see [`crate::oauth::public_key_of`]) that signs the
    /// service-account assertions `POST /token` accepts; `None` checks their form only.
    pub service_account_key: Option<Vec<u8>>,
}

impl Default for MockConfig {
    /// A free port, no key check, no echo (an empty queue is an error), `reasoning_content`.
    fn default() -> Self {
        MockConfig {
            port: 0,
            require_key: None,
            echo_when_empty: false,
            chat_reasoning_field: ChatReasoningField::ReasoningContent,
            service_account_key: None,
        }
    }
}

/// State shared by the handle and the connection tasks.
#[derive(Debug)]
struct Shared {
    config: MockConfig,
    turns: Mutex<VecDeque<Turn>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// The bodies of `POST /token` requests, and how many tokens were issued.
    token_requests: Mutex<Vec<String>>,
    tokens_issued: Mutex<u64>,
    /// The ChatGPT account behind the Codex backend.
    chatgpt: Mutex<crate::chatgpt::Account>,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running mock provider server. Dropping it stops the server as well.
#[derive(Debug)]
pub struct MockProvider {
    address: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl MockProvider {
    /// Binds 127.0.0.1 on a free port (no key check, no echo) and serves on the current tokio
    /// runtime.
    pub async fn start() -> std::io::Result<MockProvider> {
        Self::start_with(MockConfig::default()).await
    }

    /// Binds 127.0.0.1:`config.port` and serves on the current tokio runtime.
    pub async fn start_with(config: MockConfig) -> std::io::Result<MockProvider> {
        let listener = TcpListener::bind(("127.0.0.1", config.port)).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            turns: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            token_requests: Mutex::new(Vec::new()),
            tokens_issued: Mutex::new(0),
            chatgpt: Mutex::new(crate::chatgpt::Account::default()),
        });
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped));
        Ok(MockProvider {
            address,
            shared,
            stop,
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Enqueues one scripted turn (answers are consumed first in, first out).
    pub fn push(&self, turn: Turn) {
        lock(&self.shared.turns).push_back(turn);
    }

    /// Number of scripted turns not yet consumed.
    pub fn queued(&self) -> usize {
        lock(&self.shared.turns).len()
    }

    /// Every provider request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The form bodies of the token requests (`POST /token`) received so far.
    pub fn token_requests(&self) -> Vec<String> {
        lock(&self.shared.token_requests).clone()
    }

    /// Logs in to the ChatGPT account of the Codex backend (as `codex login` does): the tokens
    /// to write into `auth.json` ([`crate::ChatGptLogin::auth_json`]); earlier logins stop
    /// working. `expired`: the access token has already expired, so the client must refresh
    /// it first.
    pub fn chatgpt_login(&self, expired: bool) -> crate::ChatGptLogin {
        lock(&self.shared.chatgpt).log_in(expired)
    }

    /// Sets how much of the account's 5-hour (`primary`) and weekly (`secondary`) windows is
    /// used, in percent; at 100 the Codex backend refuses requests with HTTP 429.
    pub fn set_codex_usage(&self, primary: f64, secondary: f64) {
        let mut account = lock(&self.shared.chatgpt);
        account.windows[0].used_percent = primary;
        account.windows[1].used_percent = secondary;
    }

    /// The bodies of the token refreshes (`POST /oauth/token`) received so far.
    pub fn chatgpt_refreshes(&self) -> Vec<String> {
        lock(&self.shared.chatgpt).refreshes.clone()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// Stops accepting, closes open connections and waits for the server task.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    // Dropping the set at the end aborts the connections that are still open.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(pair) => pair,
                    Err(error) => {
                        tracing::warn!("mock provider: accept failed: {error}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let shared = Arc::clone(&shared);
                connections.spawn(async move {
                    let service = service_fn(move |request| handle(Arc::clone(&shared), request));
                    if let Err(error) = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!("mock provider: connection ended: {error}");
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

type ReplyBody = BoxBody<Bytes, std::io::Error>;

/// What an incoming request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// A provider endpoint of `format`.
    Provider {
        format: WireFormat,
        endpoint: Endpoint,
    },
    /// `POST /_mock/turns`.
    PushTurns,
    /// `GET /_mock/requests`.
    ListRequests,
    /// `DELETE /_mock/requests`.
    ClearRequests,
    /// Google's OAuth token endpoint (a service-account key's `token_uri`).
    Token,
    /// The ChatGPT token refresh of the Codex CLI.
    ChatGptToken,
    /// Anything else.
    NotFound,
}

/// The kind of provider endpoint.
#[derive(Debug, PartialEq, Eq)]
enum Endpoint {
    /// A generation request. `model` comes from the path (Google) or the body; `stream` is
    /// set by the path (Google) or by the body's `"stream"`.
    Generate {
        model: Option<String>,
        stream: Option<bool>,
    },
    /// Token counting.
    CountTokens,
    /// Model listing.
    Models,
}

fn provider(format: WireFormat, endpoint: Endpoint) -> Route {
    Route::Provider { format, endpoint }
}

fn generate_route(format: WireFormat, model: Option<&str>, stream: Option<bool>) -> Route {
    provider(
        format,
        Endpoint::Generate {
            model: model.map(str::to_string),
            stream,
        },
    )
}

fn route(method: &Method, path: &str, headers: &hyper::HeaderMap) -> Route {
    let post = method == Method::POST;
    let get = method == Method::GET;
    match path {
        "/_mock/turns" if post => return Route::PushTurns,
        "/token" if post => return Route::Token,
        "/oauth/token" if post => return Route::ChatGptToken,
        "/backend-api/codex/responses" if post => {
            return generate_route(WireFormat::Codex, None, None);
        }
        "/_mock/requests" if get => return Route::ListRequests,
        "/_mock/requests" if method == Method::DELETE => return Route::ClearRequests,
        "/v1/messages" if post => return generate_route(WireFormat::Anthropic, None, None),
        "/v1/messages/count_tokens" if post => {
            return provider(WireFormat::Anthropic, Endpoint::CountTokens);
        }
        "/v1/responses" if post => return generate_route(WireFormat::OpenAiResponses, None, None),
        "/v1/responses/input_tokens" if post => {
            return provider(WireFormat::OpenAiResponses, Endpoint::CountTokens);
        }
        "/v1/chat/completions" if post => {
            return generate_route(WireFormat::ChatCompletions, None, None);
        }
        "/v1/models" if get => {
            let anthropic =
                headers.contains_key("anthropic-version") || headers.contains_key("x-api-key");
            let format = if anthropic {
                WireFormat::Anthropic
            } else {
                WireFormat::OpenAiResponses
            };
            return provider(format, Endpoint::Models);
        }
        "/v1beta/models" if get => return provider(WireFormat::Gemini, Endpoint::Models),
        _ => {}
    }
    if !post {
        return Route::NotFound;
    }
    // Google: `/{version}/models/{model}:{action}` and
    // `/{version}/projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{model}:{action}`.
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (format, publisher, last) = match segments.as_slice() {
        ["v1beta" | "v1", "models", last] => (WireFormat::Gemini, "google", *last),
        [
            "v1" | "v1beta1",
            "projects",
            _,
            "locations",
            _,
            "publishers",
            publisher,
            "models",
            last,
        ] => (WireFormat::Vertex, *publisher, *last),
        _ => return Route::NotFound,
    };
    let Some((model, action)) = last.split_once(':') else {
        return Route::NotFound;
    };
    match (publisher, action) {
        ("google", "streamGenerateContent") => generate_route(format, Some(model), Some(true)),
        ("google", "generateContent") => generate_route(format, Some(model), Some(false)),
        ("google", "countTokens") => provider(format, Endpoint::CountTokens),
        // Claude on Vertex: the Anthropic body and stream behind Google's URL and auth.
        ("anthropic", "streamRawPredict") => {
            generate_route(WireFormat::Anthropic, Some(model), Some(true))
        }
        ("anthropic", "rawPredict") => {
            generate_route(WireFormat::Anthropic, Some(model), Some(false))
        }
        _ => Route::NotFound,
    }
}

/// The key presented the way `format`'s API expects it, if any.
fn presented_key(format: WireFormat, headers: &hyper::HeaderMap, query: &str) -> Option<String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let bearer = || {
        header("authorization")
            .and_then(|v| v.strip_prefix("Bearer ").map(|k| k.trim().to_string()))
    };
    match format {
        WireFormat::Anthropic => header("x-api-key").or_else(bearer),
        WireFormat::OpenAiResponses
        | WireFormat::ChatCompletions
        | WireFormat::Vertex
        | WireFormat::Codex => bearer(),
        WireFormat::Gemini => header("x-goog-api-key").or_else(|| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("key=").map(str::to_string))
        }),
    }
}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<ReplyBody>, Infallible> {
    let method = request.method().clone();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let headers = request.headers().clone();
    let raw = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            return Ok(plain(Reply::json(
                400,
                vec![],
                &json!({"error": format!("mock provider: could not read the request body: {error}")}),
            )));
        }
    };
    let raw_body = String::from_utf8_lossy(&raw).into_owned();
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let route = route(&method, &path, &headers);
    tracing::info!("{method} {path_and_query}");

    let (format, endpoint) = match route {
        Route::Provider { format, endpoint } => (format, endpoint),
        Route::PushTurns => return Ok(plain(push_turns(&shared, &raw))),
        Route::ChatGptToken => return Ok(plain(lock(&shared.chatgpt).refresh(&raw_body))),
        Route::Token => {
            lock(&shared.token_requests).push(raw_body.clone());
            let host = headers
                .get(hyper::header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            let audience = format!("http://{host}{path}");
            let issued = {
                let mut issued = lock(&shared.tokens_issued);
                *issued += 1;
                *issued
            };
            let key = shared.config.service_account_key.as_deref();
            return Ok(plain(crate::oauth::answer(
                &raw_body, &audience, key, issued,
            )));
        }
        Route::ListRequests => {
            let requests = json!(*lock(&shared.requests));
            return Ok(plain(Reply::json(200, vec![], &requests)));
        }
        Route::ClearRequests => {
            lock(&shared.requests).clear();
            return Ok(plain(Reply {
                status: 204,
                headers: vec![],
                frames: vec![],
            }));
        }
        Route::NotFound => {
            let message = format!(
                "mock provider: no endpoint for {method} {path}; see `flemma-mock-provider --help` for the served paths"
            );
            return Ok(plain(Reply::json(
                404,
                vec![],
                &json!({"error": {"message": message}}),
            )));
        }
    };
    lock(&shared.requests).push(RecordedRequest {
        method: method.to_string(),
        path: path_and_query,
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.clone(),
        raw_body,
        format,
    });
    let request = ProviderRequest {
        format,
        anthropic_on_vertex: path.contains("/publishers/anthropic/models/"),
        headers: &headers,
        query: &query,
        body: &body,
        body_len: raw.len(),
    };
    Ok(serve_provider(&shared, endpoint, &request))
}

/// A request to a provider endpoint, already recorded.
#[derive(Debug)]
struct ProviderRequest<'a> {
    format: WireFormat,
    /// Claude on Vertex (`…/publishers/anthropic/models/…`).
    anthropic_on_vertex: bool,
    headers: &'a hyper::HeaderMap,
    query: &'a str,
    body: &'a Value,
    body_len: usize,
}

/// Checks the key, then answers a provider endpoint.
fn serve_provider(
    shared: &Shared,
    endpoint: Endpoint,
    request: &ProviderRequest<'_>,
) -> Response<ReplyBody> {
    let format = request.format;
    // Claude on Vertex authenticates (and fails to) the Google way.
    let auth_format = if request.anthropic_on_vertex {
        WireFormat::Vertex
    } else {
        format
    };
    if format == WireFormat::Codex {
        return serve_codex(shared, endpoint, request);
    }
    if let Some(expected) = &shared.config.require_key {
        match presented_key(auth_format, request.headers, request.query) {
            None => return plain(formats::unauthorized(auth_format, KeyProblem::Missing, "")),
            Some(key) if &key != expected => {
                return plain(formats::unauthorized(
                    auth_format,
                    KeyProblem::Invalid,
                    &key,
                ));
            }
            Some(_) => {}
        }
    }
    let (model, stream) = match endpoint {
        Endpoint::CountTokens => {
            return plain(match format {
                WireFormat::Anthropic => formats::anthropic::count_tokens(request.body_len),
                WireFormat::OpenAiResponses | WireFormat::ChatCompletions | WireFormat::Codex => {
                    formats::responses::input_tokens(request.body_len)
                }
                WireFormat::Gemini | WireFormat::Vertex => {
                    formats::gemini::count_tokens(request.body_len)
                }
            });
        }
        Endpoint::Models => {
            return plain(match format {
                WireFormat::Anthropic => formats::anthropic::models(),
                WireFormat::Gemini | WireFormat::Vertex => formats::gemini::models(),
                WireFormat::OpenAiResponses | WireFormat::ChatCompletions | WireFormat::Codex => {
                    formats::chat::models()
                }
            });
        }
        Endpoint::Generate { model, stream } => (model, stream),
    };
    let body = request.body;
    let has_version = if request.anthropic_on_vertex {
        body.get("anthropic_version").is_some()
    } else {
        request.headers.contains_key("anthropic-version")
    };
    if let Some(invalid) =
        formats::validate_generation(format, body, has_version, request.anthropic_on_vertex)
    {
        return plain(invalid);
    }
    let turn = lock(&shared.turns)
        .pop_front()
        .map(|turn| turn.with_last_job_id(&body.to_string()));
    let source = if turn.is_some() {
        "the next scripted turn"
    } else {
        "an empty queue"
    };
    tracing::info!("answering {format:?} from {source}");
    let ctx = RequestContext {
        body,
        body_len: request.body_len,
        model: model
            .or_else(|| {
                body.get("model")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "mock-model".to_string()),
        stream: stream
            .unwrap_or_else(|| body.get("stream").and_then(Value::as_bool).unwrap_or(false)),
        chat_reasoning_field: shared.config.chat_reasoning_field,
        gemini_sse: request.query.split('&').any(|pair| pair == "alt=sse"),
        anthropic_on_vertex: request.anthropic_on_vertex,
    };
    generate(&shared.config, format, turn, &ctx)
}

/// The Codex backend: the account's credentials, the body as it takes it, a spent window;
/// then the next turn as a Responses stream with the account's rate-limit headers.
fn serve_codex(
    shared: &Shared,
    endpoint: Endpoint,
    request: &ProviderRequest<'_>,
) -> Response<ReplyBody> {
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let bearer = header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned));
    let account = lock(&shared.chatgpt);
    if let Some(refused) =
        account.refuse_credentials(bearer.as_deref(), header("chatgpt-account-id").as_deref())
    {
        return plain(refused);
    }
    if endpoint
        != (Endpoint::Generate {
            model: None,
            stream: None,
        })
    {
        return plain(Reply::json(404, vec![], &json!({"detail": "Not Found"})));
    }
    if let Some(refused) = crate::chatgpt::refuse_body(request.body, &account.reasoning) {
        return plain(refused);
    }
    if let Some(spent) = account.refuse_spent() {
        return plain(spent);
    }
    let headers = account.rate_limit_headers();
    drop(account);
    let turn = lock(&shared.turns)
        .pop_front()
        .map(|turn| turn.with_last_job_id(&request.body.to_string()));
    if let Some(turn) = &turn {
        // The reasoning this answer gives out may come back in later requests.
        let mut account = lock(&shared.chatgpt);
        for step in &turn.steps {
            match step {
                crate::Step::Thinking { signature, .. } => {
                    account.reasoning.insert(signature.clone());
                }
                crate::Step::RedactedThinking(data) => {
                    account.reasoning.insert(data.clone());
                }
                _ => {}
            }
        }
    }
    let ctx = RequestContext {
        body: request.body,
        body_len: request.body_len,
        model: request
            .body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("mock-model")
            .to_string(),
        stream: true,
        chat_reasoning_field: shared.config.chat_reasoning_field,
        gemini_sse: false,
        anthropic_on_vertex: false,
    };
    let mut response = generate(&shared.config, WireFormat::Codex, turn, &ctx);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

fn generate(
    config: &MockConfig,
    format: WireFormat,
    turn: Option<Turn>,
    ctx: &RequestContext<'_>,
) -> Response<ReplyBody> {
    let turn = match turn {
        Some(turn) => turn,
        None if config.echo_when_empty => Turn::text(format!(
            "You said: {}",
            formats::last_user_text(format, ctx.body)
        )),
        None => {
            let body = json!({"error": {
                "type": "mock_no_turn_left",
                "message": "mock provider: no scripted turn left; push one with MockProvider::push or POST /_mock/turns, or enable echo mode"
            }});
            return plain(Reply::json(500, vec![], &body));
        }
    };
    let reply = match &turn.failure {
        Some(Failure::Unauthorized) => {
            formats::unauthorized(format, KeyProblem::Invalid, "sk-mock-invalid-key-0000")
        }
        Some(Failure::Http {
            status,
            retry_after,
            retry_after_ms,
        }) => formats::http_error(format, *status, retry_after.as_deref(), *retry_after_ms),
        Some(Failure::Html { status }) => Reply::html(*status),
        Some(Failure::TooLong) => formats::too_long(format, ctx.body_len),
        _ => formats::render_turn(format, &turn, ctx),
    };
    let reply = match &turn.malformed_event {
        Some(needle) => reply.with_malformed_event(needle),
        None => reply,
    };
    let cut = match turn.failure {
        Some(Failure::DisconnectAfterBytes(bytes)) => Some(bytes),
        _ => None,
    };
    let pacing = Pacing {
        bytes_per_sec: turn.bytes_per_sec.filter(|rate| *rate > 0),
        cut,
        hold_open: turn.hold_open_ms.map(Duration::from_millis),
        stall: turn.stall_ms.map(Duration::from_millis),
    };
    to_response(reply, pacing)
}

/// How a response body is written: paced, cut after some bytes, held open after its end.
#[derive(Debug, Clone, Copy, Default)]
struct Pacing {
    bytes_per_sec: Option<u64>,
    cut: Option<usize>,
    hold_open: Option<Duration>,
    /// Silence in the middle of the body (after half of its frames).
    stall: Option<Duration>,
}

fn push_turns(shared: &Shared, raw: &[u8]) -> Reply {
    let parsed: Result<Vec<Turn>, _> = serde_json::from_slice::<Vec<Turn>>(raw)
        .or_else(|_| serde_json::from_slice::<Turn>(raw).map(|turn| vec![turn]));
    match parsed {
        Ok(turns) => {
            let mut queue = lock(&shared.turns);
            let added = turns.len();
            queue.extend(turns);
            Reply::json(200, vec![], &json!({"added": added, "queued": queue.len()}))
        }
        Err(error) => Reply::json(
            400,
            vec![],
            &json!({"error": {"message": format!(
                "mock provider: the body is not a JSON array of turns ({error}); expected e.g. [{{\"steps\":[{{\"text\":\"Hi\"}}]}}]"
            )}}),
        ),
    }
}

/// Builds a response whose body is written at once.
fn plain(reply: Reply) -> Response<ReplyBody> {
    to_response(reply, Pacing::default())
}

/// Builds the response; the body is written frame by frame (each frame flushed), paced at
/// `bytes_per_sec`, cut (connection aborted) after `cut` bytes and held open after its last
/// frame when asked.
fn to_response(reply: Reply, pacing: Pacing) -> Response<ReplyBody> {
    let unpaced = pacing.bytes_per_sec.is_none()
        && pacing.cut.is_none()
        && pacing.hold_open.is_none()
        && pacing.stall.is_none();
    let body = if unpaced && reply.frames.len() <= 1 {
        // One JSON or HTML document: sent with a content-length, like the real APIs do.
        let whole = reply.frames.into_iter().next().unwrap_or_default();
        http_body_util::Full::new(whole)
            .map_err(|never| match never {})
            .boxed()
    } else if unpaced {
        let frames = reply
            .frames
            .into_iter()
            .map(|f| Ok::<_, std::io::Error>(Frame::data(f)));
        StreamBody::new(stream::iter(frames)).boxed()
    } else {
        paced_body(reply.frames, pacing)
    };
    let mut builder = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(name, value);
    }
    builder.body(body).unwrap_or_else(|error| {
        let mut response = Response::new(
            http_body_util::Full::new(Bytes::from(format!(
                "mock provider: bad response header: {error}"
            )))
            .map_err(|never| match never {})
            .boxed(),
        );
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
    })
}

fn paced_body(frames: Vec<Bytes>, pacing: Pacing) -> ReplyBody {
    let Pacing {
        bytes_per_sec,
        cut,
        hold_open,
        stall,
    } = pacing;
    let stall_at = frames.len() / 2;
    let (sender, receiver) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut sent = 0usize;
        let piece_size = bytes_per_sec.map_or(usize::MAX, |bps| ((bps / 20).max(1)) as usize);
        for (index, frame) in frames.into_iter().enumerate() {
            if let Some(silence) = stall.filter(|_| index == stall_at) {
                tokio::select! {
                    () = tokio::time::sleep(silence) => {}
                    () = sender.closed() => return,
                }
            }
            let mut rest = frame;
            while !rest.is_empty() {
                let piece = rest.split_to(piece_size.min(rest.len()));
                if let Some(bps) = bytes_per_sec {
                    let due = start + Duration::from_secs_f64(sent as f64 / bps.max(1) as f64);
                    tokio::time::sleep_until(due).await;
                }
                if let Some(limit) = cut
                    && sent + piece.len() >= limit
                {
                    let keep = piece.slice(..limit - sent);
                    if !keep.is_empty() && sender.send(Ok(Frame::data(keep))).await.is_err() {
                        return;
                    }
                    abort_after_flush(&sender).await;
                    return;
                }
                sent += piece.len();
                if sender.send(Ok(Frame::data(piece))).await.is_err() {
                    return;
                }
            }
        }
        if cut.is_some() {
            abort_after_flush(&sender).await;
        }
        if let Some(hold) = hold_open {
            // Ends early when the client goes away (the receiver is dropped).
            tokio::select! {
                () = tokio::time::sleep(hold) => {}
                () = sender.closed() => {}
            }
        }
    });
    let body = stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    StreamBody::new(body).boxed()
}

/// Lets hyper write what it has, then fails the body so hyper drops the connection without
/// finishing the chunked encoding.
async fn abort_after_flush(sender: &mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>) {
    tokio::time::sleep(Duration::from_millis(50)).await;
    let error = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "scripted disconnect");
    let _ = sender.send(Err(error)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_path() {
        let headers = hyper::HeaderMap::new();
        let gemini = route(
            &Method::POST,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            &headers,
        );
        assert_eq!(
            gemini,
            generate_route(WireFormat::Gemini, Some("gemini-2.5-flash"), Some(true))
        );
        let vertex = route(
            &Method::POST,
            "/v1beta1/projects/p/locations/us-east5/publishers/google/models/gemini-2.5-pro:countTokens",
            &headers,
        );
        assert_eq!(vertex, provider(WireFormat::Vertex, Endpoint::CountTokens));
        let claude = route(
            &Method::POST,
            "/v1/projects/p/locations/global/publishers/anthropic/models/claude@1:rawPredict",
            &headers,
        );
        assert_eq!(
            claude,
            generate_route(WireFormat::Anthropic, Some("claude@1"), Some(false))
        );
        assert_eq!(
            route(&Method::GET, "/v1/messages", &headers),
            Route::NotFound
        );
        assert_eq!(
            route(&Method::GET, "/v1/models", &headers),
            provider(WireFormat::OpenAiResponses, Endpoint::Models)
        );
        assert_eq!(
            route(&Method::POST, "/v1beta/models/g:embed", &headers),
            Route::NotFound
        );
    }
}
