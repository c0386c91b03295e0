//! MCP servers as tool sources, end to end: `flemmad tools` and `tools run` against a real
//! MCP server written with the official Python SDK (PyPI `mcp`, the crate flemma-mcp's
//! `tests/servers/demo_server.py`), and agentic `flemmad send`s against `flemma-mock-provider`
//! that call its tools: one approved by a glob, one waiting for approval. No server outlives
//! flemmad (checked by pid, also when flemmad is killed).
//!
//! The Python comes from `FLEMMA_TEST_MCP_PYTHON` (`.ci/run` makes a venv); without it the
//! tests say "skipped" (and fail under `CI`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::common::{Chat, chat, flemmad_command, read, send_command, stderr};
use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

fn python(test: &str) -> Option<PathBuf> {
    crate::common::sdk_python("FLEMMA_TEST_MCP_PYTHON", "mcp", test)
}

fn demo_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/flemma-mcp/tests/servers/demo_server.py")
}

/// The user configuration with the demo server (and `extra` TOML).
fn configure(chat: &Chat, python: &Path, extra: &str) -> PathBuf {
    let markers = chat.path.parent().unwrap().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        r#"{extra}

[tools.mcp.servers.demo]
command = "{}"
args = ["{}"]
env = {{ DEMO_MARKERS = "{}" }}
"#,
        python.display(),
        demo_server().display(),
        markers.display()
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
    markers
}

