//! What a new user runs into, through the binary: read-only files and directories are refused
//! with a clear message before anything is written or paid for; Lua frontmatter is converted by
//! the command its diagnostic names.
//!
//! These tests may run as root, who can write any file whatever its mode: `flemmad` checks the
//! permission bits itself (a file or directory without write bits is refused), so they hold for
//! every user.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{chat, frontmatter, read, send, stderr};
use flemma_mock_provider::{MockProvider, Turn};

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn flemmad(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .args(args)
        .env_remove("FLEMMA_CONFIG")
        .env("XDG_CONFIG_HOME", "/nonexistent-flemmad-test-config")
        .output()
        .unwrap()
}

#[test]
fn fmt_refuses_a_read_only_file_and_leaves_it_alone() {
    let chat = chat("@You: legacy inline marker\n");
    set_mode(&chat.path, 0o444);
    let out = flemmad(&["fmt".as_ref(), chat.path.as_os_str()]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(message.contains("read-only"), "{message}");
    assert!(message.contains("chmod u+w"), "{message}");
    assert_eq!(read(&chat.path), "@You: legacy inline marker\n");
    assert_eq!(mode_of(&chat.path), 0o444);

    // Writable again: fmt does its work.
    set_mode(&chat.path, 0o644);
    let out = flemmad(&["fmt".as_ref(), chat.path.as_os_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&chat.path), "@You:\nlegacy inline marker\n");
}

#[tokio::test]
async fn send_refuses_a_read_only_file_before_the_request() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("A reply that would be lost."));
    let text = format!(
        "{}@You:\nhello\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    );
    let chat = chat(&text);
    set_mode(&chat.path, 0o444);
    let out = send(&chat, &mock.base_url()).await;
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(message.contains("read-only"), "{message}");
    assert!(message.contains("nothing was sent"), "{message}");
    assert!(mock.requests().is_empty(), "no request is paid for");
    assert_eq!(read(&chat.path), text);
    assert_eq!(mode_of(&chat.path), 0o444);
}

