//! `rpc.sock`: JSON-RPC 2.0, one JSON message per line (`docs/rpc.md`).
//!
//! The methods are one `jsonrpsee` module, registered once ([`methods`]): every `flemma/*`
//! request of `flemma_protocol::methods::METHODS` (decoded into a `FlemmaRequest` and answered
//! by `EngineHost::call`, as the language server's are), and the daemon's own `flemma/ping`,
//! `flemma/status` (without a document), `flemma/subscribe` and `flemma/shutdown`. jsonrpsee
//! serves no socket here: this file is the transport that feeds the module. It reads lines from
//! a Unix-socket connection (peer uid checked at accept), answers what is not a request itself
//! (a line that is not JSON, JSON that is not a request, an unknown method) and hands each
//! request to the module with `raw_json_request`, under its own id, writing the answer back
//! under the caller's (so any JSON id works). The connection reaches the methods that need it
//! (`flemma/subscribe`, `flemma/shutdown`) as a [`Connection`] in the call's extensions.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use flemma_protocol::error::{RequestError, codes};
use flemma_protocol::methods::{FlemmaRequest, METHODS, Method, PING, SHUTDOWN, SUBSCRIBE};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{Extensions, Methods, RpcModule};
use serde_json::{Value, json};

use super::events::Subscription;
use super::{Daemon, Event, Filter};
use crate::engine_host::DocumentRef;
use flemma_protocol::event::{DaemonEvent, EventsDropped};

/// How long a write to a client that does not read may block before the client is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest accepted line (a request is small; this bounds memory per connection).
const MAX_LINE: usize = 1 << 20;

type Writer = Arc<Mutex<UnixStream>>;

/// One connection, as its methods see it (the extension of every call it makes).
#[derive(Debug, Clone)]
pub struct Connection(Arc<ConnectionState>);

#[derive(Debug)]
struct ConnectionState {
    daemon: Arc<Daemon>,
    writer: Writer,
    subscription: Mutex<Option<Arc<Subscription>>>,
    /// `flemma/shutdown` was called: the daemon stops once the answer is written.
    shutdown: AtomicBool,
}

/// The methods of `rpc.sock`, registered once.
pub fn methods() -> Result<Methods, jsonrpsee::core::RegisterMethodError> {
    let mut module = RpcModule::new(());
    module.register_method(PING, |_, _, _| "pong")?;
    module.register_method(SHUTDOWN, |_, _, extensions| {
        let connection = connection(extensions)?;
        connection.0.shutdown.store(true, Ordering::SeqCst);
        Ok::<_, ErrorObjectOwned>(Value::Null)
    })?;
    module.register_method(SUBSCRIBE, |params, _, extensions| {
        let connection = connection(extensions)?;
        let filter = subscribe_filter(params_value(&params)).map_err(error_object)?;
        subscribe(&connection.0, filter);
        let subscribed = lock(&connection.0.subscription).is_some();
        Ok::<_, ErrorObjectOwned>(json!({ "subscribed": subscribed }))
    })?;
    for &method in METHODS {
        module.register_method(method, move |params, _, extensions| {
            let connection = connection(extensions)?;
            let params = params_value(&params);
            // `flemma/status` without a document is the daemon's own status.
            if Method::of_name(method) == Some(Method::Status)
                && params.as_ref().is_none_or(is_empty)
            {
                return Ok(daemon_status(&connection.0.daemon));
            }
            engine_call(&connection.0.daemon, method, params).map_err(error_object)
        })?;
    }
    Ok(module.into())
}

