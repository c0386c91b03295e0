//! `ask_agent` with real ACP on both sides: the chat is sent by flemmad (in-process, through
//! the daemon, from an editor over LSP, from an ACP client) against the mock provider, and the
//! asked agent is `flemmad acp` against a second mock provider (its own script) or a small
//! foreign agent on the official ACP Python SDK (`tests/it/acp/agent.py`, PyPI
//! `agent-client-protocol`; its Python from `FLEMMA_TEST_ACP_PYTHON`, as the ACP tests).
//! Also the watchdog and runaway tool calls against the mock provider.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common::{self, provider_env};

/// A project with a chat, the user's configuration (its agents), and two mock providers: the
/// chat's and the asked flemmad's.
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    chat: PathBuf,
    parent: MockProvider,
    child: MockProvider,
}

const CHAT: &str = "@You:\nAsk the helper what 2+2 is.\n";

impl Setup {
    /// `agents`: the `[agents.*]` tables (TOML) after the provider settings.
    async fn new(agents: &str) -> Self {
        let dir = common::outside_tmp("flemmad-ask-");
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("project")).unwrap();
        for dir in ["config/flemma", "state", "run", "cache"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        let parent = MockProvider::start().await.unwrap();
        let child = MockProvider::start().await.unwrap();
        let chat = root.join("project/talk.chat");
        std::fs::write(&chat, CHAT).unwrap();
        let setup = Self {
            _dir: dir,
            root,
            chat,
            parent,
            child,
        };
        // The asked flemmad's own configuration: its provider is the second mock.
        std::fs::write(
            setup.root.join("helper.toml"),
            format!(
                "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[providers.anthropic]\nbase_url = \"{}\"\n",
                setup.child.base_url()
            ),
        )
        .unwrap();
        std::fs::write(
            setup.root.join("config/flemma/config.toml"),
            format!(
                "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{agents}"
            ),
        )
        .unwrap();
        setup
    }

    /// `[agents.helper]`: flemmad itself, with its own configuration.
    fn helper(&self, permissions: &str) -> String {
        format!(
            "[agents.helper]\ncommand = \"{}\"\nargs = [\"--config\", \"{}\", \"acp\", \"--no-daemon\"]\ndescription = \"Answers questions about the project.\"\npermissions = \"{permissions}\"\n",
            env!("CARGO_BIN_EXE_flemmad"),
            self.root.join("helper.toml").display()
        )
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = provider_env(&self.parent.base_url())
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

    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
        command
            .current_dir(self.root.join("project"))
            .env_remove("FLEMMA_CONFIG")
            .env_remove("FLEMMA_ASK_DEPTH")
            .kill_on_drop(true);
        for (key, value) in self.env() {
            command.env(key, value);
        }
        command
    }

    async fn send(&self, extra: &[&str]) -> std::process::Output {
        let mut command = self.command();
        command.arg("send").arg(&self.chat).args(extra);
        tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("flemmad send finished in time")
            .unwrap()
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.chat).unwrap()
    }

    fn conversation(&self, name: &str) -> PathBuf {
        self.root
            .join("project/.flemma/talk.chat/agents")
            .join(name)
    }
}

