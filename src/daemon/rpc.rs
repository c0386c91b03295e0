//! `rpc.sock`: JSON-RPC 2.0, one JSON message per line (`docs/rpc.md`).
//!
//! Each line is decoded once: the envelope (`jsonrpc`, `id`, `method`) is read borrowing from
//! the line, the `id` and the `params` kept as their JSON text ([`RawValue`]); the method is
//! matched against the typed list (`flemma_protocol::methods`), and a `flemma/*` request's
//! params are decoded from their text straight into its params type
//! (`FlemmaRequest::decode_text`), answered by `EngineHost::call` as the language server's
//! are. The daemon's own `flemma/ping`, `flemma/status` (without a document),
//! `flemma/subscribe` and `flemma/shutdown` are answered here. The answer is written once,
//! with the caller's id as it was sent (so any JSON id works). A line that is not JSON, JSON
//! that is not a request and an unknown method are answered with their JSON-RPC errors. The
//! peer's uid is checked at accept (`socket`). Why not a `jsonrpsee` module (as before issue
//! 28): it takes a whole request as text and answers with text, so the line was parsed by us,
//! written again and parsed by it, its params parsed once more into a `Value`, and its answer
//! parsed back to put the caller's id on it — about seven decodes of each request.

use std::borrow::Cow;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flemma_protocol::error::{RequestError, codes};
use flemma_protocol::event::{DaemonEvent, EventsDropped};
use flemma_protocol::methods::{FlemmaRequest, METHODS, Method, PING, SHUTDOWN, SUBSCRIBE};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::events::Subscription;
use super::{Daemon, Event, Filter};
use crate::engine_host::DocumentRef;

/// How long a write to a client that does not read may block before the client is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest accepted line (a request is small; this bounds memory per connection).
const MAX_LINE: usize = 1 << 20;

type Writer = Arc<Mutex<UnixStream>>;

#[derive(Debug)]
struct ConnectionState {
    daemon: Arc<Daemon>,
    writer: Writer,
    subscription: Mutex<Option<Arc<Subscription>>>,
    /// `flemma/shutdown` was called: the daemon stops once the answer is written.
    shutdown: AtomicBool,
}

/// A request as the line holds it: the envelope decoded, borrowing from the line, and the
/// `id` and `params` as their JSON text.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    /// Present (even `null`): a request to answer; absent: a notification.
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
}

/// A field that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The answer to one call: what the method gave, or why it refused.
fn answer(
    connection: &ConnectionState,
    method: &str,
    params: Option<&RawValue>,
) -> Result<Value, RequestError> {
    let params = params.map(RawValue::get);
    match method {
        PING => Ok(json!("pong")),
        SHUTDOWN => {
            connection.shutdown.store(true, Ordering::SeqCst);
            Ok(Value::Null)
        }
        SUBSCRIBE => {
            subscribe(connection, subscribe_filter(params)?);
            let subscribed = lock(&connection.subscription).is_some();
            Ok(json!({ "subscribed": subscribed }))
        }
        // `flemma/status` without a document is the daemon's own status.
        _ if Method::of_name(method) == Some(Method::Status) && params.is_none_or(is_empty) => {
            Ok(daemon_status(&connection.daemon))
        }
        _ if METHODS.contains(&method) => engine_call(&connection.daemon, method, params),
        _ => Err(flemma_protocol::methods::unknown_method(method)),
    }
}

/// A `flemma/*` request, as the language server answers it: decoded, its document resolved
/// (an absolute path or a `file://` URI: the daemon does not know the caller's working
/// directory), answered by the engine host.
fn engine_call(daemon: &Daemon, method: &str, params: Option<&str>) -> Result<Value, RequestError> {
    let request = FlemmaRequest::decode_text(method, params)?;
    let engine = daemon.engine().ok_or_else(|| {
        RequestError::shutting_down(
            "the daemon's engine is not running (it is starting or stopping); try again",
        )
    })?;
    let path = flemma_protocol::document::document_path(method, request.uri(), None)?;
    let response = engine.call(DocumentRef::path(&path), request)?;
    serde_json::to_value(response).map_err(|error| {
        RequestError::new(
            codes::INTERNAL_ERROR,
            format!("cannot encode the answer: {error}"),
        )
    })
}

fn daemon_status(daemon: &Daemon) -> Value {
    json!({
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
        "uptimeSeconds": daemon.uptime().as_secs_f64(),
        "lspSessions": daemon.open_lsp_sessions(),
        "eventSubscribers": daemon.events.subscriber_count(),
    })
}

