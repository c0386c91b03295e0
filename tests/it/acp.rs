//! `flemmad acp` driven by a real ACP client: the official Python SDK (PyPI
//! `agent-client-protocol`) running `tests/it/acp/client.py`, against `flemma-mock-provider`
//! over real HTTP, with real tools in a temporary project. The bad-input tests speak raw
//! JSON lines (the SDKs cannot send malformed JSON).
//!
//! The Python comes from `FLEMMA_TEST_ACP_PYTHON` (`.ci/run` makes a venv); without it the
//! client tests say "skipped" (and fail under CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use flemma_mock_provider::{MockProvider, MockStop, Turn};
use serde_json::{Value, json};

use crate::common::provider_env;

/// The ACP client a test runs: one written on each official SDK, speaking the same steps and
/// printing the same report (`tests/it/acp/client.py`, `tests/it/acp/ts/client.mjs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sdk {
    /// PyPI `agent-client-protocol`, its Python from `FLEMMA_TEST_ACP_PYTHON`.
    Python,
    /// npm `@agentclientprotocol/sdk`, installed in `tests/it/acp/ts/node_modules` (`npm ci`
    /// there), run by the Node in `FLEMMA_TEST_ACP_NODE`.
    TypeScript,
}

/// An SDK's client, ready to run: the interpreter and the script.
struct Client {
    interpreter: PathBuf,
    script: PathBuf,
}

fn acp_tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/acp")
}

fn python(test: &str) -> Option<Client> {
    client_of(Sdk::Python, test)
}

/// The client of `sdk`; `None` (the test says "skipped") where its SDK is not installed
/// here, which fails under CI.
fn client_of(sdk: Sdk, test: &str) -> Option<Client> {
    match sdk {
        Sdk::Python => Some(Client {
            interpreter: crate::common::sdk_python(
                "FLEMMA_TEST_ACP_PYTHON",
                "agent-client-protocol",
                test,
            )?,
            script: acp_tests_dir().join("client.py"),
        }),
        Sdk::TypeScript => {
            let node = std::env::var_os("FLEMMA_TEST_ACP_NODE").filter(|n| !n.is_empty());
            let installed = acp_tests_dir()
                .join("ts/node_modules/@agentclientprotocol/sdk")
                .is_dir();
            match node {
                Some(node) if installed => Some(Client {
                    interpreter: PathBuf::from(node),
                    script: acp_tests_dir().join("ts/client.mjs"),
                }),
                _ => {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "{test}: .ci/run runs `npm ci` in tests/it/acp/ts and sets FLEMMA_TEST_ACP_NODE"
                    );
                    eprintln!(
                        "skipped: {test} (TypeScript SDK): run `npm ci` in tests/it/acp/ts and set \
                         FLEMMA_TEST_ACP_NODE to a Node (20 or later) to run it"
                    );
                    None
                }
            }
        }
    }
}

/// What a client test needs: the Python SDK's client (`None`: skipped), a project, the mock
/// provider.
async fn setup(test: &str) -> Option<(Client, Project, MockProvider)> {
    setup_with(Sdk::Python, test).await
}

/// [`setup`] with the client of `sdk`.
async fn setup_with(sdk: Sdk, test: &str) -> Option<(Client, Project, MockProvider)> {
    let client = client_of(sdk, test)?;
    Some((client, Project::new(), MockProvider::start().await.unwrap()))
}

/// A scenario (`async fn NAME(sdk: Sdk)`) run once with each SDK's client, as the tests
/// `NAME::python` and `NAME::typescript`.
macro_rules! with_each_sdk {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test]
            async fn python() {
                super::$scenario(super::Sdk::Python).await;
            }

            #[tokio::test]
            async fn typescript() {
                super::$scenario(super::Sdk::TypeScript).await;
            }
        }
    };
}

/// A project folder (outside /tmp, which the sandbox leaves writable as a whole) and a user
/// configuration: Anthropic through the mock; `bash` needs approval.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("flemmad-acp-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("project/src")).unwrap();
        std::fs::write(root.join("project/src/x.rs"), "fn x() {}\n").unwrap();
        std::fs::create_dir_all(root.join("config/flemma")).unwrap();
        std::fs::write(
            root.join("config/flemma/config.toml"),
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve_sandboxed = false\n",
        )
        .unwrap();
        Self { _dir: dir, root }
    }

    fn cwd(&self) -> PathBuf {
        self.root.join("project")
    }

    /// The user configuration where only `read` runs without asking (file edits ask too).
    fn only_read_runs_alone(&self) {
        std::fs::write(
            self.root.join("config/flemma/config.toml"),
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"read\"]\n",
        )
        .unwrap();
    }

    fn env(&self, base: &str) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = provider_env(base)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        for (key, dir) in [
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_RUNTIME_DIR", "run"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
        ] {
            env.push((key.into(), self.root.join(dir).display().to_string()));
        }
        env.push(("PATH".into(), "/usr/bin:/bin".into()));
        env
    }

    /// Runs the client with `steps`; its report.
    async fn client(&self, client: &Client, base: &str, steps: Value) -> Value {
        let mut command = tokio::process::Command::new(&client.interpreter);
        command
            .arg(&client.script)
            .arg(env!("CARGO_BIN_EXE_flemmad"))
            .arg(self.cwd())
            .arg(steps.to_string())
            .env_remove("FLEMMA_CONFIG")
            .kill_on_drop(true);
        for (key, value) in self.env(base) {
            command.env(key, value);
        }
        let out = tokio::time::timeout(Duration::from_secs(90), command.output())
            .await
            .expect("the ACP client finished in time")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "client failed: {}\n{stdout}\nlog: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// `flemmad acp` in the project, spoken to in raw JSON lines (the SDKs cannot send what
    /// these tests send); no provider answers.
    fn raw_agent(
        &self,
    ) -> (
        std::process::Child,
        std::process::ChildStdin,
        std::io::Lines<BufReader<std::process::ChildStdout>>,
    ) {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
        command
            .arg("acp")
            .current_dir(self.cwd())
            .env_remove("FLEMMA_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, value) in self.env("http://127.0.0.1:9") {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        (child, stdin, lines)
    }

    /// Starts `flemmad serve` for this project; it answers on its sockets when this returns.
    async fn daemon(&self, base: &str) -> tokio::process::Child {
        std::fs::create_dir_all(self.root.join("run")).unwrap();
        let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
        serve
            .arg("serve")
            .env_remove("FLEMMA_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        for (key, value) in self.env(base) {
            serve.env(key, value);
        }
        let daemon = serve.spawn().unwrap();
        let socket = self.root.join("run/flemma/acp.sock");
        let start = std::time::Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the daemon never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        daemon
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("state/flemma/flemmad.log")).unwrap_or_default()
    }
}

fn kinds(updates: &Value) -> Vec<String> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap().to_owned())
        .collect()
}

/// The updates of a step but `available_commands_update`: flemmad sends it right after it
/// answers `session/new`, `load`, `resume` or `fork` (the client knows the session then), so
/// a client reads it within that step or the next one, as its SDK schedules its handlers.
fn without_commands_update(updates: &Value) -> Value {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] != "available_commands_update")
        .cloned()
        .collect()
}

fn message_text(updates: &Value, kind: &str) -> String {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The sessionId `session/new` answered in the report's first step.
fn session_of(report: &Value) -> &str {
    report["steps"][0]["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session in {report}"))
}

/// The text of the chat of the report's session, as it is now.
fn chat_of(report: &Value) -> String {
    std::fs::read_to_string(session_of(report)).unwrap()
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

async fn a_new_session_streams_the_reply_into_a_chat_send_would_write_the_same(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp new session").await else {
        return;
    };
    let reply = "Hello from the mock. ".repeat(20);
    let turn = || {
        Turn::default()
            .thinking("Pondering the greeting.", "sig-1")
            .and_text(reply.clone())
            .bytes_per_sec(4000)
    };
    mock.push(turn());
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([{"op": "new"}, {"op": "prompt", "text": "Say hello."}]),
        )
        .await;

    let init = &report["initialize"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"],
        false
    );
    assert_eq!(init["authMethods"], json!([]));
    // Editors send HTTP MCP servers only to agents that say they take them.
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["http"], true);
    assert_eq!(init["agentCapabilities"]["mcpCapabilities"]["sse"], false);

    let session = session_of(&report);
    let path = PathBuf::from(session);
    assert!(path.is_absolute(), "{session}");
    assert_eq!(
        path.parent().unwrap(),
        project.cwd().join(".flemma/sessions")
    );
    assert_eq!(path.extension().unwrap(), "chat");

    let prompt = &report["steps"][1];
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    let updates = &prompt["updates"];
    assert_eq!(
        message_text(updates, "agent_thought_chunk"),
        "Pondering the greeting."
    );
    assert_eq!(message_text(updates, "agent_message_chunk"), reply);
    let chunks = kinds(updates)
        .iter()
        .filter(|k| *k == "agent_message_chunk")
        .count();
    assert!(
        chunks > 1,
        "the reply streams as it arrives: {chunks} chunk(s)"
    );
    // After the request: the context used of the model's window (claude-sonnet-4-5's 200k),
    // the session's cost, the usage and the cache in `_meta`.
    let usage = updates
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["sessionUpdate"] == "usage_update")
        .unwrap_or_else(|| panic!("no usage_update in {updates}"));
    assert!(usage["used"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(usage["size"], 200_000, "{usage}");
    assert_eq!(usage["cost"]["currency"], "USD", "{usage}");
    assert!(usage["cost"]["amount"].as_f64().unwrap() > 0.0, "{usage}");
    assert!(
        usage["_meta"]["flemma"]["usage"]["input_tokens"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{usage}"
    );

    // The chat: the recorded cwd, the prompt under @You:, the reply, a new @You:.
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(
        written.starts_with("```json\n{\"flemma\":{\"tools\":{\"bash\":{\"cwd\":\"../..\"}}}}\n```\n@You:\nSay hello.\n"),
        "{written}"
    );
    assert!(written.contains(reply.trim()), "{written}");
    no_error_diagnostics(&written);

    // `flemmad send` on the same chat before the reply writes the same bytes.
    let twin = path.with_file_name("twin.chat");
    std::fs::write(
        &twin,
        "```json\n{\"flemma\":{\"tools\":{\"bash\":{\"cwd\":\"../..\"}}}}\n```\n@You:\nSay hello.\n",
    )
    .unwrap();
    mock.push(turn());
    let mut send = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
    send.arg("send").arg(&twin).env_remove("FLEMMA_CONFIG");
    for (key, value) in project.env(&mock.base_url()) {
        send.env(key, value);
    }
    let out = send.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&twin).unwrap(), written);

    // The session's chat is an ordinary chat: it parses and `flemmad send` continues it.
    assert!(written.trim_end().ends_with("@You:"), "{written}");
    std::fs::write(&path, format!("{}\nContinue.\n", written.trim_end())).unwrap();
    mock.push(Turn::text("Continued by send."));
    let mut send = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
    send.arg("send").arg(&path).env_remove("FLEMMA_CONFIG");
    let mut parse = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
    parse
        .arg("parse")
        .arg("--json")
        .arg(&path)
        .env_remove("FLEMMA_CONFIG");
    for (key, value) in project.env(&mock.base_url()) {
        send.env(&key, &value);
        parse.env(key, value);
    }
    let out = send.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let continued = std::fs::read_to_string(&path).unwrap();
    assert!(
        continued.contains("@You:\nContinue.\n\n@Assistant:\nContinued by send.\n\n@You:\n"),
        "{continued}"
    );
    let out = parse.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(tree.is_object(), "{tree}");
}

with_each_sdk!(a_new_session_streams_the_reply_into_a_chat_send_would_write_the_same);

/// A reply saying `text` that writes `content` into `notes.txt` (call `id`).
fn writing_notes(text: &str, id: &str, content: &str) -> Turn {
    Turn::text(text).tool_call_with_id(
        "write",
        id,
        json!({"label": "notes", "path": "notes.txt", "content": content}),
    )
}

fn bash_turn(id: &str, command: &str) -> Turn {
    Turn::text("Let me run it.").tool_call_with_id(
        "bash",
        id,
        json!({"label": "run the check", "command": command, "timeout": null}),
    )
}