/// A `flemma/*` request, as the language server answers it: decoded, its document resolved
/// (an absolute path or a `file://` URI: the daemon does not know the caller's working
/// directory), answered by the engine host.
fn engine_call(
    daemon: &Daemon,
    method: &str,
    params: Option<Value>,
) -> Result<Value, RequestError> {
    let request = FlemmaRequest::decode(method, params.unwrap_or(Value::Null))?;
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

fn is_empty(params: &Value) -> bool {
    params.is_null() || params.as_object().is_some_and(serde_json::Map::is_empty)
}

/// The call's params as JSON (`None` when it has none; the transport passed valid JSON).
fn params_value(params: &jsonrpsee::types::Params<'_>) -> Option<Value> {
    params
        .as_str()
        .and_then(|raw| serde_json::from_str(raw).ok())
}

fn connection(extensions: &Extensions) -> Result<&Connection, ErrorObjectOwned> {
    extensions.get::<Connection>().ok_or_else(|| {
        error_object(RequestError::new(
            codes::INTERNAL_ERROR,
            "the call came without its connection",
        ))
    })
}

fn error_object(error: RequestError) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(error.code, error.message, None::<()>)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn send(writer: &Writer, message: &Value) -> std::io::Result<()> {
    let mut line = message.to_string();
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
    let (Some(methods), Ok(runtime)) = (daemon.rpc.get(), crate::runtime::handle()) else {
        tracing::error!(
            connection = id,
            "the RPC methods or the runtime are missing"
        );
        return;
    };
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
    let mut methods = methods.clone();
    methods
        .extensions_mut()
        .insert(Connection(Arc::clone(&state)));
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
        let response = handle_line(&methods, &runtime, &line);
        if let Some(response) = response
            && send(&writer, &response).is_err()
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

/// The answer to one line (`None` for a notification).
fn handle_line(methods: &Methods, runtime: &tokio::runtime::Handle, line: &[u8]) -> Option<Value> {
    let message: Value = match serde_json::from_slice(line) {
        Ok(message) => message,
        Err(error) => {
            return Some(error_response(
                Value::Null,
                codes::PARSE_ERROR,
                format!("parse error: {error}; send one JSON-RPC 2.0 object per line"),
            ));
        }
    };
    let id = message.get("id").cloned();
    let method = message.get("method").and_then(Value::as_str);
    let (Some(method), true) = (
        method,
        message.is_object() && message.get("jsonrpc") == Some(&json!("2.0")),
    ) else {
        return Some(error_response(
            id.unwrap_or(Value::Null),
            codes::INVALID_REQUEST,
            "invalid request: expected an object with \"jsonrpc\": \"2.0\" and a string \"method\"",
        ));
    };
    let answer = if methods.method(method).is_none() {
        let refused = flemma_protocol::methods::unknown_method(method);
        json!({"error": {"code": refused.code, "message": refused.message}})
    } else {
        // The module answers under its own id; the caller's goes back on the answer.
        let mut call = json!({"jsonrpc": "2.0", "id": 0, "method": method});
        if let Some(params) = message.get("params") {
            call["params"] = params.clone();
        }
        match runtime.block_on(methods.raw_json_request(&call.to_string(), 1)) {
            Ok((answer, _)) => serde_json::from_str(answer.get()).unwrap_or(Value::Null),
            Err(error) => json!({"error": {"code": codes::INVALID_REQUEST,
                "message": format!("invalid request: {error}")}}),
        }
    };
    // A notification (no id) gets no answer, whatever happened.
    let id = id?;
    Some(match answer.get("error") {
        Some(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        None => json!({"jsonrpc": "2.0", "id": id,
            "result": answer.get("result").cloned().unwrap_or(Value::Null)}),
    })
}

/// The filter of a `flemma/subscribe`: `{"uri"?: document, "text"?: bool}` (no params: every
/// event but the streamed text).
fn subscribe_filter(params: Option<Value>) -> Result<Filter, RequestError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SubscribeParams {
        uri: Option<String>,
        #[serde(default)]
        text: bool,
    }
    let params: SubscribeParams = match params {
        None | Some(Value::Null) => return Ok(Filter::default()),
        Some(params) => serde_json::from_value(params).map_err(|error| {
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