/// Params that name nothing: `null` or `{}` (read from the text: it is valid JSON).
fn is_empty(params: &str) -> bool {
    let params = params.trim();
    params == "null"
        || params
            .strip_prefix('{')
            .and_then(|inner| inner.strip_suffix('}'))
            .is_some_and(|inner| inner.trim().is_empty())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn send(writer: &Writer, message: &Value) -> std::io::Result<()> {
    send_line(writer, message.to_string())
}

fn send_line(writer: &Writer, mut line: String) -> std::io::Result<()> {
    line.push('\n');
    let mut stream = lock(writer);
    stream.write_all(line.as_bytes())?;
    stream.flush()
}

fn error_response(id: Value, code: i32, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// Serves one RPC client until it disconnects.
pub fn serve_connection(daemon: &Arc<Daemon>, stream: UnixStream, id: u64, peer_pid: i32) {
    tracing::debug!(connection = id, peer_pid, "RPC client connected");
    let reader = match stream.try_clone() {
        Ok(reader) => reader,
        Err(error) => {
            tracing::error!(connection = id, %error, "cannot clone the RPC connection");
            return;
        }
    };
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let writer: Writer = Arc::new(Mutex::new(stream));
    let state = Arc::new(ConnectionState {
        daemon: Arc::clone(daemon),
        writer: Arc::clone(&writer),
        subscription: Mutex::new(None),
        shutdown: AtomicBool::new(false),
    });
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(connection = id, %error, "RPC read failed");
                break;
            }
        }
        if line.len() > MAX_LINE {
            let _ = send(
                &writer,
                &error_response(
                    Value::Null,
                    codes::INVALID_REQUEST,
                    "line longer than 1 MiB",
                ),
            );
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let response = handle_line(&state, &line);
        if let Some(response) = response
            && send_line(&writer, response).is_err()
        {
            break;
        }
        // Answered first, then the main loop starts closing connections.
        if state.shutdown.swap(false, Ordering::SeqCst) {
            daemon.request_shutdown();
        }
    }
    if let Some(subscription) = lock(&state.subscription).take() {
        daemon.events.unsubscribe(&subscription);
    }
    tracing::debug!(connection = id, "RPC client disconnected");
}

/// The answer to one line, as the line to write (`None` for a notification).
fn handle_line(connection: &ConnectionState, line: &[u8]) -> Option<String> {
    let incoming = match serde_json::from_slice::<Incoming<'_>>(line) {
        Ok(incoming) => incoming,
        Err(error) => return Some(not_a_request(line, &error)),
    };
    let (Some(method), true) = (
        incoming.method.as_deref(),
        incoming.jsonrpc.as_deref() == Some("2.0"),
    ) else {
        return Some(invalid_request(incoming.id));
    };
    let answer = answer(connection, method, incoming.params);
    // A notification (no id) gets no answer, whatever happened.
    let id = incoming.id?;
    Some(match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        Err(error) => json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": error.code, "message": error.message}})
        .to_string(),
    })
}

/// The answer to a line that is no request: not JSON (`-32700`, id `null`), or JSON that is
/// not a request object (`-32600`, with its id when it has one).
fn not_a_request(line: &[u8], error: &serde_json::Error) -> String {
    match serde_json::from_slice::<Value>(line) {
        Err(_) => error_response(
            Value::Null,
            codes::PARSE_ERROR,
            format!("parse error: {error}; send one JSON-RPC 2.0 object per line"),
        )
        .to_string(),
        Ok(message) => {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            error_response(id, codes::INVALID_REQUEST, INVALID_REQUEST).to_string()
        }
    }
}

fn invalid_request(id: Option<&RawValue>) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INVALID_REQUEST,
        "message": INVALID_REQUEST}})
    .to_string()
}

const INVALID_REQUEST: &str =
    "invalid request: expected an object with \"jsonrpc\": \"2.0\" and a string \"method\"";

/// The filter of a `flemma/subscribe`: `{"uri"?: document, "text"?: bool}` (no params: every
/// event but the streamed text).
fn subscribe_filter(params: Option<&str>) -> Result<Filter, RequestError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SubscribeParams {
        uri: Option<String>,
        #[serde(default)]
        text: bool,
    }
    let params: SubscribeParams = match params.map(str::trim) {
        None | Some("null") => return Ok(Filter::default()),
        Some(params) => serde_json::from_str(params).map_err(|error| {
            RequestError::invalid_params(format!(
                "invalid params for `{SUBSCRIBE}`: {error}; it takes {{\"uri\"?: an absolute path or file:// URI, \"text\"?: true}}"
            ))
        })?,
    };
    let uri = match params.uri {
        Some(uri) => Some(flemma_protocol::document::path_to_uri(
            &flemma_protocol::document::document_path(SUBSCRIBE, &uri, None)?,
        )),
        None => None,
    };
    Ok(Filter {
        uri,
        text: params.text,
    })
}

/// Starts (or re-filters) this connection's event stream.
fn subscribe(connection: &ConnectionState, filter: Filter) {
    let mut subscription = lock(&connection.subscription);
    if let Some(queue) = subscription.as_ref() {
        queue.set_filter(filter);
        return;
    }
    let events = &connection.daemon.events;
    let queue = events.subscribe_with(filter);
    let forward_to = Arc::clone(&connection.writer);
    let from = Arc::clone(&queue);
    let spawned = std::thread::Builder::new()
        .name("rpc-events".into())
        .spawn(move || forward_events(&from, &forward_to));
    match spawned {
        Ok(_) => *subscription = Some(queue),
        Err(error) => {
            events.unsubscribe(&queue);
            tracing::error!(%error, "cannot start the event forwarder");
        }
    }
}

fn forward_events(subscription: &Subscription, writer: &Writer) {
    while let Some((event, dropped)) = subscription.next() {
        let notice =
            (dropped > 0).then_some(Event::Daemon(DaemonEvent::EventsDropped(EventsDropped {
                count: dropped,
            })));
        let sent = notice
            .iter()
            .chain(std::iter::once(&event))
            .try_for_each(|event| send(writer, &notification(event)));
        if let Err(error) = sent {
            // A subscriber that does not read (write timeout) or went away: disconnect it, so
            // its connection thread ends and unsubscribes.
            tracing::info!(%error, "disconnecting an event subscriber");
            let stream = lock(writer);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            break;
        }
    }
}

fn notification(event: &Event) -> Value {
    json!({"jsonrpc": "2.0", "method": flemma_protocol::methods::EVENT_NOTIFICATION, "params": event})
}
