//! A stdio server: discovery, exact text, isError, images, resources, timeouts and
//! cancellation (seen by the server), a server that dies mid-call and is restarted, a crash at
//! start, `tools/list_changed`, and shutdown by pid.

use std::time::Duration;

use flemma_mcp::hub::CallOptions;
use flemma_mcp::{HubOptions, McpHub, ServerState};
use serde_json::json;

use crate::support::{alive, python, runtime, stdio_def, wait_for};

const STARTUP: Duration = Duration::from_secs(30);

fn options(timeout: u64) -> CallOptions {
    CallOptions {
        timeout: Duration::from_secs(timeout),
        startup_timeout: STARTUP,
    }
}

#[test]
fn discovery_calls_faults_and_shutdown() {
    let Some(python) = python("discovery_calls_faults_and_shutdown") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let markers = dir.path().join("markers");
    std::fs::create_dir(&markers).expect("markers dir");
    let env = vec![(
        "DEMO_MARKERS".to_string(),
        flemma_mcp::Hidden::new(markers.display().to_string()),
    )];
    let def = stdio_def("demo", &python, &[], dir.path(), env);
    let hub = McpHub::new(HubOptions::default());
    let rt = runtime();
    let statuses = rt.block_on(hub.ensure(std::slice::from_ref(&def), STARTUP, None));
    let status = &statuses[0];
    let ServerState::Ready { pid: Some(pid), .. } = status.state else {
        panic!("the server runs: {:?}", status.state)
    };
    let names: Vec<&str> = status.tools.iter().map(|t| t.full_name.as_str()).collect();
    for expected in [
        "demo.echo",
        "demo.fail",
        "demo.hang",
        "demo.die",
        "demo.get__x",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let tool = |name: &str| {
        status
            .tools
            .iter()
            .find(|t| t.tool.name == name)
            .cloned()
            .expect("the tool")
    };
    let cancel = flemma_tools::Cancel::new();

    // The calls run from a tool thread while the runtime is driven, as in flemmad.
    let (echo, fail, image, note, cwd) = (
        tool("echo"),
        tool("fail"),
        tool("image"),
        tool("note"),
        tool("cwd"),
    );
    let store = dir.path().join("store");
    let outcomes = rt.block_on(async {
        let cancel = cancel.clone();
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            vec![
                echo.run(
                    &json!({"text": "  exact \n\ntext\n"}),
                    &options(10),
                    &cancel,
                    Some(&store),
                ),
                fail.run(
                    &json!({"message": "no such repo"}),
                    &options(10),
                    &cancel,
                    Some(&store),
                ),
                image.run(&json!({}), &options(10), &cancel, Some(&store)),
                note.run(&json!({}), &options(10), &cancel, Some(&store)),
                cwd.run(&json!({}), &options(10), &cancel, Some(&store)),
            ]
        })
        .await
        .expect("the tool thread")
    });
    assert_eq!(outcomes[0].text, "  exact \n\ntext\n");
    assert!(!outcomes[0].is_error);
    assert!(outcomes[1].is_error);
    assert!(
        outcomes[1].text.contains("no such repo"),
        "{}",
        outcomes[1].text
    );
    assert!(
        outcomes[2].text.starts_with("[image: image/png"),
        "{}",
        outcomes[2].text
    );
    let saved: Vec<_> = std::fs::read_dir(&store).expect("the store").collect();
    assert_eq!(saved.len(), 1, "the image is saved in the store");
    assert_eq!(
        outcomes[3].text,
        "see the note:\n[resource: test://notes/1 (text/plain)]\nremember the milk"
    );
    assert_eq!(
        std::fs::canonicalize(outcomes[4].text.trim()).expect("a path"),
        std::fs::canonicalize(dir.path()).expect("the dir")
    );

    // A call that does not answer in time is cancelled, and the server hears of it.
    let hang = tool("hang");
    let outcome = rt.block_on(async {
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || {
            hang.run(&json!({"tag": "timeout"}), &options(1), &cancel, None)
        })
        .await
        .expect("the tool thread")
    });
    assert!(outcome.is_error);
    assert!(
        outcome.text.contains("no answer within 1 s"),
        "{}",
        outcome.text
    );
    // The runtime must run for the notification to go out and the server to answer it.
    rt.block_on(async {
        for _ in 0..200 {
            if markers.join("cancelled-timeout").exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    assert!(
        markers.join("cancelled-timeout").exists(),
        "the server saw notifications/cancelled"
    );

    // Cancelling (Ctrl-C, flemma.cancel) stops a running call the same way.
    let hang = tool("hang");
    let stop = flemma_tools::Cancel::new();
    let outcome = rt.block_on(async {
        let running = stop.clone();
        let markers = markers.clone();
        let call = tokio::task::spawn_blocking(move || {
            hang.run(&json!({"tag": "ctrl-c"}), &options(60), &running, None)
        });
        for _ in 0..400 {
            if markers.join("started-ctrl-c").exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        stop.cancel();
        let outcome = call.await.expect("the tool thread");
        for _ in 0..200 {
            if markers.join("cancelled-ctrl-c").exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        outcome
    });
    assert!(
        outcome.is_error && outcome.text.contains("cancelled"),
        "{}",
        outcome.text
    );
    assert!(
        markers.join("cancelled-ctrl-c").exists(),
        "the server saw the cancellation"
    );

    // A server that dies mid-call gives an error result; the next call restarts it.
    let die = tool("die");
    let pid_tool = tool("pid");
    let (died, after) = rt.block_on(async {
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || {
            let died = die.run(&json!({}), &options(10), &cancel, None);
            let after = pid_tool.run(&json!({}), &options(10), &cancel, None);
            (died, after)
        })
        .await
        .expect("the tool thread")
    });
    assert!(died.is_error);
    assert!(
        died.text.contains("stopped during the call"),
        "{}",
        died.text
    );
    assert!(!after.is_error, "{}", after.text);
    let new_pid: u32 = after.text.trim().parse().expect("a pid");
    assert_ne!(new_pid, pid, "a new server process");
    assert!(
        wait_for(Duration::from_secs(5), || !alive(pid)),
        "the dead server is gone"
    );

    // `tools/list_changed`: the next ensure lists the tools again.
    let grow = tool("grow");
    let grown = rt.block_on(async {
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || grow.run(&json!({}), &options(10), &cancel, None))
            .await
            .expect("the tool thread")
    });
    assert_eq!(grown.text, "grown");
    let statuses = rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        hub.ensure(std::slice::from_ref(&def), STARTUP, None).await
    });
    assert!(
        statuses[0].tools.iter().any(|t| t.full_name == "demo.late"),
        "the changed list is seen"
    );

    // Shutdown ends every server process.
    let pids = hub.pids();
    assert_eq!(pids, [new_pid]);
    rt.block_on(hub.shutdown());
    assert!(
        wait_for(Duration::from_secs(10), || !alive(new_pid)),
        "no server outlives the hub"
    );
}

