//! `flemmad doctor` as a real process on a made-up machine: a temporary HOME, XDG dirs and PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use flemma_mock_provider::{MockConfig, MockProvider};

/// A machine with nothing set up: empty HOME, config and runtime dirs, and a PATH of a private
/// bin dir (with a `secret-tool` that knows no secret) before the system's.
struct Machine {
    _dir: tempfile::TempDir,
    home: PathBuf,
    config_home: PathBuf,
    runtime_dir: PathBuf,
    bin: PathBuf,
    env: Vec<(String, String)>,
}

fn machine() -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config_home = dir.path().join("config");
    let runtime_dir = dir.path().join("run");
    let bin = dir.path().join("bin");
    for d in [&home, &config_home, &runtime_dir, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::set_permissions(&runtime_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    script(&bin, "secret-tool", "echo 'No matching secret' >&2; exit 1");
    Machine {
        _dir: dir,
        home,
        config_home,
        runtime_dir,
        bin,
        env: Vec::new(),
    }
}

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Machine {
    fn with(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    fn doctor(&self, args: &[&str]) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.bin.display());
        std::process::Command::new(env!("CARGO_BIN_EXE_flemmad"))
            .arg("doctor")
            .args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config_home)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env("PATH", path)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    }

    fn write(&self, relative: &Path, text: &str) -> PathBuf {
        let path = self.config_home.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn findings(out: &Output) -> Vec<serde_json::Value> {
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .expect("--json prints JSON")
        .as_array()
        .expect("an array")
        .clone()
}

/// The findings of one check with one status.
fn with_status<'a>(
    findings: &'a [serde_json::Value],
    check: &str,
    status: &str,
) -> Vec<&'a serde_json::Value> {
    findings
        .iter()
        .filter(|f| f["check"] == check && f["status"] == status)
        .collect()
}

#[test]
fn a_clean_machine_without_a_key_needs_attention_for_the_credential_only() {
    let m = machine();
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for line in [
        "info config: no configuration file (",
        "fail credentials: no api_key for anthropic",
        "fix: set ANTHROPIC_API_KEY",
        "info daemon: not running",
        "sandbox: ",
        "search-tools: ",
        "info systemd: no flemmad user units",
        "1 check needs attention.",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("fail")).collect();
    assert_eq!(fails.len(), 1, "{text}");
    // Editors that are not set up are not reported as problems.
    assert!(!text.contains("helix:"), "{text}");
    assert!(!text.contains("vscode:"), "{text}");
}

/// Without `XDG_RUNTIME_DIR` the daemon serves in `/tmp/flemma-$UID/`: doctor looks there too.
#[test]
fn without_xdg_runtime_dir_the_daemon_is_looked_for_where_it_serves() {
    use std::os::unix::fs::MetadataExt as _;
    let m = machine().with("XDG_RUNTIME_DIR", "");
    let uid = std::fs::metadata(&m.home).unwrap().uid();
    let text = stdout(&m.doctor(&[]));
    let daemon: Vec<&str> = text.lines().filter(|l| l.contains("daemon:")).collect();
    assert_eq!(daemon.len(), 1, "{text}");
    assert!(daemon[0].contains(&format!("/tmp/flemma-{uid}")), "{text}");
    assert!(!text.contains("no place"), "{text}");
}

/// Provider `codex`: the check is the ChatGPT login `codex login` writes (`~/.codex/auth.json`),
/// never a key.
#[test]
fn codex_is_checked_by_its_chatgpt_login() {
    let m = machine();
    m.write(Path::new("flemma/config.toml"), "provider = \"codex\"\n");
    let out = m.doctor(&[]);
    let text = stdout(&out);
    let login = m.home.join(".codex/auth.json");
    assert!(
        text.contains(&format!(
            "fail credentials: not logged in to ChatGPT: {} does not exist",
            login.display()
        )) && text.contains("fix: run `codex login`"),
        "{text}"
    );
    std::fs::create_dir_all(login.parent().unwrap()).unwrap();
    std::fs::write(
        &login,
        r#"{"tokens": {"access_token": "not-a-jwt", "refresh_token": "r", "account_id": "a"}}"#,
    )
    .unwrap();
    let text = stdout(&m.doctor(&[]));
    assert!(
        text.contains(&format!(
            "ok   credentials: codex (the configured provider) uses the ChatGPT login in {}",
            login.display()
        )),
        "{text}"
    );
}

#[test]
fn a_key_in_the_environment_is_found_by_name_and_never_printed() {
    let key = "sk-ant-doctor-very-secret-0123456789";
    let m = machine().with("ANTHROPIC_API_KEY", key);
    for args in [&[][..], &["--json"][..]] {
        let out = m.doctor(args);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(
            text.contains("comes from environment variable ANTHROPIC_API_KEY"),
            "{text}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        for prefix in [key, &key[..12], &key[key.len() - 8..]] {
            assert!(!text.contains(prefix), "{text}");
            assert!(!stderr.contains(prefix), "{stderr}");
        }
    }
    let text = stdout(&m.doctor(&[]));
    assert!(text.contains("All is well."), "{text}");
}

