//! The daemon's file watcher, through `flemmad serve`: another program appends to a chat
//! while the daemon streams a reply into it (both texts kept, and the latency from the
//! foreign write to the daemon's merged write measured), an editor's atomic save replaces the
//! file mid-stream (merged), the file is deleted mid-stream (the daemon stops writing it and
//! says so; nothing is recreated). `flemmad events` is the event source throughout. Real
//! processes, real files in temp dirs, `flemma-mock-provider` over real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common::{self, Chat};

const TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}
```
"#;

/// A reply long enough to stream for a while at `bytes_per_sec`.
fn story(words: usize) -> String {
    (0..words)
        .map(|n| format!("word{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `flemmad` with the chat's own runtime, state and config directories and every provider
/// pointed at `base`.
pub(crate) fn flemmad(chat: &Chat, base: &str) -> Command {
    let dir = chat.path.parent().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_flemmad"));
    command
        .env("XDG_CONFIG_HOME", &chat.config_home)
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("FLEMMA_CONFIG")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET")
        .env("PATH", "/usr/bin:/bin");
    for (key, value) in common::provider_env(base) {
        command.env(key, value);
    }
    command
}

/// A running `flemmad serve` (killed on drop).
pub(crate) struct Served {
    child: Child,
    pub rpc_socket: PathBuf,
    log: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    pub fn start(chat: &Chat, base: &str, env: &[(&str, &str)]) -> Self {
        let dir = chat.path.parent().unwrap();
        std::fs::create_dir_all(dir.join("run")).unwrap();
        let child = flemmad(chat, base)
            .arg("serve")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let served = Self {
            child,
            rpc_socket: dir.join("run/flemma/rpc.sock"),
            log: dir.join("state/flemma/flemmad.log"),
        };
        let deadline = Instant::now() + TIMEOUT;
        while UnixStream::connect(&served.rpc_socket).is_err()
            || served.call("flemma/ping", Value::Null)["result"] != "pong"
        {
            assert!(Instant::now() < deadline, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        served
    }

    /// One request on a connection of its own; the whole answer.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let mut stream = UnixStream::connect(&self.rpc_socket).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        writeln!(stream, "{request}").unwrap();
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "rpc.sock closed");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == 1 {
                return message;
            }
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `flemmad events`, its JSON lines read on a thread.
pub(crate) struct Events {
    child: Child,
    lines: mpsc::Receiver<Value>,
    pub seen: Vec<Value>,
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Events {
    /// Starts `flemmad events` and waits until the daemon counts it as a subscriber.
    pub fn start(chat: &Chat, base: &str, daemon: &Served) -> Self {
        let mut child = flemmad(chat, base)
            .arg("events")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Every line is one JSON value: a line that is not is a failure of the test.
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("`flemmad events` printed {line:?}: {e}"));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + TIMEOUT;
        while daemon.call("flemma/status", Value::Null)["result"]["eventSubscribers"] != 1 {
            assert!(
                Instant::now() < deadline,
                "`flemmad events` never subscribed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for an event named `name`; returns it.
    pub fn wait(&mut self, name: &str) -> Value {
        self.wait_or(name, String::new)
    }

    /// [`Events::wait`], with `context` in the failure message.
    pub fn wait_or(&mut self, name: &str, context: impl Fn() -> String) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no {name} event; saw {:?}\n{}",
                    self.seen.iter().map(|e| &e["name"]).collect::<Vec<_>>(),
                    context()
                )
            });
            self.seen.push(event.clone());
            if event["name"] == name {
                return event;
            }
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn wait_for(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let text = read(path);
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never appeared in\n{text}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Appends `text` the way a program does (in place), then waits for the daemon's next write
/// of the file that holds it (the daemon writes in place too: the text changes after the
/// append); returns how long that took.
fn append_and_time_the_merge(path: &Path, text: &str) -> Duration {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
    drop(file);
    let written = Instant::now();
    let ours = read(path);
    let deadline = written + TIMEOUT;
    loop {
        let now = read(path);
        if now != ours && now.contains(text.trim()) {
            return written.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "the daemon never wrote the file again"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A chat whose configuration writes coalesced edits only once a second, so that a merged
/// write sooner than that is the watcher's doing.
fn slow_writing_chat() -> Chat {
    let chat = common::chat(&format!("{FRONTMATTER}@You:\nTell me a story.\n"));
    let config = chat.config_home.join("flemma");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[editing]\ncoalesce_ms = 1000\n",
    )
    .unwrap();
    chat
}

/// Streams a long reply into the closed chat and appends to it three times meanwhile; returns
/// the final text, the reply, the three merge latencies and the daemon's log.
fn appends_while_streaming(env: &[(&str, &str)]) -> (String, String, Vec<Duration>, String) {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let chat = slow_writing_chat();
    let daemon = Served::start(&chat, &base, env);
    let mut events = Events::start(&chat, &base, &daemon);
    let reply = story(250);
    mock.push(Turn::text(reply.clone()).bytes_per_sec(5000));
    let path = chat.path.display().to_string();
    let answer = daemon.call("flemma/send", json!({"uri": path}));
    assert!(answer["result"].is_object(), "{answer}");
    wait_for(&chat.path, "word1 ");
    let mut latencies = Vec::new();
    for n in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        let latency =
            append_and_time_the_merge(&chat.path, &format!("\nAPPENDED {n} BY ANOTHER PROGRAM\n"));
        latencies.push(latency);
    }
    let stopped = events.wait_or("engine:stopped", || {
        format!("{}\n{}", read(&chat.path), daemon.log())
    });
    assert_eq!(
        stopped["data"]["reason"],
        "idle",
        "{stopped}\n{}",
        daemon.log()
    );
    assert_eq!(stopped["uri"], format!("file://{path}"));
    let text = read(&chat.path);
    let log = daemon.log();
    drop(events);
    drop(daemon);
    runtime.block_on(mock.shutdown());
    (text, reply, latencies, log)
}

/// Every word of `reply` in `text`, in order (another program's text may sit between them).
fn words_in_order(text: &str, reply: &str) {
    let mut rest = text;
    for word in reply.split(' ') {
        let at = rest
            .find(&format!("{word} "))
            .or_else(|| rest.find(word))
            .unwrap_or_else(|| panic!("{word} missing (or out of order) in\n{text}"));
        rest = &rest[at + word.len()..];
    }
}

#[test]
fn an_append_by_another_program_mid_stream_is_merged_at_once_and_both_texts_kept() {
    let (text, reply, latencies, log) = appends_while_streaming(&[]);
    assert!(!log.contains("polled"), "{log}");
    words_in_order(&text, &reply);
    for n in 0..3 {
        assert!(
            text.contains(&format!("APPENDED {n} BY ANOTHER PROGRAM")),
            "{text}"
        );
    }
    assert!(text.starts_with(&format!("{FRONTMATTER}@You:\nTell me a story.\n")));
    eprintln!("foreign write -> merged write, watched: {latencies:?}");
    // Edits are coalesced for a second: a merge sooner than that is the watcher's doing.
    for latency in &latencies {
        assert!(*latency < Duration::from_millis(400), "{latencies:?}");
    }
}

#[test]
fn without_the_watcher_the_poll_still_merges_an_append() {
    let (text, reply, latencies, log) = appends_while_streaming(&[("FLEMMAD_WATCH", "poll")]);
    // Said once, however many times a driver started.
    assert_eq!(log.matches("polled, not watched").count(), 1, "{log}");
    words_in_order(&text, &reply);
    for n in 0..3 {
        assert!(
            text.contains(&format!("APPENDED {n} BY ANOTHER PROGRAM")),
            "{text}"
        );
    }
    eprintln!("foreign write -> merged write, polled: {latencies:?}");
}

#[test]
fn an_atomic_save_replacing_the_file_mid_stream_is_merged() {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let chat = slow_writing_chat();
    let daemon = Served::start(&chat, &base, &[]);
    let mut events = Events::start(&chat, &base, &daemon);
    let reply = story(250);
    mock.push(Turn::text(reply.clone()).bytes_per_sec(5000));
    let path = chat.path.display().to_string();
    daemon.call("flemma/send", json!({"uri": path}));
    wait_for(&chat.path, "word1 ");
    std::thread::sleep(Duration::from_millis(200));
    // An editor saves: the whole text, edited, to a temporary file renamed over the chat;
    // then vim's way: the chat renamed to a backup, the text written anew.
    let saved =
        read(&chat.path).replace("Tell me a story.", "Tell me a story (saved by an editor).");
    let tmp = chat.path.with_file_name(".talk.chat.tmp");
    std::fs::write(&tmp, &saved).unwrap();
    std::fs::rename(&tmp, &chat.path).unwrap();
    wait_for(&chat.path, "word60 ");
    let backup = chat.path.with_file_name("talk.chat~");
    let saved = read(&chat.path).replace("@You:\n", "@You:\nFirst line from vim.\n");
    std::fs::rename(&chat.path, &backup).unwrap();
    std::fs::write(&chat.path, &saved).unwrap();
    std::fs::remove_file(&backup).unwrap();
    let stopped = events.wait("engine:stopped");
    assert_eq!(
        stopped["data"]["reason"],
        "idle",
        "{stopped}\n{}",
        daemon.log()
    );
    let text = read(&chat.path);
    assert!(
        text.contains("@You:\nFirst line from vim.\nTell me a story (saved by an editor).\n"),
        "{text}"
    );
    assert!(text.contains(&reply), "the reply is whole:\n{text}");
    drop(events);
    drop(daemon);
    runtime.block_on(mock.shutdown());
}

#[test]
fn a_file_deleted_mid_stream_is_not_recreated_and_the_daemon_says_so() {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let chat = slow_writing_chat();
    let daemon = Served::start(&chat, &base, &[]);
    let mut events = Events::start(&chat, &base, &daemon);
    mock.push(Turn::text(story(400)).bytes_per_sec(500));
    let path = chat.path.display().to_string();
    daemon.call("flemma/send", json!({"uri": path}));
    wait_for(&chat.path, "word1 ");
    std::fs::remove_file(&chat.path).unwrap();
    let deleted = Instant::now();
    let stopped = events.wait("engine:stopped");
    let noticed = deleted.elapsed();
    assert_eq!(stopped["data"]["reason"], "error", "{stopped}");
    let message = stopped["data"]["message"].as_str().unwrap();
    assert!(message.contains("is gone"), "{message}");
    assert!(message.contains("did not recreate it"), "{message}");
    // Seen through the watcher, not at the next coalesced write (a second later).
    assert!(noticed < Duration::from_millis(700), "{noticed:?}");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!chat.path.exists(), "the daemon recreated the deleted file");
    assert!(daemon.log().contains("is gone"), "{}", daemon.log());
    // The daemon goes on: another chat in the same directory is served.
    let other = chat.path.with_file_name("other.chat");
    std::fs::write(&other, format!("{FRONTMATTER}@You:\nHi.\n")).unwrap();
    mock.push(Turn::text("Hello again."));
    daemon.call("flemma/send", json!({"uri": other.display().to_string()}));
    assert_eq!(events.wait("engine:stopped")["data"]["reason"], "idle");
    assert!(read(&other).contains("@Assistant:\nHello again."));
    drop(events);
    drop(daemon);
    runtime.block_on(mock.shutdown());
}

#[test]
fn flemmad_events_prints_the_engine_events_of_a_send_as_json_lines() {
    let runtime = crate::common::one_worker_runtime();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let chat = common::chat(&format!("{FRONTMATTER}@You:\nHi.\n"));
    let daemon = Served::start(&chat, &base, &[]);
    let mut events = Events::start(&chat, &base, &daemon);
    mock.push(Turn::text("Hello."));
    let path = chat.path.display().to_string();
    daemon.call("flemma/send", json!({"uri": path}));
    let stopped = events.wait("engine:stopped");
    assert_eq!(stopped["data"], json!({"reason": "idle"}));
    let uri = format!("file://{path}");
    let names: Vec<&str> = events
        .seen
        .iter()
        .map(|event| event["name"].as_str().unwrap())
        .collect();
    // What the driver's setup found, then the request (nothing else before it).
    assert_eq!(names.first(), Some(&"engine:setup"), "{names:?}");
    assert_eq!(names.get(1), Some(&"request:sending"), "{names:?}");
    assert!(names.contains(&"request:finished"), "{names:?}");
    for event in &events.seen {
        // `{name, uri, data}`: every one an event of this document (no reply text: that
        // needs the `text` filter).
        assert_eq!(event["uri"], uri, "{event}");
        assert!(event.get("data").is_some(), "{event}");
        assert_ne!(event["name"], "request:text", "{event}");
    }
    drop(events);
    drop(daemon);
    runtime.block_on(mock.shutdown());
}