async fn a_tool_call_asks_permission_runs_when_allowed_and_a_second_prompt_works(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp allow").await else {
        return;
    };
    mock.push(bash_turn("t1", "pwd; echo acp-ran"));
    mock.push(Turn::text("It ran."));
    mock.push(Turn::text("Second answer."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Run the check.", "permission": "allow_once"},
                {"op": "prompt", "text": "And now?"}
            ]),
        )
        .await;
    let session = session_of(&report);
    let step = &report["steps"][1];
    assert_eq!(step["result"]["stopReason"], "end_turn", "{step}");
    let asked = &step["permissions"][0];
    assert_eq!(asked["toolCall"]["toolCallId"], "t1", "{step}");
    let options: Vec<(&str, &str)> = asked["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_once", "allow_once"),
            ("allow_always", "allow_always"),
            ("reject_once", "reject_once")
        ]
    );
    let updates = step["updates"].as_array().unwrap();
    let call = updates
        .iter()
        .position(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "t1")
        .expect("tool_call announced");
    assert_eq!(updates[call]["title"], "run the check");
    assert_eq!(updates[call]["kind"], "execute");
    assert_eq!(updates[call]["rawInput"]["command"], "pwd; echo acp-ran");
    let statuses: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "t1")
        .filter_map(|u| u["status"].as_str())
        .collect();
    assert_eq!(statuses, ["in_progress", "completed"], "{step}");
    let done = updates.iter().find(|u| u["status"] == "completed").unwrap();
    let output = done["content"][0]["content"]["text"].as_str().unwrap();
    assert!(output.contains("acp-ran"), "{output}");
    // The tools run in the session's cwd, not in the sessions folder.
    assert!(
        output.contains(&project.cwd().display().to_string()),
        "{output}"
    );
    assert_eq!(
        message_text(&step["updates"], "agent_message_chunk"),
        "Let me run it.It ran."
    );
    // The call completes before the reply that answers its result streams (a fast provider
    // once got it after the whole reply: the result was read from the file too early).
    let completed = updates
        .iter()
        .position(|u| u["status"] == "completed" && u["toolCallId"] == "t1")
        .unwrap();
    let answer = call
        + updates[call..]
            .iter()
            .position(|u| u["sessionUpdate"] == "agent_message_chunk")
            .unwrap();
    assert!(completed < answer, "{step}");

    let second = &report["steps"][2];
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(
        message_text(&second["updates"], "agent_message_chunk"),
        "Second answer."
    );

    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("**Tool Result:** `t1`\n"), "{text}");
    assert!(text.contains("acp-ran"), "{text}");
    assert!(text.contains("@You:\nAnd now?\n"), "{text}");
    assert!(text.contains("Second answer."), "{text}");
    no_error_diagnostics(&text);
}

with_each_sdk!(a_tool_call_asks_permission_runs_when_allowed_and_a_second_prompt_works);

#[tokio::test]
async fn allow_always_approves_that_tool_for_the_rest_of_the_session() {
    let Some((python, project, mock)) = setup("acp allow always").await else {
        return;
    };
    mock.push(bash_turn("a1", "echo first"));
    mock.push(bash_turn("a2", "echo second"));
    mock.push(Turn::text("Both ran."));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Run both.", "permission": "allow_always"}
            ]),
        )
        .await;
    let step = &report["steps"][1];
    assert_eq!(step["result"]["stopReason"], "end_turn", "{step}");
    let asked: Vec<&Value> = step["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["toolCall"]["toolCallId"])
        .collect();
    assert_eq!(asked, [&json!("a1")], "{step}");
    let text = chat_of(&report);
    assert!(text.contains("first") && text.contains("second"), "{text}");
    assert!(text.contains("Both ran."), "{text}");
}

async fn a_rejected_tool_call_is_rejected_in_the_file_and_fails(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp reject").await else {
        return;
    };
    mock.push(bash_turn("t9", "touch should-not-exist"));
    mock.push(Turn::text("Understood, I will not."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Touch it.", "permission": "reject_once"}
            ]),
        )
        .await;
    let session = session_of(&report);
    let step = &report["steps"][1];
    assert_eq!(step["result"]["stopReason"], "end_turn", "{step}");
    assert_eq!(step["permissions"].as_array().unwrap().len(), 1);
    let failed = step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "t9")
        .expect("a final update");
    assert_eq!(failed["status"], "failed", "{step}");
    let text = std::fs::read_to_string(session).unwrap();
    // As `flemmad reject` writes it.
    assert!(
        text.contains(
            "**Tool Result:** `t9` (error)\n```\nThis tool has been rejected by the user.\n```"
        ),
        "{text}"
    );
    assert!(!project.cwd().join("should-not-exist").exists());
    assert!(text.contains("Understood, I will not."), "{text}");
}

with_each_sdk!(a_rejected_tool_call_is_rejected_in_the_file_and_fails);

async fn cancel_keeps_the_partial_reply_and_the_next_prompt_works(sdk: Sdk) {
    cancel_mid_reply(sdk, "acp cancel", "cancel_after_chunks").await;
}

with_each_sdk!(cancel_keeps_the_partial_reply_and_the_next_prompt_works);

/// `$/cancel_request` for the prompt request (issue 32) cancels as `session/cancel` does, and
/// the prompt still answers `cancelled`.
async fn a_cancel_request_for_the_prompt_cancels_it_like_session_cancel(sdk: Sdk) {
    cancel_mid_reply(sdk, "acp cancel request", "cancel_request_after_chunks").await;
}

with_each_sdk!(a_cancel_request_for_the_prompt_cancels_it_like_session_cancel);

/// A slow reply cancelled after two chunks by `how` (a step option of client.py).
async fn cancel_mid_reply(sdk: Sdk, test: &str, how: &str) {
    let Some((client, project, mock)) = setup_with(sdk, test).await else {
        return;
    };
    mock.push(Turn::text("slow ".repeat(400)).bytes_per_sec(2000));
    mock.push(Turn::text("After the cancel."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Talk slowly.", how: 2},
                {"op": "prompt", "text": "Go on."}
            ]),
        )
        .await;
    let session = session_of(&report);
    let cancelled = &report["steps"][1];
    assert_eq!(
        cancelled["result"]["stopReason"], "cancelled",
        "{cancelled}"
    );
    let streamed = message_text(&cancelled["updates"], "agent_message_chunk");
    assert!(streamed.len() < "slow ".len() * 400, "{streamed}");
    let next = &report["steps"][2];
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("<!-- flemma:aborted"), "{text}");
    assert!(text.contains("@Assistant:\nslow slow"), "{text}");
    assert!(!text.contains(&"slow ".repeat(400)), "{text}");
    assert!(text.contains("After the cancel."), "{text}");
    assert_eq!(
        mock.requests().len(),
        2,
        "the model is not asked again for the cancelled prompt"
    );
    no_error_diagnostics(&text);
}

async fn load_replays_a_flemma_chat_before_answering_and_continues_it(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp load").await else {
        return;
    };
    let chat = project.cwd().join("notes.chat");
    std::fs::write(
        &chat,
        "@You:\nWhat is in src?\n\n@Assistant:\n<thinking>\nLook first.\n</thinking>\nLet me look.\n\n**Tool Use:** `ls` (`a1`)\n```json\n{\"label\": \"list src\", \"path\": \"src\"}\n```\n\n**Tool Use:** `bash` (`a2`)\n```json\n{\"label\": \"count\", \"command\": \"false\"}\n```\n\n@You:\n**Tool Result:** `a1`\n```\nx.rs\n```\n\n**Tool Result:** `a2` (error)\n```\nexit 1\n```\n\n@Assistant:\nThere is x.rs.\n\n@You:\n",
    )
    .unwrap();
    mock.push(Turn::text("Still x.rs."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "load", "session": chat},
                {"op": "prompt", "text": "Anything else?"}
            ]),
        )
        .await;
    let load = &report["steps"][0];
    assert!(load.get("error").is_none(), "{load}");
    let updates = &without_commands_update(&load["updates"]);
    assert_eq!(
        kinds(updates),
        [
            "user_message_chunk",
            "agent_thought_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call",
            "agent_message_chunk"
        ]
    );
    assert_eq!(updates[0]["content"]["text"], "What is in src?");
    assert_eq!(updates[3]["status"], "completed");
    assert_eq!(updates[3]["kind"], "search");
    assert_eq!(updates[4]["status"], "failed");
    assert_eq!(updates[5]["content"]["text"], "There is x.rs.");
    let prompt = &report["steps"][1];
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    let text = std::fs::read_to_string(&chat).unwrap();
    assert!(
        text.contains("@You:\nAnything else?\n\n@Assistant:\nStill x.rs.\n\n@You:\n"),
        "{text}"
    );
}

with_each_sdk!(load_replays_a_flemma_chat_before_answering_and_continues_it);

#[tokio::test]
async fn bad_requests_get_clear_errors_and_write_nothing() {
    let Some((python, project, mock)) = setup("acp bad requests").await else {
        return;
    };
    mock.push(Turn::text("slow ".repeat(200)).bytes_per_sec(1000));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "prompt", "session": "/nowhere/x.chat", "text": "hi"},
                {"op": "load", "session": "relative.txt"},
                {"op": "new"},
                {"op": "prompt", "blocks": []},
                {"op": "double_prompt", "text": "first"}
            ]),
        )
        .await;
    let steps = &report["steps"];
    assert!(
        steps[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown sessionId"),
        "{steps}"
    );
    let load = steps[1]["error"].to_string();
    assert!(
        load.contains("not the absolute path of a .chat file"),
        "{load}"
    );
    let empty = steps[3]["error"].to_string();
    assert!(empty.contains("the prompt has no content"), "{empty}");
    let double = &steps[4];
    assert!(
        double["second"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("already running"),
        "{double}"
    );
    assert_eq!(double["result"]["stopReason"], "end_turn", "{double}");
    let session = steps[2]["result"]["sessionId"].as_str().unwrap();
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("@You:\nfirst\n"), "{text}");
    assert!(!text.contains("second"), "{text}");
}

/// Malformed JSON answers `-32700` with `"id": null`, and the agent keeps serving; nothing but
/// JSON-RPC reaches stdout.
#[test]
fn malformed_json_gets_a_parse_error_and_the_agent_keeps_serving() {
    let project = Project::new();
    let (mut child, mut stdin, mut lines) = project.raw_agent();
    stdin.write_all(b"{this is not json\n").unwrap();
    let answer: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let answer: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(lines.next().is_none());
}

/// The editor's `mcpServers` are tool sources of the session (in-process): a real MCP server
/// (PyPI `mcp`, `FLEMMA_TEST_MCP_PYTHON`) answers the model's call.
#[tokio::test]
async fn the_editors_mcp_servers_are_tool_sources_of_the_session() {
    editors_mcp_servers(false).await;
}

/// Through a daemon too: the daemon reaches the editor's server for the session (here one
/// over streamable HTTP, which `initialize` advertises).
#[tokio::test]
async fn through_a_daemon_the_editors_mcp_servers_are_tool_sources_too() {
    editors_mcp_servers(true).await;
}

async fn editors_mcp_servers(through_daemon: bool) {
    let Some(python) = python("acp mcpServers") else {
        return;
    };
    let Some(mcp_python) =
        crate::common::sdk_python("FLEMMA_TEST_MCP_PYTHON", "mcp", "acp mcpServers")
    else {
        return;
    };
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/flemma-mcp/tests/servers/demo_server.py");
    let project = Project::new();
    let mock = MockProvider::start().await.unwrap();
    let daemon = match through_daemon {
        true => Some(project.daemon(&mock.base_url()).await),
        false => None,
    };
    // In-process the server is a child over stdio; through the daemon one over HTTP.
    let mut http_server = None;
    let entry = if through_daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        http_server = Some(
            tokio::process::Command::new(&mcp_python)
                .arg(&server)
                .args(["--http", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap(),
        );
        let start = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the MCP server never listened"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        json!({"type": "http", "name": "editor", "url": format!("http://127.0.0.1:{port}/mcp"), "headers": []})
    } else {
        json!({"name": "editor", "command": mcp_python.to_string_lossy(), "args": [server], "env": []})
    };
    mock.push(Turn::text("Asking the server.").tool_call_with_id(
        "editor__echo",
        "m1",
        json!({"text": "hello from the editor's server"}),
    ));
    mock.push(Turn::text("It echoed."));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new", "mcpServers": [entry]},
                {"op": "prompt", "text": "Use the server.", "permission": "allow_once"}
            ]),
        )
        .await;
    let step = &report["steps"][1];
    assert_eq!(
        step["result"]["stopReason"],
        "end_turn",
        "{step}\n{}",
        project.log()
    );
    // The model was offered the server's tools.
    let offered = mock.requests()[0].body.to_string();
    assert!(offered.contains("editor__echo"), "{offered}");
    let text = chat_of(&report);
    assert!(text.contains("**Tool Result:** `m1`"), "{text}");
    assert!(text.contains("hello from the editor's server"), "{text}");
    if let Some(mut daemon) = daemon {
        assert!(project.log().contains("ACP connection opened"));
        daemon.kill().await.unwrap();
    }
    if let Some(mut http_server) = http_server {
        http_server.kill().await.unwrap();
    }
}

