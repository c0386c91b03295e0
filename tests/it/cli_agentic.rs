//! The agentic `flemmad send`, `approve` and `reject`, driven as processes against
//! `flemma-mock-provider` over real HTTP, with real tools running in a temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Output;
use std::time::Duration;

use common::{Chat, chat, flemmad_command, read, send_command, stderr};
use flemma_mock_provider::{Failure, MockProvider, Turn};
use serde_json::{Value, json};

/// Anthropic through the mock; `ls`/`read`/`write` auto-approved by `$standard`; `bash` needs
/// approval (the sandbox resolver is off so the result does not depend on bwrap); a short
/// resume delay after job results.
fn agentic_chat(body: &str) -> Chat {
    let frontmatter = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {"auto_approve_sandboxed": false, "autopilot": {"resume_delay": 100}}}}
```
"#;
    let chat = chat(&format!("{frontmatter}{body}"));
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("notes.txt"), "remember the milk\n").unwrap();
    chat
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

async fn send_events(chat: &Chat, base: &str) -> (Output, Vec<Value>) {
    let mut command = send_command(chat, base);
    command.arg("--events");
    let out = run(command).await;
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("each stdout line is JSON"))
        .collect();
    (out, events)
}

fn names(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["name"].as_str()).collect()
}

fn flemmad(chat: &Chat, base: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = flemmad_command(chat, base);
    command.args(args);
    command
}

fn ls(id: &str) -> Turn {
    Turn::default().tool_call_with_id(
        "ls",
        id,
        json!({"label": "list", "path": ".", "max_depth": null, "limit": null}),
    )
}

fn bash(turn: Turn, id: &str, command: &str) -> Turn {
    turn.tool_call_with_id(
        "bash",
        id,
        json!({"label": "run", "command": command, "timeout": null}),
    )
}

fn no_error_diagnostics(text: &str) {
    let doc = flemma_syntax::parse(text);
    let errors: Vec<_> = doc
        .diagnostics()
        .into_iter()
        .filter(|d| d.severity == flemma_syntax::Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{text}");
}

#[tokio::test]
async fn a_whole_agentic_conversation_with_an_approval_and_a_background_job() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nLook around, then run the tests.\n");
    let base = mock.base_url();
    mock.push(ls("t1").and_text("Let me look around.").tool_call_with_id(
        "read",
        "t2",
        json!({"label": "notes", "path": "notes.txt", "offset": null, "limit": null}),
    ));
    mock.push(
        bash(Turn::text("Now the tests."), "t3", "echo tests pass").tool_call_with_id(
            "bash",
            "t4",
            json!({"label": "slow", "command": "sleep 0.5; echo slow job done",
                   "timeout": null, "flemma.background": true}),
        ),
    );
    mock.push(Turn::text("The tests pass; the slow job is still running."));
    mock.push(Turn::text("The slow job finished too. All done."));

    // 1. ls and read run at once; bash waits for approval: exit 3 with the listing.
    let (out, events) = send_events(&chat, &base).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("`bash` (t3), asked by urn:flemma:approval:default"),
        "{err}"
    );
    assert!(err.contains("\"command\":\"echo tests pass\""), "{err}");
    let file = chat.path.display().to_string();
    assert!(
        err.contains(&format!("approve: flemmad approve {file} t3")),
        "{err}"
    );
    assert!(
        err.contains(&format!("reject:  flemmad reject {file} t3 --reason")),
        "{err}"
    );
    let text = read(&chat.path);
    assert!(
        text.contains("**Tool Result:** `t2`\n```\nremember the milk"),
        "{text}"
    );
    assert!(text.contains("notes.txt"), "{text}");
    assert!(text.contains("**Tool Result:** `t3` (pending)"), "{text}");
    assert!(text.contains("**Tool Result:** `t4` (pending)"), "{text}");
    let seen = names(&events);
    assert!(
        seen.contains(&"tool:executing") && seen.contains(&"tool:completed"),
        "{seen:?}"
    );
    let asked = events
        .iter()
        .find(|e| e["name"] == "tool:approval-required")
        .expect("approval-required event");
    assert_eq!(asked["data"]["tools"][0]["toolId"], "t3");
    assert!(asked["uri"].as_str().unwrap().starts_with("file:///"));
    no_error_diagnostics(&text);

    // 2. An unknown id is refused with the pending ones listed, and nothing changes.
    let before = read(&chat.path);
    let out = run(flemmad(&chat, &base, &["approve", &file, "t9"])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("waiting for approval: `t3`, `t4`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&chat.path), before);

    // 3. Approve both (t4 runs as a background job: the model asked so).
    let out = run(flemmad(&chat, &base, &["approve", &file, "--all"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(
        text.contains("`t3` (approved)") && text.contains("`t4` (approved)"),
        "{text}"
    );

    // 4. send resumes: bash runs, the job completes and is delivered, the model answers.
    let (out, events) = send_events(&chat, &base).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = read(&chat.path);
    assert!(
        text.contains("**Tool Result:** `t3`\n```\ntests pass\n```"),
        "{text}"
    );
    assert!(text.contains("**Job Result:**"), "{text}");
    assert!(text.contains("slow job done"), "{text}");
    assert!(
        text.contains("The slow job finished too. All done."),
        "{text}"
    );
    assert!(text.ends_with("@You:\n\n"), "{text:?}");
    let seen = names(&events);
    for name in [
        "tool:executing",
        "job:submitted",
        "request:sending",
        "job:completed",
        "autopilot:resume-scheduled",
        "autopilot:resumed",
        "conversation:idle",
    ] {
        assert!(seen.contains(&name), "{name} missing from {seen:?}");
    }
    // A status bar can name the model from `request:sending`.
    let sending = events
        .iter()
        .find(|e| e["name"] == "request:sending")
        .expect("request:sending");
    assert_eq!(sending["data"]["provider"], "anthropic", "{sending}");
    assert_eq!(sending["data"]["model"], "claude-sonnet-4-5", "{sending}");
    assert_eq!(mock.queued(), 0, "every scripted turn was used");
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn reject_with_a_reason_tells_the_model() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nClean up.\n");
    let base = mock.base_url();
    mock.push(bash(Turn::default(), "t1", "rm -rf build"));
    mock.push(Turn::text("Understood, I will not delete it."));
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let file = chat.path.display().to_string();
    let out = run(flemmad(
        &chat,
        &base,
        &["reject", &file, "t1", "--reason", "keep the build"],
    ))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(
        text.contains("**Tool Result:** `t1` (error)\n```\nUser feedback: keep the build\n```"),
        "{text}"
    );
    // Already resolved: exit 2.
    let out = run(flemmad(&chat, &base, &["reject", &file, "t1"])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not waiting for approval"),
        "{}",
        stderr(&out)
    );
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = mock.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("User feedback: keep the build"), "{last}");
    assert!(read(&chat.path).contains("Understood, I will not delete it."));
}

#[tokio::test]
async fn bad_calls_get_error_results_and_the_model_goes_on() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nTry things.\n");
    let base = mock.base_url();
    let outside = "/proc/flemma-not-allowed.txt";
    mock.push(
        Turn::default()
            .tool_call_with_id("frobnicate", "u1", json!({"x": 1}))
            .tool_call_with_id("read", "u2", json!({"label": "r", "path": 42}))
            .tool_call_with_id(
                "write",
                "u3",
                json!({"label": "w", "path": outside, "content": "x"}),
            ),
    );
    mock.push(Turn::text("Those did not work."));
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(text.contains("**Tool Result:** `u1` (error)"), "{text}");
    assert!(text.contains("frobnicate"), "{text}");
    assert!(text.contains("**Tool Result:** `u2` (error)"), "{text}");
    assert!(text.contains("does not fit the schema of `read`"), "{text}");
    assert!(text.contains("**Tool Result:** `u3` (error)"), "{text}");
    assert!(!std::path::Path::new(outside).exists());
    assert!(text.contains("Those did not work."), "{text}");
    no_error_diagnostics(&text);
}

/// Issue 31, fault 3: a `bash` call without its required `label` (bash asks for approval
/// here) gets its error result at once: it is never pending, `send` does not stop for an
/// approval, and the model reads what did not fit.
#[tokio::test]
async fn an_invalid_call_is_never_put_up_for_approval() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nList the numbers.\n");
    let base = mock.base_url();
    mock.push(Turn::default().tool_call_with_id(
        "bash",
        "u1",
        json!({"command": "seq 1 3", "timeout": null}),
    ));
    mock.push(Turn::text("I forgot the label."));
    let (out, events) = send_events(&chat, &base).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(!text.contains("(pending)"), "{text}");
    assert!(
        text.contains(
            "**Tool Result:** `u1` (error)\n```\nthe input does not fit the schema of `bash`"
        ),
        "{text}"
    );
    assert!(text.contains("label: is required but missing"), "{text}");
    assert!(text.contains("I forgot the label."), "{text}");
    assert!(
        !names(&events).contains(&"tool:approval-required"),
        "{:?}",
        names(&events)
    );
    let second = &mock.requests()[1].body;
    assert!(
        second
            .to_string()
            .contains("does not fit the schema of `bash`"),
        "{second}"
    );
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn the_same_failing_call_six_times_stops_autopilot() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nRead it.\n");
    let base = mock.base_url();
    for i in 0..8 {
        mock.push(Turn::default().tool_call_with_id(
            "read",
            format!("r{i}"),
            json!({"label": "r", "path": "missing.txt", "offset": null, "limit": null}),
        ));
    }
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        mock.requests().len(),
        6,
        "the model is not asked a 7th time"
    );
    let text = read(&chat.path);
    assert!(text.contains("[LOOP_DETECTED"), "{text}");
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn a_provider_error_after_tools_ran_keeps_their_results() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nList.\n");
    let base = mock.base_url();
    mock.push(ls("l1"));
    mock.push(Turn::failing(Failure::Http {
        status: 400,
        retry_after: None,
        retry_after_ms: None,
    }));
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(text.contains("**Tool Result:** `l1`\n```\n"), "{text}");
    assert!(text.contains("notes.txt"), "{text}");
    assert!(stderr(&out).contains("everything before is in the file"));
}

