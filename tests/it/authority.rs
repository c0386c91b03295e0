//! Issue 26, "the model cannot change what it may do": the attacks of the second security
//! review, replayed through the binary against `flemma-mock-provider` with the model's tools
//! running for real (bwrap where it is usable: CI installs it).
//!
//! * Invariant I — nothing a tool does changes what the chat may do: an auto-approved
//!   sandboxed `bash`, in the foreground and as a background job, tries to write every path of
//!   a list of authority (the chat, its folder's other chats, the user's flemmad configuration,
//!   trusted folders and records, shell start-up files, the cache, every `.git` of a tree with
//!   nested repositories, a socket in `/tmp`) — by writing, renaming, and renaming the folders
//!   that hold them — and nothing changes, nothing connects; the model cannot approve its own
//!   call, not even with a tool that runs outside the sandbox; an untrusted chat's working
//!   directory stays in its project.
//! * The same, as an ordinary user, when the tests run as root (CI does): `flemmad` then runs
//!   under `setpriv` as `nobody`.
//!
//! Canaries live outside `/tmp` (a fake home under `target/tmp` or `/var/tmp`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

use crate::common::{outside_tmp, provider_env, read, stderr};

const KEY: &str = "-----BEGIN PRIVATE KEY----- canary-private-key";

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

/// Who runs `flemmad`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum User {
    /// The test's own user (root in CI).
    Same,
    /// `nobody`, through `setpriv` (only when the test runs as root).
    Nobody,
}

const NOBODY: u32 = 65534;

/// A home and a project holding everything that decides what a chat may do.
struct World {
    dir: tempfile::TempDir,
    /// `flemmad`, copied where `nobody` can run it.
    binary: PathBuf,
    user: User,
}

impl World {
    fn new(user: User) -> Self {
        let dir = outside_tmp("flemmad-authority-");
        let root = dir.path();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = root.join("home");
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("home/.ssh/id_rsa", &format!("{KEY}\n"));
        write("home/.bashrc", "# the user's bashrc\n");
        write("home/.profile", "# the user's profile\n");
        write("home/.config/flemma/config.toml", "");
        write("home/.config/flemma/trusted-folders", "");
        write("home/.local/state/flemma/calls/x.jsonl", "");
        write("home/.cache/pre-commit/hook.sh", "#!/bin/sh\n");
        write("home/project/.git/config", "[core]\n");
        write("home/project/.git/HEAD", "ref: refs/heads/main\n");
        write("home/project/vendor/lib/.git/config", "[core]\n");
        write("home/project/vendor/deeper/dep/.git/config", "[core]\n");
        write("home/project/src/main.rs", "fn main() {}\n");
        write("home/project/chats/other.chat", "@You:\nThe other chat.\n");
        std::fs::create_dir_all(root.join("canaries")).unwrap();
        let binary = root.join("flemmad");
        std::fs::copy(env!("CARGO_BIN_EXE_flemmad"), &binary).unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = home;
        Self { dir, binary, user }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn home(&self) -> PathBuf {
        self.root().join("home")
    }

    fn project(&self) -> PathBuf {
        self.home().join("project")
    }

    /// Gives the world to `nobody` when that user runs flemmad.
    fn hand_over(&self) {
        if self.user == User::Nobody {
            let status = std::process::Command::new("chown")
                .args(["-R", &format!("{NOBODY}:{NOBODY}")])
                .arg(self.root())
                .status()
                .unwrap();
            assert!(status.success());
        }
    }

    /// Every file under the home and project, with its bytes (what must not change).
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut stack = vec![self.home()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    // The chat's own store and the sandbox's private places are the tools'.
                    if path.file_name().is_some_and(|n| n == ".flemma")
                        || path.ends_with(".cache/flemma")
                    {
                        continue;
                    }
                    stack.push(path);
                } else {
                    files.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
                }
            }
        }
        files
    }

    /// `flemmad ARGS` as the world's user, with its home and XDG folders, every provider at
    /// `base`.
    fn command(&self, base: &str, args: &[&str]) -> tokio::process::Command {
        let mut command = if self.user == User::Nobody {
            let mut command = tokio::process::Command::new("setpriv");
            command
                .arg(format!("--reuid={NOBODY}"))
                .arg(format!("--regid={NOBODY}"))
                .arg("--clear-groups")
                .arg(&self.binary);
            command
        } else {
            tokio::process::Command::new(&self.binary)
        };
        let home = self.home();
        command
            .args(args)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_RUNTIME_DIR", self.root().join("run"))
            .kill_on_drop(true);
        for (key, value) in provider_env(base) {
            command.env(key, value);
        }
        command
    }
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

