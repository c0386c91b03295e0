//! The engine's hold on an open document through the session (`Task::ReadBuffer`,
//! `Task::ReplaceBuffer`), over an in-memory connection: an edit is answered `Applied` only once
//! the client applied it and a change it reported shows it, `Refused` when the client refuses
//! it, `Dropped` when the client says `applied: true` but its text does not hold the edit
//! (Neovim), `Moved` when the mirror moved before it was sent, `Closed` when the document closes
//! with the edit in flight.

#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::Duration;

use flemma_lsp::{Backend, BufferAnswer, BufferSnapshot, Outbox, Reply, RequestDocument, Task};
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};
use flemma_syntax::TextRange;
use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use serde_json::{Value, json};

const URI: &str = "file:///t.chat";

/// Hands the outbox of every document the session opens (and closes) to the test.
struct Recorder(mpsc::Sender<(String, Option<Outbox>)>);

impl Backend for Recorder {
    fn call(
        &mut self,
        _: RequestDocument<'_>,
        request: FlemmaRequest,
        _: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        Err(RequestError::refused(format!(
            "{} is not for this test",
            request.method()
        )))
    }
    fn opened(&mut self, uri: &str, _text: &str, outbox: &Outbox) {
        let _ = self.0.send((uri.to_owned(), Some(outbox.clone())));
    }
    fn closed(&mut self, uri: &str) {
        let _ = self.0.send((uri.to_owned(), None));
    }
}

struct Setup {
    client: Connection,
    outbox: Outbox,
    events: mpsc::Receiver<(String, Option<Outbox>)>,
    thread: std::thread::JoinHandle<Result<(), flemma_lsp::LspError>>,
}

fn notify(client: &Connection, method: &str, params: Value) {
    client
        .sender
        .send(Message::Notification(Notification::new(
            method.into(),
            params,
        )))
        .unwrap();
}

fn setup(text: &str) -> Setup {
    let (server, client) = Connection::memory();
    let (tx, events) = mpsc::channel();
    let thread = std::thread::spawn(move || flemma_lsp::run(server, Box::new(Recorder(tx))));
    client
        .sender
        .send(Message::Request(Request::new(
            RequestId::from(1),
            "initialize".into(),
            json!({"processId": null, "capabilities": {"general": {"positionEncodings": ["utf-8"]},
                   "workspace": {"applyEdit": true}}}),
        )))
        .unwrap();
    loop {
        if let Message::Response(_) = client
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
        {
            break;
        }
    }
    notify(
        &client,
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "chat", "version": 0, "text": text}}),
    );
    let (uri, outbox) = events.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(uri, URI);
    Setup {
        client,
        outbox: outbox.unwrap(),
        events,
        thread,
    }
}

fn read(outbox: &Outbox) -> Option<BufferSnapshot> {
    let (tx, rx) = mpsc::channel();
    assert!(outbox.send(Task::ReadBuffer {
        uri: URI.into(),
        reply: Reply::new(move |snapshot| {
            let _ = tx.send(snapshot);
        }),
    }));
    rx.recv_timeout(Duration::from_secs(10)).unwrap()
}

fn replace(
    outbox: &Outbox,
    version: i32,
    range: TextRange,
    text: &str,
) -> mpsc::Receiver<BufferAnswer> {
    let (tx, rx) = mpsc::channel();
    assert!(outbox.send(Task::ReplaceBuffer {
        uri: URI.into(),
        version,
        range,
        text: text.into(),
        reply: Reply::new(move |answer| {
            let _ = tx.send(answer);
        }),
    }));
    rx
}

/// The next `workspace/applyEdit` the server sends.
fn next_apply_edit(client: &Connection) -> Request {
    loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
        {
            Message::Request(r) if r.method == "workspace/applyEdit" => return r,
            _ => continue,
        }
    }
}

fn answer(client: &Connection, request: &Request, applied: bool) {
    client
        .sender
        .send(Message::Response(Response::new_ok(
            request.id.clone(),
            json!({ "applied": applied }),
        )))
        .unwrap();
}

fn echo(client: &Connection, version: i32, line: u32, character: u32, text: &str) {
    notify(
        client,
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": version},
               "contentChanges": [{"range": {"start": {"line": line, "character": character},
                                             "end": {"line": line, "character": character}},
                                   "text": text}]}),
    );
}

fn finish(setup: Setup) {
    notify(&setup.client, "exit", Value::Null);
    setup.thread.join().unwrap().unwrap();
}

