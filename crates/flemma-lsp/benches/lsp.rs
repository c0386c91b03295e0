//! The language server's figures (docs/benchmarks.md, "Language server"), over an in-memory
//! connection to a real session (`flemma_lsp::run`, no engine):
//!
//! * hover and definition on a 10 MB chat: p50/p99 of single requests (goal p99 < 1 ms);
//! * diagnostics after a one-character edit of that chat: from sending `didChange` to receiving
//!   `publishDiagnostics` of that version (goal < 30 ms);
//! * RSS growth with 100 open 1 MB documents (Linux, from `/proc/self/status`).
//!
//! `cargo bench -p flemma-lsp --bench lsp -- --warm-up-time 1 --measurement-time 3`. The
//! percentiles are printed before criterion's own runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{Value, json};

/// A chat of at least `bytes`: turns of prose, a `bash` tool use and its result.
fn chat(bytes: usize) -> (String, usize) {
    let mut text = String::with_capacity(bytes + 4096);
    let mut turn = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "@You:\nplease run the tests of module {turn} and tell me what failed 中文 🙂\n\n\
             @Assistant:\nSure, running them now.\n\n**Tool Use:** `bash` (`t{turn}`)\n```json\n\
             {{\"command\":\"make test MODULE={turn}\",\"label\":\"running tests\"}}\n```\n\n\
             @You:\n**Tool Result:** `t{turn}`\n```\n"
        ));
        for line in 0..12 {
            text.push_str(&format!(
                "test module_{turn}::case_{line} ... ok (a line of output of some length)\n"
            ));
        }
        text.push_str("```\n\n");
        turn += 1;
    }
    text.push_str("@You:\nthanks, what next?\n");
    (text, turn)
}

/// A client of a session in this process.
struct Session {
    client: Connection,
    thread: Option<std::thread::JoinHandle<()>>,
    next_id: i32,
    version: i32,
}

impl Session {
    fn start() -> Self {
        let (server, client) = Connection::memory();
        let thread = std::thread::spawn(move || {
            flemma_lsp::run(server, Box::new(flemma_lsp::NoEngine)).unwrap();
        });
        let mut session = Self {
            client,
            thread: Some(thread),
            next_id: 0,
            version: 0,
        };
        session.request(
            "initialize",
            json!({"processId": null, "capabilities": {"general": {"positionEncodings": ["utf-16"]}}}),
        );
        session.notify("initialized", json!({}));
        session
    }

    fn notify(&self, method: &str, params: Value) {
        self.client
            .sender
            .send(Message::Notification(Notification::new(
                method.into(),
                params,
            )))
            .unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        self.client
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.into(),
                params,
            )))
            .unwrap();
        loop {
            match self.client.receiver.recv().unwrap() {
                Message::Response(r) if r.id == id => {
                    return r.response_result.unwrap_or(Value::Null);
                }
                _ => continue,
            }
        }
    }

    /// Waits for the diagnostics of `uri` at `version`.
    fn diagnostics(&self, uri: &str, version: i32) -> Value {
        loop {
            match self.client.receiver.recv().unwrap() {
                Message::Notification(n)
                    if n.method == "textDocument/publishDiagnostics"
                        && n.params["uri"] == uri
                        && n.params["version"] == version =>
                {
                    return n.params;
                }
                _ => continue,
            }
        }
    }

    fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "chat", "version": 0, "text": text}}),
        );
        self.diagnostics(uri, 0);
    }

    /// Types one character at `position` and waits for the diagnostics of the new version.
    fn type_char(&mut self, uri: &str, position: Value) -> Value {
        self.version += 1;
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": self.version},
                   "contentChanges": [{"range": {"start": position, "end": position}, "text": "x"}]}),
        );
        self.diagnostics(uri, self.version)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

const URI: &str = "file:///bench/big.chat";