/// The events of `--events` output.
fn events(output: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn ask_call(agent: &str, prompt: &str, with_context: Option<bool>) -> Turn {
    Turn::text("I will ask.").tool_call(
        "ask_agent",
        json!({"label": "ask", "agent": agent, "prompt": prompt, "with_context": with_context}),
    )
}

/// The result of the first tool call in `chat`.
fn result_of(chat: &str) -> String {
    let doc = flemma_syntax::parse(chat);
    let (_, _, result) = doc
        .messages()
        .iter()
        .flat_map(|m| m.tool_results().map(move |(s, r)| (m, s, r)))
        .next()
        .unwrap_or_else(|| panic!("a tool result in:\n{chat}"));
    result
        .fence
        .as_ref()
        .map(|f| doc.slice(f.content).trim_end().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn flemmad_asks_flemmad_and_gets_its_answer_and_its_conversation() {
    let setup = Setup::new("").await;
    let agents = setup.helper("run");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{agents}"
        ),
    )
    .unwrap();
    setup.parent.push(ask_call("helper", "What is 2+2?", None));
    setup.parent.push(Turn::text("The helper says 4."));
    setup.child.push(Turn::text("It is 4."));
    let out = setup.send(&["--no-daemon", "--events"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = setup.read();
    let result = result_of(&chat);
    assert_eq!(
        result,
        "[ask_agent: helper's conversation is in .flemma/talk.chat/agents/helper-1.chat]\nIt is 4.",
        "{chat}"
    );
    assert!(chat.contains("@Assistant:\nThe helper says 4.\n"), "{chat}");
    // The asked flemmad's conversation is a chat of its own.
    let child = std::fs::read_to_string(setup.conversation("helper-1.chat")).unwrap();
    assert!(child.contains("@You:\nWhat is 2+2?\n"), "{child}");
    assert!(child.contains("@Assistant:\nIt is 4.\n"), "{child}");
    // The tool description listed it; the child's model got the task.
    let offered = &setup.parent.requests()[0].body["tools"];
    let tool = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ask_agent")
        .expect("ask_agent offered");
    assert!(
        tool["description"]
            .as_str()
            .unwrap()
            .ends_with("Agents:\n  helper — Answers questions about the project."),
        "{tool}"
    );
    assert!(setup.child.requests()[0].raw_body.contains("What is 2+2?"));
    // Its text streamed through the chat's events.
    let progress: Vec<Value> = events(&out)
        .into_iter()
        .filter(|e| e["name"] == "tool:progress")
        .collect();
    assert!(
        progress
            .iter()
            .any(|e| e["data"]["agent"] == "helper" && e["data"]["kind"] == "text"),
        "{progress:?}"
    );
}

/// Every tool result of `chat`, in order.
fn results_of(chat: &str) -> Vec<String> {
    let doc = flemma_syntax::parse(chat);
    doc.messages()
        .iter()
        .flat_map(|m| m.tool_results().map(|(_, r)| r))
        .map(|result| {
            result
                .fence
                .as_ref()
                .map(|f| doc.slice(f.content).trim_end().to_owned())
                .unwrap_or_default()
        })
        .collect()
}

/// `[agents.py]`: the foreign agent on the official ACP Python SDK.
fn python_agent(python: &std::path::Path, permissions: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/acp/agent.py");
    format!(
        "[agents.py]\ncommand = \"{}\"\nargs = [\"{}\"]\npermissions = \"{permissions}\"\n",
        python.display(),
        script.display()
    )
}

/// A foreign agent (the Python SDK's) answers; its transcript is kept as a valid `.chat`
/// under the chat's store; an empty prompt gets the seed's error without starting anything.
#[tokio::test]
async fn a_python_agent_answers_and_its_transcript_is_a_chat() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "a_python_agent_answers_and_its_transcript_is_a_chat",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}",
            python_agent(&python, "run")
        ),
    )
    .unwrap();
    setup.parent.push(
        Turn::text("I will ask.")
            .tool_call(
                "ask_agent",
                json!({"label": "ask", "agent": "py", "prompt": "Summarise the notes", "with_context": null}),
            )
            .tool_call(
                "ask_agent",
                json!({"label": "ask", "agent": "py", "prompt": "  ", "with_context": null}),
            ),
    );
    setup.parent.push(Turn::text("Done."));
    let out = setup.send(&["--no-daemon"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = setup.read();
    let results = results_of(&chat);
    assert_eq!(
        results,
        [
            "[ask_agent: py's conversation is in .flemma/talk.chat/agents/py-1.chat]\nEcho: Summarise the notes",
            "[ask_agent: the prompt is empty — say what py must do]"
        ],
        "{chat}"
    );
    let transcript = std::fs::read_to_string(setup.conversation("py-1.chat")).unwrap();
    let doc = flemma_syntax::parse(transcript.as_str());
    let errors: Vec<_> = doc
        .diagnostics()
        .into_iter()
        .filter(|d| d.severity == flemma_syntax::Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{transcript}");
    assert!(
        transcript.contains("@You:\nSummarise the notes\n")
            && transcript.contains("<thinking>\nLet me see.\n</thinking>")
            && transcript.contains("Echo: ")
            && transcript.contains("py · Read notes.txt — completed"),
        "{transcript}"
    );
}

/// Agents may ask agents two levels deep: a chat already two levels below the user's is
/// refused with the depth message, and no agent starts.
#[tokio::test]
async fn asking_three_levels_deep_is_refused() {
    let setup = Setup::new("").await;
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}",
            setup.helper("run")
        ),
    )
    .unwrap();
    setup.parent.push(ask_call("helper", "What is 2+2?", None));
    setup.parent.push(Turn::text("I will do it myself."));
    let mut command = setup.command();
    command
        .env("FLEMMA_ASK_DEPTH", "2")
        .arg("send")
        .arg(&setup.chat)
        .arg("--no-daemon");
    let out = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = setup.read();
    let result = result_of(&chat);
    assert!(
        result.starts_with("[ask_agent: agents may ask agents only 2 levels deep"),
        "{chat}"
    );
    assert!(setup.child.requests().is_empty(), "no agent was asked");
}

