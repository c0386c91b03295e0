//! "Close the editor, jobs go on, reopen shows results" (issue 11, "Done when"), end to end
//! through `flemmad serve`: an LSP client (`flemmad lsp` proxying to the daemon) opens a
//! chat, the model starts a background job, the client saves, closes the document and
//! disconnects; the job finishes while no editor is open, its result lands in the file on disk
//! and autopilot's next reply after it; a new LSP session opening the file sees the job
//! completed. `flemmad events` watches the whole time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common;
use crate::daemon_watch::{Events, Served};
use crate::lsp::lsp_client::{Client, Flavor};

const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {"auto_approve_sandboxed": false, "autopilot": {"resume_delay": 100}}}}
```
"#;

fn editor(flavor: Flavor, chat: &common::Chat, base: &str) -> Client {
    let dir = chat.path.parent().unwrap();
    let mut env = common::provider_env(base);
    env.push(("XDG_CONFIG_HOME", chat.config_home.display().to_string()));
    env.push(("XDG_RUNTIME_DIR", dir.join("run").display().to_string()));
    env.push(("PATH", "/usr/bin:/bin".into()));
    // No --no-daemon: `flemmad lsp` proxies to the daemon of this runtime directory.
    let mut client = Client::start_with_env(flavor, &[], &env);
    client.initialize(dir);
    client
}

fn command(client: &mut Client, name: &str, arguments: Value) {
    let answer = client.request(
        "workspace/executeCommand",
        json!({"command": name, "arguments": arguments}),
    );
    assert!(answer.is_ok(), "{name}: {answer:?}");
}

/// Pumps the client (it answers the daemon's edits) until its buffer holds every needle.
fn wait_in_buffer(client: &mut Client, uri: &str, needles: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !needles.iter().all(|n| client.text(uri).contains(n)) {
        assert!(
            Instant::now() < deadline,
            "{needles:?} never all in the buffer:\n{}",
            client.text(uri)
        );
        client.pump(Duration::from_millis(20));
    }
}

/// Waits for an `engine:stopped` with `reason` among the events.
fn wait_stop(events: &mut Events, reason: &str, context: impl Fn() -> String) -> Value {
    loop {
        let stopped = events.wait_or("engine:stopped", &context);
        if stopped["data"]["reason"] == reason {
            return stopped;
        }
    }
}

#[test]
fn close_the_editor_the_job_goes_on_and_reopening_shows_its_result() {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let original = format!("{FRONTMATTER}@You:\nBuild it in the background.\n");
    let chat = common::chat(&original);
    let daemon = Served::start(&chat, &base, &[]);
    let mut events = Events::start(&chat, &base, &daemon);
    let uri = format!("file://{}", chat.path.display());
    let log = || {
        format!(
            "{}\n{}",
            std::fs::read_to_string(&chat.path).unwrap_or_default(),
            daemon.log()
        )
    };

    mock.push(Turn::default().tool_call_with_id(
        "bash",
        "toolu_job",
        json!({"label": "build", "command": "sleep 2; echo job-output-marker",
               "timeout": null, "flemma.background": true}),
    ));
    mock.push(Turn::text("The build runs in the background."));
    mock.push(Turn::text("The build finished: job-output-marker."));

    let mut helix = editor(Flavor::Helix, &chat, &base);
    helix.open(&uri, &original);
    command(&mut helix, "flemma.send", json!([uri]));
    wait_in_buffer(&mut helix, &uri, &["toolu_job", "(pending)"]);
    wait_stop(&mut events, "awaiting-approval", log);
    command(&mut helix, "flemma.approve", json!([uri, "toolu_job"]));
    // The job runs, and autopilot's reply after its start streams into the buffer.
    wait_in_buffer(
        &mut helix,
        &uri,
        &["job=job_", "The build runs in the background."],
    );
    let status = daemon.call(
        "flemma/status",
        json!({"uri": chat.path.display().to_string()}),
    );
    let jobs = &status["result"]["jobs"];
    assert_eq!(jobs[0]["state"], "running", "{status}");
    // The editor has it open: the daemon never wrote the file. The user saves and quits.
    assert_eq!(std::fs::read_to_string(&chat.path).unwrap(), original);
    let saved = helix.text(&uri).to_owned();
    std::fs::write(&chat.path, &saved).unwrap();
    helix.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    let _ = helix.shutdown();

    // No editor is open: the job's result and the reply after it land in the file.
    let stopped = wait_stop(&mut events, "idle", log);
    assert_eq!(stopped["uri"], uri);
    let text = std::fs::read_to_string(&chat.path).unwrap();
    // What was saved stays; the job's result goes into the empty prompt the reply left.
    let kept = saved.trim_end().trim_end_matches("@You:");
    assert!(text.starts_with(kept), "saved:\n{saved}\nnow:\n{text}");
    let job_result = text.find("**Job Result:**").expect("a job result");
    assert!(text[job_result..].contains("job-output-marker"), "{text}");
    assert!(
        text[job_result..].contains("@Assistant:\nThe build finished: job-output-marker.\n"),
        "the reply after the job's result:\n{text}"
    );
    // The model got the job's output in its third request.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[2].body.to_string().contains("job-output-marker"),
        "the last request holds the job's output"
    );

    // A new session opening the file sees the job completed.
    let mut vscode = editor(Flavor::VsCode, &chat, &base);
    vscode.open(&uri, &text);
    let at = text.find("job=job_").unwrap();
    let position = vscode.position(&uri, at);
    let hover = vscode
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": position}),
        )
        .unwrap();
    let markdown = hover["contents"]["value"].as_str().unwrap_or_default();
    assert!(markdown.contains(": completed"), "{hover}");
    let _ = vscode.shutdown();
    drop(events);
    drop(daemon);
    runtime.block_on(mock.shutdown());
}
