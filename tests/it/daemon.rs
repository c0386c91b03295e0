//! End-to-end tests of `flemmad serve` (the real binary as a process, its runtime directory in
//! a temp dir): sockets and permissions, single instance, stale sockets, LSP sessions over
//! `lsp.sock`, the `flemmad lsp` proxy, `rpc.sock`, events, shutdown, other uids refused,
//! `install-service --print`; the two sockets as one command surface (the same requests get
//! the same answers, errors included), and `--config` for the LSP sessions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_flemmad");
const TIMEOUT: Duration = Duration::from_secs(10);

/// A temp home for one daemon: `run/` is XDG_RUNTIME_DIR, `state/` XDG_STATE_HOME.
struct Home {
    root: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("run")).unwrap();
        Self { root }
    }
    fn runtime(&self) -> PathBuf {
        self.root.path().join("run")
    }
    fn dir(&self) -> PathBuf {
        self.runtime().join("flemma")
    }
    fn socket(&self, name: &str) -> PathBuf {
        self.dir().join(name)
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("state/flemma/flemmad.log"))
            .unwrap_or_default()
    }
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env("XDG_RUNTIME_DIR", self.runtime())
            .env("XDG_STATE_HOME", self.root.path().join("state"))
            .env("XDG_CACHE_HOME", self.root.path().join("cache"))
            .env("XDG_CONFIG_HOME", self.root.path().join("config"))
            .env("RUST_LOG", "flemmad=debug,info")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("NOTIFY_SOCKET");
        command
    }
    fn run(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }
    /// Starts `flemmad serve` and waits until rpc.sock answers.
    fn serve(&self) -> Daemon {
        self.serve_with(&[])
    }
    /// Starts `flemmad serve <args>` and waits until rpc.sock answers.
    fn serve_with(&self, args: &[&str]) -> Daemon {
        let child = self
            .command(&[&["serve"], args].concat())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let daemon = Daemon { child };
        // Answering a request means the pid file is written and both accept loops run.
        wait_until("the daemon answers on rpc.sock", || {
            UnixStream::connect(self.socket("rpc.sock")).is_ok_and(|mut stream| {
                let ping = r#"{"jsonrpc":"2.0","id":0,"method":"flemma/ping"}"#;
                let mut answer = String::new();
                writeln!(stream, "{ping}").is_ok()
                    && BufReader::new(stream).read_line(&mut answer).is_ok()
                    && answer.contains("pong")
            })
        });
        daemon
    }
}

struct Daemon {
    child: Child,
}

impl Daemon {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
    fn wait(&mut self) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < TIMEOUT, "the daemon did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A line-delimited JSON-RPC client on rpc.sock.
struct Rpc {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Rpc {
    fn connect(path: &Path) -> Self {
        let writer = UnixStream::connect(path).unwrap();
        writer.set_read_timeout(Some(TIMEOUT)).unwrap();
        Self {
            reader: BufReader::new(writer.try_clone().unwrap()),
            writer,
        }
    }
    fn send_line(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }
    fn read(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.reader.read_line(&mut line).unwrap() > 0,
            "the daemon closed rpc.sock"
        );
        serde_json::from_str(&line).unwrap()
    }
    fn call(&mut self, id: i64, method: &str) -> Value {
        self.call_with(id, method, &Value::Null)
    }
    /// A request with `params` (none when null).
    fn call_with(&mut self, id: i64, method: &str, params: &Value) -> Value {
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            request["params"] = params.clone();
        }
        self.send_line(&request.to_string());
        let answer = self.read();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }
}

/// A framed LSP client over any byte stream.
struct Lsp<R: Read, W: Write> {
    reader: BufReader<R>,
    writer: W,
    next_id: i64,
}