/// Faults: an agent that crashes mid-answer and one that hangs (the watchdog,
/// `parameters.idle_timeout`) give an error result with what was answered, the parent goes on,
/// and the next call starts the agent again.
#[tokio::test]
async fn a_crashed_or_hung_agent_is_an_error_result_and_the_next_call_restarts_it() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "a_crashed_or_hung_agent_is_an_error_result_and_the_next_call_restarts_it",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    let log = setup.root.join("agent.log");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[parameters]\nidle_timeout = 1\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}\n[agents.py.env]\nAGENT_LOG = \"{}\"\n",
            python_agent(&python, "run"),
            log.display()
        ),
    )
    .unwrap();
    setup.parent.push(ask_call("py", "CRASH now", None));
    setup.parent.push(ask_call("py", "HANG now", None));
    setup.parent.push(ask_call("py", "Hello again", None));
    setup.parent.push(Turn::text("Done."));
    let started = std::time::Instant::now();
    let out = setup.send(&["--no-daemon"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let chat = setup.read();
    let results = results_of(&chat);
    assert_eq!(results.len(), 3, "{chat}");
    assert!(
        results[0].contains("about to crash")
            && results[0].contains("[ask_agent: py stopped before finishing: "),
        "{chat}"
    );
    assert!(
        results[1].contains("thinking about it")
            && results[1].contains("[ask_agent: py stopped before finishing: ")
            && results[1].contains("parameters.idle_timeout"),
        "{chat}"
    );
    assert!(results[2].ends_with("Echo: Hello again"), "{chat}");
    assert!(chat.contains("@Assistant:\nDone.\n"), "{chat}");
    let starts = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|line| line.starts_with("start "))
        .count();
    assert_eq!(
        starts, 3,
        "started again after the crash and after the watchdog"
    );
}

