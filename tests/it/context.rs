//! The context meter (docs/context.md): `status` and `count` say the next request's tokens
//! against the model's window and its cost, a request that cannot fit is not sent, and a
//! provider's "too long" answer says the same fix — against the mock provider, with a window
//! made small by the user's `models.<id>.context_window`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{chat, flemmad_command, frontmatter, read, send, stderr, write_user_config};
use flemma_mock_provider::{Failure, MockProvider, Turn};

/// A chat of about `words` words to `claude-sonnet-4-5`.
fn long_chat(words: usize) -> common::Chat {
    let question = "lorem ipsum dolor sit amet ".repeat(words / 5);
    chat(&format!(
        "{}@You:\n{question}\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    ))
}

fn small_window(chat: &common::Chat, window: u64) {
    write_user_config(
        chat,
        &format!(
            "[models.\"claude-sonnet-4-5\"]\ncontext_window = {window}\n\n[context]\nwarn_at = 0.5\n"
        ),
    );
}

/// `flemmad ARGS CHAT` with the providers pointed at the mock.
async fn flemmad(chat: &common::Chat, mock: &MockProvider, args: &[&str]) -> std::process::Output {
    flemmad_command(chat, &mock.base_url())
        .args(args)
        .arg(&chat.path)
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn status_shows_the_next_request_against_the_window_and_warns_past_warn_at() {
    let mock = MockProvider::start().await.unwrap();
    let chat = long_chat(600);
    small_window(&chat, 1000);
    let out = flemmad(&chat, &mock, &["status", "--no-daemon", "--json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let context = &json["context"];
    assert_eq!(context["model"], "claude-sonnet-4-5");
    assert_eq!(
        context["window"], 1000,
        "the user's models.<id> wins: {context}"
    );
    assert_eq!(context["counted"], "estimate");
    let used = context["used"].as_u64().unwrap();
    // 600 words of 5 letters or less (one token each), the tools' definitions on top.
    assert!(used > 600, "{context}");
    assert_eq!(context["state"], if used > 1000 { "full" } else { "warn" });
    assert_eq!(context["warnAt"], 0.5);
    assert_eq!(context["compactAt"], 0.85, "the default");
    // claude-sonnet-4-5's input price is $3 per million tokens.
    let cost = context["nextCost"].as_f64().unwrap();
    assert!((cost - used as f64 * 3.0 / 1e6).abs() < 1e-9, "{context}");
    assert!(mock.requests().is_empty(), "status makes no request");

    let out = flemmad(&chat, &mock, &["status", "--no-daemon"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(" / 1,000 input tokens (")
            && text.contains("% of claude-sonnet-4-5's context window) · next request $"),
        "{text}"
    );
    assert!(
        text.contains("`context.warn_at` is 50%") || text.contains("so it was not sent"),
        "{text}"
    );
}

#[tokio::test]
async fn count_is_exact_and_says_the_window_and_the_cost() {
    let mock = MockProvider::start().await.unwrap();
    let chat = long_chat(100);
    small_window(&chat, 100_000);
    let out = flemmad(&chat, &mock, &["count"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let counted = mock
        .requests()
        .into_iter()
        .find(|r| r.path.contains("count_tokens"))
        .expect("a counting request");
    // The mock counts a quarter of the body's bytes; the body holds the tools' definitions.
    assert!(
        counted.body["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "the tools are counted: {}",
        counted.raw_body
    );
    let exact = (counted.raw_body.len() / 4) as u64;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{} / 100,000 input tokens (", thousands(exact)))
            && stdout.contains("next request $"),
        "{stdout} (exact {exact})"
    );
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[tokio::test]
async fn a_request_that_cannot_fit_is_not_sent_and_says_what_to_do() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("never streamed"));
    let chat = long_chat(2000);
    small_window(&chat, 500);
    let before = read(&chat.path);
    let out = send(&chat, &mock.base_url()).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("more than claude-sonnet-4-5's 500-token context window, so it was not sent")
            && err.contains("flemmad compact FILE"),
        "{err}"
    );
    // Past `context.compact_at` (default 0.85), one enormous message cannot be compacted:
    // said before the request, and in the refusal.
    assert!(
        err.contains("cannot be compacted: the chat is a single exchange")
            && err.contains("(automatic compaction: the chat is a single exchange"),
        "{err}"
    );
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        ["/v1/messages/count_tokens"],
        "the provider's count decided, and nothing was sent"
    );
    assert!(
        !read(&chat.path).contains("never streamed"),
        "{}",
        read(&chat.path)
    );
    assert!(read(&chat.path).starts_with(&before));
}

#[tokio::test]
async fn a_providers_too_long_answer_says_the_same_fix() {
    for (provider, model) in [
        ("anthropic", "claude-sonnet-4-5"),
        ("openai", "gpt-5"),
        ("gemini", "gemini-2.5-pro"),
    ] {
        let mock = MockProvider::start().await.unwrap();
        mock.push(Turn::failing(Failure::TooLong));
        let chat = chat(&format!("{}@You:\nHello\n", frontmatter(provider, model)));
        let out = send(&chat, &mock.base_url()).await;
        assert!(!out.status.success(), "{provider}");
        let err = stderr(&out);
        assert!(
            err.contains("too long for the model's context window")
                && err.contains("flemmad compact FILE"),
            "{provider}: {err}"
        );
    }
}

/// The language server shows the meter as an inlay hint on the last message's role line and,
/// past `context.warn_at`, a warning there (a real client over stdio).
#[test]
fn the_language_server_shows_the_meter_and_warns() {
    use crate::lsp::lsp_client::{Client, Flavor, offset_of};
    let chat = long_chat(600);
    small_window(&chat, 1000);
    let dir = chat.path.parent().unwrap().to_owned();
    let uri = format!("file://{}", chat.path.display());
    let text = read(&chat.path);
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = Client::start_with_env(
            flavor,
            &[],
            &[("XDG_CONFIG_HOME", chat.config_home.display().to_string())],
        );
        client.initialize(&dir);
        client.open(&uri, &text);
        let published = client.wait_notification("textDocument/publishDiagnostics", |params| {
            params["diagnostics"]
                .as_array()
                .is_some_and(|all| all.iter().any(|d| d["code"] == "context-window"))
        });
        let warning = published["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["code"] == "context-window")
            .unwrap()
            .clone();
        let message = warning["message"].as_str().unwrap();
        assert!(
            message.contains("flemmad compact FILE"),
            "{flavor:?}: {message}"
        );
        let role_line = text.find("@You:").unwrap();
        assert_eq!(
            offset_of(client.text(&uri), &warning["range"]["start"], client.units),
            role_line
        );
        let end = client.text(&uri).len();
        let hints = client
            .request(
                "textDocument/inlayHint",
                serde_json::json!({"textDocument": {"uri": uri},
                       "range": {"start": client.position(&uri, 0), "end": client.position(&uri, end)}}),
            )
            .unwrap();
        let meter = hints
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["label"].as_str().unwrap().contains("input tokens"))
            .unwrap_or_else(|| panic!("{flavor:?}: no meter in {hints}"));
        let label = meter["label"].as_str().unwrap();
        assert!(
            label.starts_with('≈')
                && label.contains(" / 1,000 input tokens (")
                && label.contains("next request $"),
            "{label}"
        );
        assert_eq!(
            offset_of(client.text(&uri), &meter["position"], client.units),
            role_line + "@You:".len()
        );
        client.shutdown();
    }
}

/// Three exchanges, the first with a tool call and its result.
fn three_exchanges() -> String {
    format!(
        "{}@You:\nList the files.\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{{\"command\":\"ls\"}}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nmain.rs\nlib.rs\n```\n\n@Assistant:\nThere are two files.\n\n@You:\nWhich one is the entry point?\n\n@Assistant:\nmain.rs.\n\n@You:\nNow run the tests.\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    )
}

fn archives(chat: &common::Chat) -> Vec<std::path::PathBuf> {
    let root = chat.path.parent().unwrap().join("state/flemma/compacted");
    let Ok(keys) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    keys.flat_map(|key| std::fs::read_dir(key.unwrap().path()).unwrap())
        .map(|entry| entry.unwrap().path())
        .collect()
}

#[tokio::test]
async fn compact_moves_the_older_turns_into_an_archive_and_undo_puts_them_back() {
    let mock = MockProvider::start().await.unwrap();
    let original = three_exchanges();
    let chat = chat(&original);
    mock.push(Turn::text(
        "The user listed the files (main.rs, lib.rs); main.rs is the entry point.",
    ));
    let out = flemmad(
        &chat,
        &mock,
        &["compact", "--keep", "1", "--focus", "the entry point"],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("compacted 6 messages into a summary"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The summary request held the turns and the focus.
    let request = &mock.requests()[0];
    assert!(
        request.raw_body.contains("Which one is the entry point?")
            && request.raw_body.contains("the entry point")
            && request.raw_body.contains("main.rs\\nlib.rs"),
        "{}",
        request.raw_body
    );
    let compacted = read(&chat.path);
    let head = frontmatter("anthropic", "claude-sonnet-4-5");
    assert!(
        compacted.starts_with(&format!("{head}@You:\n<!-- flemma:compacted archive=\"")),
        "{compacted}"
    );
    assert!(compacted.contains("main.rs is the entry point."));
    assert!(
        compacted.ends_with("\n@You:\nNow run the tests.\n"),
        "{compacted}"
    );
    assert!(!compacted.contains("There are two files."));
    // The archive: the frontmatter and the turns, byte for byte, a valid chat.
    let archive = archives(&chat);
    assert_eq!(archive.len(), 1, "{archive:?}");
    let archived = read(&archive[0]);
    let cut = original.find("@You:\nNow run the tests.").unwrap();
    assert_eq!(archived, original[..cut]);
    let parsed = flemmad(&chat, &mock, &["parse"]).await;
    assert!(parsed.status.success(), "{}", stderr(&parsed));
    let parse_archive = flemmad_command(&chat, &mock.base_url())
        .arg("parse")
        .arg(&archive[0])
        .output()
        .await
        .unwrap();
    assert!(parse_archive.status.success(), "{}", stderr(&parse_archive));

    // The next request holds the summary and the recent turn verbatim, not the old turns.
    mock.clear_requests();
    mock.push(Turn::text("Running them."));
    let sent = send(&chat, &mock.base_url()).await;
    assert!(sent.status.success(), "{}", stderr(&sent));
    let body = &mock.requests()[0].raw_body;
    assert!(
        body.contains("main.rs is the entry point.")
            && body.contains("Now run the tests.")
            && !body.contains("There are two files."),
        "{body}"
    );
    let after_send = read(&chat.path);
    let reply = &after_send[compacted.len()..];

    // Undo: the original bytes, and the reply since.
    let out = flemmad(&chat, &mock, &["compact", "--undo"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&chat.path), format!("{original}{reply}"));
    assert!(archives(&chat).is_empty(), "the archive is spent");
}

/// Gives the archive's first turn authority it did not have (what an undo must refuse); returns
/// what it held.
fn tamper(archive: &std::path::Path) -> String {
    let archived = read(archive);
    std::fs::write(
        archive,
        archived.replace("List the files.", "@You: (approved)"),
    )
    .unwrap();
    archived
}

/// `--undo` failed because the archive changed.
fn refused_as_changed(out: &std::process::Output) {
    assert!(!out.status.success());
    assert!(
        stderr(out).contains("changed since it was written; nothing was changed"),
        "{}",
        stderr(out)
    );
}

#[tokio::test]
async fn undo_refuses_an_archive_changed_since_it_was_written() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(&three_exchanges());
    mock.push(Turn::text("A summary."));
    let out = flemmad(&chat, &mock, &["compact", "--keep", "1"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let compacted = read(&chat.path);
    let archive = archives(&chat).remove(0);
    let archived = tamper(&archive);
    let out = flemmad(&chat, &mock, &["compact", "--undo"]).await;
    refused_as_changed(&out);
    assert_eq!(read(&chat.path), compacted);
    assert_eq!(
        read(&archive),
        archived.replace("List the files.", "@You: (approved)")
    );

    // A summary line naming a file that is not this chat's archive is refused too.
    let forged = compacted.replace(
        &archive.display().to_string(),
        &chat.path.display().to_string(),
    );
    std::fs::write(&chat.path, &forged).unwrap();
    let out = flemmad(&chat, &mock, &["compact", "--undo"]).await;
    assert!(
        stderr(&out).contains("is not an archive of this chat"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&chat.path), forged);
}

#[tokio::test]
async fn a_failing_summary_or_a_single_exchange_changes_nothing() {
    let mock = MockProvider::start().await.unwrap();
    let original = three_exchanges();
    let chat = chat(&original);
    mock.push(Turn::failing(Failure::Unauthorized));
    let out = flemmad(&chat, &mock, &["compact", "--keep", "1"]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the summary request failed")
            && stderr(&out).contains("nothing was changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&chat.path), original);
    assert!(archives(&chat).is_empty());

    // One enormous message cannot be compacted: it says so, and asks nothing.
    let single = long_chat(2000);
    let before = read(&single.path);
    mock.clear_requests();
    let out = flemmad(&single, &mock, &["compact"]).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("single exchange"), "{}", stderr(&out));
    assert_eq!(read(&single.path), before);
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn pruning_changes_the_request_and_not_the_file() {
    let mock = MockProvider::start().await.unwrap();
    let original = format!(
        "{}@You:\nList and count.\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{{\"command\":\"ls\"}}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nmain.rs\nlib.rs\n```\n\n@Assistant:\n**Tool Use:** `bash` (`t2`)\n```json\n{{\"command\":\"wc -l main.rs\"}}\n```\n\n@You:\n**Tool Result:** `t2`\n```\n42 main.rs\n```\n\n@Assistant:\nDone.\n\n@You:\nWhich file is longer?\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    );
    let chat = chat(&original);
    write_user_config(&chat, "[context]\nprune_after = 1\n");
    mock.push(Turn::text("main.rs."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let body = &mock.requests()[0].raw_body;
    let line = original[..original.find("**Tool Result:** `t1`").unwrap()]
        .lines()
        .count();
    assert!(
        body.contains(&format!(
            "left this result of `t1` out of the request to save context (2 lines, 14 bytes): the whole result is in the chat's message at line {line}"
        )) && !body.contains("main.rs\\nlib.rs")
            && body.contains("42 main.rs"),
        "{body}"
    );
    assert!(
        read(&chat.path).starts_with(&original),
        "the file keeps everything"
    );
}

/// Issue 34's long conversation: a 50-turn autopilot run whose tool results outgrow an
/// 8k-token window finishes without a context error, compacting on the way (the summaries by
/// `context.compact_model`, another provider on a second mock); each archive is a valid chat,
/// the request after a compaction holds the summary and the recent turns verbatim, and undoing
/// every compaction gives back every turn.
#[tokio::test]
async fn a_long_autopilot_run_compacts_on_the_way_and_finishes() {
    const TURNS: usize = 50;
    let mock = MockProvider::start().await.unwrap();
    let summaries = MockProvider::start().await.unwrap();
    let original = format!(
        "{}@You:\nRead big1.txt to big50.txt.\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    );
    let chat = chat(&original);
    let dir = chat.path.parent().unwrap();
    // About 800 tokens a read; another file each time (the loop detector stops a model that
    // repeats a call with the same result).
    for turn in 1..=TURNS {
        let text = format!("file {turn}\n{}", "0123456789abcdef ".repeat(200));
        std::fs::write(dir.join(format!("big{turn}.txt")), text).unwrap();
    }
    write_user_config(
        &chat,
        &format!(
            "[models.\"claude-sonnet-4-5\"]\ncontext_window = 8000\n\n[context]\ncompact_model = \"$summary\"\n\n[presets.\"$summary\"]\nprovider = \"openai\"\nmodel = \"gpt-4.1\"\n\n[providers.openai]\nbase_url = \"{}/v1\"\n\n[tools]\nauto_approve = [\"read\"]\n\n[tools.autopilot]\nmax_turns = 100\n",
            summaries.base_url()
        ),
    );
    for turn in 1..=TURNS {
        mock.push(Turn::default().tool_call_with_id(
            "read",
            format!("toolu_{turn:02}"),
            serde_json::json!({"label": "read the file", "path": format!("big{turn}.txt")}),
        ));
    }
    mock.push(Turn::text("All read."));
    for n in 1..=TURNS {
        summaries.push(Turn::text(format!(
            "Summary {n}: the user asked to read big.txt repeatedly; it was read each time."
        )));
    }
    let started = std::time::Instant::now();
    let out = send(&chat, &mock.base_url()).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("context window"), "{err}");
    let compactions = summaries.requests().len();
    assert!(
        compactions >= 2,
        "{compactions} compactions: {err}\n{}",
        read(&chat.path).chars().take(3000).collect::<String>()
    );
    eprintln!("{compactions} compactions in {:?}", started.elapsed());
    assert_eq!(
        err.matches("compacted ").count(),
        compactions,
        "a line for each compaction: {err}"
    );
    assert_eq!(mock.requests().len(), TURNS + 1);
    assert!(read(&chat.path).contains("All read."));

    // Each archive is a valid chat.
    let archive = archives(&chat);
    assert_eq!(archive.len(), compactions, "{archive:?}");
    for path in &archive {
        let parsed = flemmad_command(&chat, &mock.base_url())
            .arg("parse")
            .arg(path)
            .output()
            .await
            .unwrap();
        assert!(
            parsed.status.success(),
            "{}: {}",
            path.display(),
            stderr(&parsed)
        );
    }

    // The request after the first compaction holds its summary and the last two turns
    // verbatim, and no older turn.
    let requests = mock.requests();
    let after = requests
        .iter()
        .position(|r| r.raw_body.contains("Summary 1:"))
        .expect("a request holds the first summary");
    let body = &requests[after].raw_body;
    let last = after; // the request after `after` tool calls: toolu_01..=toolu_{after}
    for kept in [last - 1, last] {
        assert!(
            body.contains(&format!("toolu_{kept:02}")),
            "turn {kept} kept: {body}"
        );
    }
    assert!(!body.contains("toolu_01\""), "{body}");
    assert!(!requests[after - 1].raw_body.contains("Summary 1:"));

    // Undoing every compaction gives back every turn, in order.
    for _ in 0..compactions {
        let out = flemmad(&chat, &mock, &["compact", "--undo"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let restored = read(&chat.path);
    assert!(restored.starts_with(&original), "{restored}");
    assert!(!restored.contains("flemma:compacted"));
    let mut at = 0;
    for turn in 1..=TURNS {
        let id = format!("**Tool Result:** `toolu_{turn:02}`");
        at += restored[at..]
            .find(&id)
            .unwrap_or_else(|| panic!("{id} in order"));
    }
    assert!(archives(&chat).is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// Automatic compaction whose summary request fails leaves the chat as it was (the request goes
/// on as it is), and `compact_at = false` turns it off.
#[tokio::test]
async fn a_failing_automatic_compaction_changes_nothing_and_false_turns_it_off() {
    let mock = MockProvider::start().await.unwrap();
    let question = "lorem ipsum dolor sit amet ".repeat(120);
    let original = three_exchanges().replace("Now run the tests.", &question);
    let chat = chat(&original);
    write_user_config(
        &chat,
        "[models.\"claude-sonnet-4-5\"]\ncontext_window = 4000\n\n[context]\ncompact_at = 0.3\nkeep = 1\n",
    );
    mock.push(Turn::failing(Failure::Unauthorized));
    mock.push(Turn::text("Answered."));
    let out = send(&chat, &mock.base_url()).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("automatic compaction: the summary request failed")
            && err.contains("the chat is unchanged"),
        "{err}"
    );
    let text = read(&chat.path);
    assert!(text.starts_with(&original), "{text}");
    assert!(text.contains("Answered."));
    assert!(archives(&chat).is_empty());
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].raw_body.contains("There are two files."));

    // Off: no summary is asked for.
    write_user_config(
        &chat,
        "[models.\"claude-sonnet-4-5\"]\ncontext_window = 4000\n\n[context]\ncompact_at = false\n",
    );
    std::fs::write(&chat.path, &original).unwrap();
    mock.clear_requests();
    mock.push(Turn::text("Answered again."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mock.requests().len(), 1);
    assert!(!stderr(&out).contains("compact"), "{}", stderr(&out));
}

/// `flemmad compact ARGS CHAT`, spawned (it may wait on an editor the test pumps meanwhile).
fn spawn_compact(chat: &common::Chat, mock: &MockProvider, args: &[&str]) -> tokio::process::Child {
    flemmad_command(chat, &mock.base_url())
        .arg("compact")
        .args(args)
        .arg(&chat.path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `flemmad compact` and `--undo` go through the running daemon (issue 34): with an editor
/// holding the chat open, the summary and the undo reach its buffer as edits and the file is
/// not written under it; with none, the daemon writes the file; a changed archive is refused
/// as in-process.
#[test]
fn compact_and_undo_go_through_the_daemon_into_the_open_editor() {
    use crate::daemon_two_editors::daemon_and_editor;
    use crate::lsp::lsp_client::Flavor;
    use std::time::{Duration, Instant};
    let runtime = crate::common::one_worker_runtime();
    let _inside = runtime.enter();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let original = three_exchanges();
    let chat = chat(&original);
    let (_daemon, mut helix, uri) =
        daemon_and_editor(Flavor::Helix, &mock.base_url(), &chat, &original);
    // Runs `flemmad compact ARGS`, answering the editor's edits until the buffer is `done`.
    let run =
        |helix: &mut crate::lsp::lsp_client::Client, args: &[&str], done: &dyn Fn(&str) -> bool| {
            let child = spawn_compact(&chat, &mock, args);
            let deadline = Instant::now() + Duration::from_secs(30);
            while !done(helix.text(&uri)) {
                assert!(Instant::now() < deadline, "{}", helix.text(&uri));
                helix.pump(Duration::from_millis(20));
            }
            let out = runtime.block_on(child.wait_with_output()).unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };

    mock.push(Turn::text("main.rs is the entry point."));
    let said = run(&mut helix, &["--keep", "1"], &|text| {
        text.contains("main.rs is the entry point.")
    });
    assert!(
        said.contains("compacted 6 messages into a summary") && said.contains("through the daemon"),
        "{said}"
    );
    let compacted = helix.text(&uri).to_owned();
    assert!(
        compacted.ends_with("\n@You:\nNow run the tests.\n"),
        "{compacted}"
    );
    assert!(!compacted.contains("There are two files."), "{compacted}");
    assert_eq!(read(&chat.path), original, "the editor owns the document");

    let said = run(&mut helix, &["--undo"], &|text| text == original);
    assert!(said.contains("restored the 6 compacted messages"), "{said}");
    assert_eq!(read(&chat.path), original);
    // The editor's buffer may still be thrown away: the archive is kept.
    assert_eq!(archives(&chat).len(), 1);
    helix.shutdown();

    // No editor: the daemon writes the file.
    let wait = |child: tokio::process::Child| runtime.block_on(child.wait_with_output()).unwrap();
    mock.push(Turn::text("A second summary."));
    let out = wait(spawn_compact(&chat, &mock, &["--keep", "1"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let compacted = read(&chat.path);
    assert!(compacted.contains("A second summary."), "{compacted}");
    let archive = archives(&chat)
        .into_iter()
        .find(|archive| compacted.contains(&archive.display().to_string()))
        .unwrap();
    let archived = tamper(&archive);
    refused_as_changed(&wait(spawn_compact(&chat, &mock, &["--undo"])));
    assert_eq!(read(&chat.path), compacted);
    std::fs::write(&archive, archived).unwrap();
    let out = wait(spawn_compact(&chat, &mock, &["--undo"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&chat.path), original);
    assert!(
        !archive.exists(),
        "the file holds the turns: the archive is spent"
    );
    runtime.block_on(mock.shutdown());
}

/// A background job that delivers while an automatic compaction's summary is written (issue
/// 34): its turn is not compacted (a job not delivered keeps its turn), its result lands in the
/// chat beside the summary, the archive does not hold it, and the model gets it.
#[tokio::test]
async fn a_job_delivering_during_an_automatic_compaction_is_kept() {
    let mock = MockProvider::start().await.unwrap();
    let summaries = MockProvider::start().await.unwrap();
    let chat = chat(&three_exchanges());
    let dir = chat.path.parent().unwrap();
    // About 4000 tokens: the request after the read is past `compact_at`.
    let big = format!("big\n{}", "0123456789abcdef ".repeat(1000));
    std::fs::write(dir.join("big.txt"), big).unwrap();
    write_user_config(
        &chat,
        &format!(
            "[models.\"claude-sonnet-4-5\"]\ncontext_window = 8000\n\n[context]\ncompact_at = 0.5\nkeep = 1\ncompact_model = \"$summary\"\n\n[presets.\"$summary\"]\nprovider = \"openai\"\nmodel = \"gpt-4.1\"\n\n[providers.openai]\nbase_url = \"{}/v1\"\n\n[tools]\nauto_approve = [\"read\", \"bash\"]\n",
            summaries.base_url()
        ),
    );
    mock.push(
        Turn::default()
            .tool_call_with_id(
                "bash",
                "t2",
                serde_json::json!({"label": "slow", "command": "sleep 0.2; echo the job is done",
                    "timeout": null, "flemma.background": true}),
            )
            .tool_call_with_id(
                "read",
                "t3",
                serde_json::json!({"label": "big", "path": "big.txt"}),
            ),
    );
    // The summary pauses on its way: the job delivers meanwhile.
    summaries.push(
        Turn::text("Summary: the files are main.rs and lib.rs; main.rs is the entry point.")
            .stall(2500),
    );
    mock.push(Turn::text("Read it."));
    mock.push(Turn::text("The job is done too."));
    let out = send(&chat, &mock.base_url()).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(summaries.requests().len(), 1, "{err}");
    assert!(err.contains("compacted 6 messages"), "{err}");
    // The job finished while the summary was written; delivered once the compaction was in.
    assert!(
        err.find("compacted 6 messages") < err.find("delivered"),
        "{err}"
    );
    let text = read(&chat.path);
    assert!(text.contains("main.rs is the entry point."), "{text}");
    assert!(!text.contains("There are two files."), "{text}");
    // The job's turn and its result are in the chat, not in the archive.
    let delivered = text.find("the job is done").expect("the job's result");
    assert!(
        delivered > text.find("**Tool Use:** `bash` (`t2`)").unwrap(),
        "{text}"
    );
    let archive = archives(&chat).remove(0);
    assert!(!read(&archive).contains("t2"), "{}", read(&archive));
    // The model read it.
    assert!(
        mock.requests()
            .iter()
            .any(|request| request.raw_body.contains("the job is done")),
        "{text}"
    );
}
