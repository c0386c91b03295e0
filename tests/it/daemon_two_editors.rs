//! Two editors with the same chat open through one daemon (`flemmad lsp` proxying to
//! `flemmad serve`): the most recently active one receives the engine's edits; the other sees
//! the changes the way editors do, through its own didChange after the file changed on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common::{self, Chat};
use crate::lsp::lsp_client::{Client, Flavor};

const FRONTMATTER: &str = r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}
```
"#;

pub(crate) struct Daemon {
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn environment(base: &str, chat: &Chat) -> Vec<(&'static str, String)> {
    let dir = chat.path.parent().unwrap();
    let mut env = common::provider_env(base);
    env.push(("XDG_CONFIG_HOME", chat.config_home.display().to_string()));
    env.push(("XDG_RUNTIME_DIR", dir.join("run").display().to_string()));
    env.push(("PATH", "/usr/bin:/bin".into()));
    env
}

pub(crate) fn serve(env: &[(&'static str, String)], dir: &Path) -> Daemon {
    std::fs::create_dir_all(dir.join("run")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .arg("serve")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("FLEMMA_CONFIG")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket: PathBuf = dir.join("run/flemma/lsp.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child }
}

pub(crate) fn editor(flavor: Flavor, env: &[(&'static str, String)], root: &Path) -> Client {
    // No --no-daemon: `flemmad lsp` proxies to the daemon of `env`'s runtime directory.
    let mut client = Client::start_with_env(flavor, &[], env);
    client.initialize(root);
    client
}

pub(crate) fn wait_stopped(client: &mut Client) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        while let Some(n) = client.notifications.pop_front() {
            if n["method"] == "flemma/event" && n["params"]["name"] == "engine:stopped" {
                return n["params"]["data"].clone();
            }
        }
        assert!(Instant::now() < deadline, "the engine did not stop in time");
        client.pump(Duration::from_millis(50));
    }
}

pub(crate) fn send(client: &mut Client, uri: &str) {
    let answer = client.request(
        "workspace/executeCommand",
        json!({"command": "flemma.send", "arguments": [uri]}),
    );
    assert!(answer.is_ok(), "{answer:?}");
}

#[test]
fn two_editors_on_one_document_the_most_recently_active_receives_the_edits() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let original = format!("{FRONTMATTER}@You:\nFirst question.\n");
    let chat = common::chat(&original);
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(&mock.base_url(), &chat);
    let _daemon = serve(&env, &dir);
    let uri = format!("file://{}", chat.path.display());

    let mut helix = editor(Flavor::Helix, &env, &dir);
    open_settled(&mut helix, &uri, &original);
    let mut vscode = editor(Flavor::VsCode, &env, &dir);
    open_settled(&mut vscode, &uri, &original);

    // VS Code opened it last and sends: its buffer gets the reply, Helix's gets no edit.
    mock.push(Turn::text("The first answer."));
    send(&mut vscode, &uri);
    assert_eq!(wait_stopped(&mut vscode)["reason"], "idle");
    assert!(
        vscode.text(&uri).contains("@Assistant:\nThe first answer."),
        "{}",
        vscode.text(&uri)
    );
    let _ = wait_stopped(&mut helix);
    assert_eq!(helix.apply_edits_seen, 0, "the other editor got no edit");
    assert_eq!(helix.text(&uri), original);
    // An editor has it open: the daemon never wrote the file; the editor saves it.
    assert_eq!(std::fs::read_to_string(&chat.path).unwrap(), original);
    let saved = vscode.text(&uri).to_owned();
    std::fs::write(&chat.path, &saved).unwrap();
    // Helix reloads the changed file (its own didChange), and the user types in it.
    let end = helix.text(&uri).len();
    helix.replace(&uri, 0, end, &saved);
    let end = helix.text(&uri).len();
    helix.type_at(&uri, end, "Second question.\n");
    let seen_by_vscode = vscode.apply_edits_seen;

    // Now Helix is the most recently active: the second reply goes into its buffer.
    mock.push(Turn::text("The second answer."));
    send(&mut helix, &uri);
    assert_eq!(wait_stopped(&mut helix)["reason"], "idle");
    let text = helix.text(&uri).to_owned();
    assert!(text.starts_with(&saved), "{text}");
    assert!(
        text.contains("Second question.\n\n@Assistant:\nThe second answer."),
        "{text}"
    );
    let _ = wait_stopped(&mut vscode);
    assert_eq!(
        vscode.apply_edits_seen, seen_by_vscode,
        "VS Code got no edit"
    );
    assert_eq!(vscode.text(&uri), saved);
    assert_eq!(std::fs::read_to_string(&chat.path).unwrap(), saved);
    runtime.block_on(mock.shutdown());
}

/// A daemon for `chat` with the providers at `base`, and an editor of `flavor` that has the
/// chat open through it (as `text`); with the chat's uri.
pub(crate) fn daemon_and_editor(
    flavor: Flavor,
    base: &str,
    chat: &Chat,
    text: &str,
) -> (Daemon, Client, String) {
    let dir = chat.path.parent().unwrap().to_owned();
    let env = environment(base, chat);
    let daemon = serve(&env, &dir);
    let uri = format!("file://{}", chat.path.display());
    let mut client = editor(flavor, &env, &dir);
    open_settled(&mut client, &uri, text);
    (daemon, client, uri)
}

/// Opens `uri` in `client` and waits until its session has it (a request after the
/// `didOpen` is answered after it): which editor opened last is then certain.
pub(crate) fn open_settled(client: &mut Client, uri: &str, text: &str) {
    client.open(uri, text);
    let answer = client.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": uri}}),
    );
    assert!(answer.is_ok(), "{answer:?}");
}