/// `with_context`: the asked agent gets the conversation the turn started from (questions,
/// answers, one line per tool call, never tool outputs) before the task.
#[tokio::test]
async fn with_context_sends_the_conversation_without_tool_outputs() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "with_context_sends_the_conversation_without_tool_outputs",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}",
            python_agent(&python, "run")
        ),
    )
    .unwrap();
    std::fs::write(
        &setup.chat,
        "@You:\nWhat is in src?\n\n@Assistant:\nLet me look.\n\n**Tool Use:** `ls` (`t1`)\n```json\n{\"path\":\"src\"}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nsecret-output.rs\n```\n\n@Assistant:\nOne file.\n\n@You:\nAsk py about it.\n",
    )
    .unwrap();
    setup
        .parent
        .push(ask_call("py", "CONTEXT: what was asked?", Some(true)));
    setup.parent.push(Turn::text("Done."));
    let out = setup.send(&["--no-daemon"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = setup.read();
    let results = results_of(&chat);
    let answer = results.last().unwrap();
    assert!(
        answer.contains("User:\nWhat is in src?")
            && answer.contains("[tool call: ls]")
            && answer.contains("User:\nAsk py about it.")
            && answer.ends_with("The task:\n\nCONTEXT: what was asked?"),
        "{chat}"
    );
    assert!(!answer.contains("secret-output.rs"), "{chat}");
}

/// An asked agent's permission request under `permissions = "ask"` stops an in-process
/// `flemmad send` with exit 3 and says how to answer such questions; `refuse` rejects it and
/// the agent goes on.
#[tokio::test]
async fn an_agents_question_stops_send_with_exit_3_or_is_refused_by_its_policy() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "an_agents_question_stops_send_with_exit_3_or_is_refused_by_its_policy",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    let config = |permissions: &str| {
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}",
            python_agent(&python, permissions)
        )
    };
    std::fs::write(setup.root.join("config/flemma/config.toml"), config("ask")).unwrap();
    setup
        .parent
        .push(ask_call("py", "PERMISSION to clean the build", None));
    let out = setup.send(&["--no-daemon"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("1 asked agent wants permission:")
            && err.contains("py (asked by `ask_agent`, ")
            && err.contains("wants to: Run rm -rf build"),
        "{err}"
    );
    assert!(err.contains("flemmad serve"), "{err}");

    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        config("refuse"),
    )
    .unwrap();
    std::fs::write(&setup.chat, CHAT).unwrap();
    setup
        .parent
        .push(ask_call("py", "PERMISSION to clean the build", None));
    setup.parent.push(Turn::text("It was refused."));
    let out = setup.send(&["--no-daemon"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = setup.read();
    assert!(result_of(&chat).ends_with("rejected"), "{chat}");
}

/// Cancelling the parent turn (Ctrl-C on `flemmad send`) cancels the child's run
/// (`session/cancel`), and the result keeps what it answered so far.
#[tokio::test]
async fn cancelling_the_send_cancels_the_asked_agent_and_keeps_its_answer_so_far() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "cancelling_the_send_cancels_the_asked_agent_and_keeps_its_answer_so_far",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    let log = setup.root.join("agent.log");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}\n[agents.py.env]\nAGENT_LOG = \"{}\"\n",
            python_agent(&python, "run"),
            log.display()
        ),
    )
    .unwrap();
    setup.parent.push(ask_call("py", "SLOW counting", None));
    let mut command = setup.command();
    command
        .arg("send")
        .arg(&setup.chat)
        .arg("--no-daemon")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("start ")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the send ended")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("cancel "),
        "session/cancel reached the agent: {logged}\n{err}"
    );
    let chat = setup.read();
    let result = result_of(&chat);
    assert!(
        result.contains("part 1.") && result.contains("[ask_agent: py stopped before finishing: "),
        "{chat}\n{err}"
    );
}

