//! The `flemma-mock-provider` binary, started as a real process.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_flemma-mock-provider");

/// Starts the binary and returns it with its base URL (the first stdout line).
fn start(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the mock binary");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the first stdout line");
    (child, line.trim_end().to_string())
}

/// Sends SIGTERM and waits (bounded) for a clean exit.
fn terminate(mut child: Child) -> std::process::ExitStatus {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait for the mock") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the mock did not stop after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn prints_url_serves_control_api_and_stops_on_sigterm() {
    let (child, url) = start(&[]);
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .expect("URL shape")
        .parse()
        .expect("port");
    assert!(port > 0);

    let pushed = common::post(
        &format!("{url}/_mock/turns"),
        &[],
        &json!([{"steps": [{"text": "Scripted"}], "stop": "end_turn"}]),
    )
    .await;
    assert_eq!(pushed.status, 200);
    let body = json!({"model": "gpt-5", "stream": true, "messages": [{"role": "user", "content": "hello"}]});
    let answer = common::post(&format!("{url}/v1/chat/completions"), &[], &body).await;
    assert!(answer.text.contains("\"content\":\"Scripted\""));
    assert!(answer.text.ends_with("data: [DONE]\n\n"));

    // Queue empty: echo is the binary's default.
    let answer = common::post(&format!("{url}/v1/chat/completions"), &[], &body).await;
    assert!(
        answer.text.contains("\"content\":\" hello\""),
        "{}",
        answer.text
    );

    let recorded = common::get(&format!("{url}/_mock/requests"), &[])
        .await
        .json();
    assert_eq!(recorded.as_array().unwrap().len(), 2);
    assert!(terminate(child).success());
}

#[tokio::test]
async fn script_file_no_echo_and_required_key() {
    let dir = std::env::temp_dir().join(format!("flemma-mock-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.json");
    std::fs::write(&script, r#"[{"steps":[{"text":"From the script"}]}]"#).unwrap();
    let (child, url) = start(&[
        "--script",
        script.to_str().unwrap(),
        "--no-echo",
        "--require-key",
        "k1",
    ]);
    let body = json!({"model": "c", "max_tokens": 5, "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let messages = format!("{url}/v1/messages");
    assert_eq!(
        common::post(
            &messages,
            &[("x-api-key", "nope"), ("anthropic-version", "2023-06-01")],
            &body
        )
        .await
        .status,
        401
    );
    let answer = common::post(
        &messages,
        &[("x-api-key", "k1"), ("anthropic-version", "2023-06-01")],
        &body,
    )
    .await;
    assert!(answer.text.contains("\"text\":\"From\""));
    assert_eq!(
        common::post(
            &messages,
            &[("x-api-key", "k1"), ("anthropic-version", "2023-06-01")],
            &body
        )
        .await
        .status,
        500
    );
    assert!(terminate(child).success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_script_and_help() {
    let output = Command::new(BIN)
        .args(["--script", "/nonexistent/turns.json"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the script file /nonexistent/turns.json"),
        "{stderr}"
    );

    let help = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--port",
        "--script",
        "--no-echo",
        "--require-key",
        "--chat-reasoning-field",
        "/_mock/turns",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}");
    }
}