/// The editor's stdio servers start in a neutral directory, never the session's project
/// (docs/security.md, invariant III): a project that ships `mcp_server_fetch.py` does not
/// replace the editor's `python -m mcp_server_fetch`. And a server the editor names `flemma`
/// is refused (its tools would be `flemma.*`, the harness's own, which `$standard` approves):
/// its tool is neither offered nor run.
#[tokio::test]
async fn the_editors_servers_start_outside_the_project_and_flemma_is_refused() {
    let Some(python) = python("acp neutral mcp cwd") else {
        return;
    };
    let Some(mcp_python) =
        crate::common::sdk_python("FLEMMA_TEST_MCP_PYTHON", "mcp", "acp neutral mcp cwd")
    else {
        return;
    };
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/flemma-mcp/tests/servers/demo_server.py");
    let project = Project::new();
    let marker = project.root.join("the-project-module-ran");
    std::fs::write(
        project.cwd().join("mcp_server_fetch.py"),
        format!(
            "open({:?}, 'w').write('ran')\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let real = project.root.join("real");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(
        real.join("mcp_server_fetch.py"),
        format!(
            "import runpy\nrunpy.run_path({:?}, run_name='__main__')\n",
            server.display().to_string()
        ),
    )
    .unwrap();
    let mock = MockProvider::start().await.unwrap();
    mock.push(
        Turn::text("Asking both.")
            .tool_call_with_id("fetch__echo", "m1", json!({"text": "from the real module"}))
            .tool_call_with_id(
                "flemma__echo",
                "m2",
                json!({"text": "from the flemma server"}),
            ),
    );
    mock.push(Turn::text("Done."));
    let fetch = json!({"name": "fetch", "command": mcp_python.to_string_lossy(), "args": ["-m", "mcp_server_fetch"], "env": [{"name": "PYTHONPATH", "value": real.to_string_lossy()}]});
    let flemma = json!({"name": "flemma", "command": mcp_python.to_string_lossy(), "args": [server], "env": []});
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new", "mcpServers": [fetch, flemma]},
                {"op": "prompt", "text": "Use the servers.", "permission": "allow_once"}
            ]),
        )
        .await;
    assert!(
        !marker.exists(),
        "the project's module ran\n{}",
        project.log()
    );
    let offered = mock.requests()[0].body.to_string();
    assert!(offered.contains("fetch__echo"), "{offered}");
    assert!(!offered.contains("flemma__echo"), "{offered}");
    let text = chat_of(&report);
    assert!(
        text.contains("from the real module"),
        "{text}\n{}",
        project.log()
    );
    let flemma_result = text
        .split("**Tool Result:** `m2`")
        .nth(1)
        .unwrap_or_else(|| panic!("a result for m2: {text}"));
    let flemma_result = flemma_result.split("**Tool").next().unwrap_or_default();
    assert!(
        !flemma_result.contains("from the flemma server"),
        "the reserved server ran: {text}"
    );
    let log = project.log();
    assert!(log.contains("'flemma' is reserved"), "{log}");
}

/// With a daemon running, `flemmad acp` is a pipe to its `acp.sock` and the prompts run in the
/// daemon's engine (the chat is still the file): streamed text, a permission request and its
/// approval.
#[tokio::test]
async fn with_a_daemon_running_prompts_run_in_the_daemon() {
    let Some((python, project, mock)) = setup("acp via daemon").await else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    mock.push(bash_turn("d1", "echo via-daemon"));
    mock.push(Turn::text("The daemon ran it."));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Run it.", "permission": "allow_once"}
            ]),
        )
        .await;
    let step = &report["steps"][1];
    assert_eq!(
        step["result"]["stopReason"],
        "end_turn",
        "{step}\n{}",
        project.log()
    );
    assert_eq!(step["permissions"][0]["toolCall"]["toolCallId"], "d1");
    assert_eq!(
        message_text(&step["updates"], "agent_message_chunk"),
        "Let me run it.The daemon ran it."
    );
    let text = chat_of(&report);
    assert!(text.contains("via-daemon"), "{text}");
    let log = project.log();
    assert!(log.contains("acp: proxying stdio to the daemon"), "{log}");
    assert!(log.contains("ACP connection opened"), "{log}");
    daemon.kill().await.unwrap();
}

/// The settings of docs/editors/zed.md (step 3) and of docs/editors/acp.md's JetBrains
/// section parse and name the real command.
#[test]
fn the_documented_editor_settings_parse_and_name_the_real_command() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/editors");
    let zed = std::fs::read_to_string(docs.join("zed.md")).unwrap();
    let acp = std::fs::read_to_string(docs.join("acp.md")).unwrap();
    let jetbrains = &acp[acp.find("### JetBrains").expect("### JetBrains")..];
    let zed_step = &zed[zed
        .find("add flemmad to `agent_servers`")
        .expect("Zed's step 3")..];
    for (name, section) in [("zed.md", zed_step), ("acp.md JetBrains", jetbrains)] {
        let start = section.find("```json\n").unwrap() + "```json\n".len();
        let end = start + section[start..].find("```").unwrap();
        let settings: Value =
            serde_json::from_str(&section[start..end]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let server = &settings["agent_servers"]["flemmad"];
        assert_eq!(server["command"], "flemmad", "{name}");
        assert_eq!(server["args"], json!(["acp"]), "{name}");
    }
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .args(["acp", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("Agent Client Protocol"));
}

/// A permission request answered `cancelled` (what clients answer after `session/cancel`)
/// cancels the prompt: nothing runs, nothing is rejected; the call is marked aborted, so the
/// next prompt does not ask about it again and the model learns it was interrupted.
async fn a_cancelled_permission_request_cancels_the_prompt_without_running_or_rejecting(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp cancelled permission").await else {
        return;
    };
    mock.push(bash_turn("c1", "touch should-not-exist"));
    mock.push(Turn::text("Understood, nothing touched."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Touch it.", "permission": "cancel"},
                {"op": "prompt", "text": "Never mind."}
            ]),
        )
        .await;
    let step = &report["steps"][1];
    assert_eq!(step["result"]["stopReason"], "cancelled", "{step}");
    assert_eq!(step["permissions"].as_array().unwrap().len(), 1, "{step}");
    assert!(!project.cwd().join("should-not-exist").exists());
    let next = &report["steps"][2];
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    assert_eq!(next["permissions"], json!([]), "not asked again: {next}");
    assert!(!project.cwd().join("should-not-exist").exists());
    let text = chat_of(&report);
    // Marked aborted, it was sent as the abort's error result with the next prompt.
    assert!(
        text.contains("**Tool Result:** `c1` (error)\n```\nResponse interrupted by the user.\n```"),
        "{text}"
    );
    assert!(!text.contains("rejected"), "{text}");
    assert!(text.contains("Never mind."), "{text}");
    assert!(text.contains("Understood, nothing touched."), "{text}");
    no_error_diagnostics(&text);
    // The model got an error result for the call that never ran.
    let sent = mock.requests()[1].body.to_string();
    assert!(sent.contains("\"tool_use_id\":\"c1\""), "{sent}");
    assert!(sent.contains("\"is_error\":true"), "{sent}");
}

with_each_sdk!(a_cancelled_permission_request_cancels_the_prompt_without_running_or_rejecting);

/// The model's `read`, `edit` and `write` of the project, as turns: read `src/x.rs`, edit it,
/// write `src/new.rs`, then answer. The model names `src/x.rs` in roundabout ways: the editor
/// is still asked for the path it knows (issue 32, "paths as the editor knows them").
fn file_tool_turns(mock: &MockProvider) {
    mock.push(Turn::text("Reading.").tool_call_with_id(
        "read",
        "r1",
        json!({"label": "read x", "path": "src/../src/x.rs", "offset": null, "limit": null}),
    ));
    mock.push(Turn::text("Editing.").tool_call_with_id(
        "edit",
        "e1",
        json!({"label": "edit x", "path": "./src/x.rs", "edits": [{"old": "unsaved", "new": "edited"}]}),
    ));
    mock.push(Turn::text("Writing.").tool_call_with_id(
        "write",
        "w1",
        json!({"label": "write new", "path": "src/new.rs", "content": "fn new() {}\n"}),
    ));
    mock.push(Turn::text("All three done."));
}

/// A client that reads and writes files (`fs.readTextFile`, `fs.writeTextFile`) holds
/// `src/x.rs` unsaved: `read`, `edit` and `write` go through it.
fn check_file_tools_went_through_the_client(project: &Project, report: &Value) {
    let session = session_of(report);
    let step = &report["steps"][1];
    assert_eq!(
        step["result"]["stopReason"],
        "end_turn",
        "{step}\n{}",
        project.log()
    );
    let x = project.cwd().join("src/x.rs").display().to_string();
    let new = project.cwd().join("src/new.rs").display().to_string();
    // The editor's buffers changed, the disk did not.
    assert_eq!(
        report["buffers"][&x], "fn x() { /* edited */ }\n",
        "{report}"
    );
    assert_eq!(report["buffers"][&new], "fn new() {}\n", "{report}");
    assert_eq!(
        std::fs::read_to_string(project.cwd().join("src/x.rs")).unwrap(),
        "fn x() {}\n"
    );
    assert!(!project.cwd().join("src/new.rs").exists());
    let calls: Vec<(String, String)> = report["fs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            assert_eq!(call["sessionId"], session, "{call}");
            (
                call["method"].as_str().unwrap().to_owned(),
                call["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        calls
            .iter()
            .all(|(_, path)| !path.contains("/../") && !path.contains("/./")),
        "normalised: {calls:?}"
    );
    // Tool call locations are the editor's paths too.
    let read_call = step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "r1")
        .unwrap_or_else(|| panic!("r1 announced: {step}"));
    assert_eq!(read_call["locations"][0]["path"], x.as_str(), "{read_call}");
    for expected in [
        ("fs/read_text_file", &x),
        ("fs/write_text_file", &x),
        ("fs/write_text_file", &new),
    ] {
        assert!(
            calls
                .iter()
                .any(|(m, p)| m == expected.0 && p == expected.1),
            "{expected:?} in {calls:?}"
        );
    }
    // What the model read was the unsaved buffer, and the chat says so.
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("/* unsaved */"), "{text}");
    no_error_diagnostics(&text);
    // The edit's update shows its diff.
    let diff = step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["toolCallId"] == "e1" && u["status"] == "completed")
        .unwrap_or_else(|| panic!("e1 completed: {step}"));
    assert!(diff.to_string().contains("\"type\":\"diff\""), "{diff}");
}

fn file_tool_steps(project: &Project) -> Value {
    let x = project.cwd().join("src/x.rs").display().to_string();
    json!({
        "buffers": {x: "fn x() { /* unsaved */ }\n"},
        "steps": [
            {"op": "new"},
            {"op": "prompt", "text": "Read x, edit it, write new.", "permission": "allow_once"}
        ]
    })
}

async fn a_client_with_files_gets_the_file_tools_reads_and_writes(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp fs").await else {
        return;
    };
    file_tool_turns(&mock);
    let report = project
        .client(&client, &mock.base_url(), file_tool_steps(&project))
        .await;
    check_file_tools_went_through_the_client(&project, &report);
}

with_each_sdk!(a_client_with_files_gets_the_file_tools_reads_and_writes);

