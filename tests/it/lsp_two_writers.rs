//! Two editors on one document through the daemon, the writer switching while a reply
//! streams: the editor that becomes the writer keeps what its user typed while it was not the
//! writer (a three-way merge of the text it last shared with the engine, the engine's text and
//! its buffer), every streamed byte lands once; when the two changed the same place the
//! writer does not switch and the user is told.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common;
use crate::daemon_two_editors::{editor, environment, open_settled, send, serve};
use crate::lsp::lsp_client::{Client, Flavor};

const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}
```
"#;

/// A reply of distinct words, so that a byte written twice or lost shows.
fn story() -> String {
    (1..=40)
        .map(|i| format!("w{i:02}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pumps `client` until its buffer of `uri` holds `needle`.
fn pump_until_contains(client: &mut Client, uri: &str, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !client.text(uri).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "{needle:?} never arrived: {}\n{:?}",
            client.text(uri),
            client.notifications
        );
        client.pump(Duration::from_millis(20));
    }
}

/// Makes `client` the most recently active editor of `uri` (any command does).
fn touch(client: &mut Client, uri: &str) {
    let answer = client.request(
        "workspace/executeCommand",
        json!({"command": "flemma.status", "arguments": [uri]}),
    );
    assert!(answer.is_ok(), "{answer:?}");
}

fn messages(client: &Client) -> Vec<String> {
    client
        .notifications
        .iter()
        .filter(|n| n["method"] == "window/showMessage")
        .filter_map(|n| n["params"]["message"].as_str().map(str::to_owned))
        .collect()
}

/// Waits for the end of the turn, draining `other` meanwhile (its session must not block).
fn finish(writer: &mut Client, other: &mut Client) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        other.pump(Duration::from_millis(5));
        if let Some(at) = writer
            .notifications
            .iter()
            .position(|n| n["method"] == "flemma/event" && n["params"]["name"] == "engine:stopped")
        {
            let stopped = writer.notifications.remove(at).unwrap();
            return stopped["params"]["data"].clone();
        }
        assert!(Instant::now() < deadline, "the engine did not stop in time");
        writer.pump(Duration::from_millis(20));
    }
}

#[test]
fn the_new_writer_keeps_what_its_user_typed_while_another_editor_was_the_writer() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let original = format!("{FRONTMATTER}@You:\nFirst question.\n");
    let chat = common::chat(&original);
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(&mock.base_url(), &chat);
    let _daemon = serve(&env, &dir);
    let uri = format!("file://{}", chat.path.display());

    let mut helix = editor(Flavor::Helix, &env, &dir);
    open_settled(&mut helix, &uri, &original);
    let mut vscode = editor(Flavor::VsCode, &env, &dir);
    open_settled(&mut vscode, &uri, &original);

    // VS Code sends: the reply streams into its buffer.
    let story = story();
    mock.push(Turn::text(story.clone()).bytes_per_sec(1500));
    send(&mut vscode, &uri);
    pump_until_contains(&mut vscode, &uri, "w03");
    assert!(!vscode.text(&uri).contains("w40"), "streamed too fast");
    // Meanwhile the Helix user edits the question in Helix's buffer (Helix is not the writer:
    // it has none of the reply), then acts in Helix: Helix becomes the writer mid-stream.
    let at = helix.text(&uri).find("First question").unwrap() + "First question".len();
    helix.type_at(&uri, at, ", edited in Helix");
    assert_eq!(helix.apply_edits_seen, 0);
    touch(&mut helix, &uri);

    let stopped = finish(&mut helix, &mut vscode);
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    let text = helix.text(&uri).to_owned();
    assert!(
        text.starts_with(&format!(
            "{FRONTMATTER}@You:\nFirst question, edited in Helix.\n\n@Assistant:\n"
        )),
        "the Helix user's edit is kept: {text}"
    );
    assert_eq!(text.matches(story.as_str()).count(), 1, "{text}");
    assert_eq!(text.matches("@Assistant:").count(), 1, "{text}");
    assert!(helix.apply_edits_seen > 0, "the rest streamed into Helix");
    // An editor has it open: the file on disk is the editors' to save.
    assert_eq!(std::fs::read_to_string(&chat.path).unwrap(), original);
    runtime.block_on(mock.shutdown());
}

#[test]
fn a_new_writer_whose_change_conflicts_does_not_take_over_and_the_user_is_told() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let original = format!("{FRONTMATTER}@You:\nFirst question.\n");
    let chat = common::chat(&original);
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(&mock.base_url(), &chat);
    let _daemon = serve(&env, &dir);
    let uri = format!("file://{}", chat.path.display());

    let mut helix = editor(Flavor::Helix, &env, &dir);
    open_settled(&mut helix, &uri, &original);
    let mut vscode = editor(Flavor::VsCode, &env, &dir);
    open_settled(&mut vscode, &uri, &original);

    let story = story();
    mock.push(Turn::text(story.clone()).bytes_per_sec(1500));
    send(&mut vscode, &uri);
    pump_until_contains(&mut vscode, &uri, "w03");
    // The Helix user writes where the engine writes (after the question, at the end): the
    // two cannot be merged.
    let end = helix.text(&uri).len();
    helix.type_at(&uri, end, "\n@You:\nSomething else.\n");
    let typed = helix.text(&uri).to_owned();
    touch(&mut helix, &uri);

    let stopped = finish(&mut vscode, &mut helix);
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    let text = vscode.text(&uri).to_owned();
    assert_eq!(
        text.matches(story.as_str()).count(),
        1,
        "all of it in VS Code: {text}"
    );
    assert_eq!(
        helix.text(&uri),
        typed,
        "Helix's buffer is left as its user left it"
    );
    assert_eq!(helix.apply_edits_seen, 0);
    let told: Vec<String> = messages(&helix)
        .into_iter()
        .chain(messages(&vscode))
        .filter(|m| m.contains("were both changed"))
        .collect();
    assert!(!told.is_empty(), "{:?}", helix.notifications);
    assert!(
        told.iter()
            .all(|m| m.contains("Helix's buffer") && m.contains("Visual Studio Code's buffer")),
        "{told:?}"
    );
    runtime.block_on(mock.shutdown());
}

#[test]
fn the_writer_switches_there_and_back_mid_stream_and_both_users_edits_are_kept() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let original = format!("{FRONTMATTER}@You:\nFirst question.\nSecond line.\n");
    let chat = common::chat(&original);
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(&mock.base_url(), &chat);
    let _daemon = serve(&env, &dir);
    let uri = format!("file://{}", chat.path.display());

    let mut helix = editor(Flavor::Helix, &env, &dir);
    open_settled(&mut helix, &uri, &original);
    let mut vscode = editor(Flavor::VsCode, &env, &dir);
    open_settled(&mut vscode, &uri, &original);

    let story: String = (1..=90)
        .map(|i| format!("z{i:02}"))
        .collect::<Vec<_>>()
        .join(" ");
    mock.push(Turn::text(story.clone()).bytes_per_sec(1200));
    send(&mut vscode, &uri);
    pump_until_contains(&mut vscode, &uri, "z03");
    // Helix's user edits the first line, and Helix takes over.
    let at = helix.text(&uri).find("First question").unwrap() + "First question".len();
    helix.type_at(&uri, at, " (Helix)");
    touch(&mut helix, &uri);
    pump_until_contains(&mut helix, &uri, "z20");
    for _ in 0..10 {
        vscode.pump(Duration::from_millis(5));
    }
    // Meanwhile VS Code's user, no longer the writer, edits the second line; then VS Code
    // takes over again: its base is what its buffer held when it stopped being the writer.
    assert!(!vscode.text(&uri).contains("z20"));
    let at = vscode.text(&uri).find("Second line").unwrap() + "Second line".len();
    vscode.type_at(&uri, at, " (VS Code)");
    touch(&mut vscode, &uri);
    assert!(!vscode.text(&uri).contains("z90"), "streamed too fast");

    let stopped = finish(&mut vscode, &mut helix);
    assert_eq!(stopped["reason"], "idle", "{stopped}");
    let text = vscode.text(&uri).to_owned();
    assert!(
        text.starts_with(&format!(
            "{FRONTMATTER}@You:\nFirst question (Helix).\nSecond line (VS Code).\n\n@Assistant:\n{story}"
        )),
        "both users' edits and the whole reply once: {text}"
    );
    assert_eq!(text.matches(story.as_str()).count(), 1, "{text}");
    runtime.block_on(mock.shutdown());
}