/// The line of the tool use header of turn `turn`.
fn tool_use_line(text: &str, turn: usize) -> u32 {
    let needle = format!("**Tool Use:** `bash` (`t{turn}`)");
    let offset = text.find(&needle).unwrap();
    text[..offset].bytes().filter(|b| *b == b'\n').count() as u32
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.99), *samples.last().unwrap())
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The figures docs/benchmarks.md quotes, as percentiles of single requests.
fn figures() {
    let (text, turns) = chat(10 * 1024 * 1024);
    println!(
        "10 MB chat: {:.2} MB, {} turns",
        text.len() as f64 / 1e6,
        turns
    );
    let mut session = Session::start();
    let opened = Instant::now();
    session.open(URI, &text);
    println!("didOpen → first diagnostics: {:?}", opened.elapsed());
    let line = tool_use_line(&text, turns / 2);
    let on_tool =
        json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": 16}});
    for method in ["textDocument/hover", "textDocument/definition"] {
        let mut samples = Vec::new();
        for _ in 0..500 {
            let started = Instant::now();
            let answer = session.request(method, on_tool.clone());
            samples.push(started.elapsed());
            assert!(!answer.is_null(), "{method} found nothing");
        }
        let (p50, p99, max) = percentiles(samples);
        println!("{method}: p50 {p50:?}, p99 {p99:?}, max {max:?}");
    }
    // Typing in the middle of the prose of the middle turn.
    let typing = json!({"line": line - 3, "character": 10});
    let mut samples = Vec::new();
    for _ in 0..60 {
        let started = Instant::now();
        session.type_char(URI, typing.clone());
        samples.push(started.elapsed());
    }
    let (p50, p99, max) = percentiles(samples);
    println!("one-character edit → diagnostics: p50 {p50:?}, p99 {p99:?}, max {max:?}");
    drop(session);

    let one_mb = chat(1024 * 1024).0;
    let mut session = Session::start();
    let before = rss_kib();
    for i in 0..100 {
        session.open(&format!("file:///bench/doc{i}.chat"), &one_mb);
    }
    let after = rss_kib();
    if let (Some(before), Some(after)) = (before, after) {
        println!(
            "RSS: {:.1} MiB before, {:.1} MiB with 100 open 1 MB documents (+{:.1} MiB; the test's own copy of the text is 1 MB)",
            before as f64 / 1024.0,
            after as f64 / 1024.0,
            (after - before) as f64 / 1024.0
        );
    }
}

/// Where the time of an edit goes, measured on the analysis core directly (no session).
fn breakdown() {
    use std::sync::Arc;
    let (text, _) = chat(10 * 1024 * 1024);
    let config = flemma_ide::ConfigInput::default();
    let mut host =
        flemma_ide::AnalysisHost::new(Arc::new(flemma_template::FsHost::default()), config);
    let id = flemma_ide::DocumentId::new("/bench/big.chat");
    host.set_text(id.clone(), text.clone());
    host.analysis(&id).unwrap();
    let at = text.len() / 2;
    let at = text[at..].find("please").unwrap() + at;
    for _ in 0..5 {
        let started = Instant::now();
        host.apply_edits(&id, &[flemma_syntax::TextEdit::insert(at, "x")])
            .unwrap();
        let edit = started.elapsed();
        let started = Instant::now();
        let mut line_index = host.document(&id).unwrap().line_index();
        let lines = line_index.line_count();
        let index = started.elapsed();
        // What the session does per change since lsp2: shift the index by the edit.
        let started = Instant::now();
        line_index.apply_edit(flemma_syntax::TextRange::empty(at), "y");
        let index_edit = started.elapsed();
        let started = Instant::now();
        let analysis = host.analysis(&id).unwrap();
        let analyse = started.elapsed();
        let started = Instant::now();
        let evaluation = flemma_template::evaluate(
            &analysis.document,
            Arc::new(flemma_template::FsHost::default()),
            &flemma_template::EvalOptions::default(),
        );
        let evaluate = started.elapsed();
        println!(
            "edit {edit:?}, line index rebuilt {index:?} ({lines} lines) / edited {index_edit:?}, analysis {analyse:?}, of which a cold evaluation alone {evaluate:?} ({} messages)",
            evaluation.diagnostics.len() + analysis.document.messages().len()
        );
    }
}

fn bench(c: &mut Criterion) {
    let (text, turns) = chat(10 * 1024 * 1024);
    let mut session = Session::start();
    session.open(URI, &text);
    let line = tool_use_line(&text, turns / 2);
    let on_tool =
        json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": 16}});
    c.bench_function("hover on a 10 MB chat", |b| {
        b.iter(|| session.request("textDocument/hover", on_tool.clone()))
    });
    c.bench_function("definition on a 10 MB chat", |b| {
        b.iter(|| session.request("textDocument/definition", on_tool.clone()))
    });
    let typing = json!({"line": line - 3, "character": 10});
    c.bench_function("one-character edit → diagnostics, 10 MB chat", |b| {
        b.iter(|| session.type_char(URI, typing.clone()))
    });
}

criterion_group!(benches, bench);

fn main() {
    breakdown();
    figures();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
