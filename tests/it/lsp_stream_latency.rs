//! The streaming figure through the real path (docs/benchmarks.md, "Language server"): the
//! longest delay between a byte of the reply leaving the mock provider and the editor
//! receiving it in `workspace/applyEdit`, while the user types, for a Helix-like and a VS
//! Code-like client over real stdio against `flemmad lsp`, with the engine in that process and
//! through a running daemon. Goal: at most the coalescing window
//! (100 ms by default) plus one round trip.
//!
//! The bytes leaving the mock are timestamped by a TCP tap between `flemmad` and the mock (in
//! this process, on the clock the client's receive times use): each read from the mock is
//! stamped before it is passed on; the HTTP body is de-chunked and its SSE frames parsed
//! afterwards to know which read completed each word of the reply.
//!
//! `cargo test -p flemmad --test it streaming_delay -- --nocapture` prints the figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common;
use crate::daemon_two_editors::{editor, environment, serve};
use crate::lsp::lsp_client::{Client, Flavor};

const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}
```
"#;

/// The default coalescing window (`editing.coalesce_ms`).
const COALESCE: Duration = Duration::from_millis(100);

/// What the tap saw come from the mock, per connection: each read with its time.
type Reads = Arc<Mutex<Vec<Vec<(Instant, Vec<u8>)>>>>;

/// A TCP tap in front of the mock; returns its base URL and what it recorded.
fn tap(mock: SocketAddr) -> (String, Reads) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let reads: Reads = Arc::default();
    let recorded = reads.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut upstream) = TcpStream::connect(mock) else {
                return;
            };
            let (mut to_mock, mut from_client) =
                (upstream.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_client, &mut to_mock);
                let _ = to_mock.shutdown(std::net::Shutdown::Write);
            });
            let connection = {
                let mut all = recorded.lock().unwrap();
                all.push(Vec::new());
                all.len() - 1
            };
            let recorded = recorded.clone();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 16 * 1024];
                loop {
                    let n = match upstream.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    recorded.lock().unwrap()[connection]
                        .push((Instant::now(), buffer[..n].to_vec()));
                    if client.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    (base, reads)
}

/// When each of `words` (in order) was complete in the reply text the mock had sent: the time
/// of the read holding the last byte of the SSE frame that completed it.
fn sent_times(reads: &[(Instant, Vec<u8>)], words: &[String]) -> Vec<Instant> {
    let mut raw = Vec::new();
    let mut read_ends = Vec::new();
    for (_, bytes) in reads {
        raw.extend_from_slice(bytes);
        read_ends.push(raw.len());
    }
    let time_of_raw = |offset: usize| reads[read_ends.partition_point(|&end| end <= offset)].0;
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    // The body, de-chunked, with the raw offset of each byte.
    let (mut body, mut origin) = (Vec::new(), Vec::new());
    if head.contains("transfer-encoding: chunked") {
        let mut at = head_end;
        loop {
            let line_end = at + raw[at..].windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&raw[at..line_end]).unwrap().trim(), 16)
                    .unwrap();
            at = line_end + 2;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&raw[at..at + size]);
            origin.extend(at..at + size);
            at += size + 2;
        }
    } else {
        body.extend_from_slice(&raw[head_end..]);
        origin.extend(head_end..raw.len());
    }
    let mut text = String::new();
    let mut times = Vec::new();
    let mut start = 0;
    while let Some(length) = body[start..].windows(2).position(|w| w == b"\n\n") {
        let end = start + length + 2;
        let frame = String::from_utf8_lossy(&body[start..end]).into_owned();
        if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data:")) {
            let event: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
            if event["delta"]["type"] == "text_delta" {
                text.push_str(event["delta"]["text"].as_str().unwrap());
                while times.len() < words.len() && text.contains(words[times.len()].as_str()) {
                    times.push(time_of_raw(origin[end - 1]));
                }
            }
        }
        start = end;
    }
    assert_eq!(times.len(), words.len(), "the mock sent every word: {text}");
    times
}

struct Figures {
    max: Duration,
    p50: Duration,
    p99: Duration,
    refused: usize,
    keys: usize,
}

/// How the client reaches the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `flemmad lsp --no-daemon`: the engine in the editor's process.
    InProcess,
    /// `flemmad lsp` proxying stdio to a running `flemmad serve`.
    Daemon,
}

fn measure(flavor: Flavor, path: Path) -> Figures {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let (base, reads) = tap(mock.address());
    let words: Vec<String> = (1..=240).map(|i| format!("r{i:03}")).collect();
    let reply: String = words
        .chunks(12)
        .map(|line| line.join(" "))
        .collect::<Vec<_>>()
        .join("\n");
    mock.push(Turn::text(reply.clone()).bytes_per_sec(12_000));
    let original = format!("{FRONTMATTER}@You:\nplease write the numbers\n");
    let chat = common::chat(&original);
    let uri = format!("file://{}", chat.path.display());
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(&base, &chat);
    let (mut client, _daemon) = match path {
        Path::InProcess => {
            let mut client = Client::start_with_env(flavor, &["--no-daemon"], &env);
            client.initialize(&dir);
            (client, None)
        }
        Path::Daemon => {
            let daemon = serve(&env, &dir);
            (editor(flavor, &env, &dir), Some(daemon))
        }
    };
    client.open(&uri, &original);
    let sent = client.request(
        "workspace/executeCommand",
        json!({"command": "flemma.send", "arguments": [uri]}),
    );
    assert!(sent.is_ok(), "{sent:?}");

    let mut received = Vec::new();
    let mut keys = 0;
    let mut last_key = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stopped = false;
    while !stopped || received.len() < words.len() {
        client.pump(Duration::from_millis(2));
        let now = Instant::now();
        {
            let text = client.text(&uri);
            while received.len() < words.len() && text.contains(words[received.len()].as_str()) {
                received.push(now);
            }
        }
        // The user types at the start of the question every 30 ms, and now and then a key
        // lands just before the next edit (the edit is then refused and sent again).
        if received.len() < words.len() && now - last_key > Duration::from_millis(30) {
            last_key = now;
            let at = client.text(&uri).find("please").unwrap();
            if keys % 4 == 3 && client.type_before_next_apply.is_none() {
                client.type_before_next_apply = Some((uri.clone(), at, "K".into()));
            } else {
                client.type_at(&uri, at, "K");
            }
            keys += 1;
        }
        while let Some(n) = client.notifications.pop_front() {
            if n["method"] == "flemma/event" && n["params"]["name"] == "engine:stopped" {
                assert_eq!(n["params"]["data"]["reason"], "idle", "{n}");
                stopped = true;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{flavor:?}: the stream did not complete:\n{}",
            client.text(&uri)
        );
    }
    while client.pump(Duration::from_millis(200)) {}
    if client.type_before_next_apply.take().is_some() {
        keys -= 1;
    }
    let text = client.text(&uri).to_owned();
    assert!(
        text.contains(&reply),
        "{flavor:?}: the reply, whole:\n{text}"
    );
    assert_eq!(
        text.matches('K').count(),
        keys,
        "{flavor:?}: every key:\n{text}"
    );
    let refused = client.apply_edits_refused;
    client.shutdown();

    let connections = reads.lock().unwrap().clone();
    assert_eq!(connections.len(), 1, "one request");
    let sent = sent_times(&connections[0], &words);
    let mut delays: Vec<Duration> = sent
        .iter()
        .zip(&received)
        .map(|(sent, received)| received.saturating_duration_since(*sent))
        .collect();
    delays.sort();
    runtime.block_on(mock.shutdown());
    Figures {
        max: *delays.last().unwrap(),
        p50: delays[delays.len() / 2],
        p99: delays[delays.len() * 99 / 100],
        refused,
        keys,
    }
}

#[test]
fn streaming_delay_from_the_provider_to_the_editor_while_the_user_types() {
    for (flavor, path) in [
        (Flavor::Helix, Path::InProcess),
        (Flavor::VsCode, Path::InProcess),
        (Flavor::Helix, Path::Daemon),
        (Flavor::VsCode, Path::Daemon),
    ] {
        let figures = measure(flavor, path);
        println!(
            "{flavor:?}, {path:?}: provider byte → applyEdit received: max {:?}, p50 {:?}, p99 {:?} ({} keys typed, {} edits refused)",
            figures.max, figures.p50, figures.p99, figures.keys, figures.refused
        );
        assert!(
            figures.refused > 0,
            "{flavor:?}: typing never raced an edit"
        );
        // The goal is the window plus one round trip (milliseconds on this machine); the
        // bound leaves room for a loaded 2-core machine running a debug build.
        assert!(
            figures.max < COALESCE + Duration::from_millis(400),
            "{flavor:?}, {path:?}: a byte waited {:?} (p99 {:?})",
            figures.max,
            figures.p99
        );
    }
}
