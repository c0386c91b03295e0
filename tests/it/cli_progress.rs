//! `flemmad send`'s progress on stderr: plain lines and the streamed text when stderr is not a
//! terminal; one live line rewritten in place when it is (run under `script`, which gives the
//! process a pseudo-terminal).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{provider_env, read, send_command, stderr};
use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

fn progress_chat() -> common::Chat {
    common::trusted_chat(
        r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {"auto_approve": ["$standard", "+bash"], "auto_approve_sandboxed": false}}}
```
@You:
Wait a second.
"#,
    )
}

fn script_the_mock(mock: &MockProvider) {
    mock.push(Turn::text("Waiting now.").tool_call_with_id(
        "bash",
        "p1",
        json!({"label": "wait", "command": "sleep 1.2; echo waited", "timeout": null}),
    ));
    mock.push(Turn::text("Waited a second."));
}

#[tokio::test]
async fn without_a_terminal_progress_is_plain_lines_and_the_streamed_text() {
    let mock = MockProvider::start().await.unwrap();
    let chat = progress_chat();
    script_the_mock(&mock);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        send_command(&chat, &mock.base_url()).output(),
    )
    .await
    .unwrap()
    .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let position = |line: &str| {
        lines
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("no line {line:?} in\n{err}"))
    };
    let streamed = position("Waiting now.");
    let running = position("flemmad: running `bash` (p1)");
    let finished = position("flemmad: `bash` (p1) finished: success");
    let answer = position("Waited a second.");
    assert!(
        streamed < running && running < finished && finished < answer,
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("flemmad: done in ")),
        "{err}"
    );
    assert!(
        !err.contains('\r') && !err.contains('\x1b'),
        "no terminal codes: {err:?}"
    );
    assert!(read(&chat.path).ends_with("Waited a second.\n\n@You:\n\n"));
}

#[tokio::test]
async fn on_a_terminal_progress_is_one_live_line_rewritten_in_place() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: `script` (util-linux) is not installed, so no pseudo-terminal");
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let chat = progress_chat();
    script_the_mock(&mock);
    let line = format!(
        "{} send {} 2>&1",
        env!("CARGO_BIN_EXE_flemmad"),
        chat.path.display()
    );
    let mut command = tokio::process::Command::new("script");
    command
        .args(["-qefc", &line, "/dev/null"])
        .env("XDG_CONFIG_HOME", &chat.config_home)
        .env_remove("FLEMMA_CONFIG")
        .env("PATH", "/usr/bin:/bin")
        .env("COLUMNS", "100")
        .kill_on_drop(true);
    for (key, value) in provider_env(&mock.base_url()) {
        command.env(key, value);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap()
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{screen}");
    // Redrawn in place: carriage return, the line, erase to the end of the line.
    assert!(
        screen.contains("\rflemmad: running bash · ") && screen.contains("\x1b[K"),
        "{screen:?}"
    );
    // The ticker redraws while the tool runs (its clock moves), so the line came more than once.
    assert!(
        screen.matches("\rflemmad: running bash").count() >= 2,
        "{screen:?}"
    );
    // The streamed text is not printed as lines of its own; the summary is.
    assert!(!screen.contains("\nWaiting now."), "{screen:?}");
    assert!(screen.contains("flemmad: done in "), "{screen:?}");
    assert!(read(&chat.path).ends_with("Waited a second.\n\n@You:\n\n"));
}
