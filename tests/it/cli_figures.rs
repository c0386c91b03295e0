//! Figures of the agentic `flemmad send` measured on the real binary (`docs/benchmarks.md`,
//! "Engine"): peak RSS through a 100-turn autopilot conversation, and the time from a
//! background job finishing to its result being in the file. Each also checks a bound, so a
//! regression fails; run with `-- --nocapture` to see the figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{provider_env, read, send_command};
use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

fn figures_chat(body: &str) -> common::Chat {
    common::trusted_chat(&format!(
        r#"```json
{{"flemma": {{"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {{"auto_approve": ["$standard", "+bash"], "auto_approve_sandboxed": false,
            "autopilot": {{"resume_delay": 100}}}}}}}}
```
{body}"#
    ))
}

/// Peak resident set size in kB: `VmHWM` of the process, polled until it exits (the peak only
/// grows, so the last reading is the peak up to a few milliseconds before exit).
async fn run_measuring_peak_rss(
    mut command: tokio::process::Command,
    stderr_file: &Path,
) -> (std::process::ExitStatus, u64, String) {
    // stderr to a file: a pipe nobody reads meanwhile would fill up and stop the process.
    let mut child = command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr_file).unwrap())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id().unwrap());
    let mut peak = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "flemmad did not finish in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let status = child.wait().await.unwrap();
    (status, peak, read(stderr_file))
}

#[tokio::test]
async fn peak_rss_of_a_hundred_turn_autopilot_conversation() {
    if !Path::new("/proc/self/status").exists() {
        eprintln!("skipped: no /proc to read the peak RSS from");
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let chat = figures_chat("@You:\nLook around, a hundred times.\n");
    let prose = "This turn looks at the directory again and says so at some length. ".repeat(12);
    for turn in 0..99u64 {
        mock.push(
            Turn::text(format!("Turn {turn}. {prose}")).tool_call_with_id(
                "ls",
                format!("l{turn:03}"),
                json!({"label": "list", "path": ".", "max_depth": null, "limit": turn + 1}),
            ),
        );
    }
    mock.push(Turn::text("A hundred turns later: done."));
    let started = Instant::now();
    let log = chat.path.with_extension("stderr");
    let time = Path::new("/usr/bin/time");
    let (status, peak_kb, err, how) = if time.exists() {
        // GNU time's own figure: the child's maximum resident set size.
        let mut command = tokio::process::Command::new(time);
        command
            .arg("-v")
            .arg(env!("CARGO_BIN_EXE_flemmad"))
            .arg("send")
            .arg(&chat.path)
            .env("XDG_CONFIG_HOME", &chat.config_home)
            .env_remove("FLEMMA_CONFIG")
            .env("PATH", "/usr/bin:/bin")
            .envs(provider_env(&mock.base_url()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true);
        let status = tokio::time::timeout(Duration::from_secs(300), command.status())
            .await
            .unwrap()
            .unwrap();
        let err = read(&log);
        let kb = err
            .lines()
            .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no maximum RSS in GNU time's output:\n{err}"));
        (status, kb, err, "GNU time -v")
    } else {
        let (status, kb, err) =
            run_measuring_peak_rss(send_command(&chat, &mock.base_url()), &log).await;
        (status, kb, err, "VmHWM polled")
    };
    let elapsed = started.elapsed();
    assert!(status.success(), "{err}");
    let text = read(&chat.path);
    assert_eq!(text.matches("**Tool Result:** `l").count(), 99);
    assert!(text.ends_with("A hundred turns later: done.\n\n@You:\n\n"));
    assert_eq!(mock.requests().len(), 100);
    eprintln!(
        "FIGURE peak RSS of a 100-turn send ({how}): {:.1} MB ({} kB), {:.2} s, file {} kB",
        peak_kb as f64 / 1024.0,
        peak_kb,
        elapsed.as_secs_f64(),
        text.len() / 1024
    );
    assert!(peak_kb > 0, "VmHWM was read");
    assert!(peak_kb < 400 * 1024, "peak RSS {peak_kb} kB");
}

fn nanos_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// One conversation with a background job; the milliseconds from the job's last action (it
/// writes the time, then prints its output and exits) to its result being in the file.
async fn job_to_file_latency_ms(coalesce_ms: u64) -> f64 {
    let mock = MockProvider::start().await.unwrap();
    let chat = figures_chat("@You:\nRun the slow thing in the background.\n");
    let text = read(&chat.path).replacen(
        "{\"flemma\": {",
        &format!("{{\"flemma\": {{\"editing\": {{\"coalesce_ms\": {coalesce_ms}}}, "),
        1,
    );
    std::fs::write(&chat.path, text).unwrap();
    let dir = chat.path.parent().unwrap().to_path_buf();
    mock.push(Turn::text("Starting it.").tool_call_with_id(
        "bash",
        "j1",
        json!({"label": "slow", "command": "sleep 0.8; date +%s%N > finished_at; echo job done",
               "timeout": null, "flemma.background": true}),
    ));
    mock.push(Turn::text("It runs; I will wait."));
    mock.push(Turn::text("The job is done."));
    let mut child = send_command(&chat, &mock.base_url())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        if std::fs::read_to_string(&chat.path).is_ok_and(|t| t.contains("**Job Result:**")) {
            break nanos_now();
        }
        assert!(Instant::now() < deadline, "{}", read(&chat.path));
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    let finished: u128 = read(&dir.join("finished_at")).trim().parse().unwrap();
    let text = read(&chat.path);
    assert!(text.contains("job done"), "{text}");
    assert!(text.ends_with("The job is done.\n\n@You:\n\n"), "{text}");
    (seen.saturating_sub(finished)) as f64 / 1e6
}

#[tokio::test]
async fn a_finished_background_job_is_in_the_file_soon() {
    for coalesce_ms in [100, 0] {
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(job_to_file_latency_ms(coalesce_ms).await);
        }
        eprintln!(
            "FIGURE job finished → result in the file, editing.coalesce_ms = {coalesce_ms}: {runs:.1?} ms"
        );
        for latency in &runs {
            assert!(*latency < 1500.0, "{runs:?}");
        }
    }
}