/// Through a daemon, the tools run in the daemon and still read and write through the
/// editor's connection.
#[tokio::test]
async fn through_a_daemon_the_file_tools_still_go_through_the_client() {
    let Some((python, project, mock)) = setup("acp fs via daemon").await else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    file_tool_turns(&mock);
    let report = project
        .client(&python, &mock.base_url(), file_tool_steps(&project))
        .await;
    check_file_tools_went_through_the_client(&project, &report);
    assert!(project.log().contains("ACP connection opened"));
    daemon.kill().await.unwrap();
}

/// Autopilot's `max_turns` stops a prompt with `max_turn_requests`; the chat stays valid.
#[tokio::test]
async fn autopilots_turn_limit_ends_the_prompt_with_max_turn_requests() {
    let Some(python) = python("acp max turns") else {
        return;
    };
    let project = Project::new();
    std::fs::write(
        project.root.join("config/flemma/config.toml"),
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"read\"]\n\n[tools.autopilot]\nmax_turns = 2\n",
    )
    .unwrap();
    let mock = MockProvider::start().await.unwrap();
    for n in 0..4 {
        mock.push(Turn::text("Again.").tool_call_with_id(
            "read",
            format!("r{n}"),
            json!({"label": "read x", "path": "src/x.rs", "offset": null, "limit": null}),
        ));
    }
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([{"op": "new"}, {"op": "prompt", "text": "Keep reading."}]),
        )
        .await;
    let step = &report["steps"][1];
    assert_eq!(
        step["result"]["stopReason"],
        "max_turn_requests",
        "{step}\n{}",
        project.log()
    );
    assert_eq!(step["permissions"], json!([]), "read is approved: {step}");
    assert!(mock.requests().len() < 4, "autopilot stopped early");
    let session = session_of(&report);
    no_error_diagnostics(&std::fs::read_to_string(session).unwrap());
}

/// A provider's refusal ends the prompt with `refusal`, keeps what came before it, and the
/// next prompt works.
#[tokio::test]
async fn a_refusal_ends_the_prompt_with_refusal_and_the_next_one_works() {
    let Some((python, project, mock)) = setup("acp refusal").await else {
        return;
    };
    mock.push(Turn::text("I would rather").stop(MockStop::Refusal("policy".into())));
    mock.push(Turn::text("Here is a different answer."));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Something refused."},
                {"op": "prompt", "text": "Something else."}
            ]),
        )
        .await;
    let refused = &report["steps"][1];
    assert_eq!(
        refused["result"]["stopReason"],
        "refusal",
        "{refused}\n{}",
        project.log()
    );
    assert_eq!(
        message_text(&refused["updates"], "agent_message_chunk"),
        "I would rather"
    );
    let next = &report["steps"][2];
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    let text = chat_of(&report);
    assert!(text.contains("I would rather"), "{text}");
    assert!(text.contains("Here is a different answer."), "{text}");
    no_error_diagnostics(&text);
}

/// `allow_always` lasts the session, not the connection: through a daemon, an editor that
/// reconnects and loads the session again is not asked again about that tool.
#[tokio::test]
async fn allow_always_outlives_the_connection_through_a_daemon() {
    let Some((python, project, mock)) = setup("acp allow always across connections").await else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    mock.push(bash_turn("k1", "echo first"));
    mock.push(Turn::text("First ran."));
    let first = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Run one.", "permission": "allow_always"}
            ]),
        )
        .await;
    assert_eq!(
        first["steps"][1]["permissions"].as_array().unwrap().len(),
        1
    );
    let session = first["steps"][0]["result"]["sessionId"].as_str().unwrap();
    mock.push(bash_turn("k2", "echo second"));
    mock.push(Turn::text("Second ran."));
    let again = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "load", "session": session},
                {"op": "prompt", "text": "Run another.", "permission": "reject_once"}
            ]),
        )
        .await;
    let step = &again["steps"][1];
    assert_eq!(step["result"]["stopReason"], "end_turn", "{step}");
    assert_eq!(step["permissions"], json!([]), "not asked again: {step}");
    let text = std::fs::read_to_string(session).unwrap();
    assert!(text.contains("Second ran."), "{text}");
    assert!(!text.contains("rejected"), "{text}");
    daemon.kill().await.unwrap();
}

/// The file is the truth: another program's edit of the chat between prompts is what the next
/// prompt sends.
#[tokio::test]
async fn an_edit_of_the_chat_between_prompts_is_what_the_next_prompt_sends() {
    let Some((python, project, mock)) = setup("acp edited between prompts").await else {
        return;
    };
    mock.push(Turn::text("The capital is Lyon."));
    mock.push(Turn::text("Noted."));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "What is the capital of France?"},
                {"op": "replace_in_chat", "old": "The capital is Lyon.", "new": "The capital is Paris."},
                {"op": "prompt", "text": "Thanks."}
            ]),
        )
        .await;
    let next = &report["steps"][3];
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    let sent = mock.requests()[1].body.to_string();
    assert!(sent.contains("The capital is Paris."), "{sent}");
    assert!(!sent.contains("Lyon"), "{sent}");
    let text = chat_of(&report);
    assert!(
        text.contains("The capital is Paris.") && text.contains("Noted."),
        "{text}"
    );
}

/// A reply that leaves a code fence open leaves a chat that parses without errors, at once and
/// after the next prompt (which is not swallowed by the fence).
#[tokio::test]
async fn a_reply_that_leaves_a_fence_open_leaves_a_valid_chat() {
    let Some((python, project, mock)) = setup("acp open fence").await else {
        return;
    };
    mock.push(Turn::text(
        "Here it is:\n\n```rust\nfn main() {\n    println!(\"hi\");",
    ));
    mock.push(Turn::text("Closed now."));
    let first = project
        .client(
            &python,
            &mock.base_url(),
            json!([{"op": "new"}, {"op": "prompt", "text": "Write main."}]),
        )
        .await;
    assert_eq!(first["steps"][1]["result"]["stopReason"], "end_turn");
    let session = first["steps"][0]["result"]["sessionId"].as_str().unwrap();
    let text = std::fs::read_to_string(session).unwrap();
    no_error_diagnostics(&text);
    let again = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "load", "session": session},
                {"op": "prompt", "text": "And close it."}
            ]),
        )
        .await;
    assert_eq!(
        again["steps"][1]["result"]["stopReason"], "end_turn",
        "{again}"
    );
    let text = std::fs::read_to_string(session).unwrap();
    no_error_diagnostics(&text);
    // The prompt is the user's message, not code inside the reply's fence.
    let sent = mock.requests()[1].body.to_string();
    assert!(sent.contains("\"text\":\"And close it.\""), "{sent}");
    assert!(text.contains("Closed now."), "{text}");
}

/// A client may send `session/new` right after `initialize`, in the same write, before the
/// answer (CodeCompanion does): both are answered, in order, without error.
#[test]
fn a_request_right_behind_initialize_waits_for_its_answer() {
    let project = Project::new();
    let (mut child, mut stdin, mut lines) = project.raw_agent();
    let both = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": project.cwd(), "mcpServers": []}}),
    );
    stdin.write_all(both.as_bytes()).unwrap();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["protocolVersion"], 1, "{first}");
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(second["id"], 2, "{second}");
    let session = second["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{second}"));
    assert!(Path::new(session).starts_with(project.cwd().join(".flemma/sessions")));
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A session the editor created but never used (CodeCompanion creates one when a chat buffer
/// opens) leaves no chat behind; a used one stays.
#[tokio::test]
async fn an_unused_session_leaves_no_chat_behind() {
    let Some((python, project, mock)) = setup("acp unused session").await else {
        return;
    };
    mock.push(Turn::text("Used."));
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([{"op": "new"}, {"op": "new"}, {"op": "prompt", "text": "Use this one."}]),
        )
        .await;
    let unused = report["steps"][0]["result"]["sessionId"].as_str().unwrap();
    let used = report["steps"][1]["result"]["sessionId"].as_str().unwrap();
    assert_ne!(unused, used);
    assert!(!Path::new(unused).exists(), "{unused}");
    let text = std::fs::read_to_string(used).unwrap();
    assert!(text.contains("Used."), "{text}");
}

/// `session/list` lists the project's used sessions, newest first, titled by their first
/// question; a session opened and not used is not listed. Each listed one loads.
async fn list_shows_the_projects_sessions_newest_first(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp list").await else {
        return;
    };
    mock.push(Turn::text("One."));
    mock.push(Turn::text("Two."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "First question\nwith a second line"},
                {"op": "new"},
                {"op": "prompt", "text": "Second question"},
                {"op": "new"},
                {"op": "list"}
            ]),
        )
        .await;
    let init = &report["initialize"]["agentCapabilities"];
    assert_eq!(init["sessionCapabilities"]["list"], json!({}), "{init}");
    let first = report["steps"][0]["result"]["sessionId"].as_str().unwrap();
    let second = report["steps"][2]["result"]["sessionId"].as_str().unwrap();
    let listed = report["steps"][5]["result"]["sessions"].as_array().unwrap();
    let ids: Vec<&str> = listed
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [second, first], "{listed:?}");
    assert_eq!(listed[0]["title"], "Second question");
    assert_eq!(listed[1]["title"], "First question");
    assert_eq!(listed[0]["cwd"], project.cwd().display().to_string());
    let updated = listed[0]["updatedAt"].as_str().unwrap();
    assert!(
        updated.len() == 20 && updated.ends_with('Z') && updated.as_bytes()[10] == b'T',
        "{updated}"
    );
    assert!(report["steps"][5]["result"].get("nextCursor").is_none());
}

with_each_sdk!(list_shows_the_projects_sessions_newest_first);

/// Through a daemon the reply goes on when the editor goes away mid-prompt; a tool that runs
/// after that reads the disk, not the editor that left (its files are the connection's).
#[tokio::test]
async fn a_tool_run_after_the_editor_left_reads_the_disk() {
    let Some((python, project, mock)) = setup("acp editor left").await else {
        return;
    };
    project.only_read_runs_alone();
    let mut daemon = project.daemon(&mock.base_url()).await;
    // The reply lasts about 5 s (the rate counts the stream's bytes), longer than the client
    // takes to go (it closes its side, waits up to 2 s, then ends the agent).
    mock.push(
        Turn::text("Reading the file now. ".repeat(20))
            .bytes_per_sec(2000)
            .tool_call_with_id(
                "read",
                "r1",
                json!({"label": "read x", "path": "src/x.rs", "offset": null, "limit": null}),
            ),
    );
    mock.push(Turn::text("Done reading."));
    let mut steps = file_tool_steps(&project);
    steps["steps"][1] = json!({"op": "prompt_and_leave", "text": "Read x.", "after_chunks": 1});
    let report = project.client(&python, &mock.base_url(), steps).await;
    assert_eq!(report["steps"][1]["result"]["left"], true, "{report}");
    let session = session_of(&report);
    let start = std::time::Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(session).unwrap();
        if text.contains("Done reading.") {
            break text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the reply did not go on without the editor:\n{text}\n{}",
            project.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(text.contains("**Tool Result:** `r1`\n"), "{text}");
    assert!(text.contains("fn x() {}"), "read from the disk: {text}");
    assert!(!text.contains("unsaved"), "{text}");
    assert!(report["fs"].as_array().unwrap().is_empty(), "{report}");
    daemon.kill().await.unwrap();
}

/// Issue 26, finding 6: a repository that ships `.flemma/sessions` (or `.flemma`) as a link
/// to somewhere else — `/tmp`, whose `../..` is `/` — gets no session: the sessions folder is
/// made following no link, and `session/new` says so. Nothing is written through the link.
#[tokio::test]
async fn a_sessions_folder_that_is_a_link_is_refused() {
    let Some((python, project, mock)) = setup("acp sessions link").await else {
        return;
    };
    let elsewhere = tempfile::Builder::new()
        .prefix("flemmad-acp-elsewhere-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    for link in [".flemma/sessions", ".flemma"] {
        let flemma = project.cwd().join(".flemma");
        let _ = std::fs::remove_dir_all(&flemma);
        let _ = std::fs::remove_file(&flemma);
        if link == ".flemma/sessions" {
            std::fs::create_dir_all(&flemma).unwrap();
        }
        std::os::unix::fs::symlink(elsewhere.path(), project.cwd().join(link)).unwrap();
        let report = project
            .client(&python, &mock.base_url(), json!([{"op": "new"}]))
            .await;
        let error = report["steps"][0]["error"].to_string();
        assert!(
            error.contains("symbolic link"),
            "{link}: the session is refused, saying why: {report}"
        );
        assert_eq!(
            std::fs::read_dir(elsewhere.path()).unwrap().count(),
            0,
            "{link}: nothing was written through the link"
        );
    }
}

/// Review before approval (issue 35): the permission request of an `edit` carries its change
/// as a diff (the whole file before and after, as the file is now), so the client shows it
/// before the user allows it; nothing is written before the answer.
async fn a_permission_request_for_an_edit_carries_the_files_diff(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp review diff").await else {
        return;
    };
    project.only_read_runs_alone();
    let notes = project.cwd().join("notes.md");
    std::fs::write(&notes, "alpha\nbeta\n").unwrap();
    push_notes_edit(&mock);
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Fix the notes.", "permission": "reject_once"}
            ]),
        )
        .await;
    check_notes_diff(&report["steps"][1], &notes);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "alpha\nbeta\n");
}