#[tokio::test]
async fn send_refuses_a_read_only_directory_before_the_request() {
    let mock = MockProvider::start().await.unwrap();
    mock.push(Turn::text("A reply that would be lost."));
    let text = format!(
        "{}@You:\nhello\n",
        frontmatter("anthropic", "claude-sonnet-4-5")
    );
    let chat = chat(&text);
    let dir = chat.path.parent().unwrap().to_path_buf();
    set_mode(&dir, 0o555);
    let out = send(&chat, &mock.base_url()).await;
    set_mode(&dir, 0o755);
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(message.contains("directory"), "{message}");
    assert!(message.contains("nothing was sent"), "{message}");
    assert!(mock.requests().is_empty(), "no request is paid for");
    assert_eq!(read(&chat.path), text);

    // Writable: the same send goes through.
    let out = send(&chat, &mock.base_url()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(read(&chat.path).contains("A reply that would be lost."));
}

const LUA_CHAT: &str = "```lua\nrecipient = \"QA team\"\nflemma.opt.thinking = \"medium\"\n```\n@You: Hello {{ recipient }}\n";

#[test]
fn the_lua_diagnostic_names_the_command_that_converts() {
    let chat = chat(LUA_CHAT);
    let out = flemmad(&["parse".as_ref(), chat.path.as_os_str()]);
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(printed.contains("flemmad fmt --convert-lua"), "{printed}");
    let out = flemmad(&["fmt".as_ref(), chat.path.as_os_str()]);
    assert!(
        stderr(&out).contains("`flemmad fmt --convert-lua"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fmt_convert_lua_turns_declarative_lua_into_rhai() {
    let chat = chat(LUA_CHAT);
    let check = flemmad(&[
        "fmt".as_ref(),
        "--check".as_ref(),
        "--convert-lua".as_ref(),
        chat.path.as_os_str(),
    ]);
    assert_eq!(check.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&check.stdout).contains("would convert the Lua frontmatter"));
    assert_eq!(read(&chat.path), LUA_CHAT);

    let out = flemmad(&[
        "fmt".as_ref(),
        "--convert-lua".as_ref(),
        chat.path.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        read(&chat.path),
        "```rhai\nlet recipient = \"QA team\";\nflemma.opt.thinking = \"medium\";\n```\n@You:\nHello {{ recipient }}\n"
    );
    let eval = flemmad(&["parse".as_ref(), "--eval".as_ref(), chat.path.as_os_str()]);
    let printed = String::from_utf8_lossy(&eval.stdout);
    assert!(
        printed.contains("Hello QA team"),
        "{printed}{}",
        stderr(&eval)
    );
    assert!(!printed.contains("error"), "{printed}");
    // The fixed point: nothing more to do.
    let again = flemmad(&[
        "fmt".as_ref(),
        "--check".as_ref(),
        "--convert-lua".as_ref(),
        chat.path.as_os_str(),
    ]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
}

#[test]
fn fmt_convert_lua_refuses_code_it_cannot_convert() {
    let text =
        "```lua\nif os.getenv(\"CI\") then\n  flemma.opt.thinking = \"low\"\nend\n```\n@You:\nhi\n";
    let chat = chat(text);
    let out = flemmad(&[
        "fmt".as_ref(),
        "--convert-lua".as_ref(),
        chat.path.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(message.contains("by hand"), "{message}");
    assert!(message.contains("not changed"), "{message}");
    assert_eq!(read(&chat.path), text);
}

#[test]
fn an_incomplete_tag_is_not_blamed_on_a_semicolon_the_user_never_wrote() {
    let chat = chat("@You:\n{% if %}yes{% } %}\n\n@You:\n{% x = %}\n");
    let out = flemmad(&["parse".as_ref(), "--eval".as_ref(), chat.path.as_os_str()]);
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!printed.contains("';'"), "{printed}");
    assert_eq!(printed.matches("ends too early").count(), 2, "{printed}");

    let chat = common::chat("@You:\n{% if true %}yes{% endif %}\n");
    let out = flemmad(&["parse".as_ref(), "--eval".as_ref(), chat.path.as_os_str()]);
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(printed.contains("{% if cond { %}"), "{printed}");
}

#[test]
fn output_cut_short_by_the_reader_ends_quietly() {
    use std::io::Read as _;
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("@You:\nmessage {i}\n\n@Assistant:\nreply {i}\n\n"));
    }
    let chat = chat(&text);
    let mut child = Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .args(["parse".as_ref(), chat.path.as_os_str()])
        .env("XDG_CONFIG_HOME", &chat.config_home)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout); // like `| head -1`
    let out = child.wait_with_output().unwrap();
    let message = stderr(&out);
    assert!(!message.contains("Broken pipe"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert_eq!(out.status.code(), Some(141));
}

#[test]
fn log_level_and_file_from_the_configuration_are_used() {
    let chat = chat("@You:\n{{ print(\"a line for the log\") }}hi\n");
    let log = chat.config_home.join("flemmad.log");
    let config = chat.config_home.join("config.toml");
    std::fs::write(
        &config,
        format!("[log]\nlevel = \"info\"\nfile = \"{}\"\n", log.display()),
    )
    .unwrap();
    let run = |config: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flemmad"));
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command
            .args(["parse".as_ref(), "--eval".as_ref(), chat.path.as_os_str()])
            .env("XDG_CONFIG_HOME", "/nonexistent-flemmad-test-config")
            .env_remove("FLEMMA_CONFIG")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let out = run(Some(&config));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("a line for the log"),
        "{}",
        stderr(&out)
    );
    assert!(read(&log).contains("a line for the log"), "{}", read(&log));

    // Without the configuration: warnings only, on stderr.
    let out = run(None);
    assert!(
        !stderr(&out).contains("a line for the log"),
        "{}",
        stderr(&out)
    );
}
