//! Helpers shared by the end-to-end tests: temporary chats, and `flemmad` commands whose
//! providers all point at a `flemma-mock-provider`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

pub struct Chat {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub config_home: PathBuf,
}

pub fn chat(text: &str) -> Chat {
    chat_in(tempfile::tempdir().unwrap(), text)
}

/// A temporary folder outside every path the default sandbox policy makes writable (`/tmp`,
/// `$TMPDIR`): under `target/tmp`, or under `/var/tmp` when the checkout itself is in `/tmp`
/// (as a CI clone may be). A canary in a writable folder proves nothing.
pub fn outside_tmp(prefix: &str) -> tempfile::TempDir {
    let target_tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let writable = |path: &std::path::Path| {
        path.starts_with("/tmp")
            || std::env::var_os("TMPDIR")
                .filter(|dir| !dir.is_empty())
                .is_some_and(|dir| path.starts_with(dir))
    };
    let base = if writable(&target_tmp) {
        PathBuf::from("/var/tmp")
    } else {
        target_tmp
    };
    assert!(
        !writable(&base),
        "no folder outside /tmp and $TMPDIR for the test's canaries (tried {})",
        base.display()
    );
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&base)
        .unwrap_or_else(|error| panic!("a temp dir in {}: {error}", base.display()))
}

/// A chat in a temporary folder outside `/tmp` ([`outside_tmp`]): the default sandbox
/// policy makes `/tmp` writable, so a canary there proves nothing.
pub fn chat_outside_tmp(text: &str) -> Chat {
    chat_in(outside_tmp("flemmad-chat-"), text)
}

fn chat_in(dir: tempfile::TempDir, text: &str) -> Chat {
    chat_under(dir, "", text)
}

/// A chat `talk.chat` in the folder `folder` (created) of the temporary folder `dir`, whose
/// `config/` is its config home.
pub fn chat_under(dir: tempfile::TempDir, folder: &str, text: &str) -> Chat {
    std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    let path = dir.path().join(folder).join("talk.chat");
    std::fs::write(&path, text).unwrap();
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(&config_home).unwrap();
    Chat {
        path,
        config_home,
        _dir: dir,
    }
}