#[tokio::test]
async fn sigkill_mid_tool_then_the_next_send_recovers() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nRun the long job.\n");
    let base = mock.base_url();
    mock.push(Turn::default().tool_call_with_id(
        "bash",
        "k1",
        json!({"label": "slow", "command": "sleep 30", "timeout": null, "flemma.background": true}),
    ));
    // bash needs approval: run once to the pending placeholder, approve, run again.
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let file = chat.path.display().to_string();
    let out = run(flemmad(&chat, &base, &["approve", &file, "k1"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    mock.push(Turn::text("Started it."));
    let mut child = send_command(&chat, &base)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the job is recorded in the file, then kill the process.
    wait_for(&chat, "Started it.").await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let text = read(&chat.path);
    assert!(text.contains("job="), "{text}");
    // The next send marks the orphan lost and tells the model.
    mock.push(Turn::text("The job was lost; shall I retry?"));
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(
        text.contains("Job lost: session ended before completion."),
        "{text}"
    );
    assert!(text.contains("The job was lost; shall I retry?"), "{text}");
    no_error_diagnostics(&text);
}

/// Waits until the file contains `needle`.
async fn wait_for(chat: &Chat, needle: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !read(&chat.path).contains(needle) {
        assert!(
            std::time::Instant::now() < deadline,
            "{needle:?} never appeared in\n{}",
            read(&chat.path)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn ctrl_c_mid_tool_writes_aborted_and_exits_130() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nWait a while.\n");
    let base = mock.base_url();
    mock.push(bash(Turn::default(), "s1", "sleep 30"));
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let file = chat.path.display().to_string();
    let out = run(flemmad(&chat, &base, &["approve", &file, "s1"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut command = send_command(&chat, &base);
    command.arg("--events").stdout(std::process::Stdio::piped());
    let child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The tool runs once its `tool:executing` is out; give the process a moment to start it.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let events = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(events.contains("\"tool:executing\""), "{events}");
    let text = read(&chat.path);
    assert!(text.contains("**Tool Result:** `s1` (aborted)"), "{text}");
    assert_eq!(mock.requests().len(), 1, "nothing sent after the interrupt");
}

#[tokio::test]
async fn text_typed_while_a_tool_runs_is_kept() {
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic_chat("@You:\nSlowly.\n");
    let base = mock.base_url();
    mock.push(bash(Turn::default(), "w1", "sleep 1; echo finally"));
    let out = run(send_command(&chat, &base)).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let file = chat.path.display().to_string();
    let out = run(flemmad(&chat, &base, &["approve", &file, "w1"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    mock.push(Turn::text("Done waiting."));
    let child = send_command(&chat, &base)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Another program edits the file while the tool runs: a note at the top of the user's
    // first message.
    let text = read(&chat.path);
    let edited = text.replacen("Slowly.\n", "Slowly.\nTYPED WHILE RUNNING\n", 1);
    assert_ne!(edited, text);
    std::fs::write(&chat.path, &edited).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(text.contains("Slowly.\nTYPED WHILE RUNNING\n"), "{text}");
    assert!(
        text.contains("**Tool Result:** `w1`\n```\nfinally\n```"),
        "{text}"
    );
    assert!(text.contains("Done waiting."), "{text}");
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn status_lists_the_pending_calls_the_jobs_and_the_layers() {
    let chat = agentic_chat(
        "@You:\nrun\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\",\"label\":\"l\",\"timeout\":null}\n```\n\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"sleep 9\",\"label\":\"l\",\"timeout\":null}\n```\n\n@You:\n**Tool Result:** `t1` (pending)\n```\n```\n\n**Tool Result:** `t2` (job=job_abc12345)\n```\nRunning as a background job.\n```\n",
    );
    let file = chat.path.display().to_string();
    let out = run(flemmad(
        &chat,
        "http://127.0.0.1:9",
        &["status", &file, "--json"],
    ))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        status["config_sources"]["tools.auto_approve_sandboxed"],
        "frontmatter"
    );
    assert_eq!(status["unresolved"][0]["toolId"], "t1");
    assert_eq!(status["unresolved"][0]["status"], "pending");
    assert_eq!(
        status["unresolved"][0]["approval"]["verdict"],
        "require_approval"
    );
    assert_eq!(status["jobs"][0]["jobId"], "job_abc12345");
    assert_eq!(status["jobs"][0]["state"], "orphaned");
    assert!(status["send_pid"].is_null());
    let tools: Vec<&str> = status["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"bash") && tools.contains(&"ls"),
        "{tools:?}"
    );
}
