//! Issue 18, "a sandbox that holds": each finding of the security review, replayed through the
//! binary (`flemmad send` against `flemma-mock-provider`, the model's tools running for real,
//! bwrap where it is usable — CI installs it), must now fail for the attacker:
//!
//! 1. a sandboxed `bash` cannot see the daemon's runtime directory (`rpc.sock`);
//! 2. a store folder shipped as a symlink is refused (nothing written through it);
//! 4. a sandboxed command cannot type into the user's terminal (TIOCSTI, under `script`);
//! 5. `write` cannot be raced into a swapped symlink; `send.lock` is never followed;
//! 6. tools see no provider key, have no network unless asked (and then ask), cannot write
//!    `.git`, do not read outside the project without asking; `fetch_content` refuses loopback.
//!
//! Canaries live outside `/tmp` (the default policy makes `/tmp` writable): in a fake home
//! outside `/tmp` (`common::outside_tmp`), which is also the `HOME` the tools see (never the developer's).
//! Network checks use loopback listeners only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common::{Chat, chat, flemmad_command, read, result_of, stderr};

const SECRET_KEY: &str = "sk-ant-test-secret";

/// A home outside `/tmp` holding the canaries and the files a model must not reach.
struct FakeHome {
    dir: tempfile::TempDir,
}

