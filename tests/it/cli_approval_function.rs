//! A Rhai `auto_approve` function in the frontmatter deciding per call, through the binary:
//! `flemmad send` against `flemma-mock-provider` (auto-run, denied, pending), `flemmad status`
//! and `flemmad tools` showing the decision and the resolver.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Output;
use std::time::Duration;

use common::{Chat, flemmad_command, read, send_command, stderr};
use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

/// `read` of a Markdown file runs, `bash` with `rm` is denied (with the function's reason),
/// any other `bash` waits for approval, everything else passes to the rest of the chain.
const POLICY: &str = r#"```rhai
flemma.opt.provider = "anthropic";
flemma.opt.model = "claude-sonnet-4-5";
flemma.opt.tools.auto_approve_sandboxed = false;
flemma.opt.tools.auto_approve = |tool, input, ctx| {
  if tool == "read" && input.path.ends_with(".md") { return true; }
  if tool == "bash" && input.command.contains("rm ") { return "deny: this chat never deletes files"; }
  if tool == "bash" { return false; }
  ()
};
```
"#;

fn policy_chat(body: &str) -> Chat {
    let chat = common::trusted_chat(&format!("{POLICY}{body}"));
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("notes.md"), "# Notes\nremember the milk\n").unwrap();
    std::fs::write(dir.join("keep.txt"), "precious\n").unwrap();
    chat
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

fn bash(turn: Turn, id: &str, command: &str) -> Turn {
    turn.tool_call_with_id(
        "bash",
        id,
        json!({"label": "run", "command": command, "timeout": null}),
    )
}

#[tokio::test]
async fn send_runs_denies_and_holds_as_the_frontmatter_function_says() {
    let mock = MockProvider::start().await.unwrap();
    let chat = policy_chat("@You:\nRead the notes, tidy up, then list.\n");
    let base = mock.base_url();
    let turn = Turn::text("On it.").tool_call_with_id(
        "read",
        "t1",
        json!({"label": "notes", "path": "notes.md", "offset": null, "limit": null}),
    );
    let turn = bash(turn, "t2", "rm keep.txt");
    mock.push(bash(turn, "t3", "ls"));
    let out = run(send_command(&chat, &base)).await;
    let err = stderr(&out);
    // Waiting for the one call that needs approval.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("`bash` (t3), asked by urn:flemma:approval:config"),
        "{err}"
    );
    assert!(err.contains("1 tool call pending:"), "{err}");
    assert!(err.contains("`read` (t1) finished: success"), "{err}");
    let text = read(&chat.path);
    // t1 ran (approved by the function), t2 was denied (the model is told why) and never
    // ran, t3 is pending.
    assert!(
        text.contains("**Tool Result:** `t1`\n```\n# Notes\nremember the milk"),
        "{text}"
    );
    assert!(
        text.contains("**Tool Result:** `t2` (error)\n```\nthis chat never deletes files\n```"),
        "{text}"
    );
    assert!(text.contains("**Tool Result:** `t3` (pending)"), "{text}");
    let dir = chat.path.parent().unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
        "precious\n",
        "the denied rm did not run"
    );

    // status shows the pending call and who holds it.
    let file = chat.path.display().to_string();
    let out = run({
        let mut command = flemmad_command(&chat, &base);
        command.args(["status", &file, "--json"]);
        command
    })
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pending = status["unresolved"]
        .as_array()
        .unwrap()
        .iter()
        .find(|call| call["toolId"] == "t3")
        .expect("t3 is unresolved");
    assert_eq!(pending["approval"]["verdict"], "require_approval");
    assert_eq!(
        pending["approval"]["resolver"],
        "urn:flemma:approval:config"
    );
}

#[tokio::test]
async fn status_and_tools_show_the_function_decisions() {
    let chat = policy_chat(
        "@You:\ngo\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"rm -rf build\",\"label\":\"l\",\"timeout\":null}\n```\n\n**Tool Use:** `read` (`t2`)\n```json\n{\"path\":\"notes.md\",\"label\":\"l\",\"offset\":null,\"limit\":null}\n```\n\n**Tool Use:** `read` (`t3`)\n```json\n{\"path\":\"keep.txt\",\"label\":\"l\",\"offset\":null,\"limit\":null}\n```\n",
    );
    let file = chat.path.display().to_string();
    let out = run({
        let mut command = flemmad_command(&chat, "http://127.0.0.1:9");
        command.args(["status", &file, "--json"]);
        command
    })
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let approval = |id: &str| {
        status["unresolved"]
            .as_array()
            .unwrap()
            .iter()
            .find(|call| call["toolId"] == id)
            .unwrap_or_else(|| panic!("{id} unresolved in {status}"))["approval"]
            .clone()
    };
    let denied = approval("t1");
    assert_eq!(denied["verdict"], "deny");
    assert_eq!(denied["resolver"], "urn:flemma:approval:config");
    assert_eq!(denied["message"], "this chat never deletes files");
    assert_eq!(approval("t2")["verdict"], "approve");
    // keep.txt is not Markdown: the function passes; it replaced the `$standard` list, so
    // the rest of the chain (no sandbox, approval required) asks.
    let passed = approval("t3");
    assert_eq!(passed["verdict"], "require_approval");
    assert_eq!(passed["resolver"], "urn:flemma:approval:default");

    // The human form names the resolver and the reason too.
    let out = run({
        let mut command = flemmad_command(&chat, "http://127.0.0.1:9");
        command.args(["status", &file]);
        command
    })
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "`bash` (t1): no result  [deny by urn:flemma:approval:config: this chat never deletes files]"
        ),
        "{text}"
    );

    // `flemmad tools --chat` lists each tool with the function's decision for an empty input.
    let out = run({
        let mut command = flemmad_command(&chat, "http://127.0.0.1:9");
        command.args(["tools", "--chat", &file, "--json"]);
        command
    })
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bash = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "bash")
        .expect("bash listed");
    assert_eq!(bash["approval"]["resolver"], "urn:flemma:approval:config");
}

#[tokio::test]
async fn a_failing_function_requires_approval_and_says_what_to_fix() {
    let mock = MockProvider::start().await.unwrap();
    let chat = common::trusted_chat(
        "```rhai\nflemma.opt.provider = \"anthropic\";\nflemma.opt.model = \"claude-sonnet-4-5\";\nflemma.opt.tools.auto_approve = |tool, input, ctx| { if tool == \"ls\" { return 42; } true };\n```\n@You:\nlist\n",
    );
    let base = mock.base_url();
    mock.push(Turn::default().tool_call_with_id(
        "ls",
        "t1",
        json!({"label": "list", "path": ".", "max_depth": null, "limit": null}),
    ));
    let out = run(send_command(&chat, &base)).await;
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a failing function never approves: {err}"
    );
    assert!(err.contains("`ls` (t1)"), "{err}");
    assert!(
        err.contains("auto_approve function returned i64"),
        "the reason is shown: {err}"
    );
    assert!(
        read(&chat.path).contains("**Tool Result:** `t1` (pending)"),
        "{}",
        read(&chat.path)
    );
}