#[test]
fn an_edit_is_applied_only_once_answered_and_echoed() {
    let setup = setup("@You:\nhi\n");
    let snapshot = read(&setup.outbox).unwrap();
    assert_eq!(
        snapshot,
        BufferSnapshot {
            text: "@You:\nhi\n".into(),
            version: 0
        }
    );
    let answers = replace(&setup.outbox, 0, TextRange::new(9, 9), "there\n");
    let request = next_apply_edit(&setup.client);
    let change = &request.params["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 0);
    // An insertion at the end that ends with the last line break goes before it (the same
    // change; Neovim applies it in one step: to_proto::past_the_end).
    assert_eq!(
        change["edits"][0]["range"]["start"],
        json!({"line": 1, "character": 2})
    );
    assert_eq!(change["edits"][0]["newText"], "\nthere");
    // Answered (VS Code answers before its echo): not yet settled.
    answer(&setup.client, &request, true);
    assert!(answers.recv_timeout(Duration::from_millis(200)).is_err());
    echo(&setup.client, 1, 1, 2, "\nthere");
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Applied
    );
    assert_eq!(read(&setup.outbox).unwrap().text, "@You:\nhi\nthere\n");
    finish(setup);
}

#[test]
fn a_refused_edit_a_moved_mirror_and_a_close_are_told_apart() {
    let setup = setup("@You:\nhi\n");
    // Refused by the client (the user typed meanwhile).
    let answers = replace(&setup.outbox, 0, TextRange::new(9, 9), "x");
    let request = next_apply_edit(&setup.client);
    echo(&setup.client, 1, 0, 0, "typed ");
    answer(&setup.client, &request, false);
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Refused
    );
    // Built for a version the mirror has left: nothing is sent.
    let answers = replace(&setup.outbox, 0, TextRange::new(9, 9), "x");
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Moved
    );
    // The document closes with an edit in flight.
    let answers = replace(&setup.outbox, 1, TextRange::new(15, 15), "x");
    let _request = next_apply_edit(&setup.client);
    notify(
        &setup.client,
        "textDocument/didClose",
        json!({"textDocument": {"uri": URI}}),
    );
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Closed
    );
    let (uri, outbox) = setup.events.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        uri == URI && outbox.is_none(),
        "the backend is told of the close"
    );
    assert_eq!(read(&setup.outbox), None);
    finish(setup);
}

#[test]
fn helix_echoes_before_answering_and_neovim_trims_its_echo() {
    let setup = setup("@You:\nab\n");
    // Helix: the change comes first, then `applied: true`.
    let answers = replace(&setup.outbox, 0, TextRange::new(9, 9), "x\n");
    let request = next_apply_edit(&setup.client);
    echo(&setup.client, 1, 2, 0, "x\n");
    assert!(answers.recv_timeout(Duration::from_millis(200)).is_err());
    answer(&setup.client, &request, true);
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Applied
    );
    // Neovim reports `b` inserted after `ab` for an edit that inserted it after `a`: the same
    // text, so the edit landed.
    let answers = replace(&setup.outbox, 1, TextRange::new(7, 7), "b");
    let request = next_apply_edit(&setup.client);
    answer(&setup.client, &request, true);
    echo(&setup.client, 2, 1, 2, "b");
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Applied
    );
    assert_eq!(read(&setup.outbox).unwrap().text, "@You:\nabb\nx\n");
    finish(setup);
}

#[test]
fn applied_true_for_an_edit_the_text_does_not_hold_is_dropped() {
    let setup = setup("@You:\nhi\n");
    // Neovim drops a stale edit, says `applied: true`, and then reports the user's keystroke
    // (a newer version, not the edit).
    let answers = replace(&setup.outbox, 0, TextRange::new(9, 9), "reply\n");
    let request = next_apply_edit(&setup.client);
    answer(&setup.client, &request, true);
    echo(&setup.client, 1, 0, 0, "typed ");
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Dropped
    );
    assert_eq!(read(&setup.outbox).unwrap().text, "typed @You:\nhi\n");
    // `applied: true` and no change at all: after the bounded wait, the mirror decides.
    let answers = replace(&setup.outbox, 1, TextRange::new(15, 15), "reply\n");
    let request = next_apply_edit(&setup.client);
    answer(&setup.client, &request, true);
    assert!(answers.recv_timeout(Duration::from_millis(300)).is_err());
    assert_eq!(
        answers.recv_timeout(Duration::from_secs(10)).unwrap(),
        BufferAnswer::Dropped
    );
    finish(setup);
}