with_each_sdk!(a_permission_request_for_an_edit_carries_the_files_diff);

/// The model's `edit` of `notes.md` (`e1`, which asks), then a reply.
fn push_notes_edit(mock: &MockProvider) {
    mock.push(Turn::text("Fixing.").tool_call_with_id(
        "edit",
        "e1",
        json!({"label": "fix notes", "path": "notes.md", "oldText": "beta", "newText": "BETA"}),
    ));
    mock.push(Turn::text("Not done."));
}

/// The permission request of the prompt `step` asked about `e1` with its diff of `notes`.
fn check_notes_diff(step: &Value, notes: &Path) {
    let asked = &step["permissions"][0]["toolCall"];
    assert_eq!(asked["toolCallId"], "e1", "{step}");
    let diff = &asked["content"][0];
    assert_eq!(diff["type"], "diff", "{asked}");
    assert_eq!(diff["path"], notes.display().to_string());
    assert_eq!(diff["oldText"], "alpha\nbeta\n");
    assert_eq!(diff["newText"], "alpha\nBETA\n");
}

/// `session/resume`, `session/close` and `session/delete` (issue 32), through the official
/// SDK: a second connection resumes the session without a replay and goes on with it; a
/// closed session takes no prompt; a deleted one's chat is moved to flemmad's trash, whole, and
/// is no longer listed.
async fn resume_close_and_delete_sessions(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp resume close delete").await else {
        return;
    };
    mock.push(Turn::text("First answer."));
    mock.push(Turn::text("Resumed answer."));
    let first = project
        .client(
            &client,
            &mock.base_url(),
            json!([{"op": "new"}, {"op": "prompt", "text": "Hello."}]),
        )
        .await;
    let caps = &first["initialize"]["agentCapabilities"]["sessionCapabilities"];
    for capability in ["resume", "close", "delete"] {
        assert_eq!(caps[capability], json!({}), "{caps}");
    }
    let session = session_of(&first).to_owned();
    // The title (the first line of the first question), told once the first prompt is written.
    let titles = |updates: &Value| -> Vec<String> {
        updates
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["sessionUpdate"] == "session_info_update")
            .map(|u| u["title"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(titles(&first["steps"][1]["updates"]), ["Hello."], "{first}");
    let second = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "resume", "session": session},
                {"op": "prompt", "text": "Still there?"},
                {"op": "close"},
                {"op": "prompt", "text": "After close."},
                {"op": "resume", "session": session},
                {"op": "delete"},
                {"op": "list"}
            ]),
        )
        .await;
    let steps = second["steps"].as_array().unwrap();
    assert!(steps[0].get("error").is_none(), "{second}");
    assert_eq!(
        without_commands_update(&steps[0]["updates"]),
        json!([]),
        "no replay on resume: {second}"
    );
    assert_eq!(steps[1]["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(
        titles(&steps[1]["updates"]),
        ["Hello."],
        "told to the new connection"
    );
    assert_eq!(
        message_text(&steps[1]["updates"], "agent_message_chunk"),
        "Resumed answer."
    );
    assert!(steps[2].get("error").is_none(), "{second}");
    let refused = steps[3]["error"]["message"].as_str().unwrap_or_default();
    assert!(refused.contains("unknown sessionId"), "{second}");
    // Deleted: the chat, whole, lies in the trash the answer names.
    let trashed = steps[5]["result"]["_meta"]["flemma"]["trashedTo"]
        .as_str()
        .unwrap_or_else(|| panic!("no trash path: {second}"));
    assert!(!Path::new(&session).exists());
    let kept = std::fs::read_to_string(trashed).unwrap();
    assert!(
        kept.contains("Hello.") && kept.contains("Resumed answer."),
        "{kept}"
    );
    assert!(trashed.contains("/flemma/trash/"), "{trashed}");
    let listed = steps[6]["result"]["sessions"].as_array().unwrap();
    assert!(
        listed.iter().all(|s| s["sessionId"] != session.as_str()),
        "{second}"
    );
}

with_each_sdk!(resume_close_and_delete_sessions);

/// `session/fork` (issue 32): a copy of the session's chat next to it, whole or cut after a
/// message the client names (`_meta.flemma.messages`); the fork goes on on its own while the
/// original stays as it was; a cut that would strand tool calls is refused.
async fn fork_copies_the_chat_whole_or_up_to_a_message(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp fork").await else {
        return;
    };
    mock.push(Turn::text("First answer."));
    mock.push(Turn::text("Second answer."));
    mock.push(Turn::text("The fork's answer."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "One."},
                {"op": "prompt", "text": "Two."},
                {"op": "fork", "messages": 2},
                {"op": "prompt", "text": "Instead of two."},
                {"op": "fork", "messages": 9},
                {"op": "fork"}
            ]),
        )
        .await;
    let steps = report["steps"].as_array().unwrap();
    let original = std::fs::read_to_string(session_of(&report)).unwrap();
    let forked = steps[3]["result"]["sessionId"].as_str().unwrap();
    assert_ne!(forked, session_of(&report));
    assert_eq!(
        Path::new(forked).parent(),
        Path::new(session_of(&report)).parent(),
        "next to the original"
    );
    let fork = std::fs::read_to_string(forked).unwrap();
    assert!(
        fork.contains("One.") && fork.contains("First answer.") && !fork.contains("Two."),
        "{fork}"
    );
    assert!(
        fork.contains("Instead of two.") && fork.contains("The fork's answer."),
        "{fork}"
    );
    assert!(
        original.contains("Second answer.") && !original.contains("Instead of two."),
        "{original}"
    );
    let refused = steps[5]["error"]["message"].as_str().unwrap_or_default();
    assert!(refused.contains("but the chat has 5 messages"), "{report}");
    // A whole fork of the fork: the same text.
    let whole = steps[6]["result"]["sessionId"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(whole).unwrap(), fork);
}

with_each_sdk!(fork_copies_the_chat_whole_or_up_to_a_message);

/// Slash commands (issue 32): `available_commands_update` names them; `/status` says the
/// context meter and the waiting calls, `/rewind` puts the files back before the last call;
/// neither asks the model nor writes the chat.
async fn slash_commands_status_and_rewind(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp slash commands").await else {
        return;
    };
    // The project is a repository of its own (else its checkpoints would be those of the
    // repository the test's temporary folder lies in, which ignores it).
    let init = std::process::Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(project.cwd())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(init.success());
    mock.push(writing_notes("Writing.", "w1", "one\n"));
    mock.push(Turn::text("Written."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "prompt", "text": "Write the notes."},
                {"op": "prompt", "text": "/status"},
                {"op": "prompt", "text": "/rewind"}
            ]),
        )
        .await;
    let steps = report["steps"].as_array().unwrap();
    let commands: Vec<&str> = steps
        .iter()
        .flat_map(|s| s["updates"].as_array().unwrap().iter())
        .filter(|u| u["sessionUpdate"] == "available_commands_update")
        .flat_map(|u| u["availableCommands"].as_array().unwrap().iter())
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        commands,
        ["status", "rewind", "compact", "model", "mode"],
        "{report}"
    );
    assert_eq!(steps[1]["result"]["stopReason"], "end_turn", "{report}");
    let notes = project.cwd().join("notes.txt");
    let chat = chat_of(&report);
    // The write ran (the client's run ends after /rewind, which took the file away again).
    assert!(
        chat.contains("**Tool Result:** `w1`\n```\nCreated notes.txt"),
        "{chat}"
    );
    let status = message_text(&steps[2]["updates"], "agent_message_chunk");
    assert!(
        status.contains("context: ≈") && status.contains("input tokens"),
        "{status}"
    );
    assert!(status.contains("no call waits for approval"), "{status}");
    let rewind = message_text(&steps[3]["updates"], "agent_message_chunk");
    assert!(
        rewind.contains("before `w1`") && rewind.contains("removed notes.txt"),
        "{rewind}"
    );
    assert!(!notes.exists());
    assert!(
        !chat.contains("/status") && !chat.contains("/rewind"),
        "not written: {chat}"
    );
    assert_eq!(mock.requests().len(), 2, "the model is not asked");
}

with_each_sdk!(slash_commands_status_and_rewind);

/// `docs/editors/acp.md` has a row for every method and session update of ACP v1 as the
/// TypeScript SDK's schema holds it (unstable parts included), and no row for anything else.
#[test]
fn the_method_table_names_every_method_and_update_of_the_schema() {
    let schema_path = acp_tests_dir()
        .join("ts/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json");
    let Ok(schema) = std::fs::read_to_string(&schema_path) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{}: .ci/run runs `npm ci` in tests/it/acp/ts",
            schema_path.display()
        );
        eprintln!("skipped: the ACP method table (run `npm ci` in tests/it/acp/ts)");
        return;
    };
    let schema: Value = serde_json::from_str(&schema).unwrap();
    let mut in_schema = std::collections::BTreeSet::new();
    collect_methods(&schema, &mut in_schema);
    let updates = schema["$defs"]["SessionUpdate"]["oneOf"]
        .as_array()
        .or_else(|| schema["$defs"]["SessionUpdate"]["anyOf"].as_array())
        .expect("SessionUpdate's variants");
    for update in updates {
        let kind = update["properties"]["sessionUpdate"]["const"]
            .as_str()
            .unwrap();
        in_schema.insert(kind.to_owned());
    }
    assert!(in_schema.contains("session/prompt") && in_schema.contains("tool_call_update"));

    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/editors/acp.md"))
            .unwrap();
    let section = doc
        .split("\n## Every method and update\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the section `## Every method and update`");
    let in_table: std::collections::BTreeSet<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect();
    let missing: Vec<_> = in_schema.difference(&in_table).collect();
    let stale: Vec<_> = in_table.difference(&in_schema).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/editors/acp.md: rows missing for {missing:?}; rows for what the schema has not: {stale:?}"
    );
}

/// Every `x-method` named anywhere in `value`.
fn collect_methods(value: &Value, into: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(method)) = map.get("x-method") {
                into.insert(method.clone());
            }
            map.values().for_each(|v| collect_methods(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_methods(v, into)),
        _ => {}
    }
}