/// Waits (up to 30 s) until `read` gives something `done` accepts, and returns it.
async fn wait_until(what: &str, read: impl Fn() -> String, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = read();
        if done(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited in vain for {what}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `flemmad serve` of the setup's environment, stopped (SIGTERM) when dropped.
struct Served {
    child: tokio::process::Child,
}

impl Served {
    async fn start(setup: &Setup) -> Self {
        let mut command = setup.command();
        command
            .arg("serve")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let child = command.spawn().unwrap();
        let socket = setup.root.join("run/flemma/rpc.sock");
        wait_until(
            "the daemon's socket",
            || socket.exists().to_string(),
            |exists| exists == "true",
        )
        .await;
        Self { child }
    }

    /// SIGTERM, then waits for the daemon to exit.
    async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the daemon exited in time")
            .unwrap();
    }
}

impl Setup {
    /// `flemmad ARGS…` (through the daemon when one serves).
    async fn flemmad(&self, args: &[&str]) -> std::process::Output {
        let mut command = self.command();
        command.args(args);
        tokio::time::timeout(Duration::from_secs(60), command.output())
            .await
            .expect("flemmad finished in time")
            .unwrap()
    }
}

/// Through the daemon: an asked agent's question stops `flemmad send` (exit 3) with the
/// command that answers it, and `flemmad approve FILE ID` answers it; `flemmad cancel` of a
/// chat whose agent is answering sends it `session/cancel` and keeps what it answered; two
/// agents asked as background jobs run at once and their answers come back as job results;
/// and the daemon owns the agents' processes: none outlives it.
#[tokio::test]
async fn through_the_daemon_questions_cancel_and_background_agents() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "through_the_daemon_questions_cancel_and_background_agents",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    let log = setup.root.join("agent.log");
    let second = python_agent(&python, "run").replace("[agents.py]", "[agents.py2]");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n[tools.autopilot]\nresume_delay = 100\n\n{}\n[agents.py.env]\nAGENT_LOG = \"{log}\"\n\n{second}\n[agents.py2.env]\nAGENT_LOG = \"{log}\"\n",
            python_agent(&python, "ask"),
            log = log.display()
        ),
    )
    .unwrap();
    let daemon = Served::start(&setup).await;
    let file = setup.chat.display().to_string();
    let logged = || std::fs::read_to_string(&log).unwrap_or_default();

    // The agent's question: `flemmad send` stops with exit 3 and the command to answer it.
    setup
        .parent
        .push(ask_call("py", "PERMISSION to clean the build", None));
    setup.parent.push(Turn::text("It was allowed."));
    let out = setup.flemmad(&["send", &file]).await;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("wants to: Run rm -rf build"), "{err}");
    let approve = err
        .lines()
        .find_map(|line| line.trim().strip_prefix("approve: "))
        .unwrap_or_else(|| panic!("the command to approve: {err}"));
    let id = approve.rsplit(' ').next().unwrap();
    assert!(id.contains(".perm-"), "{approve}");
    let out = setup.flemmad(&["approve", &file, id]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = wait_until(
        "the answer",
        || setup.read(),
        |c| c.contains("It was allowed."),
    )
    .await;
    assert!(result_of(&chat).ends_with("allowed"), "{chat}");

    // Cancel mid-answer through the daemon.
    std::fs::write(&setup.chat, CHAT).unwrap();
    setup.parent.push(ask_call("py2", "SLOW counting", None));
    let out = setup.flemmad(&["send", "--detach", &file]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("the slow answer", logged, |l| l.contains("slow ")).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let out = setup.flemmad(&["cancel", &file]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = wait_until(
        "the answer so far",
        || setup.read(),
        |c| c.contains("stopped before finishing"),
    )
    .await;
    assert!(logged().contains("cancel "), "{}", logged());
    let result = result_of(&chat);
    assert!(result.contains("part 1."), "{chat}");
    assert!(chat.contains("(aborted)"), "{chat}");

    // Two agents at once, as background jobs.
    std::fs::write(&setup.chat, CHAT).unwrap();
    let background = |agent: &str, prompt: &str| json!({"label": "ask", "agent": agent, "prompt": prompt, "with_context": null, "flemma.background": true});
    setup.parent.push(
        Turn::text("Asking both.")
            .tool_call("ask_agent", background("py", "BARRIER one"))
            .tool_call("ask_agent", background("py2", "BARRIER two")),
    );
    setup.parent.push(Turn::text("Both asked."));
    // Each result delivered resumes the chat (together or one after the other).
    setup.parent.push(Turn::text("An answer came."));
    setup.parent.push(Turn::text("An answer came."));
    let out = setup.flemmad(&["send", "--detach", &file]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = wait_until(
        "both answers",
        || setup.read(),
        |c| {
            c.matches("**Job Result:**").count() == 2
                && c.rsplit("**Job Result:**")
                    .next()
                    .is_some_and(|last| last.contains("An answer came."))
        },
    )
    .await;
    // Each waited for the other: they ran at once.
    assert!(chat.contains("Together: BARRIER one"), "{chat}");
    assert!(chat.contains("Together: BARRIER two"), "{chat}");

    // The daemon owns the agents: once it stopped, none of their processes runs.
    let pids: Vec<String> = logged()
        .lines()
        .filter_map(|line| line.strip_prefix("start "))
        .map(str::to_owned)
        .collect();
    assert!(pids.len() >= 2, "{}", logged());
    assert!(
        pids.iter()
            .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists()),
        "the agents run while the daemon does"
    );
    daemon.stop().await;
    wait_until(
        "the agents' end",
        || {
            pids.iter()
                .filter(|pid| alive(pid))
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
        },
        str::is_empty,
    )
    .await;
}

/// Whether process `pid` runs (a zombie waiting to be reaped does not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// An ACP client drives the parent (`flemmad acp`): the asked agent's question under
/// `permissions = "ask"` reaches it as `session/request_permission` (forwarded), its answer
/// goes back to the agent, and the agent's progress arrives as tool call updates.
#[tokio::test]
async fn an_acp_client_answers_the_asked_agents_question() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "an_acp_client_answers_the_asked_agents_question",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}",
            python_agent(&python, "ask")
        ),
    )
    .unwrap();
    setup
        .parent
        .push(ask_call("py", "PERMISSION to clean the build", None));
    setup.parent.push(Turn::text("The helper was allowed."));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/acp/client.py");
    let steps = json!([
        {"op": "new"},
        {"op": "prompt", "text": "Ask py to clean the build.", "permission": "allow_once"}
    ]);
    let mut command = tokio::process::Command::new(&python);
    command
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_flemmad"))
        .arg(setup.root.join("project"))
        .arg(steps.to_string())
        .current_dir(setup.root.join("project"))
        .env_remove("FLEMMA_CONFIG")
        .env_remove("FLEMMA_ASK_DEPTH")
        .kill_on_drop(true);
    for (key, value) in setup.env() {
        command.env(key, value);
    }
    let out = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("the ACP client finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let step = &report["steps"][1];
    assert_eq!(step["result"]["stopReason"], "end_turn", "{step}");
    let asked = step["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{step}");
    // Asked as the parent's call, titled with the agent's name.
    assert_eq!(
        asked[0]["toolCall"]["title"], "py · Run rm -rf build",
        "{step}"
    );
    let options: Vec<&str> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["optionId"].as_str())
        .collect();
    assert_eq!(options, ["allow_once", "reject_once"], "{step}");
    // The answer reached the agent ("allowed"), and the parent went on.
    let updates = step["updates"].as_array().unwrap();
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call_update"
                && u["status"] == "completed"
                && u["content"][0]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("\nallowed"))),
        "{step}"
    );
    let said: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(said.ends_with("The helper was allowed."), "{said}");
}