#[test]
fn a_key_from_secret_tool_names_secret_tool() {
    let m = machine().with("OPENAI_API_KEY", "");
    script(
        &m.bin,
        "secret-tool",
        r#"[ "$*" = "lookup service openai key api_key" ] && echo sk-from-the-keyring && exit 0; exit 1"#,
    );
    m.write(
        Path::new("flemma/config.toml"),
        "provider = \"openai\"\nmodel = \"gpt-5\"\n",
    );
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("comes from secret-tool lookup service openai key api_key"),
        "{text}"
    );
    assert!(!text.contains("sk-from-the-keyring"), "{text}");
}

#[test]
fn an_invalid_config_fails_with_its_file_and_line() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    let file = m.write(
        Path::new("flemma/config.toml"),
        "# my settings\nmodel = \"claude-sonnet-4-5\"\nprovider = \"antropic\"\n",
    );
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("fail config:"), "{text}");
    assert!(text.contains("config.toml:3"), "{text}");
    assert!(
        text.contains(&format!("fix: fix {}", file.display())),
        "{text}"
    );

    // A valid file is named as the one in use.
    std::fs::write(&file, "provider = \"anthropic\"\n").unwrap();
    let text = stdout(&m.doctor(&[]));
    assert!(
        text.contains(&format!("ok   config: {} is valid", file.display())),
        "{text}"
    );
}

#[test]
fn a_socket_dir_open_to_others_fails_with_the_fix() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    let dir = m.runtime_dir.join("flemma");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "fail daemon: {} has mode 0755; it must be 0700",
            dir.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("fix: chmod 700 {}", dir.display())),
        "{text}"
    );
}

#[test]
fn a_listening_socket_is_a_running_daemon_and_its_mode_is_checked() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    let dir = m.runtime_dir.join("flemma");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("lsp.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = m.doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let all = findings(&out);
    let running = with_status(&all, "daemon", "ok");
    assert_eq!(running.len(), 1, "{all:?}");
    assert!(
        running[0]["message"]
            .as_str()
            .unwrap()
            .contains("answers on lsp.sock"),
        "{all:?}"
    );

    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("has mode 0666; it must be 0600"), "{text}");
    assert!(
        text.contains(&format!("fix: chmod 600 {}", socket.display())),
        "{text}"
    );
}

#[test]
fn a_stale_socket_is_a_warning_not_a_failure() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    let dir = m.runtime_dir.join("flemma");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("rpc.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = m.doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let all = findings(&out);
    assert_eq!(with_status(&all, "daemon", "warn").len(), 1, "{all:?}");
}

#[test]
fn a_helix_set_up_without_the_server_fails_naming_the_file() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    let languages = m.write(
        Path::new("helix/languages.toml"),
        "[[language]]\nname = \"chat\"\nscope = \"text.chat\"\nfile-types = [\"chat\"]\nlanguage-servers = [\"flemma\"]\n",
    );
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "fail helix: {} has no [language-server.flemma]",
            languages.display()
        )),
        "{text}"
    );
}

#[test]
fn the_shipped_helix_set_up_is_complete() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_flemmad"), m.bin.join("flemmad")).unwrap();
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/helix");
    let shipped = std::fs::read_to_string(clients.join("languages.toml")).unwrap();
    m.write(Path::new("helix/languages.toml"), &shipped);
    let out = m.doctor(&["--json"]);
    let all = findings(&out);
    // Without the query files: works, with a warning saying how to copy them.
    assert_eq!(with_status(&all, "helix", "ok").len(), 1, "{all:?}");
    let warnings = with_status(&all, "helix", "warn");
    assert_eq!(warnings.len(), 1, "{all:?}");
    assert!(
        warnings[0]["hint"]
            .as_str()
            .unwrap()
            .contains("runtime/queries/chat"),
        "{all:?}"
    );
    for query in ["highlights.scm", "injections.scm"] {
        let text =
            std::fs::read_to_string(clients.join("runtime/queries/chat").join(query)).unwrap();
        m.write(&Path::new("helix/runtime/queries/chat").join(query), &text);
    }
    let out = m.doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let all = findings(&out);
    assert!(with_status(&all, "helix", "warn").is_empty(), "{all:?}");

    // A command that does not resolve is a broken set-up.
    std::fs::remove_file(m.bin.join("flemmad")).unwrap();
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("the flemma server's command `flemmad` is not an executable on PATH"),
        "{text}"
    );
}