#[test]
fn a_crash_at_start_is_one_reason_with_stderr() {
    let Some(python) = python("a_crash_at_start_is_one_reason_with_stderr") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let crash = stdio_def("broken", &python, &["--crash"], dir.path(), Vec::new());
    let good = stdio_def("demo", &python, &[], dir.path(), Vec::new());
    let hub = McpHub::new(HubOptions::default());
    let rt = runtime();
    let statuses = rt.block_on(hub.ensure(&[crash, good], STARTUP, None));
    let ServerState::Failed { reason } = &statuses[0].state else {
        panic!("the crashing server failed: {:?}", statuses[0].state)
    };
    assert!(
        reason.contains("DEMO_TOKEN credential is missing"),
        "{reason}"
    );
    assert!(statuses[0].tools.is_empty());
    assert!(
        matches!(statuses[1].state, ServerState::Ready { .. }),
        "the other server works"
    );
    rt.block_on(hub.shutdown());
}

#[test]
fn a_missing_command_and_a_slow_start_fail_with_their_reason() {
    let Some(python) = python("a_missing_command_and_a_slow_start_fail_with_their_reason") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut missing = stdio_def("missing", &python, &[], dir.path(), Vec::new());
    if let flemma_mcp::Transport::Stdio { command, .. } = &mut missing.transport {
        *command = "no-such-mcp-server-here".into();
    }
    // `sleep` never answers `initialize`.
    let mut slow = stdio_def("slow", &python, &[], dir.path(), Vec::new());
    if let flemma_mcp::Transport::Stdio { command, args, .. } = &mut slow.transport {
        *command = "sleep".into();
        *args = vec!["30".into()];
    }
    let hub = McpHub::new(HubOptions::default());
    let rt = runtime();
    let statuses = rt.block_on(hub.ensure(&[missing, slow], Duration::from_secs(1), None));
    let reasons: Vec<String> = statuses
        .iter()
        .map(|s| match &s.state {
            ServerState::Failed { reason } => reason.clone(),
            other => panic!("failed: {other:?}"),
        })
        .collect();
    assert!(
        reasons[0].contains("cannot start `no-such-mcp-server-here`"),
        "{}",
        reasons[0]
    );
    assert!(
        reasons[1].contains("did not start within 1 s"),
        "{}",
        reasons[1]
    );
    rt.block_on(hub.shutdown());
}
