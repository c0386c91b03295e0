//! The daemon's memory over many turns (issue 27): one `flemmad serve`, `flemma-mock-provider`
//! over real HTTP, and N turns sent through `rpc.sock`, the daemon's memory sampled as they go.
//! Run by hand, never in CI (docs/benchmarks.md, "The daemon's memory over many turns"):
//!
//! ```sh
//! cargo bench -p flemmad --bench soak -- --turns 10000
//! cargo bench -p flemmad --profile dev --bench soak -- --turns 2000   # the debug build
//! FLEMMAD=target/release/flemmad cargo bench -p flemmad --bench soak  # another binary
//! ```
//!
//! A turn is one `flemma/send` of a chat holding one question, answered by the mock, waited for
//! until `engine:stopped` (`idle`), after which the chat is written back to its question, so
//! the document does not grow and any growth is the daemon's. `--chats K` sends to K chats in
//! turn (every path is a key in the daemon's maps); `--reply-bytes B` sizes the reply.
//!
//! Printed: a row every `--every` turns (RSS, anonymous memory, threads, open descriptors),
//! the growth per turn after the warm-up (the first tenth of the turns) by a least-squares
//! fit, and the idle figures before the first turn and after the last.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

const QUESTION: &str = "```json\n{\"flemma\": {\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\"}}\n```\n@You:\nSay something.\n";

struct Options {
    turns: usize,
    chats: usize,
    every: usize,
    reply_bytes: usize,
    /// Each turn a `flemmad send` process through the daemon (a new connection per turn),
    /// instead of one `rpc.sock` connection for all.
    cli: bool,
    /// Each turn sends every chat at once and waits for them all (the time of each turn is
    /// printed: many chats streaming at once).
    at_once: bool,
    /// Pace each reply at this many bytes a second (0: unpaced).
    pace: u64,
    /// Write and fsync a file in the chats' folder in a loop while the turns run (another
    /// program loading the disk).
    disk_load: bool,
    flemmad: PathBuf,
}

impl Options {
    fn parse() -> Self {
        let mut options = Options {
            turns: 10_000,
            chats: 1,
            every: 500,
            reply_bytes: 200,
            cli: false,
            at_once: false,
            pace: 0,
            disk_load: false,
            flemmad: std::env::var_os("FLEMMAD").map_or_else(
                || PathBuf::from(env!("CARGO_BIN_EXE_flemmad")),
                PathBuf::from,
            ),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |name: &str| -> usize {
                args.next()
                    .and_then(|value| value.parse().ok())
                    .unwrap_or_else(|| panic!("{name} takes a number"))
            };
            match arg.as_str() {
                "--turns" => options.turns = number("--turns"),
                "--chats" => options.chats = number("--chats").max(1),
                "--every" => options.every = number("--every").max(1),
                "--reply-bytes" => options.reply_bytes = number("--reply-bytes"),
                "--at-once" => options.at_once = true,
                "--disk-load" => options.disk_load = true,
                "--pace" => options.pace = number("--pace") as u64,
                "--via" => match args.next().as_deref() {
                    Some("cli") => options.cli = true,
                    Some("rpc") => options.cli = false,
                    _ => panic!("--via takes `cli` or `rpc`"),
                },
                // What `cargo bench` passes to every bench.
                "--bench" => {}
                other => panic!(
                    "unknown argument `{other}`; known: --turns N, --chats K, --every N, --reply-bytes B, --via cli|rpc, --at-once, --pace B, --disk-load"
                ),
            }
        }
        options
    }
}

/// The daemon's memory and what else grows with leaks.
#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kib: u64,
    anon_kib: u64,
    threads: u64,
    fds: u64,
}

impl Sample {
    fn of(pid: u32) -> Self {
        let field = |text: &str, name: &str| -> u64 {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let rollup =
            std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        Sample {
            rss_kib: field(&status, "VmRSS:"),
            anon_kib: field(&rollup, "Anonymous:"),
            threads: field(&status, "Threads:"),
            fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64),
        }
    }
}

/// A line-delimited JSON-RPC client of `rpc.sock`.
struct Rpc {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    stops: Vec<Value>,
}