/// A Unix socket in the host's `/tmp` counting connections: a tmux, ssh-agent or Emacs
/// server's socket, which runs what it is asked outside the sandbox.
fn tmp_socket() -> (tempfile::TempDir, PathBuf, Arc<AtomicUsize>) {
    let dir = tempfile::Builder::new()
        .prefix("tmux-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("default");
    let listener = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (dir, path, count)
}

/// The attack: every path of authority, written, renamed and replaced, its folders renamed
/// and replaced; a socket in `/tmp` connected to; a `.git` made at the project root.
fn attack_script(world: &World, chat: &Path, socket: &Path) -> String {
    let home = world.home();
    let project = world.project();
    let targets = [
        chat.to_path_buf(),
        project.join("chats/other.chat"),
        home.join(".config/flemma/config.toml"),
        home.join(".config/flemma/trusted-folders"),
        home.join(".local/state/flemma/calls/x.jsonl"),
        home.join(".bashrc"),
        home.join(".profile"),
        home.join(".cache/pre-commit/hook.sh"),
        project.join(".git/config"),
        project.join("vendor/lib/.git/config"),
        project.join("vendor/deeper/dep/.git/config"),
    ];
    let mut script = String::from("exec 2>/dev/null\n");
    for target in &targets {
        let path = target.display();
        let dir = target.parent().unwrap().display();
        script.push_str(&format!(
            "echo evil >> '{path}'; sed -i s/^/evil/ '{path}'; mv '{path}' '{path}.away'; \
             mv '{dir}' '{dir}.away' && mkdir -p '{dir}' && echo evil > '{path}'\n"
        ));
    }
    for dir in [
        project.join("chats"),
        project.join("vendor/lib"),
        project.join("vendor"),
    ] {
        let dir = dir.display();
        script.push_str(&format!(
            "mv '{dir}' '{dir}.away' && mkdir -p '{dir}/.git' && echo evil > '{dir}/.git/config'\n"
        ));
    }
    script.push_str(&format!(
        "mkdir -p '{root}/sub' && cd '{root}' && git init -q . ; echo evil > .git/config\n\
         python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' '{socket}' \
           && touch '{canaries}/socket-reached'\n\
         true\n",
        root = chat.parent().unwrap().display(),
        socket = socket.display(),
        canaries = world.root().join("canaries").display(),
    ));
    script
}

/// A chat in `dir` (default settings) asking for `turns`.
fn chat_at(dir: &Path, question: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("talk.chat");
    std::fs::write(
        &path,
        format!(
            "```json\n{}\n```\n@You:\n{question}\n",
            json!({"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
                "tools": {"autopilot": {"resume_delay": 50}}}})
        ),
    )
    .unwrap();
    path
}

fn bash(id: &str, command: &str, background: bool) -> Turn {
    let mut input = json!({"label": "work", "command": command, "timeout": 60});
    if background {
        input["flemma.background"] = json!(true);
    }
    Turn::default().tool_call_with_id("bash", id, input)
}

async fn nothing_of_authority_changes(user: User) {
    let world = World::new(user);
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = chat_at(&world.project().join("chats"), "Tidy up.");
    let (_socket_dir, socket, connections) = tmp_socket();
    let script = attack_script(&world, &chat, &socket);
    world.hand_over();
    let before = world.snapshot();
    // In the foreground, then as a background job the model collects.
    mock.push(bash("t1", &script, false));
    mock.push(bash("t2", &script, true));
    mock.push(Turn::text("Done."));
    mock.push(Turn::text("Collected."));
    let out = run(world.command(&base, &["send", "--no-daemon", chat.to_str().unwrap()])).await;
    let text = std::fs::read_to_string(&chat).unwrap_or_else(|error| {
        let listing = std::process::Command::new("ls")
            .args(["-laR"])
            .arg(world.project())
            .output()
            .unwrap();
        panic!(
            "the chat is gone ({error}):\n{}\n{}",
            stderr(&out),
            String::from_utf8_lossy(&listing.stdout)
        )
    });
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(
        text.contains("**Tool Result:** `t1`") && text.contains("Done."),
        "the tools ran and the conversation went on:\n{text}"
    );
    let after = world.snapshot();
    let chat_file = chat.clone();
    for (path, bytes) in &before {
        if *path == chat_file {
            continue;
        }
        assert_eq!(
            after.get(path),
            Some(bytes),
            "{} changed or went away",
            path.display()
        );
    }
    // flemmad's own records of the chat (its calls, its driver's lock, the checkpoints of the
    // project's files, written by flemmad outside the sandbox) are the new files it may make
    // there.
    let state = world.home().join(".local/state/flemma");
    let appeared: Vec<&PathBuf> = after
        .iter()
        .filter(|(path, bytes)| {
            let own = ["calls", "locks"]
                .iter()
                .any(|folder| path.parent() == Some(state.join(folder).as_path()))
                && path.file_stem().is_some_and(|s| s.len() == 64)
                && !String::from_utf8_lossy(bytes).contains("evil");
            let checkpoint = path.starts_with(state.join("checkpoints"));
            !before.contains_key(*path) && !own && !checkpoint
        })
        .map(|(path, _)| path)
        .collect();
    assert!(
        appeared.is_empty(),
        "the attack left files where it must not: {appeared:?}"
    );
    for dir in ["chats.away", "vendor.away", "vendor/lib.away", "chats/.git"] {
        assert!(
            !world.project().join(dir).exists(),
            "{dir} appeared in the project"
        );
    }
    assert!(
        text.starts_with("```json\n{\"flemma\""),
        "the chat's frontmatter is the user's:\n{text}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "a socket in the host's /tmp was reached"
    );
    assert!(
        !world.root().join("canaries/socket-reached").exists(),
        "the socket was reached"
    );
}