impl<R: Read, W: Write> Lsp<R, W> {
    fn new(reader: R, writer: W) -> Self {
        Self {
            reader: BufReader::new(reader),
            writer,
            next_id: 1,
        }
    }
    fn send(&mut self, message: &Value) {
        let body = message.to_string();
        write!(self.writer, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.writer.flush().unwrap();
    }
    fn receive(&mut self) -> Option<Value> {
        let mut length = None;
        loop {
            let mut header = String::new();
            if self.reader.read_line(&mut header).unwrap() == 0 {
                return None;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some(value) = header.strip_prefix("Content-Length: ") {
                length = Some(value.parse::<usize>().unwrap());
            }
        }
        let mut body = vec![0; length.expect("a Content-Length header")];
        self.reader.read_exact(&mut body).unwrap();
        Some(serde_json::from_slice(&body).unwrap())
    }
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.receive().expect("the server closed the connection");
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }
    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }
    /// The params of the next `method` notification that `wanted` accepts.
    fn notification(&mut self, method: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.receive().expect("the server closed the connection");
            if message["method"] == method && wanted(&message["params"]) {
                return message["params"].clone();
            }
        }
    }
    fn initialize(&mut self) -> Value {
        let answer = self.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": null,
                "capabilities": {"general": {"positionEncodings": ["utf-8"]}},
            }),
        );
        self.notify("initialized", json!({}));
        answer
    }
    fn shutdown(&mut self) {
        let answer = self.request("shutdown", Value::Null);
        assert!(answer.get("error").is_none(), "{answer}");
        self.notify("exit", Value::Null);
    }
}

fn lsp_over_socket(path: &Path) -> Lsp<UnixStream, UnixStream> {
    let stream = UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    Lsp::new(stream.try_clone().unwrap(), stream)
}

const URI: &str = "file:///tmp/daemon-test/talk.chat";
const CHAT: &str = "@You:\nlist the files\n\n@Assistant:\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"ls\"}\n```\n";

/// Opens [`CHAT`] and hovers the tool use: the markdown names the tool call and its input.
fn open_and_hover<R: Read, W: Write>(lsp: &mut Lsp<R, W>) {
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "chat", "version": 1, "text": CHAT}}),
    );
    let hover = lsp.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": URI}, "position": {"line": 4, "character": 15}}),
    );
    let markdown = hover["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("no hover markdown: {hover}"));
    assert!(markdown.contains("`bash` (call `t2`)"), "{markdown}");
    assert!(markdown.contains("\"command\": \"ls\""), "{markdown}");
}

