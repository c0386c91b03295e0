//! `rpc.sock`: JSON-RPC 2.0, one JSON message per line (`docs/rpc.md`).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Daemon, Event, Filter, engine_methods};

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;

/// How long a write to a client that does not read may block before the client is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest accepted line (a request is small; this bounds memory per connection).
const MAX_LINE: usize = 1 << 20;

type Writer = Arc<Mutex<UnixStream>>;

fn send(writer: &Writer, message: &Value) -> std::io::Result<()> {
    let mut line = message.to_string();
    line.push('\n');
    let mut stream = writer.lock().unwrap_or_else(PoisonError::into_inner);
    stream.write_all(line.as_bytes())?;
    stream.flush()
}

fn error_response(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn result_response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
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
    let mut subscription = None;
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
                &error_response(Value::Null, INVALID_REQUEST, "line longer than 1 MiB"),
            );
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some(response) = handle_line(daemon, &line, &writer, &mut subscription) else {
            continue;
        };
        if send(&writer, &response).is_err() {
            break;
        }
    }
    if let Some(subscription) = subscription {
        daemon.events.unsubscribe(&subscription);
    }
    tracing::debug!(connection = id, "RPC client disconnected");
}

/// The answer to one line (`None` for a notification).
fn handle_line(
    daemon: &Arc<Daemon>,
    line: &[u8],
    writer: &Writer,
    subscription: &mut Option<Arc<super::events::Subscription>>,
) -> Option<Value> {
    let message: Value = match serde_json::from_slice(line) {
        Ok(message) => message,
        Err(error) => {
            return Some(error_response(
                Value::Null,
                PARSE_ERROR,
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
            INVALID_REQUEST,
            "invalid request: expected an object with \"jsonrpc\": \"2.0\" and a string \"method\"",
        ));
    };
    let params = message.get("params");
    let engine_call = || match daemon.engine.get() {
        Some(engine) => engine_methods::call(engine, method, params),
        None => Some(Err((
            engine_methods::SHUTTING_DOWN,
            "the daemon's engine is not running (it is starting or stopping); try again".into(),
        ))),
    };
    let result = match method {
        "flemma/ping" => Ok(json!("pong")),
        // With a document: the engine's status of it.
        "flemma/status" if params.is_some_and(|p| p.get("uri").is_some()) => {
            engine_call().unwrap_or_else(|| Ok(Value::Null))
        }
        "flemma/status" => Ok(json!({
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "uptimeSeconds": daemon.uptime().as_secs_f64(),
            "lspSessions": daemon.open_lsp_sessions(),
            "eventSubscribers": daemon.events.subscriber_count(),
        })),
        "flemma/shutdown" => {
            // Answer before the main loop starts closing connections.
            if let Some(id) = id {
                let _ = send(writer, &result_response(id, Value::Null));
            }
            daemon.request_shutdown();
            return None;
        }
        "flemma/subscribe" => match subscribe_filter(params) {
            Err(error) => Err(error),
            Ok(filter) => {
                subscribe(daemon, writer, subscription, filter);
                Ok(json!({"subscribed": subscription.is_some()}))
            }
        },
        other => match engine_call() {
            Some(result) => result,
            None => Err((
                METHOD_NOT_FOUND,
                format!(
                    "unknown method `{other}`; the methods are flemma/ping, flemma/status, flemma/subscribe, flemma/shutdown, {} (docs/rpc.md)",
                    engine_methods::METHODS.join(", ")
                ),
            )),
        },
    };
    // A notification (no id) gets no answer, whatever happened.
    let id = id?;
    Some(match result {
        Ok(result) => result_response(id, result),
        Err((code, message)) => error_response(id, code, message),
    })
}

/// The filter of a `flemma/subscribe`: `{"uri"?: document, "text"?: bool}` (no params: every
/// event but the streamed text).
fn subscribe_filter(params: Option<&Value>) -> Result<Filter, (i64, String)> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SubscribeParams {
        uri: Option<String>,
        #[serde(default)]
        text: bool,
    }
    let params: SubscribeParams = match params {
        None | Some(Value::Null) => return Ok(Filter::default()),
        Some(params) => serde_json::from_value(params.clone()).map_err(|error| {
            (
                engine_methods::INVALID_PARAMS,
                format!(
                    "invalid params for flemma/subscribe: {error}; expected {{\"uri\"?: an absolute path or file:// URI, \"text\"?: true}}"
                ),
            )
        })?,
    };
    let uri = match params.uri {
        Some(uri) => Some(flemma_lsp::path_to_uri(&engine_methods::document_path(
            "flemma/subscribe",
            &uri,
        )?)),
        None => None,
    };
    Ok(Filter {
        uri,
        text: params.text,
    })
}

/// Starts (or re-filters) this connection's event stream.
fn subscribe(
    daemon: &Arc<Daemon>,
    writer: &Writer,
    subscription: &mut Option<Arc<super::events::Subscription>>,
    filter: Filter,
) {
    if let Some(queue) = subscription {
        queue.set_filter(filter);
        return;
    }
    let queue = daemon.events.subscribe_with(filter);
    let forward_to = Arc::clone(writer);
    let from = Arc::clone(&queue);
    let spawned = std::thread::Builder::new()
        .name("rpc-events".into())
        .spawn(move || forward_events(&from, &forward_to));
    match spawned {
        Ok(_) => *subscription = Some(queue),
        Err(error) => {
            daemon.events.unsubscribe(&queue);
            tracing::error!(%error, "cannot start the event forwarder");
        }
    }
}

fn forward_events(subscription: &super::events::Subscription, writer: &Writer) {
    while let Some((event, dropped)) = subscription.next() {
        let notice =
            (dropped > 0).then(|| Event::new("events:dropped", json!({ "count": dropped })));
        let sent = notice
            .iter()
            .chain(std::iter::once(&event))
            .try_for_each(|event| send(writer, &notification(event)));
        if let Err(error) = sent {
            // A subscriber that does not read (write timeout) or went away: disconnect it, so
            // its connection thread ends and unsubscribes.
            tracing::info!(%error, "disconnecting an event subscriber");
            let stream = writer.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            break;
        }
    }
}

fn notification(event: &Event) -> Value {
    json!({"jsonrpc": "2.0", "method": "flemma/event", "params": event})
}
