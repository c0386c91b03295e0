//! Every command reports the same diagnostics for the same broken chat and refuses the same
//! way (issue 7): `parse --eval` (text and JSON), `send` and `count` run as processes on the
//! same files against `flemma-mock-provider`. Also the send rules of issue 8 (an open fence in
//! the question, unclosed frontmatter, `count` on an empty chat, continuing after an aborted
//! reply) and the lock that refuses a second `send` of one file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Output;
use std::time::Duration;

use common::{Chat, chat, flemmad_command, read, send_command, stderr};
use flemma_mock_provider::{MockProvider, Turn};

async fn run(chat: &Chat, base: &str, args: &[&str], extra: &[&str]) -> Output {
    let mut command = flemmad_command(chat, base);
    command.args(extra).args(args).arg(&chat.path);
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

/// The diagnostic lines of a report (everything but the closing `flemmad CMD: …` line and
/// the progress lines of a send).
fn diagnostic_lines(output: &Output) -> Vec<String> {
    stderr(output)
        .lines()
        .filter(|line| !line.starts_with("flemmad"))
        .map(str::to_owned)
        .collect()
}

struct Reports {
    eval_text: Output,
    eval_json: Output,
    send: Output,
    count: Output,
    parse_json: Output,
}

async fn every_command(chat: &Chat, mock: &MockProvider, extra: &[&str]) -> Reports {
    let base = mock.base_url();
    Reports {
        eval_text: run(chat, &base, &["parse", "--eval"], extra).await,
        eval_json: run(chat, &base, &["parse", "--eval", "--json"], extra).await,
        count: run(chat, &base, &["count"], extra).await,
        send: run(chat, &base, &["send"], extra).await,
        parse_json: run(chat, &base, &["parse", "--json"], extra).await,
    }
}

/// Asserts the commands agree on a chat whose problems block sending, and that the blocking
/// codes are `expected`.
async fn assert_blocked_alike(text: &str, config: Option<&str>, extra: &[&str], expected: &[&str]) {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(text);
    if let Some(config) = config {
        std::fs::create_dir_all(chat.config_home.join("flemma")).unwrap();
        std::fs::write(chat.config_home.join("flemma/config.toml"), config).unwrap();
    }
    let reports = every_command(&chat, &mock, extra).await;
    let reference = diagnostic_lines(&reports.eval_text);
    assert!(!reference.is_empty(), "{}", stderr(&reports.eval_text));
    for (name, output) in [
        ("parse --eval", &reports.eval_text),
        ("parse --eval --json", &reports.eval_json),
        ("send", &reports.send),
        ("count", &reports.count),
    ] {
        assert_eq!(
            output.status.code(),
            Some(1),
            "{name} must refuse: {}",
            stderr(output)
        );
        assert_eq!(
            diagnostic_lines(output),
            reference,
            "{name} reports differently"
        );
    }
    assert!(mock.requests().is_empty(), "nothing may reach the provider");
    assert_eq!(
        read(&chat.path),
        text,
        "a refused send leaves the file as it was"
    );

    let json: serde_json::Value = serde_json::from_slice(&reports.eval_json.stdout).unwrap();
    assert_eq!(json["blocked"], true);
    let diagnostics = json["diagnostics"].as_array().unwrap();
    let blocking: Vec<&str> = diagnostics
        .iter()
        .filter(|d| d["blocking"] == true)
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(blocking, expected, "{json:#}");
    // Every message the JSON lists is among the lines printed.
    for d in diagnostics {
        let message = d["message"].as_str().unwrap();
        assert!(
            reference.iter().any(|line| line.contains(message)),
            "{message} missing from {reference:?}"
        );
    }
    // The parser's findings are the same under `parse --json`.
    let tree: serde_json::Value = serde_json::from_slice(&reports.parse_json.stdout).unwrap();
    for d in diagnostics.iter().filter(|d| d["source"] == "syntax") {
        assert!(
            tree["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["code"] == d["code"] && t["message"] == d["message"]),
            "{d} missing from parse --json"
        );
    }
}

#[tokio::test]
async fn an_open_fence_in_the_question_blocks_every_command_and_names_the_fix() {
    let text = "@You:\nPlease fix this:\n```python\nprint(1)\n";
    assert_blocked_alike(text, None, &[], &["unclosed-fence"]).await;
    let mock = MockProvider::start().await.unwrap();
    let chat = chat(text);
    let out = run(&chat, &mock.base_url(), &["send"], &[]).await;
    let err = stderr(&out);
    assert!(err.contains("talk.chat:3:1: error:"), "{err}");
    assert!(
        err.contains("  hint: close the fence with ``` on its own line"),
        "{err}"
    );
}

#[tokio::test]
async fn unclosed_frontmatter_blocks_at_its_first_line() {
    let text = "```json\n{ \"flemma\": { \"provider\": \"openai\" } }\n@You:\nhi\n";
    assert_blocked_alike(text, None, &[], &["unclosed-frontmatter"]).await;
}

#[tokio::test]
async fn lua_frontmatter_blocks_every_command() {
    let text = "```lua\nflemma.opt.thinking = \"low\"\n```\n@You:\nhi\n";
    assert_blocked_alike(text, None, &[], &["lua-frontmatter"]).await;
}

#[tokio::test]
async fn a_blocking_template_error_blocks_every_command() {
    assert_blocked_alike("@You:\n{% let x = ; %}\n", None, &[], &["template-code"]).await;
}

#[tokio::test]
async fn a_misspelt_option_in_the_config_file_blocks_every_command() {
    let config = "[parameters]\nthinkng = \"low\"\n";
    assert_blocked_alike("@You:\nhi\n", Some(config), &[], &["config"]).await;
}

#[tokio::test]
async fn a_missing_config_file_is_an_error_everywhere() {
    let extra = ["--config", "/nonexistent/flemma.toml"];
    assert_blocked_alike("@You:\nhi\n", None, &extra, &["config"]).await;
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nhi\n");
    let out = {
        let mut command = flemmad_command(&chat, &mock.base_url());
        command.args(extra).args(["models", "anthropic"]);
        command.output().await.unwrap()
    };
    {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot read config file /nonexistent/flemma.toml"),
            "{}",
            stderr(&out)
        );
    }
}

#[tokio::test]
async fn warnings_are_reported_alike_and_do_not_block() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("Hello."));
    let chat = chat("@You:\nHi {{ recipent }}\n");
    let base = mock.base_url();
    let eval = run(&chat, &base, &["parse", "--eval"], &[]).await;
    let count = run(&chat, &base, &["count"], &[]).await;
    let send = run(&chat, &base, &["send"], &[]).await;
    let warnings = diagnostic_lines(&eval);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(": warning: "), "{warnings:?}");
    for (name, out) in [("parse --eval", &eval), ("count", &count), ("send", &send)] {
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(out));
        assert!(
            diagnostic_lines(out).starts_with(&warnings),
            "{name}: {}",
            stderr(out)
        );
    }
}