/// An editor drives the chat over LSP: the asked agent's question under `permissions = "ask"`
/// reaches it as `window/showMessageRequest` (Allow / Reject), and the user's `Allow` goes back
/// to the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_answers_the_asked_agents_question_over_lsp() {
    use crate::lsp::lsp_client::{Client, Flavor};
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "an_editor_answers_the_asked_agents_question_over_lsp",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}",
            python_agent(&python, "ask")
        ),
    )
    .unwrap();
    setup
        .parent
        .push(ask_call("py", "PERMISSION to clean the build", None));
    setup.parent.push(Turn::text("It was allowed."));
    let env = setup.env();
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let mut client = Client::start_with_env(Flavor::Helix, &["--no-daemon"], &env);
    client.message_answer = Some("Allow".into());
    client.initialize(&setup.root.join("project"));
    let uri = format!("file://{}", setup.chat.display());
    client.open(&uri, CHAT);
    client
        .request(
            "workspace/executeCommand",
            json!({"command": "flemma.send", "arguments": [uri]}),
        )
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !client.text(&uri).contains("It was allowed.") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}\nasked: {:?}",
            client.text(&uri),
            client.messages_asked
        );
        client.pump(Duration::from_millis(50));
    }
    let text = client.text(&uri).to_owned();
    assert!(result_of(&text).ends_with("\nallowed"), "{text}");
    assert_eq!(
        client.messages_asked.len(),
        1,
        "{:?}",
        client.messages_asked
    );
    let asked = &client.messages_asked[0];
    assert!(
        asked["message"]
            .as_str()
            .unwrap()
            .contains("py (asked by ask_agent) wants to: Run rm -rf build"),
        "{asked}"
    );
    let actions: Vec<&str> = asked["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["title"].as_str())
        .collect();
    assert_eq!(actions, ["Allow", "Reject"]);
    // Go-to-definition from the result's text opens the agent's conversation.
    let offset = text.find("\nallowed\n").unwrap() + 2;
    let position = client.position(&uri, offset);
    let found = client
        .request(
            "textDocument/definition",
            json!({"textDocument": {"uri": uri}, "position": position}),
        )
        .unwrap();
    let conversation = setup.conversation("py-1.chat");
    assert_eq!(
        found["uri"],
        format!("file://{}", conversation.display()),
        "{found}"
    );
    assert!(
        std::fs::read_to_string(&conversation)
            .unwrap()
            .contains("@You:\nPERMISSION to clean the build\n"),
        "the conversation is a chat of its own"
    );
    client.shutdown();
}