/// Writes the user configuration file of `chat`'s config home (`flemma/config.toml`).
pub fn write_user_config(chat: &Chat, toml: &str) {
    let dir = chat.config_home.join("flemma");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

/// Trusts `dir` with `flemmad trust` under the config home `config_home` (the tests' own
/// `XDG_CONFIG_HOME`): its chats' frontmatter may then widen what they do, as before the trust
/// model (docs/security.md).
pub fn trust_folder(dir: &Path, config_home: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .arg("trust")
        .arg(dir)
        .env("XDG_CONFIG_HOME", config_home)
        .env_remove("FLEMMA_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "flemmad trust: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A chat in a folder trusted with `flemmad trust`: for tests of what a frontmatter that
/// widens power does (auto-approving `bash`, custom tools, approval functions…).
pub fn trusted_chat(text: &str) -> Chat {
    let chat = chat(text);
    trust_folder(chat.path.parent().unwrap(), &chat.config_home);
    chat
}

pub fn frontmatter(provider: &str, model: &str) -> String {
    let extra = if provider == "vertex" {
        r#", "parameters": {"vertex": {"project_id": "demo-project", "location": "us-central1"}}"#
    } else {
        ""
    };
    format!(
        "```json\n{{\"flemma\": {{\"provider\": \"{provider}\", \"model\": \"{model}\"{extra}}}}}\n```\n"
    )
}

/// Environment pointing every provider at the mock.
pub fn provider_env(base: &str) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", base.to_owned()),
        ("ANTHROPIC_API_KEY", "sk-ant-test-secret".to_owned()),
        ("OPENAI_BASE_URL", format!("{base}/v1")),
        ("OPENAI_API_KEY", "sk-openai-test".to_owned()),
        ("OPENAI_COMPATIBLE_BASE_URL", format!("{base}/v1")),
        ("GEMINI_BASE_URL", base.to_owned()),
        ("GEMINI_API_KEY", "gemini-test".to_owned()),
        ("VERTEX_BASE_URL", base.to_owned()),
        ("VERTEX_ACCESS_TOKEN", "ya29.test".to_owned()),
        ("MOONSHOT_BASE_URL", format!("{base}/v1")),
        ("MOONSHOT_API_KEY", "moonshot-test".to_owned()),
        ("CODEX_BASE_URL", format!("{base}/backend-api/codex")),
        (
            "CODEX_REFRESH_TOKEN_URL_OVERRIDE",
            format!("{base}/oauth/token"),
        ),
    ]
}

/// The Codex CLI's home of a chat's tests (`CODEX_HOME`, set by [`flemmad_command`]): a
/// test never reads the real `~/.codex`.
pub fn codex_home(chat: &Chat) -> PathBuf {
    chat.path.parent().unwrap().join("codex-home")
}

pub fn send_command(chat: &Chat, base: &str) -> tokio::process::Command {
    let mut command = flemmad_command(chat, base);
    command.arg("send").arg(&chat.path);
    command
}

/// `flemmad` with every provider pointed at `base` and an empty user configuration.
pub fn flemmad_command(chat: &Chat, base: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_flemmad"));
    // The chat's own runtime and state directories: a test never reaches a daemon it did not
    // start (`serve_daemon`), and a daemon's log stays in the temp dir.
    let dir = chat.path.parent().unwrap();
    command
        .env("XDG_CONFIG_HOME", &chat.config_home)
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("CODEX_HOME", dir.join("codex-home"))
        .env_remove("FLEMMA_CONFIG")
        .env("PATH", "/usr/bin:/bin")
        .kill_on_drop(true);
    for (key, value) in provider_env(base) {
        command.env(key, value);
    }
    command
}

pub async fn send(chat: &Chat, base: &str) -> Output {
    tokio::time::timeout(Duration::from_secs(60), send_command(chat, base).output())
        .await
        .expect("flemmad send finished in time")
        .unwrap()
}

/// The content of the tool result `id` in `chat` (its fence's content).
pub fn result_of<'t>(chat: &'t str, id: &str) -> &'t str {
    let (_, rest) = result_line(chat, id);
    let body = rest.find("\n```").map_or(rest, |at| &rest[at + 4..]);
    let end = body.find("\n```").unwrap_or(body.len());
    &body[..end]
}

/// The header line of the tool result `id` in `chat` (with its status: `(error)`, …), and
/// what follows it.
pub fn result_line<'t>(chat: &'t str, id: &str) -> (&'t str, &'t str) {
    let header = format!("**Tool Result:** `{id}`");
    let start = chat
        .find(&header)
        .unwrap_or_else(|| panic!("no result for {id}:\n{chat}"));
    let rest = &chat[start..];
    let end = rest.find('\n').unwrap_or(rest.len());
    (&rest[..end], &rest[end..])
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The Python of an official SDK from PyPI, named by the environment variable `var` (`.ci/run`
/// makes a venv with `package` and sets it); `None` (the test is skipped, and says so) when it
/// is not set, which fails under CI.
pub fn sdk_python(var: &str, package: &str, test: &str) -> Option<std::path::PathBuf> {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => Some(std::path::PathBuf::from(path)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: {var} is not set; .ci/run installs PyPI `{package}` in a venv and sets it"
            );
            eprintln!(
                "skipped: {test}: set {var} to a Python with PyPI `{package}` to run this test"
            );
            None
        }
    }
}

/// The text of the file at `path` once it contains `needle` (polled, up to 30 s); `what` names
/// the wait in the failure.
pub fn wait_until_contains(path: &Path, needle: &str, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {needle:?} never appeared in\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A multi-thread tokio runtime with one worker, for a test that drives processes from plain
/// threads (`block_on`) while the runtime's worker answers them.
pub fn one_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Runs `git ARGS` in `dir` with no user configuration and a fixed identity; fails the test
/// when git does.
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "me")
        .env("GIT_AUTHOR_EMAIL", "me@example.org")
        .env("GIT_COMMITTER_NAME", "me")
        .env("GIT_COMMITTER_EMAIL", "me@example.org")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
}