/// Modes (docs/modes.md) from an ACP client, both ways the protocol has: the session modes
/// and the `mode` config option, each announced with the session and changed by either, with
/// `current_mode_update` and `config_option_update`. `ask` refuses a `write` without asking;
/// `auto-edit` runs one inside the project without asking; an unknown mode is refused.
async fn the_mode_pickers_change_what_the_tools_may_do(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp modes").await else {
        return;
    };
    project.only_read_runs_alone();
    mock.push(writing_notes("Writing.", "w1", "ask\n"));
    mock.push(Turn::text("Refused, I am in ask mode."));
    mock.push(writing_notes("Writing again.", "w2", "auto-edit\n"));
    mock.push(Turn::text("Written."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "set_mode", "mode": "ask"},
                {"op": "prompt", "text": "Keep a note.", "permission": "reject_once"},
                {"op": "set_config_option", "config": "mode", "value": "auto-edit"},
                {"op": "prompt", "text": "Now keep it.", "permission": "reject_once"},
                {"op": "set_mode", "mode": "yolo"}
            ]),
        )
        .await;
    let steps = report["steps"].as_array().unwrap();
    let new = &steps[0]["result"];
    assert_eq!(new["modes"]["currentModeId"], "default", "{new}");
    let ids: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["auto-edit", "default", "ask"]);
    assert_eq!(new["configOptions"][0]["id"], "mode", "{new}");
    assert_eq!(new["configOptions"][0]["currentValue"], "default", "{new}");
    assert_eq!(new["configOptions"][0]["category"], "mode", "{new}");

    // Told both ways (after the answer: in that step or the next one).
    let told: Vec<&Value> = steps
        .iter()
        .flat_map(|step| step["updates"].as_array().unwrap())
        .filter(|u| {
            u["sessionUpdate"] == "current_mode_update"
                || u["sessionUpdate"] == "config_option_update"
        })
        .collect();
    let modes_told: Vec<&str> = told
        .iter()
        .filter_map(|u| u["currentModeId"].as_str())
        .collect();
    assert_eq!(modes_told, ["ask", "auto-edit"], "{report}");
    assert!(
        told.iter()
            .any(|u| u["configOptions"][0]["currentValue"] == "ask"),
        "{report}"
    );

    // Ask: refused before it ran, nobody asked.
    let ask = &steps[2];
    assert_eq!(ask["result"]["stopReason"], "end_turn", "{ask}");
    assert_eq!(ask["permissions"], json!([]), "{ask}");
    let failed = ask["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["toolCallId"] == "w1" && u["status"] == "failed")
        .unwrap_or_else(|| panic!("w1 failed: {ask}"));
    assert!(failed.to_string().contains("ask mode"), "{failed}");

    // The config option answers with the options as they are now.
    let set = &steps[3]["result"];
    assert_eq!(
        set["configOptions"][0]["currentValue"], "auto-edit",
        "{set}"
    );
    // Auto-edit: the write inside the project ran without asking.
    let auto = &steps[4];
    assert_eq!(auto["permissions"], json!([]), "{auto}");
    assert_eq!(
        std::fs::read_to_string(project.cwd().join("notes.txt")).unwrap(),
        "auto-edit\n"
    );

    let refused = steps[5]["error"]["message"].as_str().unwrap_or_default();
    let data = steps[5]["error"]["data"].to_string();
    assert!(
        refused.contains("auto-edit, default, ask") || data.contains("auto-edit, default, ask"),
        "{report}"
    );
}

with_each_sdk!(the_mode_pickers_change_what_the_tools_may_do);

/// `/compact` (issue 34): the older turns summarised into the chat through the engine host,
/// answered with what was compacted; the next prompt's request holds the summary and the
/// recent turns, not the old ones.
async fn slash_compact_summarises_the_older_turns(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp /compact").await else {
        return;
    };
    mock.push(Turn::text("One."));
    mock.push(Turn::text("Two."));
    mock.push(Turn::text("Three."));
    mock.push(Turn::text("The user asked a first question, answered One."));
    mock.push(Turn::text("Four."));
    let steps = json!([
        {"op": "new"},
        {"op": "prompt", "text": "First question."},
        {"op": "prompt", "text": "Second question."},
        {"op": "prompt", "text": "Third question."},
        {"op": "prompt", "text": "/compact the first answer"},
        {"op": "prompt", "text": "Fourth question."}
    ]);
    let (advertises, steps) = advertising_compaction(sdk, steps);
    let report = project.client(&client, &mock.base_url(), steps).await;
    let steps = report["steps"].as_array().unwrap();
    let said = message_text(&steps[4]["updates"], "agent_message_chunk");
    assert!(
        said.contains("compacted 2 messages into a summary"),
        "{said}\n{report}"
    );
    let compactions: Vec<&Value> = steps[4]["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == "compaction_update")
        .collect();
    if advertises {
        // `/compact` is reported as a compaction too: in progress, then its summary line.
        let statuses: Vec<&Value> = compactions.iter().map(|u| &u["status"]).collect();
        assert_eq!(statuses, ["in_progress", "completed"], "{}", steps[4]);
        assert_eq!(
            compactions[0]["compactionId"], compactions[1]["compactionId"],
            "one compaction"
        );
        assert!(
            compactions[1]["summary"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("compacted 2 messages into a summary")),
            "{}",
            compactions[1]
        );
    } else {
        assert!(compactions.is_empty(), "{}", steps[4]);
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 5, "{report}");
    assert!(requests[3].raw_body.contains("the first answer"));
    let next = &requests[4].raw_body;
    assert!(
        next.contains("answered One.")
            && next.contains("Second question.")
            && !next.contains("First question."),
        "{next}"
    );
    let chat = chat_of(&report);
    assert!(chat.contains("<!-- flemma:compacted archive="), "{chat}");
    assert!(!chat.contains("/compact the first"), "not written: {chat}");
    no_error_diagnostics(&chat);
}

with_each_sdk!(slash_compact_summarises_the_older_turns);

/// The client's `steps` with `session.compaction` advertised where its SDK knows the
/// `compaction_update` (the TypeScript one; the Python SDK does not), and whether it is.
fn advertising_compaction(sdk: Sdk, steps: Value) -> (bool, Value) {
    if sdk == Sdk::TypeScript {
        let steps = json!({"capabilities": {"session": {"compaction": {}}}, "steps": steps});
        (true, steps)
    } else {
        (false, steps)
    }
}

/// The `config_option_update`s of a report's steps, in order.
fn config_updates(report: &Value) -> Vec<Value> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|step| step["updates"].as_array().unwrap())
        .filter(|u| u["sessionUpdate"] == "config_option_update")
        .cloned()
        .collect()
}

/// The current value of the config option `id` among `options`.
fn option_value<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .map_or(&Value::Null, |option| &option["currentValue"])
}

/// The `model` and `thought_level` config options (issue 32): offered with the mode, the
/// catalogue's models of the chat's provider and the user's presets; chosen from the client
/// they are the chat's `flemma.switch` (its next request uses them), told back as
/// `config_option_update`; a frontmatter edited elsewhere shows in the next prompt's updates;
/// `/model` and `/mode` do what the pickers do and list the choices without an argument.
async fn the_model_and_thinking_pickers_switch_the_chat(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp model pickers").await else {
        return;
    };
    std::fs::write(
        project.root.join("config/flemma/config.toml"),
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[presets.\"$fast\"]\nmodel = \"anthropic/claude-haiku-4-5\"\n",
    )
    .unwrap();
    mock.push(Turn::text("Haiku here."));
    mock.push(Turn::text("Opus here."));
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "set_config_option", "config": "model", "value": "anthropic/claude-haiku-4-5"},
                {"op": "set_config_option", "config": "thought_level", "value": "low"},
                {"op": "prompt", "text": "Who are you?"},
                {"op": "replace_in_chat", "old": "{\"flemma\":{\"tools\"",
                 "new": "{\"flemma\":{\"model\":\"anthropic/claude-opus-4-6\",\"tools\""},
                {"op": "prompt", "text": "And now?"},
                {"op": "prompt", "text": "/model"},
                {"op": "prompt", "text": "/mode ask"},
                {"op": "prompt", "text": "/model $fast"},
                {"op": "set_config_option", "config": "model", "value": "nobody/nothing"},
                {"op": "set_config_option", "config": "colour", "value": "blue"}
            ]),
        )
        .await;
    let steps = report["steps"].as_array().unwrap();
    // Offered with the mode, the current model and level selected.
    let offered = &steps[0]["result"]["configOptions"];
    let ids: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mode", "model", "thought_level"], "{offered}");
    assert_eq!(
        option_value(offered, "model"),
        "anthropic/claude-sonnet-4-5"
    );
    assert_eq!(option_value(offered, "thought_level"), "high", "{offered}");
    let model = &offered[1];
    assert_eq!(model["category"], "model", "{model}");
    let values: Vec<&str> = model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    for expected in [
        "anthropic/claude-opus-4-6",
        "anthropic/claude-haiku-4-5",
        "$fast",
    ] {
        assert!(values.contains(&expected), "{expected} in {values:?}");
    }
    assert!(
        !values.iter().any(|v| v.starts_with("openai/")),
        "only the chat's provider's models: {values:?}"
    );
    assert_eq!(offered[2]["category"], "thought_level", "{offered}");
    assert!(
        offered[2]["options"].to_string().contains("\"off\""),
        "{offered}"
    );

    // Chosen from the client: answered and told with the new values.
    let chose_model = &steps[1]["result"]["configOptions"];
    assert_eq!(
        option_value(chose_model, "model"),
        "anthropic/claude-haiku-4-5"
    );
    let chose_level = &steps[2]["result"]["configOptions"];
    assert_eq!(option_value(chose_level, "thought_level"), "low");
    assert_eq!(
        option_value(chose_level, "model"),
        "anthropic/claude-haiku-4-5"
    );
    let told = config_updates(&report);
    assert!(
        told.iter()
            .any(|u| option_value(&u["configOptions"], "thought_level") == "low"),
        "{report}"
    );
    // The next request uses them; the chat's file is not written by a switch.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{report}");
    let first: Value = serde_json::from_str(&requests[0].raw_body).unwrap();
    assert_eq!(first["model"], "claude-haiku-4-5", "{first}");
    assert!(first["thinking"].is_object(), "thinking sent: {first}");
    // The frontmatter edited elsewhere wins and is told at the next prompt.
    let second: Value = serde_json::from_str(&requests[1].raw_body).unwrap();
    assert_eq!(second["model"], "claude-opus-4-6", "{second}");
    assert!(
        steps[5]["updates"].as_array().unwrap().iter().any(|u| {
            u["sessionUpdate"] == "config_option_update"
                && option_value(&u["configOptions"], "model") == "anthropic/claude-opus-4-6"
        }),
        "{}",
        steps[5]
    );
    // `/model` lists, the current one marked; `/mode ask` sets the mode and tells it.
    let listed = message_text(&steps[6]["updates"], "agent_message_chunk");
    assert!(
        listed.contains("* anthropic/claude-opus-4-6") && listed.contains("  $fast"),
        "{listed}"
    );
    let mode = &steps[7]["updates"];
    assert!(
        message_text(mode, "agent_message_chunk").contains("mode: ask"),
        "{mode}"
    );
    assert!(
        mode.as_array()
            .unwrap()
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update" && u["currentModeId"] == "ask"),
        "{mode}"
    );
    // A switch below the frontmatter says that the frontmatter wins.
    let fast = message_text(&steps[8]["updates"], "agent_message_chunk");
    assert!(fast.contains("frontmatter sets the model"), "{fast}");
    // Values not offered and unknown options are clear errors.
    let unknown = steps[9]["error"].to_string();
    assert!(
        unknown.contains("unknown model `nobody/nothing`"),
        "{unknown}"
    );
    let colour = steps[10]["error"].to_string();
    assert!(
        colour.contains("unknown config option `colour`"),
        "{colour}"
    );
    let chat = chat_of(&report);
    assert!(!chat.contains("/model"), "commands are not written: {chat}");
    no_error_diagnostics(&chat);
}

with_each_sdk!(the_model_and_thinking_pickers_switch_the_chat);

/// Choosing another model resets the thinking level to the configuration's (the switch's
/// runtime layer is replaced, level and all), and the client is told with a
/// `config_option_update` as well as in the answer (issue 32).
#[tokio::test]
async fn choosing_a_model_resets_the_thinking_level_and_tells_it() {
    let Some((python, project, mock)) = setup("acp level reset").await else {
        return;
    };
    std::fs::write(
        project.root.join("config/flemma/config.toml"),
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n",
    )
    .unwrap();
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "new"},
                {"op": "set_config_option", "config": "thought_level", "value": "low"},
                {"op": "set_config_option", "config": "model", "value": "anthropic/claude-haiku-4-5"},
                // Answered by flemmad alone; the updates sent after the last answer arrive here.
                {"op": "prompt", "text": "/mode"}
            ]),
        )
        .await;
    let steps = report["steps"].as_array().unwrap();
    let configured = option_value(&steps[0]["result"]["configOptions"], "thought_level").clone();
    assert_ne!(configured, "low", "{report}");
    assert_eq!(
        option_value(&steps[1]["result"]["configOptions"], "thought_level"),
        "low"
    );
    let chose_model = &steps[2]["result"]["configOptions"];
    assert_eq!(
        option_value(chose_model, "model"),
        "anthropic/claude-haiku-4-5"
    );
    assert_eq!(
        *option_value(chose_model, "thought_level"),
        configured,
        "the level is the configuration's again: {report}"
    );
    let told = config_updates(&report);
    let last = told.last().expect("config_option_update sent");
    assert_eq!(
        option_value(&last["configOptions"], "model"),
        "anthropic/claude-haiku-4-5"
    );
    assert_eq!(
        *option_value(&last["configOptions"], "thought_level"),
        configured,
        "{report}"
    );
}