#[test]
fn the_documented_zed_set_up_is_checked() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    // No Zed settings: nothing said.
    let all = findings(&m.doctor(&["--json"]));
    assert!(all.iter().all(|f| f["check"] != "zed"), "{all:?}");

    // The entry of docs/editors/zed.md, in settings with comments and a trailing comma, as
    // Zed's own files are.
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/editors/zed.md"))
            .unwrap();
    let entry = docs
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Zed settings block of docs/editors/zed.md");
    assert!(entry.contains("\"env\": {}"), "{entry}");
    let settings = format!(
        "// Zed settings\n{}\n",
        entry
            .trim()
            .replacen(
                "\"agent_servers\"",
                "\"theme\": \"One Dark\", // mine\n  \"agent_servers\"",
                1
            )
            .replacen("\"env\": {}", "\"env\": {}, /* a trailing comma */", 1)
    );
    let path = m.write(Path::new("zed/settings.json"), &settings);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_flemmad"), m.bin.join("flemmad")).unwrap();
    let all = findings(&m.doctor(&["--json"]));
    assert_eq!(
        with_status(&all, "zed", "ok").len(),
        1,
        "{settings}\n{all:?}"
    );

    // Without `acp`, and with a command that is not there: both said, with the fix.
    m.write(
        Path::new("zed/settings.json"),
        r#"{"agent_servers": {"flemmad": {"command": "flemmad", "args": ["lsp"]}}}"#,
    );
    std::fs::remove_file(m.bin.join("flemmad")).unwrap();
    let out = m.doctor(&[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "fail zed: {}: `agent_servers.flemmad` runs flemmad without `acp`",
            path.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("`agent_servers.flemmad.command` `flemmad` is not an executable on PATH"),
        "{text}"
    );

    // Zed set up with other agents only: how things are, not a failure.
    m.write(
        Path::new("zed/settings.json"),
        r#"{"agent_servers": {"other": {"command": "other-agent"}}}"#,
    );
    let all = findings(&m.doctor(&["--json"]));
    assert_eq!(with_status(&all, "zed", "info").len(), 1, "{all:?}");
}

#[test]
fn systemd_units_and_vscode_extensions_are_checked_when_present() {
    let m = machine().with("ANTHROPIC_API_KEY", "sk-test");
    m.write(
        Path::new("systemd/user/flemmad.service"),
        "[Service]\nExecStart=/nowhere/flemmad serve\n",
    );
    let text = stdout(&m.doctor(&[]));
    assert!(text.contains("fail systemd: incomplete:"), "{text}");
    assert!(text.contains("flemmad.socket is missing"), "{text}");

    m.write(Path::new("systemd/user/flemmad.socket"), "[Socket]\n");
    let text = stdout(&m.doctor(&[]));
    assert!(
        text.contains("ExecStart names /nowhere/flemmad, which is not an executable"),
        "{text}"
    );

    m.write(
        Path::new("systemd/user/flemmad.service"),
        &format!(
            "[Service]\nExecStart={} serve\n",
            env!("CARGO_BIN_EXE_flemmad")
        ),
    );
    let extension = m.home.join(".vscode/extensions/flemma.flemmad-0.1.0");
    std::fs::create_dir_all(&extension).unwrap();
    std::fs::write(extension.join("package.json"), "{\"version\": \"0.1.0\"}").unwrap();
    let out = m.doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let all = findings(&out);
    assert_eq!(with_status(&all, "systemd", "ok").len(), 1, "{all:?}");
    assert_eq!(with_status(&all, "vscode", "ok").len(), 1, "{all:?}");

    std::fs::write(extension.join("package.json"), "{not json").unwrap();
    let out = m.doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        with_status(&findings(&out), "vscode", "fail").len(),
        1,
        "{}",
        stdout(&out)
    );
}

#[test]
fn json_is_an_array_of_findings() {
    let out = machine().doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let all = findings(&out);
    assert!(all.len() >= 5, "{all:?}");
    for finding in &all {
        let object = finding.as_object().unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["check", "hint", "message", "status"], "{finding}");
        assert!(
            ["ok", "warn", "fail", "info"].contains(&finding["status"].as_str().unwrap()),
            "{finding}"
        );
        assert!(finding["hint"].is_null() || finding["hint"].is_string());
    }
    assert_eq!(with_status(&all, "credentials", "fail").len(), 1, "{all:?}");
}

#[tokio::test]
async fn online_asks_the_provider_and_explains_a_rejected_key() {
    let mock = MockProvider::start_with(MockConfig {
        require_key: Some("sk-the-right-key".to_owned()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let base = mock.base_url();
    let run = |key: &'static str| {
        let m = machine()
            .with("ANTHROPIC_API_KEY", key)
            .with("ANTHROPIC_BASE_URL", &base);
        tokio::task::spawn_blocking(move || m.doctor(&["--online"]))
    };
    let out = run("sk-the-right-key").await.unwrap();
    let text = stdout(&out);
    assert!(text.contains("provider: anthropic at "), "{text}");
    assert!(text.contains(" answers: "), "{text}");
    assert!(
        mock.requests()
            .iter()
            .any(|r| r.path.starts_with("/v1/models")),
        "{text}"
    );

    let out = run("sk-a-wrong-key").await.unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("fail provider:"), "{text}");
    assert!(
        text.contains("rejected the credential ANTHROPIC_API_KEY"),
        "{text}"
    );
    assert!(!text.contains("sk-a-wrong-key"), "{text}");
}

#[test]
fn help_describes_every_check_and_the_exit_status() {
    let out = machine().doctor(&["--help"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    for word in [
        "--online",
        "--json",
        "credentials",
        "daemon",
        "sandbox",
        "helix",
        "vscode",
        "systemd",
        "Exit status",
    ] {
        assert!(text.contains(word), "missing {word:?} in:\n{text}");
    }
}
