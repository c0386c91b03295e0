//! Custom tools from config, run as real processes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_config::CustomTool;
use flemma_tools::builtin::custom;
use flemma_tools::context::{PathGuard, RunContext};
use flemma_tools::spec::Capability;
use serde_json::json;

#[derive(Debug)]
struct NoWrites;
impl PathGuard for NoWrites {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        Err(format!("{} — not in these tests", path.display()))
    }
}

fn tool(command: &str, timeout: Option<u64>) -> CustomTool {
    CustomTool {
        name: "probe".into(),
        description: "A test tool".into(),
        command: command.into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        capabilities: vec!["disables_save_to".into(), "teleports".into()],
        timeout,
    }
}

fn ctx(dir: &Path) -> RunContext {
    RunContext::new(dir, Arc::new(NoWrites))
}

/// Running (a zombie waiting for a reaper that does not reap, as in some containers, is dead).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

#[test]
fn spec_keeps_schema_and_known_capabilities() {
    let spec = custom::spec(&tool("true", None));
    assert_eq!(spec.name, "probe");
    assert_eq!(spec.capabilities, vec![Capability::DisablesSaveTo]);
    assert!(!spec.strict);
}

#[test]
fn input_on_stdin_output_from_stdout_in_the_call_directory() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = custom::run(
        &ctx(dir.path()),
        &tool(
            "read -r line; echo \"got $line in $(basename \"$PWD\")\"; echo noise >&2",
            None,
        ),
        &json!({"q": "hi"}),
    );
    let base = dir
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, format!("got {{\"q\":\"hi\"}} in {base}"));
    // The text is the whole output: nothing backs it in a file, so nothing is "truncated".
    assert!(out.full_output.is_none());
}

#[test]
fn only_an_overflowing_output_is_backed_by_its_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = custom::run(&ctx(dir.path()), &tool("seq 1 3000", None), &json!({}));
    let full = out
        .full_output
        .unwrap_or_else(|| panic!("full output kept"));
    let stored = std::fs::read_to_string(full.path()).unwrap_or_default();
    assert_eq!(stored.lines().count(), 3000);
}

#[test]
fn a_tool_that_prints_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = custom::run(&ctx(dir.path()), &tool("cat >/dev/null", None), &json!({}));
    assert!(!out.is_error);
    assert_eq!(out.text, "[probe printed nothing]");
}

#[test]
fn non_zero_exit_is_an_error_with_stderr() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = custom::run(
        &ctx(dir.path()),
        &tool(
            "echo partial; echo 'bad input: q missing' >&2; exit 3",
            None,
        ),
        &json!({}),
    );
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "partial\n[stderr]\nbad input: q missing\n[exit code: 3]"
    );
}

#[test]
fn a_crash_is_reported_with_its_signal() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = custom::run(&ctx(dir.path()), &tool("kill -SEGV $$", None), &json!({}));
    assert!(out.is_error);
    assert_eq!(out.text, "[probe was killed by signal 11]");
}

#[test]
fn a_tool_that_never_reads_stdin_does_not_block() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 4 MB of input: far more than a pipe holds.
    let big = "x".repeat(4 * 1024 * 1024);
    let started = Instant::now();
    let out = custom::run(
        &ctx(dir.path()),
        &tool("echo done", Some(10)),
        &json!({"q": big}),
    );
    assert_eq!(out.text, "done");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pids = dir.path().join("pids");
    let command = format!(
        "sleep 60 & echo $! > {0}; echo $$ >> {0}; echo started; wait",
        pids.display()
    );
    let started = Instant::now();
    let out = custom::run(&ctx(dir.path()), &tool(&command, Some(1)), &json!({}));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert_eq!(out.text, "started\n[error: 1s timeout exceeded]");
    let pids = std::fs::read_to_string(&pids).unwrap_or_default();
    assert_eq!(pids.lines().count(), 2, "{pids}");
    std::thread::sleep(Duration::from_millis(100));
    for pid in pids.lines() {
        assert!(!alive(pid), "process {pid} survived the timeout");
    }
}

#[test]
fn cancel_kills_the_group() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = ctx(dir.path());
    let cancel = c.cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
    });
    let out = custom::run(&c, &tool("echo working; sleep 60", Some(30)), &json!({}));
    assert!(out.is_error);
    assert_eq!(out.text, "working\n[error: cancelled]");
}

#[test]
fn a_missing_program_says_so() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = custom::run(
        &ctx(dir.path()),
        &tool("no-such-program-here --x", None),
        &json!({}),
    );
    assert!(out.is_error);
    assert!(
        out.text.contains("no-such-program-here: command not found"),
        "{}",
        out.text
    );
    assert!(out.text.ends_with("[exit code: 127]"), "{}", out.text);
}