#[test]
fn serve_creates_a_private_directory_and_private_sockets() {
    let home = Home::new();
    let _daemon = home.serve();
    let dir = std::fs::metadata(home.dir()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    for name in ["lsp.sock", "rpc.sock", "acp.sock"] {
        let meta = std::fs::metadata(home.socket(name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
        assert_eq!(meta.uid(), std::fs::metadata(home.runtime()).unwrap().uid());
    }
    let pid = std::fs::read_to_string(home.socket("daemon.pid")).unwrap();
    assert_eq!(pid.trim(), _daemon.pid().to_string());
}

#[test]
fn serve_refuses_a_directory_other_users_can_enter() {
    let home = Home::new();
    std::fs::create_dir(home.dir()).unwrap();
    std::fs::set_permissions(home.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = home.run(&["serve"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("lets other users in"), "{stderr}");
    assert!(stderr.contains("chmod 700"), "{stderr}");
    assert!(!home.socket("rpc.sock").exists());
}

#[test]
fn a_second_serve_is_refused_while_one_runs() {
    let home = Home::new();
    let daemon = home.serve();
    let output = home.run(&["serve"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("a daemon already runs (pid {})", daemon.pid())),
        "{stderr}"
    );
    // The running daemon still answers on its sockets.
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/ping")["result"], "pong");
}

#[test]
fn a_live_socket_is_never_stolen_even_without_the_pid_file() {
    let home = Home::new();
    let daemon = home.serve();
    std::fs::remove_file(home.socket("daemon.pid")).unwrap();
    let output = home.run(&["serve"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("a daemon already runs (pid {})", daemon.pid())),
        "{stderr}"
    );
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/status")["result"]["pid"], daemon.pid());
}

#[test]
fn the_stale_socket_of_a_killed_daemon_is_replaced() {
    let home = Home::new();
    let mut first = home.serve();
    first.signal("KILL");
    first.wait();
    assert!(
        home.socket("lsp.sock").exists(),
        "kill -9 leaves the sockets behind"
    );
    let second = home.serve();
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    let status = rpc.call(1, "flemma/status");
    assert_eq!(status["result"]["pid"], second.pid(), "{status}");
    assert!(
        home.log().contains("replacing the stale socket"),
        "{}",
        home.log()
    );
}

#[test]
fn an_lsp_session_over_the_socket_answers_initialize_and_hover() {
    let home = Home::new();
    let _daemon = home.serve();
    let mut lsp = lsp_over_socket(&home.socket("lsp.sock"));
    let init = lsp.initialize();
    assert_eq!(
        init["result"]["capabilities"]["positionEncoding"], "utf-8",
        "{init}"
    );
    open_and_hover(&mut lsp);
    lsp.shutdown();
}

#[test]
fn two_clients_at_once_have_their_own_sessions() {
    let home = Home::new();
    let _daemon = home.serve();
    let mut first = lsp_over_socket(&home.socket("lsp.sock"));
    let mut second = lsp_over_socket(&home.socket("lsp.sock"));
    first.initialize();
    second.initialize();
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/status")["result"]["lspSessions"], 2);
    open_and_hover(&mut first);
    open_and_hover(&mut second);
    first.shutdown();
    wait_until("one session is left", || {
        rpc.call(2, "flemma/status")["result"]["lspSessions"] == 1
    });
    // The second session is unaffected by the first one's exit.
    open_and_hover(&mut second);
    second.shutdown();
}

#[test]
fn flemmad_lsp_proxies_to_the_running_daemon() {
    let home = Home::new();
    let _daemon = home.serve();
    let mut child = home
        .command(&["lsp", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lsp = Lsp::new(stdout, stdin);
    let init = lsp.initialize();
    assert_eq!(init["result"]["capabilities"]["positionEncoding"], "utf-8");
    open_and_hover(&mut lsp);
    lsp.shutdown();
    drop(lsp);
    let status = child.wait().unwrap();
    assert!(status.success());
    // The daemon logs the session's end once its side of the connection is done, which may
    // be just after the proxy saw the connection close.
    wait_until("the daemon logged the session's end", || {
        home.log().contains("LSP session closed")
    });
    let log = home.log();
    assert!(log.contains("lsp: proxying stdio to the daemon"), "{log}");
    assert!(log.contains("LSP session opened"), "{log}");
}

/// An editor restarts a language server that fails, not one that ends cleanly: when the
/// daemon behind `flemmad lsp` dies mid-session, the proxy exits non-zero and says why (issue
/// 27; it used to exit 0, so the editor thought the session ended as asked).
#[test]
fn flemmad_lsp_exits_non_zero_when_its_daemon_dies_mid_session() {
    let home = Home::new();
    let mut daemon = home.serve();
    let mut child = home
        .command(&["lsp", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lsp = Lsp::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    lsp.initialize();
    daemon.signal("KILL");
    daemon.wait();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < TIMEOUT, "flemmad lsp did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("closed the connection before the editor ended its session"),
        "{err}"
    );
    drop(lsp);
}

#[test]
fn flemmad_lsp_no_daemon_runs_in_process() {
    let home = Home::new();
    let _daemon = home.serve();
    let mut child = home
        .command(&["lsp", "--stdio", "--no-daemon"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lsp = Lsp::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    lsp.initialize();
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/status")["result"]["lspSessions"], 0);
    lsp.shutdown();
    drop(lsp);
    assert!(child.wait().unwrap().success());
    assert!(!home.log().contains("LSP session opened"));
}

#[test]
fn rpc_answers_ping_status_unknown_methods_and_malformed_lines() {
    let home = Home::new();
    let daemon = home.serve();
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/ping")["result"], "pong");
    let status = rpc.call(2, "flemma/status")["result"].clone();
    assert_eq!(status["pid"], daemon.pid());
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert!(status["uptimeSeconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(status["lspSessions"], 0);
    let unknown = rpc.call(3, "flemma/nope");
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    rpc.send_line("{not json");
    let malformed = rpc.read();
    assert_eq!(malformed["error"]["code"], -32700, "{malformed}");
    assert_eq!(malformed["id"], Value::Null);
    rpc.send_line(r#"{"id": 4, "method": 7}"#);
    let invalid = rpc.read();
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    assert_eq!(invalid["id"], 4);
    // A notification gets no answer; the next request still does.
    rpc.send_line(r#"{"jsonrpc": "2.0", "method": "flemma/ping"}"#);
    assert_eq!(rpc.call(5, "flemma/ping")["result"], "pong");
    // Any JSON id comes back as it was sent, answers and errors alike.
    for id in [json!("a-string"), json!(-3), json!(2.5), json!({"n": 1})] {
        rpc.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": "flemma/ping"}).to_string());
        assert_eq!(
            rpc.read(),
            json!({"jsonrpc": "2.0", "id": id, "result": "pong"})
        );
        rpc.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": "flemma/nope"}).to_string());
        let unknown = rpc.read();
        assert_eq!(
            (&unknown["id"], &unknown["error"]["code"]),
            (&id, &json!(-32601))
        );
    }
}

#[test]
fn subscribers_and_flemmad_events_see_sessions_open_and_close() {
    let home = Home::new();
    let mut daemon = home.serve();
    let mut events = home
        .command(&["events"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(
        rpc.call(1, "flemma/subscribe")["result"]["subscribed"],
        true
    );
    wait_until("`flemmad events` has subscribed", || {
        rpc.call(2, "flemma/status")["result"]["eventSubscribers"] == 2
    });
    let mut lsp = lsp_over_socket(&home.socket("lsp.sock"));
    lsp.initialize();
    lsp.shutdown();
    let opened = rpc.read();
    assert_eq!(opened["method"], "flemma/event");
    assert_eq!(opened["params"]["name"], "session:opened", "{opened}");
    let closed = rpc.read();
    assert_eq!(closed["params"]["name"], "session:closed", "{closed}");
    assert_eq!(
        closed["params"]["data"]["session"],
        opened["params"]["data"]["session"]
    );
    // Stopping the daemon ends `flemmad events`, which printed the same two events.
    daemon.signal("TERM");
    daemon.wait();
    let mut printed = String::new();
    events
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut printed)
        .unwrap();
    let lines: Vec<Value> = printed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let names: Vec<&str> = lines.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["session:opened", "session:closed"], "{printed}");
    assert!(events.wait().unwrap().success());
}

#[test]
fn flemmad_events_without_a_daemon_says_how_to_start_one() {
    let home = Home::new();
    let output = home.run(&["events"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no daemon runs; start it with `flemmad serve`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("systemctl --user start flemmad.socket"),
        "{stderr}"
    );
}

#[test]
fn sigterm_closes_sessions_and_removes_the_sockets_and_pid_file() {
    let home = Home::new();
    let mut daemon = home.serve();
    let mut lsp = lsp_over_socket(&home.socket("lsp.sock"));
    lsp.initialize();
    daemon.signal("TERM");
    assert!(daemon.wait().success());
    assert_eq!(lsp.receive(), None, "the session was closed");
    for name in ["lsp.sock", "rpc.sock", "daemon.pid"] {
        assert!(!home.socket(name).exists(), "{name} is left behind");
    }
    let log = home.log();
    assert!(log.contains("shutting down reason=\"SIGTERM\""), "{log}");
    assert!(!log.contains("still open"), "{log}");
}

#[test]
fn sigint_stops_the_daemon_cleanly_too() {
    let home = Home::new();
    let mut daemon = home.serve();
    daemon.signal("INT");
    assert!(daemon.wait().success());
    assert!(!home.socket("lsp.sock").exists());
    let log = home.log();
    assert!(log.contains("shutting down reason=\"SIGINT\""), "{log}");
    // And a new daemon starts in the same directory.
    let _again = home.serve();
}

#[test]
fn rpc_shutdown_stops_the_daemon() {
    let home = Home::new();
    let mut daemon = home.serve();
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/shutdown")["result"], Value::Null);
    assert!(daemon.wait().success());
    assert!(!home.socket("rpc.sock").exists());
}

#[test]
fn a_connection_from_another_uid_is_refused() {
    // Only root can connect as another uid through the 0700 directory
    // (keeping CAP_DAC_OVERRIDE so the peer-uid check, not the file mode, is what refuses).
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(1);
    let setpriv = Command::new("setpriv").arg("--version").output();
    let python = Command::new("python3").arg("--version").output();
    if uid != 0 || setpriv.is_err() || python.is_err() {
        eprintln!("skipped: needs root, setpriv and python3 to connect as uid 65534");
        return;
    }
    let home = Home::new();
    let _daemon = home.serve();
    // Connecting succeeds (CAP_DAC_OVERRIDE passes the file modes); the daemon then closes
    // the connection without answering.
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nprint('connected')\ntry:\n    s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"flemma/ping\"}\\n')\n    data=s.recv(4096)\nexcept (ConnectionResetError, BrokenPipeError):\n    data=b''\nprint('answer:' + data.decode())\n";
    let output = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+dac_override",
            "--ambient-caps=+dac_override",
            "python3",
            "-c",
            script,
        ])
        .arg(home.socket("rpc.sock"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && stderr.contains("setpriv") {
        eprintln!("skipped: setpriv cannot drop to uid 65534 here: {stderr}");
        return;
    }
    assert_eq!(
        stdout.trim(),
        "connected\nanswer:",
        "the daemon answered another uid: {stdout} {stderr}"
    );
    wait_until("the refusal is logged", || {
        home.log().contains("connection from uid 65534")
    });
    // The daemon goes on serving its own user.
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    assert_eq!(rpc.call(1, "flemma/ping")["result"], "pong");
}

#[test]
fn install_service_print_shows_both_units_with_this_binary() {
    let home = Home::new();
    let output = home.run(&["install-service", "--print"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let binary = std::fs::canonicalize(BIN).unwrap();
    assert!(
        stdout.contains(&format!("ExecStart={} serve", binary.display())),
        "{stdout}"
    );
    assert!(stdout.contains("Type=notify"), "{stdout}");
    assert!(
        stdout.contains("ListenStream=%t/flemma/lsp.sock"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ListenStream=%t/flemma/rpc.sock"),
        "{stdout}"
    );
    assert!(!stdout.contains(".cargo/bin/flemmad"), "{stdout}");
    assert!(stdout.contains("SocketMode=0600"), "{stdout}");
    assert!(
        !home.root.path().join("config/systemd").exists(),
        "--print wrote files"
    );
}

#[test]
fn install_service_writes_the_units_and_prints_the_next_command() {
    let home = Home::new();
    let output = home.run(&["install-service"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "systemctl --user daemon-reload && systemctl --user enable --now flemmad.socket"
        ),
        "{stdout}"
    );
    let units = home.root.path().join("config/systemd/user");
    let service = std::fs::read_to_string(units.join("flemmad.service")).unwrap();
    assert!(service.contains("ExecStart=/"), "{service}");
    let socket = std::fs::read_to_string(units.join("flemmad.socket")).unwrap();
    assert!(
        socket.contains("ListenStream=%t/flemma/rpc.sock"),
        "{socket}"
    );
}

/// Named sockets, as a unit written before `acp.sock` existed passes them: the daemon binds
/// `acp.sock` itself (and removes it when it stops).
#[test]
fn socket_activation_by_name_serves_the_passed_sockets_and_notifies_readiness() {
    socket_activation(Some("--fdname=lsp:rpc"), false);
}

/// One socket unit with a `ListenStream=` each (as `install-service` writes): no names, the
/// daemon tells the sockets apart by their paths.
#[test]
fn socket_activation_by_path_serves_the_passed_sockets() {
    socket_activation(None, true);
}

fn socket_activation(fdname: Option<&str>, passes_acp: bool) {
    if Command::new("systemd-socket-activate")
        .arg("--help")
        .output()
        .is_err()
    {
        eprintln!("skipped: systemd-socket-activate is not installed");
        return;
    }
    let home = Home::new();
    std::fs::create_dir(home.dir()).unwrap();
    std::fs::set_permissions(home.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let notify_path = home.root.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(TIMEOUT)).unwrap();
    let lsp_path = home.socket("lsp.sock");
    let rpc_path = home.socket("rpc.sock");
    let acp_path = home.socket("acp.sock");
    let mut activator = Command::new("systemd-socket-activate");
    activator
        .arg(format!("--listen={}", lsp_path.display()))
        .arg(format!("--listen={}", rpc_path.display()));
    if passes_acp {
        activator.arg(format!("--listen={}", acp_path.display()));
    }
    activator
        .args(fdname)
        .arg(format!(
            "--setenv=XDG_RUNTIME_DIR={}",
            home.runtime().display()
        ))
        .arg(format!(
            "--setenv=XDG_STATE_HOME={}",
            home.root.path().join("state").display()
        ))
        .arg(format!("--setenv=NOTIFY_SOCKET={}", notify_path.display()))
        .args([BIN, "serve"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = activator.spawn().unwrap();
    let mut guard = Daemon { child };
    wait_until("the activator listens", || {
        rpc_path.exists() && lsp_path.exists()
    });
    // The first connection starts the daemon (systemd-socket-activate execs it on accept of
    // any listener); it then serves both sockets.
    let mut rpc = Rpc::connect(&rpc_path);
    assert_eq!(rpc.call(1, "flemma/ping")["result"], "pong");
    let mut ready = [0u8; 256];
    let read = notify.recv(&mut ready).unwrap();
    let ready = String::from_utf8_lossy(&ready[..read]);
    assert!(ready.contains("READY=1"), "{ready}");
    let mut lsp = lsp_over_socket(&lsp_path);
    lsp.initialize();
    lsp.shutdown();
    // ACP too, whether systemd passed its socket or the daemon bound it.
    let acp = UnixStream::connect(&acp_path).unwrap();
    acp.set_read_timeout(Some(TIMEOUT)).unwrap();
    (&acp)
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let mut answer = String::new();
    BufReader::new(&acp).read_line(&mut answer).unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    drop(acp);
    guard.signal("TERM");
    guard.wait();
    assert!(home.log().contains("socket-activated"), "{}", home.log());
    // A socket the daemon bound itself it removes; systemd's stay systemd's.
    assert_eq!(acp_path.exists(), passes_acp);
}

/// The answer without its envelope: `{"result": …}` or `{"error": {code, message}}`.
fn outcome(answer: &Value) -> Value {
    match answer.get("error") {
        Some(error) => json!({"error": {"code": error["code"], "message": error["message"]}}),
        None => json!({"result": answer["result"]}),
    }
}

#[test]
fn the_same_requests_get_the_same_answers_on_lsp_sock_and_rpc_sock() {
    let home = Home::new();
    let _daemon = home.serve();
    let dir = home.root.path().join("chats");
    std::fs::create_dir(&dir).unwrap();
    let chat = dir.join("talk.chat");
    std::fs::write(&chat, "@You:\nhello\n\n@Assistant:\nhi\n\n@You:\n").unwrap();
    let chat = chat.display().to_string();
    let chat_uri = format!("file://{chat}");
    let missing = dir.join("missing.chat").display().to_string();
    let directory = dir.display().to_string();
    let requests: Vec<(&str, Value)> = vec![
        // Documents that are not chats: refused at once, not "started" then "gone".
        ("flemma/send", json!({"uri": missing})),
        ("flemma/status", json!({"uri": missing})),
        ("flemma/send", json!({"uri": directory})),
        (
            "flemma/status",
            json!({"uri": format!("file://{directory}")}),
        ),
        (
            "flemma/jobs",
            json!({"uri": format!("{directory}/../chats/nope.chat")}),
        ),
        ("flemma/send", json!([missing])),
        // Params that do not fit.
        ("flemma/send", json!({"uri": chat, "nope": 1})),
        ("flemma/send", Value::Null),
        ("flemma/approve", json!({"uri": chat})),
        ("flemma/reject", json!({"uri": chat, "toolId": 7})),
        ("flemma/status", json!({"uri": "file://elsewhere/x.chat"})),
        ("flemma/explode", json!({"uri": chat})),
        // What the engine refuses.
        (
            "flemma/approve",
            json!({"uri": chat, "toolId": "toolu_nope"}),
        ),
        ("flemma/approveAll", json!({"uri": chat_uri})),
        (
            "flemma/reject",
            json!({"uri": chat, "toolId": "toolu_nope", "reason": "no"}),
        ),
        ("flemma/cancel", json!({"uri": chat})),
        (
            "flemma/background",
            json!({"uri": chat, "toolId": "toolu_nope"}),
        ),
        ("flemma/switch", json!({"uri": chat, "model": "openai/"})),
        (
            "flemma/switch",
            json!({"uri": chat, "model": "nosuchprovider/x"}),
        ),
        // And what it answers.
        ("flemma/status", json!({"uri": chat})),
        ("flemma/jobs", json!({"uri": chat_uri})),
        ("flemma/usage", json!({"uri": chat})),
    ];
    let mut rpc = Rpc::connect(&home.socket("rpc.sock"));
    let mut lsp = lsp_over_socket(&home.socket("lsp.sock"));
    lsp.initialize();
    for (method, params) in &requests {
        let by_rpc = outcome(&rpc.call_with(7, method, params));
        // Absent params are null in LSP's `Request`, as they are here.
        let by_lsp = outcome(&lsp.request(method, params.clone()));
        assert_eq!(by_rpc, by_lsp, "{method} {params}");
        eprintln!("{method} {params} → {by_rpc}");
    }
    // The answers say what was wrong.
    let mut answer = |i: usize| outcome(&rpc.call_with(8, requests[i].0, &requests[i].1));
    let missing_answer = answer(0);
    assert_eq!(missing_answer["error"]["code"], -32602, "{missing_answer}");
    assert!(
        missing_answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{missing_answer}"
    );
    let directory_answer = answer(2);
    assert!(
        directory_answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is a directory"),
        "{directory_answer}"
    );
    assert_eq!(answer(11)["error"]["code"], -32601);
    assert!(
        answer(12)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no tool result placeholder for `toolu_nope`")
    );
    assert_eq!(answer(15)["error"]["code"], -32001);
    assert_eq!(answer(19)["result"]["state"], "idle");
    // Nothing was started for the documents that do not exist, and nothing was written.
    assert!(!Path::new(&missing).exists());
    let status = rpc.call(200, "flemma/status");
    assert!(status["result"]["pid"].is_number(), "{status}");
}

#[test]
fn lsp_sessions_of_serve_analyse_with_its_config_file() {
    let home = Home::new();
    // The user's default configuration is valid: only `--config` has the mistake.
    let user = home.root.path().join("config/flemma");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("config.toml"), "provider = \"anthropic\"\n").unwrap();
    let given = home.root.path().join("given.toml");
    std::fs::write(&given, "provider = \"anthropicc\"\n").unwrap();
    let _daemon = home.serve_with(&["--config", given.to_str().unwrap()]);
    let uri = format!("file://{}/talk.chat", home.root.path().display());
    let mut lsp = lsp_over_socket(&home.socket("lsp.sock"));
    lsp.initialize();
    lsp.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "chat", "version": 0,
               "text": "@You:\nhello\n"}}),
    );
    let published = lsp.notification("textDocument/publishDiagnostics", |p| p["uri"] == uri);
    let given = given.display().to_string();
    let diagnostics = published["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics.iter().any(|d| {
            d["code"] == "config"
                && d["message"].as_str().unwrap().contains(&given)
                && d["message"].as_str().unwrap().contains("anthropicc")
        }),
        "the --config file's mistake is a diagnostic: {published}"
    );
}
