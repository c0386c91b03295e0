//! The session over an in-memory connection, with backends standing in for the engine.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use flemma_lsp::{Backend, BackendError, EngineCommand, Outbox};
use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{Value, json};

/// An engine with a bug: every command panics.
struct Panicking;

impl Backend for Panicking {
    fn command(&mut self, _: EngineCommand, _: &Outbox) -> Result<Value, BackendError> {
        panic!("engine bug");
    }
}

fn request(client: &Connection, id: i32, method: &str, params: Value) -> lsp_server::Response {
    client
        .sender
        .send(Message::Request(Request::new(
            RequestId::from(id),
            method.into(),
            params,
        )))
        .unwrap();
    loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
        {
            Message::Response(r) if r.id == RequestId::from(id) => return r,
            _ => continue,
        }
    }
}

#[test]
fn a_panicking_handler_answers_with_an_error_and_the_server_goes_on() {
    let (server, client) = Connection::memory();
    let thread = std::thread::spawn(move || flemma_lsp::run(server, Box::new(Panicking)));
    let init = request(
        &client,
        1,
        "initialize",
        json!({"processId": null, "capabilities": {}}),
    );
    assert_eq!(
        init.response_result.unwrap()["capabilities"]["positionEncoding"],
        "utf-16"
    );
    client
        .sender
        .send(Message::Notification(Notification::new(
            "textDocument/didOpen".into(),
            json!({"textDocument": {"uri": "file:///t.chat", "languageId": "chat", "version": 0,
                   "text": "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n"}}),
        )))
        .unwrap();
    let status = request(
        &client,
        2,
        "workspace/executeCommand",
        json!({"command": "flemma.status", "arguments": ["file:///t.chat"]}),
    );
    let error = status.response_result.unwrap_err();
    assert_eq!(error.code, -32603);
    assert!(
        error.message.contains("engine bug") && error.message.contains("keeps running"),
        "{}",
        error.message
    );
    let hover = request(
        &client,
        3,
        "textDocument/hover",
        json!({"textDocument": {"uri": "file:///t.chat"}, "position": {"line": 1, "character": 16}}),
    );
    let hover = hover.response_result.unwrap();
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .contains("`bash`")
    );
    // The flemma/* request of the same command panics the same way, and is answered.
    let send = request(&client, 4, "flemma/send", json!({"uri": "file:///t.chat"}));
    let error = send.response_result.unwrap_err();
    assert_eq!(error.code, -32603);
    assert!(error.message.contains("flemma/send"), "{}", error.message);
    let bad = request(&client, 6, "flemma/send", json!({}));
    assert_eq!(bad.response_result.unwrap_err().code, -32602);
    request(&client, 5, "shutdown", Value::Null);
    client
        .sender
        .send(Message::Notification(Notification::new(
            "exit".into(),
            Value::Null,
        )))
        .unwrap();
    thread.join().unwrap().unwrap();
}

/// An engine whose request fails at once (a provider error).
struct FailingProvider;

impl Backend for FailingProvider {
    fn command(&mut self, command: EngineCommand, outbox: &Outbox) -> Result<Value, BackendError> {
        outbox.send(flemma_lsp::Task::Failed {
            uri: command.uri().to_owned(),
            message: "anthropic answered 529 overloaded; send again later".into(),
        });
        Ok(json!({"started": true}))
    }
}

#[test]
fn a_failed_request_is_shown_to_the_user() {
    let (server, client) = Connection::memory();
    let thread = std::thread::spawn(move || flemma_lsp::run(server, Box::new(FailingProvider)));
    request(
        &client,
        1,
        "initialize",
        json!({"processId": null, "capabilities": {"window": {"workDoneProgress": true}}}),
    );
    client
        .sender
        .send(Message::Notification(Notification::new(
            "textDocument/didOpen".into(),
            json!({"textDocument": {"uri": "file:///t.chat", "languageId": "chat", "version": 0,
                   "text": "@You:\nhello\n"}}),
        )))
        .unwrap();
    let sent = request(&client, 2, "flemma/send", json!({"uri": "file:///t.chat"}));
    assert_eq!(sent.response_result.unwrap(), json!({"started": true}));
    let shown = loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
        {
            Message::Notification(n) if n.method == "window/showMessage" => break n.params,
            _ => continue,
        }
    };
    assert_eq!(shown["type"], 1);
    assert_eq!(
        shown["message"],
        "flemma: anthropic answered 529 overloaded; send again later"
    );
    request(&client, 3, "shutdown", Value::Null);
    client
        .sender
        .send(Message::Notification(Notification::new(
            "exit".into(),
            Value::Null,
        )))
        .unwrap();
    thread.join().unwrap().unwrap();
}