/// An agent that writes garbage (not JSON-RPC) on its stdout: a clear error result, the parent
/// goes on, and the next call starts the agent again.
#[tokio::test]
async fn an_agent_writing_garbage_is_an_error_result_and_is_restarted() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "an_agent_writing_garbage_is_an_error_result_and_is_restarted",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    let log = setup.root.join("agent.log");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[parameters]\nidle_timeout = 30\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}\n[agents.py.env]\nAGENT_LOG = \"{}\"\n",
            python_agent(&python, "run"),
            log.display()
        ),
    )
    .unwrap();
    setup.parent.push(ask_call("py", "GARBAGE please", None));
    setup.parent.push(ask_call("py", "Hello again", None));
    setup.parent.push(Turn::text("Done."));
    let out = setup.send(&["--no-daemon"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chat = setup.read();
    let results = results_of(&chat);
    assert_eq!(results.len(), 2, "{chat}");
    assert!(
        results[0].contains("[ask_agent: py stopped before finishing: it wrote something that is not ACP (JSON-RPC, one message a line): \"this is not json-rpc\""),
        "{chat}"
    );
    assert!(chat.contains("(error)"), "{chat}");
    assert!(results[1].ends_with("Echo: Hello again"), "{chat}");
    assert!(chat.contains("@Assistant:\nDone.\n"), "{chat}");
    let starts = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|line| line.starts_with("start "))
        .count();
    assert_eq!(starts, 2, "started again after the garbage");
}

