//! Issue 18, "an analysis no file can stop": `flemmad lsp` keeps answering while a chat makes
//! its analysis read its own protocol pipe (`@//dev/stdin`), an endless device (`@//dev/zero`,
//! `include("/dev/zero")`), a huge file ten times, or spend the template budget in 400
//! messages. A hover must answer within 2 s right after opening and after a keystroke, the
//! diagnostics must say what was not read or run, and the server must stay small.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::lsp::lsp_client::{Client, Flavor};

const BOUND: Duration = Duration::from_secs(2);

/// The largest resident size the server reached, from `/proc/<pid>/status` (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn hover_within_bound(client: &mut Client, uri: &str, what: &str) {
    let position = client.position(uri, 1);
    let started = Instant::now();
    let answer = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": position}),
    );
    let elapsed = started.elapsed();
    println!("{what}: hover answered in {elapsed:?}");
    assert!(answer.is_ok(), "{what}: {answer:?}");
    assert!(elapsed < BOUND, "{what}: hover took {elapsed:?}");
}

/// Opens `text` as `talk.chat` in `dir`, hovers at once, types a key, hovers again, then waits
/// for diagnostics containing `expected` and returns them with the server's peak memory.
fn check(dir: &std::path::Path, text: &str, expected: &str, what: &str) -> (Vec<Value>, u64) {
    let mut client = Client::start(Flavor::Helix, &[]);
    client.initialize(dir);
    let uri = format!("file://{}/talk.chat", dir.display());
    std::fs::write(dir.join("talk.chat"), text).unwrap();
    client.open(&uri, text);
    hover_within_bound(&mut client, &uri, what);
    let end = client.text(&uri).len();
    client.type_at(&uri, end, "x");
    hover_within_bound(&mut client, &uri, &format!("{what}, after a keystroke"));
    // A code action and a completion answer too.
    for (method, params) in [
        (
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": {"start": client.position(&uri, 0), "end": client.position(&uri, 0)}, "context": {"diagnostics": []}}),
        ),
        (
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": client.position(&uri, 0)}),
        ),
    ] {
        let started = Instant::now();
        assert!(client.request(method, params).is_ok(), "{what}: {method}");
        assert!(
            started.elapsed() < BOUND,
            "{what}: {method} took {:?}",
            started.elapsed()
        );
    }
    let diagnostics = wait_for_diagnostics(&mut client, &uri, expected, what);
    let peak = peak_kib(client.pid());
    assert!(client.shutdown().success());
    (diagnostics, peak)
}

/// Waits (60 s at most: the analysis itself may be slow, that is the point) for the document's
/// diagnostics to contain `expected`.
fn wait_for_diagnostics(client: &mut Client, uri: &str, expected: &str, what: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        while let Some(n) = client.notifications.pop_front() {
            if n["method"] == "textDocument/publishDiagnostics" && n["params"]["uri"] == uri {
                let diagnostics = n["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if diagnostics
                    .iter()
                    .any(|d| d["message"].as_str().is_some_and(|m| m.contains(expected)))
                {
                    return diagnostics;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no diagnostic saying {expected:?}"
        );
        client.pump(Duration::from_millis(100));
    }
}

#[test]
fn the_server_does_not_read_its_own_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let (diagnostics, _) = check(
        dir.path(),
        "@You:\nWhat is in @//dev/stdin ?\n",
        "it is in /dev, which flemmad never reads",
        "@//dev/stdin",
    );
    assert!(!diagnostics.is_empty());
}

#[test]
fn endless_devices_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let (_, peak) = check(
        dir.path(),
        "@You:\n@//dev/zero and {{ include(\"/dev/zero\") }}\n",
        "it is in /dev, which flemmad never reads",
        "/dev/zero",
    );
    assert!(peak < 300 * 1024, "the server grew to {peak} KiB");
}

#[test]
fn a_huge_file_referenced_ten_times_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse: 200 MB that take no disk.
    let big = std::fs::File::create(dir.path().join("big.txt")).unwrap();
    big.set_len(200 * 1024 * 1024).unwrap();
    let text = format!("@You:\n{}\n", "@./big.txt ".repeat(10));
    let (diagnostics, peak) = check(dir.path(), &text, "larger than 32 MiB", "10 x 200 MB");
    let cut = diagnostics
        .iter()
        .filter(|d| d["message"].as_str().is_some_and(|m| m.contains("big.txt")))
        .count();
    assert_eq!(
        cut, 10,
        "each reference says it was not read: {diagnostics:#?}"
    );
    assert!(peak < 300 * 1024, "the server grew to {peak} KiB");
}

#[test]
fn four_hundred_slow_templates_do_not_block_requests() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = "@You:\n{% loop { } %}\n\n@Assistant:\nok\n\n".repeat(400);
    text.push_str("@You:\nand now?\n");
    let (diagnostics, _) = check(
        dir.path(),
        &text,
        "were not evaluated",
        "400 slow templates",
    );
    assert!(
        diagnostics.iter().any(|d| d["severity"] == 1),
        "the budget error blocks: {diagnostics:#?}"
    );
}