fn agentic(body: &str) -> Chat {
    chat(&format!(
        "```json\n{{\"flemma\": {{\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\"}}}}\n```\n{body}"
    ))
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn gone(pid: u32) -> bool {
    for _ in 0..200 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

fn wire(name: &str) -> String {
    flemma_provider::encode_tool_name(name)
}

#[tokio::test]
async fn an_agentic_send_calls_mcp_tools_approved_by_a_glob() {
    let Some(python) = python("an_agentic_send_calls_mcp_tools_approved_by_a_glob") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic("@You:\nUse the demo server.\n");
    configure(
        &chat,
        &python,
        r#"[tools]
auto_approve = ["$standard", "demo.*"]

[tools.mcp]
include = ["demo.*"]
exclude = ["demo.die", "demo.hang", "demo.grow"]"#,
    );
    mock.push(
        Turn::text("Calling the server.")
            .tool_call_with_id("demo__echo", "m1", json!({"text": "  hello from mcp \n"}))
            .tool_call_with_id(wire("demo.get__x"), "m2", json!({}))
            .tool_call_with_id("demo__pid", "m3", json!({}))
            .tool_call_with_id("demo__fail", "m4", json!({"message": "no such repo"}))
            .tool_call_with_id("demo__image", "m5", json!({})),
    );
    mock.push(Turn::text("All four answered."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = read(&chat.path);
    assert!(text.contains("**Tool Use:** `demo.echo` (`m1`)"), "{text}");
    assert!(
        text.contains("**Tool Use:** `demo.get__x` (`m2`)"),
        "the name round-trips: {text}"
    );
    assert!(text.contains("  hello from mcp \n"), "exact output: {text}");
    assert!(text.contains("no such repo"), "{text}");
    assert!(text.contains("All four answered."), "{text}");

    // What the model was offered: the included tools under their wire names, not the excluded
    // ones; the built-ins as before.
    let requests = mock.requests();
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(offered.contains(&"demo__echo"), "{offered:?}");
    assert!(
        offered.contains(&wire("demo.get__x").as_str()),
        "{offered:?}"
    );
    assert!(offered.contains(&"bash"), "{offered:?}");
    assert!(!offered.contains(&"demo__die"), "excluded: {offered:?}");
    // The second request carries the results, `isError` as an error result.
    let results: Vec<&Value> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|part| part["type"] == "tool_result")
        .collect();
    let failed = results.iter().find(|r| r["tool_use_id"] == "m4").unwrap();
    assert_eq!(failed["is_error"], json!(true), "{failed}");
    // The image is saved in the chat's store and sent to the model as an image part.
    assert!(text.contains("attached:]\n@//"), "{text}");
    let image = results.iter().find(|r| r["tool_use_id"] == "m5").unwrap();
    let kinds: Vec<&str> = image["content"]
        .as_array()
        .unwrap_or_else(|| panic!("content parts: {image}"))
        .iter()
        .filter_map(|part| part["type"].as_str())
        .collect();
    assert!(kinds.contains(&"image"), "{image}");

    // The server is gone once flemmad is: its pid is in the chat.
    let pid: u32 = text
        .split("`m3`")
        .nth(2)
        .and_then(|rest| rest.split("```").nth(1))
        .and_then(|fence| fence.trim().parse().ok())
        .unwrap_or_else(|| panic!("the pid result in {text}"));
    assert!(
        gone(pid).await,
        "the MCP server {pid} outlived flemmad send"
    );
}

#[tokio::test]
async fn an_mcp_tool_waits_for_approval_like_any_tool() {
    let Some(python) = python("an_mcp_tool_waits_for_approval_like_any_tool") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic("@You:\nEcho something.\n");
    configure(&chat, &python, "[tools.mcp]\ninclude = [\"demo.echo\"]");
    mock.push(Turn::text("Echoing.").tool_call_with_id(
        "demo__echo",
        "e1",
        json!({"text": "approved echo"}),
    ));
    mock.push(Turn::text("Echoed."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    let err = stderr(&out);
    // `$standard` approves the harness tools only: the MCP call waits.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("`demo.echo` (e1)"), "{err}");
    assert!(
        !read(&chat.path).contains("approved echo\n```"),
        "not run yet"
    );

    let mut approve = flemmad_command(&chat, &mock.base_url());
    approve.arg("approve").arg(&chat.path).arg("e1");
    let out = run(approve).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(read(&chat.path).contains("`e1` (approved)"));
    // The next send runs the approved call, then continues.
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(text.contains("approved echo"), "{text}");
    assert!(text.contains("Echoed."), "{text}");
}

#[tokio::test]
async fn tools_lists_and_runs_mcp_tools_and_names_a_server_that_crashes() {
    let Some(python) = python("tools_lists_and_runs_mcp_tools_and_names_a_server_that_crashes")
    else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let chat = agentic("@You:\nhi\n");
    configure(
        &chat,
        &python,
        &format!(
            r#"[tools.mcp]
include = ["demo.e*"]
exclude = ["demo.env"]

[tools.mcp.servers.broken]
command = "{}"
args = ["{}", "--crash"]"#,
            python.display(),
            demo_server().display()
        ),
    );
    let base = mock.base_url();
    let tools = |args: &[&str]| {
        let mut command = flemmad_command(&chat, &base);
        command
            .arg("tools")
            .args(args)
            .arg("--chat")
            .arg(&chat.path);
        command
    };
    let out = run(tools(&["--json"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("MCP server `broken` did not start").count(),
        1,
        "one warning: {err}"
    );
    assert!(
        err.contains("DEMO_TOKEN credential is missing"),
        "with stderr's last lines: {err}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool = |name: &str| {
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
    };
    let echo = tool("demo.echo").expect("demo.echo listed");
    assert_eq!(echo["source"], "mcp:demo");
    assert_eq!(echo["offered"], true);
    assert_eq!(echo["input_schema"]["properties"]["text"]["type"], "string");
    assert!(echo["description"].as_str().unwrap().contains("exactly"));
    // `tools.mcp.exclude` runs first: the tool is not registered at all.
    assert!(tool("demo.env").is_none(), "excluded: {report}");
    assert_eq!(
        tool("demo.fail").expect("listed")["offered"],
        false,
        "not included"
    );
    assert_eq!(tool("bash").expect("built-in")["source"], Value::Null);
    let servers = report["mcp_servers"].as_array().unwrap();
    let demo = servers.iter().find(|s| s["name"] == "demo").unwrap();
    assert_eq!(demo["state"], "running");
    let demo_tools: Vec<&str> = demo["tool_names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(demo_tools.contains(&"demo.echo"), "{demo_tools:?}");
    assert!(
        !demo_tools.contains(&"demo.env"),
        "excluded: {demo_tools:?}"
    );
    assert_eq!(demo["tools"], json!(demo_tools.len()));
    let out = run(tools(&[])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("demo.fail"), "{listing}");
    assert!(!listing.contains("demo.env"), "excluded: {listing}");
    assert!(
        servers
            .iter()
            .any(|s| s["name"] == "broken" && s["state"] == "failed")
    );

    let out = run(tools(&["run", "demo.echo", r#"{"text": "a\n b "}"#])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\n b \n");
    let out = run(tools(&["run", "demo.fail", r#"{"message": "bad repo"}"#])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bad repo"));
    let out = run(tools(&["run", "demo.echo", r#"{"txt": 1}"#])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("text: is required"),
        "{}",
        stderr(&out)
    );
    let out = run(tools(&["run", "demo.env", r#"{"name": "HOME"}"#])).await;
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(2), ""),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(
            r#"`demo.env` is excluded by tools.mcp.exclude ("demo.env"): it is not registered"#
        ),
        "{}",
        stderr(&out)
    );
}

/// A chat and its folder, with the user configuration's MCP server `here` (the demo server)
/// whose `cwd` is "" (the chat's folder).
fn chat_with_a_server_in_its_folder(python: &Path) -> (Chat, PathBuf) {
    let chat = agentic("@You:\nhi\n");
    let folder = chat.path.parent().unwrap().to_path_buf();
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[tools.mcp.servers.here]\ncommand = \"{}\"\nargs = [\"{}\"]\ncwd = \"\"\n",
            python.display(),
            demo_server().display()
        ),
    )
    .unwrap();
    (chat, folder)
}

/// A chat named by its bare file name from its own folder: a server's `cwd` is taken against
/// the chat's folder, never against "" (issue 28: `tools --chat c.chat` once started servers
/// in an empty working directory — "its working directory  does not exist").
#[tokio::test]
async fn a_bare_chat_name_gives_servers_the_chats_folder() {
    let Some(python) = python("a_bare_chat_name_gives_servers_the_chats_folder") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let (chat, folder) = chat_with_a_server_in_its_folder(&python);
    let mut command = flemmad_command(&chat, &mock.base_url());
    command
        .current_dir(&folder)
        .args(["tools", "run", "here.cwd", "{}", "--chat"])
        .arg(chat.path.file_name().unwrap());
    let out = run(command).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        folder.canonicalize().unwrap().display().to_string()
    );
}

/// `flemmad status` of a chat named by its bare file name: the path is made absolute once, at
/// the edge (`ProcessContext::absolute`), so its MCP servers start in the chat's folder as for
/// an absolute path (issue 28, item 4).
#[tokio::test]
async fn status_of_a_bare_chat_name_starts_servers_in_the_chats_folder() {
    let Some(python) = python("status_of_a_bare_chat_name_starts_servers_in_the_chats_folder")
    else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let (chat, folder) = chat_with_a_server_in_its_folder(&python);
    let mut command = flemmad_command(&chat, &mock.base_url());
    command
        .current_dir(&folder)
        .args(["status", "--json", "--no-daemon"])
        .arg(chat.path.file_name().unwrap());
    let out = run(command).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &status["mcp_servers"][0];
    assert_eq!(server["name"], "here", "{status:#}");
    assert_eq!(server["state"], "running", "{server:#}");
    let transport = server["transport"].as_str().unwrap();
    let folder = folder.canonicalize().unwrap();
    assert!(
        transport.contains(&format!("(in {}", folder.display())),
        "{transport}"
    );
    // The file is named as the user gave it.
    assert_eq!(status["file"], "talk.chat", "{status:#}");
}

#[tokio::test]
async fn tools_run_checks_inputs_against_the_schemas_the_python_sdk_writes() {
    let Some(python) = python("tools_run_checks_inputs_against_the_schemas_the_python_sdk_writes")
    else {
        return;
    };
    let chat = agentic(
        "@You:
hi
",
    );
    let server = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/flemma-mcp/tests/servers/typed_server.py");
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            r#"[tools.mcp]
include = ["typed.*"]
exclude = ["typed.sec*"]

[tools.mcp.servers.typed]
command = "{}"
args = ["{}"]
"#,
            python.display(),
            server.display()
        ),
    )
    .unwrap();
    let tools_run = |name: &str, input: &str| {
        let mut command = flemmad_command(&chat, "http://127.0.0.1:9");
        command
            .args(["tools", "run", name, input, "--chat"])
            .arg(&chat.path);
        command
    };
    // An optional integer (`anyOf` integer, null) given a string, and a nested model (`$ref`
    // into `$defs`) given a string for an integer: refused by flemmad with the path, before
    // the server sees them.
    let out = run(tools_run("typed.count", r#"{"n": "not-a-number"}"#)).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "the input does not fit the schema of `typed.count`: n: expected integer or null, got string"
        ),
        "{}",
        stderr(&out)
    );
    let out = run(tools_run("typed.plot", r#"{"p": {"x": "a"}}"#)).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("p.x: expected integer, got string; p.y: is required but missing"),
        "{}",
        stderr(&out)
    );
    // What fits runs: the server answers with what it received.
    let out = run(tools_run("typed.plot", r#"{"p": {"x": 1, "y": 2}}"#)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let received: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(received, json!({"p": {"x": 1, "y": 2}, "maybe": null}));
    // An excluded tool is refused, not run.
    let out = run(tools_run("typed.secret", "{}")).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("excluded by tools.mcp.exclude (\"typed.sec*\")"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn a_server_with_sandbox_true_runs_inside_the_sandbox() {
    let Some(python) = python("a_server_with_sandbox_true_runs_inside_the_sandbox") else {
        return;
    };
    let bwrap_works = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !bwrap_works {
        eprintln!("skipped: bwrap does not run here (apt-get install bubblewrap)");
        return;
    }
    let outside = crate::common::outside_tmp("flemmad-mcp-canary-");
    let canary = outside.path().join("escaped");
    let write = |chat: &Chat, path: &Path| {
        let mut command = flemmad_command(chat, "http://127.0.0.1:9");
        command
            .arg("tools")
            .arg("run")
            .arg("demo.write")
            .arg(json!({"path": path, "text": "x"}).to_string())
            .arg("--chat")
            .arg(&chat.path);
        run(command)
    };

    // Unsandboxed (the default), the server writes where its user can: the test can fail.
    let chat = agentic("@You:\nhi\n");
    configure(&chat, &python, "");
    let out = write(&chat, &canary).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(canary.exists());
    std::fs::remove_file(&canary).unwrap();

    // `sandbox = true`: the same call cannot write outside the sandbox's writable paths, and
    // still writes in the chat's directory.
    let chat = agentic("@You:\nhi\n");
    let config = chat.config_home.join("flemma/config.toml");
    configure(&chat, &python, "");
    // The sandbox has a /tmp of its own: the server's script must not be in a checkout that
    // lies under /tmp (as a CI clone may), so it is copied out.
    let scripts = crate::common::outside_tmp("flemmad-mcp-server-");
    let script = scripts.path().join("demo_server.py");
    std::fs::copy(demo_server(), &script).unwrap();
    let mut text = std::fs::read_to_string(&config).unwrap().replace(
        &demo_server().display().to_string(),
        &script.display().to_string(),
    );
    text.push_str("sandbox = true\n");
    std::fs::write(&config, text).unwrap();
    let out = write(&chat, &canary).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("cannot write"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !canary.exists(),
        "a sandboxed server wrote outside the sandbox"
    );
    let inside = chat.path.parent().unwrap().join("inside.txt");
    let out = write(&chat, &inside).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(inside.exists());

    // A program under /tmp does not exist inside the sandbox (it has a /tmp of its own): the
    // server is refused with the reason, not started to fail with "No such file".
    let in_tmp = tempfile::Builder::new()
        .prefix("flemmad-mcp-tmp-")
        .tempdir_in("/tmp")
        .unwrap();
    let program = in_tmp.path().join("python3");
    std::os::unix::fs::symlink(&python, &program).unwrap();
    let chat = agentic("@You:\nhi\n");
    configure(&chat, &program, "");
    let mut text = std::fs::read_to_string(chat.config_home.join("flemma/config.toml")).unwrap();
    text.push_str("sandbox = true\n");
    std::fs::write(chat.config_home.join("flemma/config.toml"), text).unwrap();
    let out = write(&chat, &inside).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lies under /tmp, which the sandbox replaces"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn no_server_outlives_a_killed_flemmad() {
    let Some(python) = python("no_server_outlives_a_killed_flemmad") else {
        return;
    };
    let chat = agentic("@You:\nhi\n");
    let markers = configure(&chat, &python, "");
    let mut command = flemmad_command(&chat, "http://127.0.0.1:9");
    command
        .arg("tools")
        .arg("run")
        .arg("demo.hang")
        .arg(r#"{"tag": "killed"}"#)
        .arg("--chat")
        .arg(&chat.path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().unwrap();
    let started = markers.join("started-killed");
    // The marker holds the server's pid once it is written (it exists, empty, a moment before).
    let mut pid = None;
    for _ in 0..1200 {
        pid = std::fs::read_to_string(&started)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok());
        if pid.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let pid = pid.expect("the hanging call started and wrote its pid");
    assert!(alive(pid));
    child.start_kill().unwrap(); // SIGKILL: no chance to close anything
    let _ = child.wait().await;
    assert!(
        gone(pid).await,
        "the MCP server {pid} outlived a killed flemmad"
    );
}

#[tokio::test]
async fn a_streamable_http_server_runs_through_tools_run() {
    let Some(python) = python("a_streamable_http_server_runs_through_tools_run") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let mut server = tokio::process::Command::new(&python)
        .arg(demo_server())
        .args(["--http", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..1200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let chat = agentic("@You:\nhi\n");
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[tools.mcp.servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{DEMO_SECRET}}\" }}\n"
        ),
    )
    .unwrap();
    let mut command = flemmad_command(&chat, "http://127.0.0.1:9");
    command
        .env("DEMO_SECRET", "s3cret-value")
        .args([
            "tools",
            "run",
            "web.echo",
            r#"{"text": "over http"}"#,
            "--chat",
        ])
        .arg(&chat.path);
    let out = run(command).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "over http\n");
    assert!(!stderr(&out).contains("s3cret-value"));
    let _ = server.kill().await;
}