/// Invariant I, as the test's user (root in CI): every path of authority stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_changes_nothing_that_holds_authority() {
    if !bwrap_usable("a_sandboxed_command_changes_nothing_that_holds_authority") {
        return;
    }
    nothing_of_authority_changes(User::Same).await;
}

/// Invariant I as an ordinary user: the same attack with flemmad run as `nobody` (when the
/// test runs as root; otherwise the test's own user is the ordinary one and the test above
/// covers it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_changes_nothing_that_holds_authority_as_an_ordinary_user() {
    if !bwrap_usable("a_sandboxed_command_changes_nothing_that_holds_authority_as_an_ordinary_user")
    {
        return;
    }
    if !rustix::process::getuid().is_root() {
        eprintln!("not root: the test above already runs as an ordinary user");
        return;
    }
    nothing_of_authority_changes(User::Nobody).await;
}

/// Finding 1: the model asks for a call that needs approval (`read ~/.ssh/id_rsa`) and, in the
/// same turn, a background `bash` that waits for `(pending)` in its own chat and rewrites it to
/// `(approved)`. In the sandbox the chat is read-only; and with the user's own configuration
/// running `bash` outside any sandbox (and approving it), the engine still does not take text a
/// tool wrote for an approval. Either way the call stays pending and the key never leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_approve_its_own_call() {
    for unsandboxed in [false, true] {
        if !unsandboxed && !bwrap_usable("the_model_cannot_approve_its_own_call") {
            continue;
        }
        let world = World::new(User::Same);
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let chat = chat_at(&world.project(), "Check my key.");
        if unsandboxed {
            std::fs::write(
                world.home().join(".config/flemma/config.toml"),
                "[sandbox]\nenabled = false\n[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n",
            )
            .unwrap();
        }
        let approve_it = format!(
            "for i in $(seq 1 100); do \
               if grep -q '(pending)' '{chat}'; then \
                 sed -i 's/`t1` (pending)/`t1` (approved)/' '{chat}' 2>/dev/null; \
                 python3 - '{chat}' <<'EOF' 2>/dev/null\n\
import os, sys\n\
p = sys.argv[1]\n\
t = open(p).read().replace('`t1` (pending)', '`t1` (approved)')\n\
open(p + '.new', 'w').write(t)\n\
os.rename(p + '.new', p)\n\
EOF\n\
                 sleep 0.5; grep -q '`t1` (approved)' '{chat}' && exit 0; \
               fi; sleep 0.05; done; true",
            chat = chat.display()
        );
        let key = world.home().join(".ssh/id_rsa");
        mock.push(
            Turn::default()
                .tool_call_with_id(
                    "read",
                    "t1",
                    json!({"label": "key", "path": key.display().to_string()}),
                )
                .tool_call_with_id(
                    "bash",
                    "t2",
                    json!({"label": "helper", "command": approve_it, "timeout": 60,
                           "flemma.background": true}),
                ),
        );
        mock.push(Turn::text("Waiting."));
        mock.push(Turn::text("Done."));
        let send = |world: &World| {
            run(world.command(&base, &["send", "--no-daemon", chat.to_str().unwrap()]))
        };
        let out = send(&world).await;
        let text = read(&chat);
        assert_eq!(
            out.status.code(),
            Some(3),
            "unsandboxed={unsandboxed}: the read waits for approval\n{}\n{text}",
            stderr(&out)
        );
        assert!(
            text.contains("**Tool Result:** `t1` (pending)"),
            "unsandboxed={unsandboxed}: {text}"
        );
        // The next send, too, finds nothing approved.
        let out = send(&world).await;
        assert_eq!(
            out.status.code(),
            Some(3),
            "unsandboxed={unsandboxed}: {}",
            stderr(&out)
        );
        for request in mock.requests() {
            assert!(
                !request.raw_body.contains("canary-private-key"),
                "unsandboxed={unsandboxed}: the key reached the provider"
            );
        }
    }
}