impl FakeHome {
    fn new() -> Self {
        let dir = crate::common::outside_tmp("flemmad-home-");
        std::fs::create_dir_all(dir.path().join(".ssh")).unwrap();
        std::fs::write(
            dir.path().join(".ssh/id_rsa"),
            "-----BEGIN PRIVATE KEY----- canary-private-key\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("canaries")).unwrap();
        Self { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn canaries(&self) -> PathBuf {
        self.dir.path().join("canaries")
    }
    /// What appeared in the canary directory.
    fn canaries_found(&self) -> Vec<String> {
        std::fs::read_dir(self.canaries())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

/// Whether bwrap runs here; when not, says the test is skipped (CI installs it).
fn bwrap_usable(test: &str) -> bool {
    match flemma_tools::sandbox::bwrap_availability() {
        Ok(_) => true,
        Err(why) => {
            eprintln!("skipped {test}: the process sandbox is unusable here ({why})");
            false
        }
    }
}

/// A chat for anthropic through the mock; `extra` is merged into the `flemma` frontmatter.
fn agent_chat(extra: Value, body: &str) -> Chat {
    let mut flemma = json!({"provider": "anthropic", "model": "claude-sonnet-4-5",
        "tools": {"autopilot": {"resume_delay": 50}}});
    merge(&mut flemma, extra);
    let frontmatter = json!({ "flemma": flemma });
    chat(&format!("```json\n{frontmatter}\n```\n@You:\n{body}\n"))
}

fn merge(into: &mut Value, extra: Value) {
    match (into, extra) {
        (Value::Object(into), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, extra) => *into = extra,
    }
}

/// Writes the user's own configuration (trusted, unlike a chat's frontmatter).
fn user_config(chat: &Chat, toml: &str) {
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

/// `flemmad` with the fake home as `HOME` (and its `.cache`), every provider at the mock.
fn command(chat: &Chat, home: &FakeHome, base: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = flemmad_command(chat, base);
    command
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .args(args);
    command
}

/// `flemmad send <chat>`, through a daemon when one answers (`daemon`) or in-process.
fn send(chat: &Chat, home: &FakeHome, base: &str, daemon: bool) -> tokio::process::Command {
    let mut command = command(chat, home, base, &["send"]);
    if !daemon {
        command.arg("--no-daemon");
    }
    command.arg(&chat.path);
    command
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

fn bash(id: &str, command: &str) -> Turn {
    Turn::default().tool_call_with_id(
        "bash",
        id,
        json!({"label": "run", "command": command, "timeout": null}),
    )
}

/// A loopback listener counting the connections that reach it.
fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut stream = stream;
            // The request first (answering before it arrives confuses a client).
            let mut reader = std::io::BufReader::new(&stream);
            let mut line = String::new();
            while std::io::BufRead::read_line(&mut reader, &mut line).is_ok_and(|n| n > 0)
                && line != "\r\n"
            {
                line.clear();
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 30\r\nConnection: close\r\n\r\n<html><body>hi</body></html>\r\n",
            );
        }
    });
    (port, count)
}

/// Finding 1 with `flemmad serve` running, and finding 6 (the network, the keys) for the
/// commands it runs: the sandboxed `bash` the sandbox approved by itself does not see the
/// daemon's runtime directory nor `~/.ssh`, its environment holds no provider key nor socket
/// path, and it has no network (a loopback listener of the host counts nothing).
#[tokio::test]
async fn a_sandboxed_command_sees_no_daemon_no_key_and_no_network() {
    if !bwrap_usable("a_sandboxed_command_sees_no_daemon_no_key_and_no_network") {
        return;
    }
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Look around.");
    let runtime = chat.path.parent().unwrap().join("run");
    std::fs::create_dir(&runtime).unwrap();
    let mut daemon = command(&chat, &home, &base, &["serve"]);
    let _daemon = daemon
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rpc = runtime.join("flemma/rpc.sock");
    for _ in 0..200 {
        if rpc.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rpc.exists(), "the daemon serves {}", rpc.display());
    let (port, connections) = counting_listener();
    let probe = format!(
        "for p in {run}/flemma/rpc.sock {run}/flemma/lsp.sock {run}/flemma/daemon.pid; do \
           if [ -e \"$p\" ]; then echo \"VISIBLE $p\"; else echo \"HIDDEN $p\"; fi; done; \
         echo \"KEYS:$(env | grep -c {SECRET_KEY})\"; \
         echo \"SSH:$(cat \"$HOME/.ssh/id_rsa\" 2>&1 | grep -c canary-private-key)\"; \
         echo \"RUNTIME:${{XDG_RUNTIME_DIR:-unset}}\"; \
         if (echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo NET:CONNECTED; else echo NET:REFUSED; fi",
        run = runtime.display()
    );
    mock.push(bash("t1", &probe));
    mock.push(Turn::text("Done."));
    // Through the daemon (it answers on rpc.sock): its tools run the command.
    let out = run(send(&chat, &home, &base, true)).await;
    let text = read(&chat.path);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let result = result_of(&text, "t1");
    assert!(
        !result.contains("VISIBLE"),
        "the daemon's files are hidden:\n{result}"
    );
    assert_eq!(result.matches("HIDDEN").count(), 3, "{result}");
    assert!(result.contains("KEYS:0"), "{result}");
    assert!(
        result.contains("SSH:0"),
        "the home's keys are hidden: {result}"
    );
    assert!(result.contains("RUNTIME:unset"), "{result}");
    assert!(result.contains("NET:REFUSED"), "{result}");
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "nothing left the sandbox"
    );
}

/// Finding 6, keys: the environment of every tool process lacks the provider keys, with or
/// without a process sandbox (here `bash` is approved by the chat's list, not by the sandbox).
#[tokio::test]
async fn the_provider_key_never_reaches_a_tool() {
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Print the environment.");
    user_config(
        &chat,
        "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n",
    );
    mock.push(bash(
        "t1",
        "env; echo \"DONE key=${ANTHROPIC_API_KEY:-none}\"",
    ));
    mock.push(Turn::text("Done."));
    let out = run(send(&chat, &home, &base, false)).await;
    let text = read(&chat.path);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let result = result_of(&text, "t1");
    assert!(result.contains("DONE key=none"), "{result}");
    assert!(
        !text.contains(SECRET_KEY),
        "the key reached the tool:\n{text}"
    );
    assert!(
        !result.contains("ANTHROPIC") && !result.contains("XDG_RUNTIME_DIR"),
        "{result}"
    );
    for request in mock.requests() {
        assert!(!request.raw_body.contains(SECRET_KEY));
    }
}

/// Finding 6, network: with `sandbox.policy.network = true` (the user's own config) a
/// sandboxed `bash` is no longer approved by the sandbox alone: the call waits for approval.
#[tokio::test]
async fn with_the_network_on_a_sandboxed_command_asks_first() {
    if !bwrap_usable("with_the_network_on_a_sandboxed_command_asks_first") {
        return;
    }
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Fetch something.");
    user_config(&chat, "[sandbox.policy]\nnetwork = true\n");
    mock.push(bash("t1", "echo would use the network"));
    let out = run(send(&chat, &home, &base, false)).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("`bash` (t1)"), "{}", stderr(&out));
    assert!(read(&chat.path).contains("**Tool Result:** `t1` (pending)"));
}

/// Finding 2: a repository ships `.flemma/<chat>` as a symlink to somewhere in the home. The
/// send is refused with a clear error before anything is asked or written; so is running a tool
/// for the chat (`flemmad tools run`, the same setup the engine uses). The same for `.flemma`
/// itself being the link.
#[tokio::test]
async fn a_store_folder_that_is_a_symlink_is_refused() {
    let home = FakeHome::new();
    for link_at in [".flemma/talk.chat", ".flemma"] {
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let chat = agent_chat(json!({}), "Write a file.");
        let dir = chat.path.parent().unwrap();
        let link = dir.join(link_at);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(home.canaries(), &link).unwrap();
        mock.push(Turn::default().tool_call_with_id(
            "write",
            "w1",
            json!({"label": "w", "path": ".flemma/talk.chat/bashrc_e2e", "content": "pwned"}),
        ));
        mock.push(Turn::text("Done."));
        let before = read(&chat.path);
        let out = run(send(&chat, &home, &base, false)).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
        assert_eq!(read(&chat.path), before);
        assert!(mock.requests().is_empty(), "nothing was asked");
        let tools = run(command(
            &chat,
            &home,
            &base,
            &[
                "tools",
                "--chat",
                chat.path.to_str().unwrap(),
                "run",
                "bash",
                r#"{"label": "x", "command": "touch \"$FLEMMA_TOOLS_STORE_PATH/canary\"", "timeout": null}"#,
            ],
        ))
        .await;
        assert!(!tools.status.success(), "{}", stderr(&tools));
        assert!(
            stderr(&tools).contains("symbolic link"),
            "{}",
            stderr(&tools)
        );
        assert!(
            home.canaries_found().is_empty(),
            "{:?}",
            home.canaries_found()
        );
    }
}

/// Finding 6, `.git`: an auto-approved `write` to `.git/config` (`core.fsmonitor` runs code at
/// the next `git status`) is refused, and a sandboxed command cannot append to it either.
#[tokio::test]
async fn git_metadata_is_not_writable_by_tools() {
    let sandboxed = bwrap_usable("git_metadata_is_not_writable_by_tools (its bash part)");
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Configure git.");
    let git = chat.path.parent().unwrap().join(".git");
    std::fs::create_dir_all(&git).unwrap();
    let config = "[core]\n\trepositoryformatversion = 0\n";
    std::fs::write(git.join("config"), config).unwrap();
    let canary = home.canaries().join("fsmonitor");
    let mut turn = Turn::default().tool_call_with_id(
        "write",
        "w1",
        json!({"label": "w", "path": ".git/config",
               "content": format!("[core]\n\tfsmonitor = touch {}\n", canary.display())}),
    );
    if sandboxed {
        turn = turn.tool_call_with_id(
            "bash",
            "b1",
            json!({"label": "b", "command": "printf '[core]\\n\\tfsmonitor = x\\n' >> .git/config && echo APPENDED || echo REFUSED", "timeout": null}),
        );
    }
    mock.push(turn);
    mock.push(Turn::text("Done."));
    let out = run(send(&chat, &home, &base, false)).await;
    let text = read(&chat.path);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let write = result_of(&text, "w1");
    assert!(write.contains(".git"), "{write}");
    assert!(write.contains("git_writable"), "{write}");
    if sandboxed {
        assert!(result_of(&text, "b1").contains("REFUSED"), "{text}");
    }
    assert_eq!(std::fs::read_to_string(git.join("config")).unwrap(), config);
    assert!(!canary.exists());
}

/// Finding 6, reads: `$standard` approves `read` inside the project; `~/.ssh/id_rsa` is not
/// read without asking (the send stops for approval, the key reaches neither the chat nor the
/// provider).
#[tokio::test]
async fn reading_outside_the_project_asks_first() {
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Read things.");
    std::fs::write(
        chat.path.parent().unwrap().join("notes.txt"),
        "project notes\n",
    )
    .unwrap();
    let key = home.path().join(".ssh/id_rsa");
    mock.push(
        Turn::default()
            .tool_call_with_id(
                "read",
                "r1",
                json!({"label": "r", "path": "notes.txt", "offset": null, "limit": null}),
            )
            .tool_call_with_id(
                "read",
                "r2",
                json!({"label": "r", "path": key.display().to_string(), "offset": null, "limit": null}),
            )
            .tool_call_with_id(
                "grep",
                "g1",
                json!({"label": "g", "pattern": "PRIVATE", "path": home.path().display().to_string(), "glob": null, "limit": null}),
            ),
    );
    let out = run(send(&chat, &home, &base, false)).await;
    let text = read(&chat.path);
    assert_eq!(out.status.code(), Some(3), "{}\n{text}", stderr(&out));
    assert!(result_of(&text, "r1").contains("project notes"), "{text}");
    assert!(text.contains("**Tool Result:** `r2` (pending)"), "{text}");
    assert!(text.contains("**Tool Result:** `g1` (pending)"), "{text}");
    assert!(
        stderr(&out).contains("outside the project"),
        "{}",
        stderr(&out)
    );
    assert!(!text.contains("canary-private-key"));
    for request in mock.requests() {
        assert!(!request.raw_body.contains("canary-private-key"));
    }
}

/// How many writes race the swapper (the old check-then-write let one in every few dozen).
const WRITES: usize = 150;

/// Finding 5, `write`: a background job swaps a directory and a symlink to the home back and
/// forth while the model writes into it again and again; no write may land in the home.
#[tokio::test]
async fn write_cannot_be_raced_into_a_swapped_symlink() {
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Race.");
    user_config(
        &chat,
        "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\nmax_concurrent = 4\n",
    );
    // One process exchanging a real directory and a symlink to the home as fast as it can
    // (renameat2 RENAME_EXCHANGE: `sub` is always there, half the time a link; where the file
    // system cannot exchange, it removes and recreates them instead).
    let swapper = format!(
        "python3 -c \"{}\"",
        [
            "import ctypes, os, shutil, time",
            "libc = ctypes.CDLL(None, use_errno=True)",
            "os.makedirs('sub', exist_ok=True)",
            &format!("os.symlink('{}', 'alt')", home.canaries().display()),
            "end = time.time() + 4",
            "exchange = getattr(libc, 'renameat2', None)",
            "n = 0",
            "while time.time() < end:",
            "    n += 1",
            "    if exchange is not None and exchange(-100, b'sub', -100, b'alt', 2) == 0:",
            "        continue",
            "    exchange = None",
            "    for step in (lambda: shutil.rmtree('sub'), lambda: os.unlink('sub'), lambda: os.symlink(os.readlink('alt'), 'sub'), lambda: os.unlink('sub'), lambda: os.mkdir('sub')):",
            "        try:",
            "            step()",
            "        except OSError:",
            "            pass",
            "print('swaps', n, exchange is not None)",
        ]
        .join("\n")
    );
    mock.push(Turn::default().tool_call_with_id(
        "bash",
        "j1",
        json!({"label": "swap", "command": swapper, "timeout": null, "flemma.background": true}),
    ));
    // The swapper is running by the time the writes come.
    mock.push(bash("s1", "sleep 0.5"));
    let mut writes = Turn::default();
    for n in 0..WRITES {
        writes = writes.tool_call_with_id(
            "write",
            format!("w{n}"),
            json!({"label": "w", "path": "sub/pwned", "content": format!("pwned {n}")}),
        );
    }
    mock.push(writes);
    mock.push(Turn::text("Writes done."));
    mock.push(Turn::text("The job finished."));
    mock.push(Turn::text("Nothing more."));
    let out = run(send(&chat, &home, &base, false)).await;
    let text = read(&chat.path);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let written = text.matches("Created sub/pwned").count() + text.matches("Overwrote").count();
    let refused = text.matches("(error)").count();
    println!(
        "{WRITES} writes while the swapper ran: {written} written in the directory, {refused} refused; the swapper: {}",
        text.lines()
            .find(|l| l.starts_with("swaps "))
            .unwrap_or("no report")
    );
    assert!(
        home.canaries_found().is_empty(),
        "a write went through the link: {:?}",
        home.canaries_found()
    );
}

/// Finding 5, the driver lock: a lock that is a symlink is never followed (`flemmad cancel`
/// used to truncate its target), and one pointing at `/dev/zero` does not make `status` read
/// forever. (The lock now lives in flemmad's state folder, out of every tool's reach; a link
/// there could only come from another program.)
#[tokio::test]
async fn the_send_lock_is_never_followed() {
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "hello");
    let folder = chat.path.parent().unwrap().join("state/flemma/locks");
    std::fs::create_dir_all(&folder).unwrap();
    let key = ring::digest::digest(
        &ring::digest::SHA256,
        chat.path.as_os_str().as_encoded_bytes(),
    );
    let name: String = key.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let lock = folder.join(format!("{name}.lock"));
    let precious = home.canaries().join("precious");
    std::fs::write(&precious, "precious\n").unwrap();
    std::os::unix::fs::symlink(&precious, &lock).unwrap();
    let file = chat.path.to_str().unwrap();
    for args in [
        vec!["cancel", file],
        vec!["status", file],
        vec!["send", "--no-daemon", file],
    ] {
        let out = run(command(&chat, &home, &base, &args)).await;
        assert_eq!(
            std::fs::read_to_string(&precious).unwrap(),
            "precious\n",
            "{args:?}: {}",
            stderr(&out)
        );
        if args[0] == "send" {
            assert!(!out.status.success(), "{args:?}");
            assert!(
                stderr(&out).contains("symbolic link"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
    assert!(mock.requests().is_empty());
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &lock).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        command(&chat, &home, &base, &["status", file]).output(),
    )
    .await
    .expect("status ends although the lock points at /dev/zero")
    .unwrap();
    assert!(out.stdout.len() < 1_000_000, "{} bytes", out.stdout.len());
}

/// Finding 6, `fetch_content`: loopback is refused before any connection (a listener counts
/// nothing) unless the user's config allows private addresses.
#[tokio::test]
async fn fetch_content_does_not_reach_loopback() {
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let (port, connections) = counting_listener();
    let chat = agent_chat(json!({}), "Fetch.");
    user_config(
        &chat,
        "[tools]\nfetch_content = true\nauto_approve = [\"$standard\", \"+fetch_content\"]\n",
    );
    let fetch = |id: &str, url: String| {
        Turn::default().tool_call_with_id(
            "fetch_content",
            id,
            json!({"label": "f", "url": url, "output": null, "baseUrl": null,
                   "tables": null, "strikethrough": null, "taskList": null}),
        )
    };
    mock.push(fetch("f1", format!("http://127.0.0.1:{port}/")));
    mock.push(fetch("f2", format!("http://localhost:{port}/")));
    mock.push(Turn::text("Done."));
    let out = run(send(&chat, &home, &base, false)).await;
    let text = read(&chat.path);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    for id in ["f1", "f2"] {
        let result = result_of(&text, id);
        assert!(result.contains("loopback"), "{id}: {result}");
        assert!(result.contains("fetch_private_addresses"), "{id}: {result}");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

/// Finding 4: a sandboxed command pushes `touch <canary>` into the terminal's input queue with
/// TIOCSTI; bwrap's `--new-session` leaves it no controlling terminal. Run under `script` (a
/// real terminal); skipped where the kernel forbids TIOCSTI anyway (`dev.tty.legacy_tiocsti =
/// 0`) or where `script` or Python are missing.
#[tokio::test]
async fn a_sandboxed_command_cannot_type_into_the_terminal() {
    if !bwrap_usable("a_sandboxed_command_cannot_type_into_the_terminal") {
        return;
    }
    if std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").is_ok_and(|v| v.trim() == "0") {
        eprintln!(
            "skipped a_sandboxed_command_cannot_type_into_the_terminal: this kernel forbids TIOCSTI (dev.tty.legacy_tiocsti = 0)"
        );
        return;
    }
    for program in ["script", "python3"] {
        if !flemma_tools::process::on_path(program) {
            eprintln!(
                "skipped a_sandboxed_command_cannot_type_into_the_terminal: `{program}` is not installed"
            );
            return;
        }
    }
    let home = FakeHome::new();
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = agent_chat(json!({}), "Type.");
    let inject = "import fcntl, os, termios\n\
fd = os.open('/dev/tty', os.O_RDWR)\n\
for c in b'INJECTED\\n':\n    fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n";
    let script_file = home.path().join("inject.py");
    std::fs::write(&script_file, inject).unwrap();
    mock.push(bash(
        "t1",
        &format!(
            "python3 {} && echo PUSHED || echo NO_TERMINAL",
            script_file.display()
        ),
    ));
    mock.push(Turn::text("Done."));
    // The control: without a sandbox, the same script does reach the terminal here (else the
    // kernel forbids it and the test says so).
    let control = in_terminal(
        &format!(
            "python3 {} && read -t 2 line && echo \"GOT:$line\"",
            script_file.display()
        ),
        &[],
    );
    if !control.contains("GOT:INJECTED") {
        eprintln!(
            "skipped a_sandboxed_command_cannot_type_into_the_terminal: TIOCSTI does not work here even unsandboxed ({})",
            control.trim()
        );
        return;
    }
    let line = format!(
        "{} send --no-daemon {}; read -t 2 line; echo \"GOT:$line\"",
        env!("CARGO_BIN_EXE_flemmad"),
        chat.path.display()
    );
    let dir = chat.path.parent().unwrap();
    let mut env: Vec<(String, String)> = vec![
        (
            "XDG_CONFIG_HOME".into(),
            chat.config_home.display().to_string(),
        ),
        (
            "XDG_RUNTIME_DIR".into(),
            dir.join("run").display().to_string(),
        ),
        (
            "XDG_STATE_HOME".into(),
            dir.join("state").display().to_string(),
        ),
        ("HOME".into(), home.path().display().to_string()),
        (
            "XDG_CACHE_HOME".into(),
            home.path().join(".cache").display().to_string(),
        ),
        ("PATH".into(), "/usr/bin:/bin".into()),
    ];
    env.extend(
        crate::common::provider_env(&base)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v)),
    );
    let printed = tokio::task::spawn_blocking(move || in_terminal(&line, &env))
        .await
        .unwrap();
    let text = read(&chat.path);
    assert!(
        result_of(&text, "t1").contains("NO_TERMINAL"),
        "{text}\n{printed}"
    );
    assert!(!printed.contains("GOT:INJECTED"), "{printed}");
}

/// Runs `line` with `sh` in a terminal (`script`), its input kept open (and empty) until it
/// ends, and returns what the terminal showed.
fn in_terminal(line: &str, env: &[(String, String)]) -> String {
    let mut child = std::process::Command::new("script")
        .args(["-qec", line, "/dev/null"])
        .env_remove("FLEMMA_CONFIG")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Held open: at the end of its input `script` would type an end-of-file into the terminal.
    let input = child.stdin.take();
    let mut printed = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut out, &mut printed);
    }
    let _ = child.wait();
    drop(input);
    printed
}
