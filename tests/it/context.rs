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