/// An automatic compaction in a prompt (issue 32): a client that advertised
/// `session.compaction` (the TypeScript SDK's) gets it as a `compaction_update` with the
/// summary line and its facts in `_meta.flemma`; one that did not (the Python SDK, which does
/// not know the update) gets it as a line of the reply, as before.
async fn an_automatic_compaction_is_a_compaction_update_for_a_client_that_takes_one(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp compaction_update").await else {
        return;
    };
    std::fs::write(
        project.root.join("config/flemma/config.toml"),
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[models.\"claude-sonnet-4-5\"]\ncontext_window = 9000\n\n[context]\ncompact_at = 0.5\nkeep = 1\n",
    )
    .unwrap();
    let long = "word ".repeat(4000);
    mock.push(Turn::text("One."));
    mock.push(Turn::text(
        "The user asked a long first question, answered One.",
    ));
    mock.push(Turn::text("Two."));
    let steps = json!([
        {"op": "new"},
        {"op": "prompt", "text": format!("First question: {long}")},
        {"op": "prompt", "text": "Second question."}
    ]);
    let (advertises, steps) = advertising_compaction(sdk, steps);
    let report = project.client(&client, &mock.base_url(), steps).await;
    let second = &report["steps"][2];
    assert_eq!(second["result"]["stopReason"], "end_turn", "{report}");
    assert_eq!(mock.requests().len(), 3, "{report}");
    let compactions: Vec<&Value> = second["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == "compaction_update")
        .collect();
    let said = message_text(&second["updates"], "agent_message_chunk");
    if advertises {
        assert_eq!(compactions.len(), 1, "{second}");
        let update = compactions[0];
        assert_eq!(update["status"], "completed", "{update}");
        assert!(
            update["summary"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("compacted 2 messages into a summary")),
            "{update}"
        );
        assert_eq!(update["_meta"]["flemma"]["messages"], 2, "{update}");
        assert_eq!(update["_meta"]["flemma"]["automatic"], true, "{update}");
        // The model's summary, appended to the compaction's.
        let chunks: Vec<&Value> = second["updates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["sessionUpdate"] == "compaction_summary_chunk")
            .collect();
        assert_eq!(chunks.len(), 1, "{second}");
        assert_eq!(
            chunks[0]["compactionId"], update["compactionId"],
            "{second}"
        );
        assert_eq!(
            chunks[0]["content"]["text"], "\n\nThe user asked a long first question, answered One.",
            "{second}"
        );
        assert!(!said.contains("compacted"), "not also as text: {said}");
    } else {
        assert!(compactions.is_empty(), "{second}");
        assert!(
            said.contains("compacted 2 messages into a summary"),
            "{said}"
        );
    }
    assert!(said.contains("Two."), "{said}");
}

with_each_sdk!(an_automatic_compaction_is_a_compaction_update_for_a_client_that_takes_one);

/// Updates in causal order whatever the provider's pace (issue 32): with a mock that answers
/// at once and calls that run without asking (`read`, `edit`, `write` auto-approved), the client
/// sees each call's `tool_call`, then `in_progress`, then `completed`, the call's own file
/// request after its `tool_call`, and all of it before the next call's `tool_call`.
async fn updates_come_in_causal_order_with_a_provider_that_answers_at_once(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp causal order").await else {
        return;
    };
    std::fs::write(
        project.root.join("config/flemma/config.toml"),
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"read\", \"edit\", \"write\"]\n",
    )
    .unwrap();
    file_tool_turns(&mock);
    let report = project
        .client(&client, &mock.base_url(), file_tool_steps(&project))
        .await;
    assert_eq!(report["steps"][1]["permissions"], json!([]), "{report}");
    let seen: Vec<&str> = report["seen"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = |entry: &str| {
        seen.iter()
            .position(|s| s.starts_with(entry))
            .unwrap_or_else(|| panic!("{entry} in {seen:#?}"))
    };
    let x = project.cwd().join("src/x.rs").display().to_string();
    let new = project.cwd().join("src/new.rs").display().to_string();
    let calls = [
        ("r1", format!("fs/read_text_file {x}")),
        ("e1", format!("fs/write_text_file {x}")),
        ("w1", format!("fs/write_text_file {new}")),
    ];
    let mut last_completed = 0;
    for (id, file) in &calls {
        let announced = at(&format!("tool_call {id}"));
        let running = at(&format!("tool_call_update {id} in_progress"));
        let completed = at(&format!("tool_call_update {id} completed"));
        let request = at(file);
        assert!(
            last_completed <= announced
                && announced < running
                && running < completed
                && announced < request
                && request < completed,
            "{id}: {seen:#?}"
        );
        last_completed = completed;
    }
}

with_each_sdk!(updates_come_in_causal_order_with_a_provider_that_answers_at_once);

/// One conversation, two editors, one daemon (issue 32): an ACP client (the Python SDK's)
/// and an LSP editor (the test client, through `flemmad lsp`) on the same chat. The ACP
/// session's first turn is in the file the editor opens; the editor's turn (sent with
/// `flemma.send`, saved, closed) reaches the ACP client while it runs, once, and its next
/// prompt replays none of it; the ACP turn after it is in the file the editor opens again;
/// `session/list` shows a chat another program created in the project's sessions folder.
#[tokio::test]
async fn one_conversation_in_an_acp_client_and_an_lsp_editor_through_one_daemon() {
    let Some((python, project, mock)) = setup("acp and lsp, one daemon").await else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    let sessions = project.cwd().join(".flemma/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let outside = sessions.join("written-elsewhere.chat");
    std::fs::write(&outside, "@You:\nA chat from elsewhere.\n").unwrap();
    mock.push(Turn::text("The first answer."));
    mock.push(Turn::text("The editor's answer."));
    mock.push(Turn::text("The third answer."));
    let acp = {
        let steps = json!([
            {"op": "new"},
            {"op": "prompt", "text": "First question."},
            {"op": "wait_for_chat", "contains": "The editor's answer."},
            {"op": "prompt", "text": "Third question."},
            {"op": "list"}
        ]);
        let base = mock.base_url();
        let (project, python) = (&project, &python);
        async move { project.client(python, &base, steps).await }
    };
    let lsp = async {
        // The ACP session's chat once its first turn is in it.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let chat = loop {
            let found = std::fs::read_dir(&sessions).ok().and_then(|entries| {
                entries.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                    std::fs::read_to_string(p).is_ok_and(|t| t.contains("The first answer."))
                })
            });
            if let Some(chat) = found {
                break chat;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no ACP turn in {sessions:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let env: Vec<(String, String)> = project.env(&mock.base_url());
        let cwd = project.cwd();
        tokio::task::spawn_blocking(move || {
            use crate::lsp::lsp_client::{Client, Flavor};
            let env: Vec<(&str, String)> =
                env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let mut editor = Client::start_with_env(Flavor::Helix, &[], &env);
            editor.initialize(&cwd);
            let uri = format!("file://{}", chat.display());
            let text = std::fs::read_to_string(&chat).unwrap();
            crate::daemon_two_editors::open_settled(&mut editor, &uri, &text);
            let end = editor.text(&uri).len();
            editor.type_at(&uri, end, "The editor's question.\n");
            crate::daemon_two_editors::send(&mut editor, &uri);
            assert_eq!(
                crate::daemon_two_editors::wait_stopped(&mut editor)["reason"],
                "idle"
            );
            let saved = editor.text(&uri).to_owned();
            assert!(
                saved.contains("@Assistant:\nThe editor's answer."),
                "{saved}"
            );
            // The editor saves and closes the chat.
            std::fs::write(&chat, &saved).unwrap();
            editor.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": uri}}),
            );
            (editor, chat, uri)
        })
        .await
        .unwrap()
    };
    let (report, (mut editor, chat, uri)) = tokio::join!(acp, lsp);
    let steps = report["steps"].as_array().unwrap();
    let third = &steps[3];
    assert_eq!(third["result"]["stopReason"], "end_turn", "{report}");
    // The editor's turn, once, while the client waited (live), then the prompt's own reply
    // (streamed chunks joined).
    let mut said: Vec<String> = Vec::new();
    let mut last_kind = String::new();
    let waited = steps[2]["updates"].as_array().unwrap();
    for update in waited.iter().chain(third["updates"].as_array().unwrap()) {
        let kind = update["sessionUpdate"].as_str().unwrap_or_default();
        if kind != "user_message_chunk" && kind != "agent_message_chunk" {
            continue;
        }
        let text = update["content"]["text"].as_str().unwrap_or_default();
        match said.last_mut() {
            Some(joined) if kind == last_kind && !joined.ends_with('.') => joined.push_str(text),
            _ => said.push(format!("{kind}: {text}")),
        }
        last_kind = kind.to_owned();
    }
    assert_eq!(
        said,
        [
            "user_message_chunk: The editor's question.",
            "agent_message_chunk: The editor's answer.",
            "agent_message_chunk: The third answer."
        ],
        "{report}"
    );
    assert_eq!(message_text(&third["updates"], "user_message_chunk"), "");
    // Every byte once in the file, which the editor opens again.
    let text = std::fs::read_to_string(&chat).unwrap();
    for once in [
        "First question.",
        "The first answer.",
        "The editor's question.",
        "The editor's answer.",
        "Third question.",
        "The third answer.",
    ] {
        assert_eq!(text.matches(once).count(), 1, "{once}: {text}");
    }
    let first = text.find("The first answer.").unwrap();
    let editors = text.find("The editor's question.").unwrap();
    let third_at = text.find("Third question.").unwrap();
    assert!(first < editors && editors < third_at, "{text}");
    no_error_diagnostics(&text);
    crate::daemon_two_editors::open_settled(&mut editor, &uri, &text);
    assert_eq!(editor.text(&uri), text);
    // The chat another program wrote is listed with the ACP session's.
    let listed = steps[4]["result"]["sessions"].to_string();
    assert!(listed.contains("written-elsewhere.chat"), "{listed}");
    assert!(listed.contains(&chat.display().to_string()), "{listed}");
    daemon.kill().await.unwrap();
}

/// One chat open in an LSP editor (unsaved typing in it) and prompted from an ACP client
/// through one daemon: the prompt reaches the editor's buffer as an edit (the file is not
/// written under it), the reply streams into it, and what the user types there while the reply
/// streams is kept; each once, and the file holds all of it once the editor saves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acp_prompt_goes_through_the_buffer_of_an_editor_that_has_the_chat_open() {
    let Some((python, project, mock)) = setup("acp and an lsp editor").await else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    let chat = project.cwd().join("both.chat");
    let original = "@You:\nFirst question.\n\n@Assistant:\nFirst answer.\n\n@You:\n";
    std::fs::write(&chat, original).unwrap();
    let (mut editor, uri) = editor_with(&project, &mock, &chat, original);
    // Unsaved typing in the editor before the prompt.
    let at = original.find("First question").unwrap() + "First question".len();
    editor.type_at(&uri, at, " (edited)");

    let reply = "Second answer, the first half. And the second half.";
    mock.push(Turn::text(reply).stall(1500));
    let pump = {
        let uri = uri.clone();
        let mut typed = false;
        EditorPump::start(editor, move |editor| {
            let text = editor.text(&uri).to_owned();
            // The reply streams into the buffer: the user types meanwhile.
            if !typed && text.contains("Second question.") && text.contains("Second answer") {
                assert!(!text.contains(reply), "typed after the reply ended: {text}");
                let at = text.find("First answer").unwrap() + "First answer".len();
                editor.type_at(&uri, at, " (noted)");
                typed = true;
            }
            typed
        })
    };
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "load", "session": chat},
                {"op": "prompt", "text": "Second question."}
            ]),
        )
        .await;
    let (mut editor, typed) = pump.stop();
    assert!(typed, "the reply never streamed into the editor's buffer");
    let prompt = &report["steps"][1];
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    assert_eq!(
        message_text(&prompt["updates"], "agent_message_chunk"),
        reply
    );
    // The reply's last edit may still be on its way to the buffer.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !editor.text(&uri).contains(reply) {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            editor.text(&uri)
        );
        editor.pump(Duration::from_millis(20));
    }
    let text = editor.text(&uri).to_owned();
    for part in [" (edited)", " (noted)", "Second question.", reply] {
        assert_eq!(text.matches(part).count(), 1, "{part:?} in {text}");
    }
    assert!(
        text.starts_with(
            "@You:\nFirst question (edited).\n\n@Assistant:\nFirst answer (noted).\n\n@You:\nSecond question.\n\n@Assistant:\n"
        ),
        "{text}"
    );
    // The file under the editor was not written: the editor holds the chat.
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), original);
    // The editor saves.
    std::fs::write(&chat, &text).unwrap();
    editor.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), text);
    drop(editor);
    daemon.kill().await.unwrap();
}