impl Rpc {
    fn connect(socket: &Path) -> std::io::Result<Self> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            next_id: 1,
            stops: Vec::new(),
        })
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        let read = self.reader.read_line(&mut line).expect("an answer in time");
        assert!(read > 0, "rpc.sock closed (did the daemon die?)");
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.writer, "{request}").unwrap();
        loop {
            let message = self.read();
            if message["method"] == "flemma/event" {
                if message["params"]["name"] == "engine:stopped" {
                    self.stops.push(message["params"].clone());
                }
            } else if message["id"] == id {
                return message;
            }
        }
    }

    /// The next `engine:stopped` event.
    fn stopped(&mut self) -> Value {
        if !self.stops.is_empty() {
            return self.stops.remove(0);
        }
        loop {
            let message = self.read();
            if message["method"] == "flemma/event" && message["params"]["name"] == "engine:stopped"
            {
                return message["params"].clone();
            }
        }
    }
}

/// Another program loading the disk: 64 KiB written and fsynced in a loop.
struct DiskLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl DiskLoad {
    fn start(dir: &Path) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let path = dir.join("disk-load.bin");
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut file = std::fs::File::create(&path).unwrap();
            let block = vec![7u8; 64 * 1024];
            let mut syncs = 0;
            while !flag.load(Ordering::Relaxed) {
                file.write_all(&block).unwrap();
                file.sync_data().unwrap();
                syncs += 1;
                if syncs % 256 == 0 {
                    file.set_len(0).unwrap();
                    std::io::Seek::rewind(&mut file).unwrap();
                }
            }
            let _ = std::fs::remove_file(&path);
            syncs
        });
        DiskLoad { stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

struct Daemon {
    child: Child,
}

impl Drop for Daemon {
    /// SIGTERM first (`SOAK_STOP_SIGNAL` names another: `USR1` ends a daemon under a heap
    /// profiler without its clean shutdown, so the profile's end shows what was still held).
    fn drop(&mut self) {
        let signal = std::env::var("SOAK_STOP_SIGNAL").unwrap_or_else(|_| "TERM".to_owned());
        let _ = Command::new("kill")
            .args(["-s", &signal, &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    let options = Options::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let dir = tempfile::tempdir().unwrap();
    let chats: Vec<PathBuf> = (0..options.chats)
        .map(|n| dir.path().join(format!("soak{n:05}.chat")))
        .collect();
    for chat in &chats {
        std::fs::write(chat, QUESTION).unwrap();
    }
    for sub in ["config", "run", "state", "cache"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let flemmad = |dir: &Path| {
        let mut command = Command::new(&options.flemmad);
        command
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("XDG_RUNTIME_DIR", dir.join("run"))
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("CODEX_HOME", dir.join("codex-home"))
            .env("ANTHROPIC_BASE_URL", &base)
            .env("ANTHROPIC_API_KEY", "sk-ant-soak")
            .env("PATH", "/usr/bin:/bin")
            .env_remove("FLEMMA_CONFIG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    };
    let daemon = Daemon {
        child: flemmad(dir.path()).arg("serve").spawn().unwrap(),
    };
    let pid = daemon.child.id();
    let socket = dir.path().join("run/flemma/rpc.sock");
    let start = Instant::now();
    let mut rpc = loop {
        if let Ok(mut rpc) = Rpc::connect(&socket)
            && rpc.call("flemma/ping", Value::Null)["result"] == "pong"
        {
            break rpc;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the daemon never answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        rpc.call("flemma/subscribe", Value::Null)["result"]["subscribed"],
        true
    );
    std::thread::sleep(Duration::from_millis(500));
    let idle_before = Sample::of(pid);
    println!(
        "flemmad: {}\nturns: {}, chats: {}, reply: {} bytes\nidle before: RSS {} KiB, anonymous {} KiB, {} threads, {} fds",
        options.flemmad.display(),
        options.turns,
        options.chats,
        options.reply_bytes,
        idle_before.rss_kib,
        idle_before.anon_kib,
        idle_before.threads,
        idle_before.fds
    );
    println!(
        "{:>7} {:>10} {:>10} {:>8} {:>5} {:>8}",
        "turn", "RSS KiB", "anon KiB", "threads", "fds", "s"
    );
    let word = "word ";
    let reply = word.repeat(options.reply_bytes.div_ceil(word.len()).max(1));
    let began = Instant::now();
    let mut samples: Vec<(usize, Sample)> = Vec::new();
    let load = options.disk_load.then(|| DiskLoad::start(dir.path()));
    let mut rounds = Vec::new();
    for turn in 1..=options.turns {
        if options.at_once {
            let round = Instant::now();
            for chat in &chats {
                std::fs::write(chat, QUESTION).unwrap();
                mock.push(Turn::text(reply.clone()).bytes_per_sec(options.pace));
            }
            for chat in &chats {
                let answer = rpc.call("flemma/send", json!({"uri": chat.display().to_string()}));
                assert!(answer["result"].is_object(), "turn {turn}: {answer}");
            }
            for _ in &chats {
                let stopped = rpc.stopped();
                assert_eq!(stopped["data"]["reason"], "idle", "turn {turn}: {stopped}");
            }
            let took = round.elapsed().as_secs_f64();
            rounds.push(took);
            println!("turn {turn}: {} chats at once in {took:.2} s", chats.len());
            continue;
        }
        let chat = &chats[(turn - 1) % chats.len()];
        std::fs::write(chat, QUESTION).unwrap();
        mock.push(Turn::text(reply.clone()));
        if options.cli {
            let status = flemmad(dir.path()).arg("send").arg(chat).status().unwrap();
            assert!(status.success(), "turn {turn}: flemmad send: {status}");
        } else {
            let answer = rpc.call("flemma/send", json!({"uri": chat.display().to_string()}));
            assert!(answer["result"].is_object(), "turn {turn}: {answer}");
        }
        let stopped = rpc.stopped();
        assert_eq!(stopped["data"]["reason"], "idle", "turn {turn}: {stopped}");
        if turn % 1000 == 0 {
            mock.clear_requests();
        }
        if turn % options.every == 0 || turn == options.turns {
            let sample = Sample::of(pid);
            println!(
                "{turn:>7} {:>10} {:>10} {:>8} {:>5} {:>8.1}",
                sample.rss_kib,
                sample.anon_kib,
                sample.threads,
                sample.fds,
                began.elapsed().as_secs_f64()
            );
            samples.push((turn, sample));
        }
    }
    if let Some(load) = load {
        println!("disk load: {} fsyncs meanwhile", load.stop());
    }
    if !rounds.is_empty() {
        let mean = rounds.iter().sum::<f64>() / rounds.len() as f64;
        let max = rounds.iter().copied().fold(0.0, f64::max);
        println!(
            "{} chats at once: mean {mean:.2} s, max {max:.2} s a turn",
            chats.len()
        );
    }
    let text = std::fs::read_to_string(&chats[0]).unwrap();
    assert!(
        text.contains("@Assistant:"),
        "the last reply is written:\n{text}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let idle_after = Sample::of(pid);
    let warm = options.turns / 10;
    let fitted: Vec<(f64, f64, f64)> = samples
        .iter()
        .filter(|(turn, _)| *turn >= warm)
        .map(|(turn, s)| (*turn as f64, s.rss_kib as f64, s.anon_kib as f64))
        .collect();
    let slope = |y: fn(&(f64, f64, f64)) -> f64| -> f64 {
        let n = fitted.len() as f64;
        if n < 2.0 {
            return f64::NAN;
        }
        let mean_x = fitted.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = fitted.iter().map(y).sum::<f64>() / n;
        let covariance: f64 = fitted
            .iter()
            .map(|p| (p.0 - mean_x) * (y(p) - mean_y))
            .sum();
        let variance: f64 = fitted.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        covariance / variance
    };
    println!(
        "growth after turn {warm}: RSS {:.0} B/turn, anonymous {:.0} B/turn",
        slope(|p| p.1) * 1024.0,
        slope(|p| p.2) * 1024.0
    );
    println!(
        "idle after: RSS {} KiB ({:+} KiB), anonymous {} KiB ({:+} KiB), {} threads, {} fds; {:.1} turns/s",
        idle_after.rss_kib,
        idle_after.rss_kib as i64 - idle_before.rss_kib as i64,
        idle_after.anon_kib,
        idle_after.anon_kib as i64 - idle_before.anon_kib as i64,
        idle_after.threads,
        idle_after.fds,
        options.turns as f64 / began.elapsed().as_secs_f64()
    );
    drop(daemon);
}
