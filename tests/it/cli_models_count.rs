//! `flemmad models` and `flemmad count` against the mock provider.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{chat, flemmad_command, frontmatter, stderr};
use flemma_mock_provider::MockProvider;

#[tokio::test]
async fn models_lists_what_each_provider_serves() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("");
    for provider in ["anthropic", "openai", "gemini"] {
        let out = flemmad_command(&chat, &mock.base_url())
            .args(["models", provider, "--json"])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!lines.is_empty(), "{provider}");
        assert!(lines.iter().all(|m| m["id"].is_string()), "{provider}");
    }
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.contains(&"/v1/models".to_owned()), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("/v1beta/models")),
        "{paths:?}"
    );
}

#[tokio::test]
async fn models_rejects_an_unknown_provider_with_a_suggestion() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("");
    let out = flemmad_command(&chat, &mock.base_url())
        .args(["models", "antropic"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("anthropic"), "{}", stderr(&out));
}

#[tokio::test]
async fn count_asks_the_provider_counting_endpoint() {
    let mock = MockProvider::start().await.unwrap();
    for (provider, model, path) in [
        (
            "anthropic",
            "claude-sonnet-4-5",
            "/v1/messages/count_tokens",
        ),
        ("openai", "gpt-5", "/v1/responses/input_tokens"),
        ("gemini", "gemini-2.5-pro", ":countTokens"),
    ] {
        let chat = chat(&format!(
            "{}@You:\nHow many tokens is this?\n",
            frontmatter(provider, model)
        ));
        let out = flemmad_command(&chat, &mock.base_url())
            .arg("count")
            .arg(&chat.path)
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("input tokens"), "{provider}: {stdout}");
        assert!(
            mock.requests().iter().any(|r| r.path.contains(path)),
            "{provider}: no request to {path}"
        );
    }
}

/// `count --stdin` counts an editor's unsaved buffer (the Neovim plugin's estimate): the text
/// read from stdin, evaluated as the chat at FILE (its directory for references).
#[tokio::test]
async fn count_stdin_counts_the_text_given_as_the_chats() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(&format!(
        "{}@You:\nOn disk.\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    ));
    std::fs::write(chat.path.parent().unwrap().join("notes.md"), "from a file").unwrap();
    let unsaved = format!(
        "{}@You:\nIn the buffer, with @./notes.md\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    );
    let mut command = flemmad_command(&chat, &mock.base_url());
    command
        .args(["count", "--stdin"])
        .arg(&chat.path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, unsaved.as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("input tokens"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let counted = mock
        .requests()
        .into_iter()
        .find(|r| r.path.contains("count_tokens"))
        .expect("a counting request");
    let body = counted.body.to_string();
    assert!(body.contains("In the buffer"), "{body}");
    assert!(body.contains("from a file"), "{body}");
    assert!(!body.contains("On disk"), "{body}");
}