type LspEditor = crate::lsp::lsp_client::Client;

/// An LSP editor kept alive on a thread of its own while an ACP client works on its chat
/// (the daemon edits its buffer and waits for the answers): it reads what the daemon sends and
/// runs `each` after every read; [`EditorPump::stop`] gives the editor back with `each`'s
/// last result.
struct EditorPump<T> {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(LspEditor, T)>,
}

impl<T: Default + Send + 'static> EditorPump<T> {
    fn start(
        mut editor: LspEditor,
        mut each: impl FnMut(&mut LspEditor) -> T + Send + 'static,
    ) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut last = T::default();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                editor.pump(Duration::from_millis(20));
                last = each(&mut editor);
            }
            (editor, last)
        });
        EditorPump { stop, thread }
    }

    fn stop(self) -> (LspEditor, T) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// An LSP editor (Helix, through the project's daemon) with `chat` open holding `text`; its
/// URI.
fn editor_with(
    project: &Project,
    mock: &MockProvider,
    chat: &Path,
    text: &str,
) -> (LspEditor, String) {
    let uri = format!("file://{}", chat.display());
    let env: Vec<(&str, String)> = project
        .env(&mock.base_url())
        .into_iter()
        .map(|(key, value)| (&*key.leak(), value))
        .collect();
    let flavor = crate::lsp::lsp_client::Flavor::Helix;
    let mut editor = crate::daemon_two_editors::editor(flavor, &env, &project.cwd());
    crate::daemon_two_editors::open_settled(&mut editor, &uri, text);
    (editor, uri)
}

/// A call approved in the LSP editor while the ACP client's permission request for it is
/// open: the agent withdraws the request (the client would answer it too late), the call runs
/// once, and the prompt goes on to its end.
async fn a_call_approved_in_the_lsp_editor_withdraws_the_acp_permission_request(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "acp approval from the editor").await
    else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    let chat = project.cwd().join("approve.chat");
    let original = "@You:\nHello.\n\n@Assistant:\nHi.\n\n@You:\n";
    std::fs::write(&chat, original).unwrap();
    let (editor, uri) = editor_with(&project, &mock, &chat, original);
    mock.push(bash_turn("p1", "echo once >> ran.txt"));
    mock.push(Turn::text("It ran."));
    let asked = project.root.join("asked");
    let release = project.root.join("release");
    let pump = {
        let (uri, asked, release) = (uri.clone(), asked.clone(), release.clone());
        let ran = project.cwd().join("ran.txt");
        let mut approved = None;
        EditorPump::start(editor, move |editor| {
            if approved.is_none() && asked.exists() {
                approved =
                    Some(editor.request("flemma/approve", json!({"uri": uri, "toolId": "p1"})));
            }
            // The client answers (too late) once the call has run.
            if approved.is_some() && ran.exists() && !release.exists() {
                std::fs::write(&release, "").unwrap();
            }
            approved.clone()
        })
    };
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "load", "session": chat},
                {"op": "prompt", "text": "Run it.", "permission": "hold",
                 "asked_marker": asked, "release_marker": release}
            ]),
        )
        .await;
    let (mut editor, approved) = pump.stop();
    let approved = approved.expect("the client was never asked");
    assert!(approved.is_ok(), "{approved:?}");
    let prompt = &report["steps"][1];
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    assert_eq!(
        prompt["permissions"].as_array().unwrap().len(),
        1,
        "{prompt}"
    );
    let updates = &prompt["updates"];
    assert!(
        updates
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["toolCallId"] == "p1"
                && u["sessionUpdate"] == "tool_call_update"
                && u["status"] == "completed"),
        "{updates}"
    );
    assert_eq!(
        message_text(updates, "agent_message_chunk"),
        "Let me run it.It ran."
    );
    // The call ran once.
    let ran = std::fs::read_to_string(project.cwd().join("ran.txt")).unwrap();
    assert_eq!(ran, "once\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !editor.text(&uri).contains("It ran.") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            editor.text(&uri)
        );
        editor.pump(Duration::from_millis(20));
    }
    assert_eq!(
        editor.text(&uri).matches("**Tool Result:** `p1`").count(),
        1
    );
    drop(editor);
    daemon.kill().await.unwrap();
}

with_each_sdk!(a_call_approved_in_the_lsp_editor_withdraws_the_acp_permission_request);

/// One conversation, two editors, live (issue 32): a turn sent from an LSP editor on a chat an
/// ACP client has loaded, through one daemon, streams into the ACP client while it runs — the
/// editor's question, the reply, the call waiting for approval (pending: it is the editor's to
/// decide, and no permission request goes to the ACP client), its progress and result once
/// the editor approved it — from the engine's events; the reply's first half reaches the
/// client before the turn ends (the provider stalls in its middle). The ACP client's next
/// prompt replays none of it, and every byte is once in the editor's buffer and the chat.
async fn an_lsp_editors_turn_streams_live_into_the_acp_client(sdk: Sdk) {
    let Some((client, project, mock)) = setup_with(sdk, "lsp turn live in acp").await else {
        return;
    };
    let mut daemon = project.daemon(&mock.base_url()).await;
    let chat = project.cwd().join("live.chat");
    let original = "@You:\nFirst question.\n\n@Assistant:\nFirst answer.\n\n@You:\n";
    std::fs::write(&chat, original).unwrap();
    let (editor, uri) = editor_with(&project, &mock, &chat, original);
    let reply = "The editor's answer, the first half. And the second half.";
    mock.push(bash_turn("e1", "echo from-the-editor"));
    mock.push(Turn::text(reply).stall(3000));
    mock.push(Turn::text("The third answer."));
    let marker = |name: &str| project.root.join(name);
    let (loaded, pending, live, done) = (
        marker("loaded"),
        marker("pending"),
        marker("live"),
        marker("done"),
    );
    // The editor: its question, sent; the call approved once the ACP client showed it
    // pending; the end of the turn, when the ACP client must have had the first half.
    let pump = {
        let (uri, loaded, pending, live, done) = (
            uri.clone(),
            loaded.clone(),
            pending.clone(),
            live.clone(),
            done.clone(),
        );
        let mut stage = 0;
        let mut live_at_end = None;
        EditorPump::start(editor, move |editor| {
            match stage {
                0 if loaded.exists() => {
                    let end = editor.text(&uri).len();
                    editor.type_at(&uri, end, "The editor's question.\n");
                    crate::daemon_two_editors::send(editor, &uri);
                    let stopped = crate::daemon_two_editors::wait_stopped(editor);
                    assert_eq!(stopped["reason"], "awaiting-approval", "{stopped}");
                    stage = 1;
                }
                1 if pending.exists() => {
                    let approved =
                        editor.request("flemma/approve", json!({"uri": uri, "toolId": "e1"}));
                    assert!(approved.is_ok(), "{approved:?}");
                    let stopped = crate::daemon_two_editors::wait_stopped(editor);
                    assert_eq!(stopped["reason"], "idle", "{stopped}");
                    live_at_end = Some(live.exists());
                    std::fs::write(&done, "").unwrap();
                    stage = 2;
                }
                _ => {}
            }
            live_at_end
        })
    };
    let report = project
        .client(
            &client,
            &mock.base_url(),
            json!([
                {"op": "load", "session": chat},
                {"op": "touch", "path": loaded},
                {"op": "wait_for_update", "contains": "run the check", "marker": pending},
                {"op": "wait_for_update", "contains": "The editor's answer", "marker": live},
                {"op": "wait_for_file", "path": done},
                {"op": "prompt", "text": "Third question."}
            ]),
        )
        .await;
    let (mut editor, live_at_end) = pump.stop();
    assert_eq!(
        live_at_end,
        Some(true),
        "the reply reached the ACP client only after the turn: {report}"
    );
    let steps = report["steps"].as_array().unwrap();
    // The editor's turn, as it ran: told once, in the engine's order, no permission asked.
    let live_updates: Vec<Value> = steps[2..5]
        .iter()
        .flat_map(|step| step["updates"].as_array().unwrap().clone())
        .collect();
    for step in &steps[1..6] {
        assert_eq!(step["permissions"], json!([]), "{step}");
        assert!(step.get("error").is_none(), "{step}");
    }
    let live_updates = Value::Array(live_updates);
    assert_eq!(
        message_text(&live_updates, "user_message_chunk"),
        "The editor's question."
    );
    assert_eq!(
        message_text(&live_updates, "agent_message_chunk"),
        format!("Let me run it.{reply}")
    );
    let calls: Vec<String> = live_updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["toolCallId"] == "e1")
        // A `tool_call` without a status is `pending` (the schema's default).
        .map(|u| {
            let status = u["status"].as_str().unwrap_or("pending");
            format!("{} {status}", u["sessionUpdate"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        calls,
        [
            "tool_call pending",
            "tool_call_update in_progress",
            "tool_call_update completed"
        ],
        "{live_updates}"
    );
    // The ACP client's own prompt: its reply only.
    let third = &steps[5];
    assert_eq!(third["result"]["stopReason"], "end_turn", "{third}");
    assert_eq!(message_text(&third["updates"], "user_message_chunk"), "");
    assert_eq!(
        message_text(&third["updates"], "agent_message_chunk"),
        "The third answer."
    );
    assert!(!third["updates"].to_string().contains("e1"), "{third}");
    // Every byte once in the editor's buffer, which the editor saves.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !editor.text(&uri).contains("The third answer.") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            editor.text(&uri)
        );
        editor.pump(Duration::from_millis(20));
    }
    let text = editor.text(&uri).to_owned();
    for once in [
        "First answer.",
        "The editor's question.",
        "Let me run it.",
        "**Tool Result:** `e1`",
        reply,
        "Third question.",
        "The third answer.",
    ] {
        assert_eq!(text.matches(once).count(), 1, "{once:?} in {text}");
    }
    no_error_diagnostics(&text);
    std::fs::write(&chat, &text).unwrap();
    drop(editor);
    daemon.kill().await.unwrap();
}

with_each_sdk!(an_lsp_editors_turn_streams_live_into_the_acp_client);

/// Review before approval with the chat open in an LSP editor, through one daemon: the call
/// the permission request asks about is in the editor's buffer (unsaved: the file under it
/// does not have it), and the request still carries its diff, read through the daemon's
/// writer as the rest of the chat is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permission_requests_diff_reads_the_chat_from_the_editors_buffer() {
    let Some((python, project, mock)) = setup("acp review diff from the buffer").await else {
        return;
    };
    project.only_read_runs_alone();
    let mut daemon = project.daemon(&mock.base_url()).await;
    let notes = project.cwd().join("notes.md");
    std::fs::write(&notes, "alpha\nbeta\n").unwrap();
    let chat = project.cwd().join("review.chat");
    let original = "@You:\nHello.\n\n@Assistant:\nHi.\n\n@You:\n";
    std::fs::write(&chat, original).unwrap();
    let (editor, _uri) = editor_with(&project, &mock, &chat, original);
    push_notes_edit(&mock);
    let pump = EditorPump::start(editor, |_| ());
    let report = project
        .client(
            &python,
            &mock.base_url(),
            json!([
                {"op": "load", "session": chat},
                {"op": "prompt", "text": "Fix the notes.", "permission": "reject_once"}
            ]),
        )
        .await;
    let (editor, ()) = pump.stop();
    check_notes_diff(&report["steps"][1], &notes);
    // The call was only ever in the editor's buffer.
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), original);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "alpha\nbeta\n");
    drop(editor);
    daemon.kill().await.unwrap();
}
