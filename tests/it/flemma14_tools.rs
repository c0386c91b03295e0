//! Flemma 0.13–0.14 tool behaviour under `flemmad send` (issue 16): the store variable in file
//! paths, store path templates, Flemma's `edit` form, truthful truncation notices, the
//! `flemma.jobs.status` answer, the loop detector on calls that never ran, the thinking-off
//! warning, and a Flemma 0.14 chat using all of it. Real tools run in temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Output;
use std::time::Duration;

use common::{Chat, chat, read, send_command, stderr};
use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

fn config_file(chat: &Chat, toml: &str) {
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

async fn send(chat: &Chat, base: &str) -> Output {
    tokio::time::timeout(Duration::from_secs(90), send_command(chat, base).output())
        .await
        .expect("flemmad send finished in time")
        .unwrap()
}

/// Anthropic, with the tools of `$standard` approved and `bash` too (whatever the sandbox).
fn tool_chat(body: &str) -> Chat {
    let frontmatter = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-haiku-4-5",
  "tools": {"auto_approve": ["$standard", "bash"], "autopilot": {"resume_delay": 100}}}}
```
"#;
    chat(&format!("{frontmatter}{body}"))
}

fn call(id: &str, name: &str, input: Value) -> Turn {
    Turn::default().tool_call_with_id(name, id, input)
}

/// The text of the result block of `id` in `text`.
fn result_of(text: &str, id: &str) -> String {
    let doc = flemma_syntax::parse(text);
    let (_, _, result) = doc.tool_result(id).expect("a result block");
    let fence = result.fence.as_ref().expect("a fence");
    doc.slice(fence.content).to_owned()
}

#[tokio::test]
async fn the_store_variable_reaches_read_write_and_edit() {
    let mock = MockProvider::start().await.unwrap();
    let chat = tool_chat("@You:\nKeep a note in the store.\n");
    mock.push(call(
        "w1",
        "write",
        json!({"label": "note", "path": "$FLEMMA_TOOLS_STORE_PATH/note.txt", "content": "alpha\n"}),
    ));
    mock.push(call(
        "e1",
        "edit",
        json!({"label": "fix", "path": "${FLEMMA_TOOLS_STORE_PATH}/note.txt", "oldText": "alpha", "newText": "beta"}),
    ));
    mock.push(call(
        "r1",
        "read",
        json!({"label": "check", "path": "$FLEMMA_TOOLS_STORE_PATH/note.txt", "offset": null, "limit": null}),
    ));
    mock.push(Turn::text("Noted."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = chat.path.parent().unwrap();
    let stored = dir.join(".flemma/talk.chat/note.txt");
    assert_eq!(std::fs::read_to_string(&stored).unwrap(), "beta\n");
    assert!(
        !dir.join("$FLEMMA_TOOLS_STORE_PATH").exists(),
        "no literal directory next to the chat"
    );
    let text = read(&chat.path);
    assert_eq!(result_of(&text, "r1"), "beta\n", "{text}");
}

#[tokio::test]
async fn custom_store_templates_expand_their_variables() {
    let mock = MockProvider::start().await.unwrap();
    let chat = tool_chat("@You:\nCount.\n");
    config_file(
        &chat,
        "[tools.store]\npath_format = \"{{ __dirname }}/results/{{ flemma.path.stem(__filename) }}/{{ source }}_{{ name }}_{{ id }}.txt\"\n",
    );
    mock.push(call(
        "b1",
        "bash",
        json!({"label": "count", "command": "seq 1 3000", "timeout": null}),
    ));
    mock.push(Turn::text("Counted."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = chat.path.parent().unwrap();
    let stored = dir.join("results/talk/tool_bash_b1.txt");
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap().lines().count(),
        3000
    );
    let result = result_of(&read(&chat.path), "b1");
    assert!(
        result.contains(&format!("Full output: {}", stored.display())),
        "{result}"
    );
    assert!(!result.contains("{{"), "{result}");
}

#[tokio::test]
async fn a_pending_edit_in_flemmas_form_runs_once_approved() {
    let mock = MockProvider::start().await.unwrap();
    // As Flemma leaves it: the call in Flemma's form, its result pending review.
    let chat = tool_chat(
        "@You:\nFix the greeting.\n\n@Assistant:\n**Tool Use:** `edit` (`toolu_edit1`)\n```json\n{\"label\":\"fix greeting\",\"path\":\"hello.txt\",\"oldText\":\"helo\",\"newText\":\"hello\"}\n```\n\n@You:\n**Tool Result:** `toolu_edit1` (pending)\n```\n```\n",
    );
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("hello.txt"), "helo world\n").unwrap();
    let file = chat.path.display().to_string();
    let out = common::flemmad_command(&chat, &mock.base_url())
        .args(["approve", &file, "toolu_edit1"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    mock.push(Turn::text("Fixed."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = read(&chat.path);
    assert_eq!(
        std::fs::read_to_string(dir.join("hello.txt")).unwrap(),
        "hello world\n",
        "{text}"
    );
    let result = result_of(&text, "toolu_edit1");
    assert!(!result.contains("is required but missing"), "{result}");
    assert!(
        text.contains("`toolu_edit1`\n"),
        "a success, not an error: {text}"
    );
}

#[tokio::test]
async fn a_truncated_read_says_where_to_continue() {
    let mock = MockProvider::start().await.unwrap();
    let chat = tool_chat("@You:\nRead the log.\n");
    let dir = chat.path.parent().unwrap();
    let log: String = (1..=3000).map(|i| format!("entry {i}\n")).collect();
    std::fs::write(dir.join("big.log"), log).unwrap();
    mock.push(call(
        "r1",
        "read",
        json!({"label": "log", "path": "big.log", "offset": null, "limit": null}),
    ));
    mock.push(Turn::text("Read."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let result = result_of(&read(&chat.path), "r1");
    assert!(result.starts_with("entry 1\n"), "{}", &result[..40]);
    assert!(
        result.ends_with("[Showing lines 1-1999; more lines follow. Continue with offset 2000.]\n"),
        "{}",
        &result[result.len() - 120..]
    );
    // No store file that claims to be the "full output" but holds only the window.
    assert!(!result.contains("Full output"), "false notice");
    assert!(!dir.join(".flemma/talk.chat/tool_read_r1.txt").exists());
}

#[tokio::test]
async fn a_small_custom_tool_output_has_no_truncation_notice() {
    let mock = MockProvider::start().await.unwrap();
    // Its frontmatter approves a tool: a trusted folder (docs/security.md).
    let chat = common::trusted_chat(
        "```json\n{\"flemma\": {\"provider\": \"anthropic\", \"model\": \"claude-haiku-4-5\", \"tools\": {\"auto_approve\": [\"probe\"]}}}\n```\n@You:\nProbe.\n",
    );
    config_file(
        &chat,
        "[[tools.custom]]\nname = \"probe\"\ndescription = \"Says ok\"\ncommand = \"echo ok\"\n",
    );
    mock.push(call("p1", "probe", json!({"label": "probe"})));
    mock.push(Turn::text("Probed."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(result_of(&read(&chat.path), "p1"), "ok\n");
}

#[tokio::test]
async fn jobs_status_answers_json_with_elapsed_seconds() {
    let mock = MockProvider::start().await.unwrap();
    let chat = tool_chat("@You:\nRun it in the background.\n");
    mock.push(call(
        "b1",
        "bash",
        json!({"label": "wait", "command": "sleep 3; echo finished", "timeout": null, "flemma.background": true}),
    ));
    // The model asks about the job it was told of (the mock reads the id from the request).
    let status = |id: &str| {
        call(
            id,
            "flemma.jobs.status",
            json!({"label": "check", "job_id": flemma_mock_provider::LAST_JOB_ID}),
        )
    };
    mock.push(status("s1"));
    // Streamed slowly: the job finishes while this reply streams, before its call runs.
    let mut slow = Turn::text("x".repeat(100)).tool_call_with_id(
        "flemma.jobs.status",
        "s2",
        json!({"label": "check", "job_id": flemma_mock_provider::LAST_JOB_ID}),
    );
    slow.bytes_per_sec = Some(200);
    mock.push(slow);
    mock.push(Turn::text("All done."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = read(&chat.path);
    let running: Value = serde_json::from_str(&result_of(&text, "s1")).unwrap();
    let job = running["job_id"].as_str().unwrap().to_owned();
    assert!(text.contains(&format!("(job={job})")), "{text}");
    assert_eq!(running["status"], "running", "{text}");
    assert_eq!(running["tool"], "bash");
    assert!(
        running["elapsed_seconds"].as_u64().unwrap() < 3,
        "{running}"
    );
    let pending: Value = serde_json::from_str(&result_of(&text, "s2")).unwrap();
    assert_eq!(pending["job_id"], job.as_str());
    assert_eq!(pending["status"], "completed (delivery pending)", "{text}");
    assert!(
        pending["elapsed_seconds"].as_u64().unwrap() >= 3,
        "{pending}"
    );
    assert!(text.contains(&format!("**Job Result:** `{job}`")), "{text}");
}

#[tokio::test]
async fn the_loop_detector_counts_calls_to_an_unknown_tool() {
    let mock = MockProvider::start().await.unwrap();
    let chat = tool_chat("@You:\nWhat is 2+2?\n");
    for i in 0..8 {
        mock.push(call(
            &format!("c{i}"),
            "calculator",
            json!({"expression": "2+2"}),
        ));
    }
    let out = send(&chat, &mock.base_url()).await;
    assert!(!out.status.success(), "the loop stops the send");
    // Six paid requests, not autopilot's hundred.
    assert_eq!(mock.requests().len(), 6);
    let text = read(&chat.path);
    assert!(result_of(&text, "c1").starts_with("Unknown tool `calculator`"));
    assert!(!result_of(&text, "c1").contains("LOOP_DETECTED"));
    assert!(result_of(&text, "c2").contains("[LOOP_DETECTED:"), "{text}");
    assert!(
        result_of(&text, "c5").contains("turn stopped by the loop detector"),
        "{text}"
    );
    assert!(stderr(&out).contains("loop detector"), "{}", stderr(&out));
}

#[tokio::test]
async fn the_thinking_off_warning_is_said_once_per_send() {
    let mock = MockProvider::start().await.unwrap();
    let chat = tool_chat("@You:\nLook around.\n");
    // Replies without thinking blocks that call tools: every later request of the cycle turns
    // thinking off for Anthropic.
    for i in 0..3 {
        mock.push(call(
            &format!("l{i}"),
            "ls",
            json!({"label": "list", "path": ".", "max_depth": null, "limit": null}),
        ));
    }
    mock.push(Turn::text("Seen."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mock.requests().len(), 4);
    let text = stderr(&out);
    assert_eq!(
        text.matches("thinking turned off for this request").count(),
        1,
        "{text}"
    );
}

/// A chat as Flemma 0.14 writes it, using every feature of the issue: JSON frontmatter with a
/// model preset defined and selected, a Flemma-only option, the pre-0.12 `flemma:*` spelling,
/// thinking from another provider, a pending `edit` in Flemma's form and a `read` of the store.
#[tokio::test]
async fn a_flemma_0_14_chat_sends_without_an_error() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/flemma14/features.chat");
    let mock = MockProvider::start().await.unwrap();
    // A chat the user wrote with Flemma, in a folder they trust: its `(approved)` counts as
    // written (in an untrusted folder it would wait for approval: docs/security.md).
    let chat = common::trusted_chat(&std::fs::read_to_string(fixture).unwrap());
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("greeting.txt"), "helo\n").unwrap();
    std::fs::create_dir_all(dir.join(".flemma/talk.chat")).unwrap();
    std::fs::write(dir.join(".flemma/talk.chat/plan.md"), "1. greet\n").unwrap();
    mock.push(call(
        "toolu_r1",
        "read",
        json!({"label": "plan", "path": "$FLEMMA_TOOLS_STORE_PATH/plan.md", "offset": null, "limit": null}),
    ));
    mock.push(Turn::text("The greeting is fixed and the plan is done."));
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(!text.contains("error"), "{text}");
    // The preset's provider, model and parameters went on the wire.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[0].body;
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(body["model"], "kimi-k3", "{body}");
    assert_eq!(body["reasoning_effort"], "low", "{body}");
    // Thinking from Claude went as prose ending with a rule.
    assert!(
        requests[0]
            .raw_body
            .contains("---\\n\\nI will fix the greeting.")
    );
    assert!(!requests[0].raw_body.contains("<thinking>"));
    assert_eq!(
        std::fs::read_to_string(dir.join("greeting.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(result_of(&read(&chat.path), "toolu_r1"), "1. greet\n");
}