#[tokio::test]
async fn count_on_an_empty_chat_sends_no_request() {
    let mock = MockProvider::start().await.unwrap();
    for text in [
        "",
        "@You:\n\n",
        "@You:\nhi\n\n@Assistant:\nhello\n\n@You:\n\n",
    ] {
        let chat = chat(text);
        let out = run(&chat, &mock.base_url(), &["count"], &[]).await;
        assert_eq!(out.status.code(), Some(1), "{text:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("nothing to send"), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("hint: write your message under a final `@You:` line"),
            "{}",
            stderr(&out)
        );
    }
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn a_chat_whose_last_reply_was_aborted_can_be_sent_again() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("the rest"));
    let chat = chat(
        "@You:\nhi\n\n@Assistant:\nHel\n\n<!-- flemma:aborted: The provider failed mid-reply. -->\n\n@You:\n\n",
    );
    let out = run(&chat, &mock.base_url(), &["send"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mock.requests().len(), 1);
    assert!(read(&chat.path).contains("the rest"));
}

#[tokio::test]
async fn a_second_send_of_the_same_file_is_refused_at_once_naming_the_first() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nStream slowly.\n");
    // About two seconds of stream: the second send starts well before it ends.
    mock.push(Turn::text("slow ".repeat(40)).bytes_per_sec(2000));
    let first = send_command(&chat, &mock.base_url())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let first_pid = first.id().unwrap();
    for _ in 0..400 {
        if read(&chat.path).contains("@Assistant:\nslow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let started = std::time::Instant::now();
    let second = tokio::time::timeout(
        Duration::from_secs(30),
        send_command(&chat, &mock.base_url()).output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused at once"
    );
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    assert!(
        stderr(&second).contains(&format!("pid {first_pid}")),
        "{}",
        stderr(&second)
    );
    let first = tokio::time::timeout(Duration::from_secs(30), first.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(mock.requests().len(), 1, "only the first send paid");

    // Once the first is done the file can be sent again.
    std::fs::write(&chat.path, "@You:\nagain\n").unwrap();
    mock.push(Turn::text("ok"));
    let third = run(&chat, &mock.base_url(), &["send"], &[]).await;
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
}
