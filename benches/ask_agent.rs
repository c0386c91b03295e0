//! The time from an `ask_agent` call to the asked agent's first streamed event (issue 36), in
//! process (`flemmad send --no-daemon`) and through the daemon (`flemmad send` with a
//! `flemmad serve` running). Run by hand, never in CI (docs/benchmarks.md, "`ask_agent`"):
//!
//! ```sh
//! cargo bench -p flemmad --bench ask_agent -- --runs 10
//! FLEMMAD=target/release/flemmad cargo bench -p flemmad --bench ask_agent  # another binary
//! ```
//!
//! Each run sends a chat whose model (`flemma-mock-provider`, over real HTTP) calls `ask_agent`;
//! the asked agent is `flemmad acp --no-daemon` with a config of its own (a second mock). The
//! clock starts when `flemmad send --events` prints the call's `tool:executing` and stops at the
//! first `tool:progress` of the agent: the agent started (in process: every send is a new
//! process, so every run starts the agent; through the daemon only the first run does, later
//! ones reuse it), a session made, the prompt sent, the child's model asked and its first text
//! streamed back. Printed: each run, then the median of each mode (the daemon's first run
//! apart).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

const CHAT: &str = "@You:\nAsk the helper what 2+2 is.\n";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(10usize);
    let flemmad = std::env::var_os("FLEMMAD").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_flemmad")),
        PathBuf::from,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let parent = runtime.block_on(MockProvider::start()).unwrap();
    let child = runtime.block_on(MockProvider::start()).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("flemmad-ask-bench-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let root = dir.path().canonicalize().unwrap();
    for sub in ["project", "config/flemma", "state", "run", "cache"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(
        root.join("helper.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[providers.anthropic]\nbase_url = \"{}\"\n",
            child.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("config/flemma/config.toml"),
        format!(
            "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n[providers.anthropic]\nbase_url = \"{}\"\n\n[tools]\nauto_approve = [\"$standard\", \"ask_agent\"]\n\n[agents.helper]\ncommand = \"{}\"\nargs = [\"--config\", \"{}\", \"acp\", \"--no-daemon\"]\n",
            parent.base_url(),
            flemmad.display(),
            root.join("helper.toml").display()
        ),
    )
    .unwrap();
    let command = |args: &[&str]| {
        let mut command = Command::new(&flemmad);
        command
            .args(args)
            .current_dir(root.join("project"))
            .env_remove("FLEMMA_CONFIG")
            .env("ANTHROPIC_API_KEY", "no-key-needed")
            .env("PATH", "/usr/bin:/bin");
        for (key, sub) in [
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_RUNTIME_DIR", "run"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
        ] {
            command.env(key, root.join(sub));
        }
        command
    };
    let chat = root.join("project/talk.chat");
    let one = |no_daemon: bool| -> Duration {
        std::fs::write(&chat, CHAT).unwrap();
        let _ = std::fs::remove_dir_all(root.join("project/.flemma"));
        parent.push(
            Turn::text("I will ask.").tool_call(
                "ask_agent",
                json!({"label": "ask", "agent": "helper", "prompt": "What is 2+2?", "with_context": null}),
            ),
        );
        parent.push(Turn::text("Done."));
        child.push(Turn::text("It is 4."));
        let path = chat.display().to_string();
        let mut args = vec!["send", path.as_str(), "--events"];
        if no_daemon {
            args.push("--no-daemon");
        }
        let mut send = command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = std::io::BufReader::new(send.stdout.take().unwrap()).lines();
        let mut started = None;
        let mut first = None;
        for line in lines {
            let Ok(event) = serde_json::from_str::<Value>(&line.unwrap()) else {
                continue;
            };
            let now = Instant::now();
            match event["name"].as_str() {
                Some("tool:executing") if started.is_none() => started = Some(now),
                Some("tool:progress") if first.is_none() && event["data"]["agent"] == "helper" => {
                    first = Some(now);
                }
                _ => {}
            }
        }
        let status = send.wait().unwrap();
        assert!(status.success(), "flemmad send failed");
        let (Some(started), Some(first)) = (started, first) else {
            panic!("no tool:executing or no progress of the agent in the events");
        };
        first - started
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut in_process = Vec::new();
    for run in 0..runs {
        let took = one(true);
        println!("in process, run {run}: {:.1} ms", ms(took));
        in_process.push(took);
    }
    let mut daemon = command(&["serve"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = root.join("run/flemma/rpc.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !Path::new(&socket).exists() {
        assert!(Instant::now() < deadline, "the daemon never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut through = Vec::new();
    for run in 0..=runs {
        let took = one(false);
        println!("through the daemon, run {run}: {:.1} ms", ms(took));
        through.push(took);
    }
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let _ = daemon.wait();
    let cold = through.remove(0);
    println!(
        "median, in process (the agent started every time): {:.1} ms",
        ms(median(in_process))
    );
    println!(
        "through the daemon: first run (the agent started) {:.1} ms; median of the others (the agent reused) {:.1} ms",
        ms(cold),
        ms(median(through))
    );
    runtime.block_on(parent.shutdown());
    runtime.block_on(child.shutdown());
}