/// `flemmad doctor` starts each configured agent and says whether it answers `initialize`
/// (by its own name and title), and names one that does not start; `status` and `tools` list
/// the agents a chat may ask, and `tools` declares `ask_agent` with them in its description.
#[tokio::test]
async fn doctor_status_and_tools_list_the_agents() {
    let setup = Setup::new("").await;
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n{}\n[agents.broken]\ncommand = \"no-such-agent-anywhere\"\ndescription = \"Never starts.\"\n",
            setup.helper("refuse")
        ),
    )
    .unwrap();
    let file = setup.chat.display().to_string();
    let out = setup.flemmad(&["doctor"]).await;
    let shown =
        String::from_utf8_lossy(&out.stdout).into_owned() + &*String::from_utf8_lossy(&out.stderr);
    assert!(
        shown.contains("agent `helper` starts and answers `initialize` as flemmad"),
        "{shown}"
    );
    assert!(
        shown.contains("agent `broken` does not start: cannot start `no-such-agent-anywhere`"),
        "{shown}"
    );
    assert_eq!(out.status.code(), Some(1), "a failed check needs attention");

    let out = setup.flemmad(&["status", "--no-daemon", &file]).await;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("agent helper: ")
            && shown.contains("its permission requests: refuse")
            && shown.contains("agent broken: no-such-agent-anywhere"),
        "{shown}"
    );

    let out = setup.flemmad(&["tools", "--chat", &file, "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["broken", "helper"], "{listed}");
    let text = listed.to_string();
    assert!(
        text.contains(
            "Agents:\\n  broken — Never starts.\\n  helper — Answers questions about the project."
        ),
        "{listed}"
    );
}

/// The language server lists the agents: completion of an `ask_agent` call's `"agent"` value
/// (with their descriptions), and hover on the call (the agent it asks first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_and_hover_list_the_agents() {
    use crate::lsp::lsp_client::{Client, Flavor};
    let setup = Setup::new("").await;
    let helper = setup.helper("run");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n{helper}\n{}",
            helper
                .replace("[agents.helper]", "[agents.critic]")
                .replace("Answers questions about the project.", "Finds faults.")
        ),
    )
    .unwrap();
    let env = setup.env();
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let mut client = Client::start_with_env(Flavor::Helix, &["--no-daemon"], &env);
    client.initialize(&setup.root.join("project"));
    let uri = format!("file://{}", setup.chat.display());
    let text = "@You:\nAsk.\n\n@Assistant:\n**Tool Use:** `ask_agent` (`a1`)\n```json\n{\"agent\": \"helper\", \"prompt\": \"Why?\"}\n```\n";
    client.open(&uri, text);
    // Hover never waits for an analysis: the agents it lists are the last analysis's, so the
    // test waits for the first one (its diagnostics) as an editor's user would have.
    client.wait_notification("textDocument/publishDiagnostics", |p| {
        p["uri"] == uri.as_str()
    });
    let at = text.find("\"helper\"").unwrap() + 1;
    let found = client
        .request(
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": client.position(&uri, at)}),
        )
        .unwrap();
    let items = found
        .as_array()
        .or_else(|| found["items"].as_array())
        .unwrap_or_else(|| panic!("{found}"));
    let listed: Vec<(&str, &str)> = items
        .iter()
        .map(|i| {
            (
                i["label"].as_str().unwrap(),
                i["detail"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("critic", "Finds faults."),
            ("helper", "Answers questions about the project.")
        ]
    );
    let header = text.find("**Tool Use:**").unwrap() + 3;
    let hover = client
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": client.position(&uri, header)}),
        )
        .unwrap();
    let shown = hover["contents"]["value"].as_str().unwrap_or_default();
    assert!(
        shown.ends_with(
            "Agents:\n- `helper` (asked here) — Answers questions about the project.\n- `critic` — Finds faults.\n"
        ),
        "{hover}"
    );
    client.shutdown();
}

/// An ACP client cancels the parent's prompt while the asked agent answers: the agent gets
/// `session/cancel`, the prompt ends `cancelled`, and the call's result in the parent's chat
/// keeps what the agent answered so far (`aborted`).
#[tokio::test]
async fn an_acp_clients_cancel_reaches_the_asked_agent() {
    let Some(python) = common::sdk_python(
        "FLEMMA_TEST_ACP_PYTHON",
        "agent-client-protocol",
        "an_acp_clients_cancel_reaches_the_asked_agent",
    ) else {
        return;
    };
    let setup = Setup::new("").await;
    let log = setup.root.join("agent.log");
    std::fs::write(
        setup.root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n{}\n[agents.py.env]\nAGENT_LOG = \"{}\"\n",
            python_agent(&python, "run"),
            log.display()
        ),
    )
    .unwrap();
    setup.parent.push(ask_call("py", "SLOW counting", None));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/acp/client.py");
    let steps = json!([
        {"op": "new"},
        {"op": "prompt", "text": "Ask py to count.", "cancel_when_seen": "part 2."}
    ]);
    let mut command = tokio::process::Command::new(&python);
    command
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_flemmad"))
        .arg(setup.root.join("project"))
        .arg(steps.to_string())
        .current_dir(setup.root.join("project"))
        .env_remove("FLEMMA_CONFIG")
        .env_remove("FLEMMA_ASK_DEPTH")
        .kill_on_drop(true);
    for (key, value) in setup.env() {
        command.env(key, value);
    }
    let out = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("the ACP client finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    let step = &report["steps"][1];
    assert_eq!(step["result"]["stopReason"], "cancelled", "{step}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("cancel "), "{logged}");
    let session = report["steps"][0]["result"]["sessionId"].as_str().unwrap();
    let chat = wait_until(
        "the answer so far in the parent's chat",
        || std::fs::read_to_string(session).unwrap_or_default(),
        |c| c.contains("stopped before finishing"),
    )
    .await;
    assert!(chat.contains("(aborted)"), "{chat}");
    assert!(result_of(&chat).contains("part 1."), "{chat}");
}