/// Finding 5: an untrusted chat's `tools.bash.cwd = "../.."` made the home (or `/`) a
/// writable root. Now an untrusted chat's tools work in its own folder: a working directory
/// further up is ignored (with the usual warning), and `../..` — which only a chat `flemmad acp`
/// keeps in `<project>/.flemma/sessions/` may name — refuses the send elsewhere, saying what to
/// do. Either way nothing outside the chat's folder is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_working_directory_stays_in_the_project() {
    for (cwd, refused) in [("../../..", false), ("../..", true)] {
        let world = World::new(User::Same);
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let dir = world.project().join("deep");
        std::fs::create_dir_all(&dir).unwrap();
        let chat = dir.join("talk.chat");
        std::fs::write(
            &chat,
            format!(
                "```json\n{}\n```\n@You:\nWhere am I?\n",
                json!({"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
                    "tools": {"bash": {"cwd": cwd}, "autopilot": {"resume_delay": 50}}}})
            ),
        )
        .unwrap();
        mock.push(bash(
            "t1",
            &format!(
                "pwd; echo pwned >> '{}'",
                world.home().join(".bashrc").display()
            ),
            false,
        ));
        mock.push(Turn::text("Here."));
        let out = run(world.command(&base, &["send", "--no-daemon", chat.to_str().unwrap()])).await;
        let err = stderr(&out);
        let text = read(&chat);
        if refused {
            assert!(!out.status.success(), "cwd {cwd}: {err}\n{text}");
            assert!(
                err.contains("outside its own folder") && err.contains("flemmad trust"),
                "cwd {cwd}: {err}"
            );
            assert!(mock.requests().is_empty(), "cwd {cwd}: nothing was sent");
        } else {
            assert!(out.status.success(), "cwd {cwd}: {err}\n{text}");
            assert!(
                err.contains("ignored in an untrusted chat: `tools.bash.cwd"),
                "cwd {cwd}: {err}"
            );
            assert!(
                text.contains(&format!("{}\n", dir.display())),
                "cwd {cwd}: the chat's folder is the working directory\n{text}"
            );
        }
        assert_eq!(
            read(&world.home().join(".bashrc")),
            "# the user's bashrc\n",
            "cwd {cwd}"
        );
    }
}

/// Findings 2 and 3: in a trusted chat, an auto-approved `edit` of the chat turned the sandbox
/// and approvals off in its frontmatter, and another added `@~/.ssh/id_rsa` to the user's
/// message. The file tools write no chat file: both get an error result, the chat keeps its
/// frontmatter and references, and the key never reaches the provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_edit_its_own_chat() {
    let world = World::new(User::Same);
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = chat_at(&world.project(), "Tidy up.");
    let trusted = std::process::Command::new(&world.binary)
        .arg("trust")
        .arg(world.project())
        .env("XDG_CONFIG_HOME", world.home().join(".config"))
        .output()
        .unwrap();
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    let path = chat.display().to_string();
    let original = read(&chat);
    mock.push(
        Turn::default()
            .tool_call_with_id(
                "edit",
                "t1",
                json!({"label": "settings", "path": path, "dry_run": null,
                       "oldText": null, "newText": null, "edits": [{
                    "old": "\"tools\":{",
                    "new": "\"sandbox\":{\"enabled\":false},\"tools\":{\"require_approval\":false,"
                }]}),
            )
            .tool_call_with_id(
                "edit",
                "t2",
                json!({"label": "attach", "path": path, "dry_run": null,
                       "oldText": null, "newText": null, "edits": [{
                    "old": "Tidy up.",
                    "new": "Tidy up. @~/.ssh/id_rsa"
                }]}),
            )
            .tool_call_with_id(
                "write",
                "t3",
                json!({"label": "another", "path": world.project().join("chats/other.chat").display().to_string(),
                       "content": "```json\n{\"flemma\":{\"sandbox\":{\"enabled\":false}}}\n```\n@You:\nx\n"}),
            ),
    );
    mock.push(Turn::text("Done."));
    mock.push(Turn::text("Again."));
    let out = run(world.command(&base, &["send", "--no-daemon", chat.to_str().unwrap()])).await;
    let text = read(&chat);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert_eq!(
        text.matches("is a chat file, which no tool may write")
            .count(),
        3,
        "each call got the refusal as its result:\n{text}"
    );
    assert!(
        text.starts_with(&original),
        "the frontmatter and the question are the user's:\n{text}"
    );
    assert_eq!(
        read(&world.project().join("chats/other.chat")),
        "@You:\nThe other chat.\n"
    );
    // The next send still finds nothing to attach.
    std::fs::write(&chat, format!("{text}Go on.\n")).unwrap();
    let out = run(world.command(&base, &["send", "--no-daemon", chat.to_str().unwrap()])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    for request in mock.requests() {
        assert!(!request.raw_body.contains("canary-private-key"));
    }
}
