//! `flemmad parse` and `flemmad fmt` driven as a process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn flemmad() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flemmad"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/chat")
        .join(name)
}

#[test]
fn parse_json_has_the_documented_shape() {
    let out = flemmad()
        .args(["parse", "--json"])
        .arg(fixture("spec_7_2_parallel_tools.chat"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["frontmatter"].is_null());
    let messages = json["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "Assistant");
    let tool_uses: Vec<_> = messages[1]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool_use")
        .collect();
    assert_eq!(tool_uses.len(), 2);
    assert_eq!(tool_uses[0]["name"], "write");
    assert_eq!(tool_uses[0]["input"]["path"], "hello.md");
    assert!(
        tool_uses[0]["raw_input"]
            .as_str()
            .unwrap()
            .contains("```python")
    );
    let results: Vec<_> = messages[2]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool_result")
        .collect();
    assert_eq!(results[0]["status"], serde_json::Value::Null);
    assert_eq!(results[0]["content"], "Wrote 38 bytes to hello.md\n");
    assert_eq!(results[1]["status"], "pending");
    assert_eq!(results[1]["range"]["start"]["line"], 22);
}

#[test]
fn parse_reports_diagnostics_but_exits_zero() {
    let out = flemmad()
        .args(["parse", "--json"])
        .arg(fixture("broken_blocks.chat"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<&str> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"tool-use-without-fence"), "{codes:?}");
    assert!(codes.contains(&"legacy-inline-role"), "{codes:?}");
}

#[test]
fn parse_positions_follow_the_requested_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.chat");
    std::fs::write(&path, "@You:\n😀 {{ x }}\n").unwrap();
    let column = |encoding: &str| {
        let out = flemmad()
            .args(["parse", "--json", "--position-encoding", encoding])
            .arg(&path)
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["messages"][0]["segments"][1]["range"]["start"]["character"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(column("utf-16"), 3);
    assert_eq!(column("utf-8"), 5);
}

#[test]
fn parse_of_a_missing_file_exits_two_with_one_line() {
    let out = flemmad()
        .args(["parse", "/nonexistent/x.chat"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/x.chat"));
}

#[test]
fn parse_outline_lists_nodes() {
    let out = flemmad()
        .arg("parse")
        .arg(fixture("thinking_forms.chat"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("thinking 7:0-10:0 provider=anthropic"),
        "{text}"
    );
}

#[test]
fn fmt_check_names_changes_then_fmt_applies_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.chat");
    let original =
        "@You: hello\n\n@Assistant:\n**Tool Use:** `slack:list` (`t1`)\n\n```json\n{}\n```\n";
    std::fs::write(&path, original).unwrap();
    let check = flemmad()
        .args(["fmt", "--check"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let listed = String::from_utf8_lossy(&check.stdout);
    assert!(listed.contains(":1: would split"), "{listed}");
    assert!(listed.contains("slack.list"), "{listed}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        original,
        "--check must not write"
    );

    let fmt = flemmad().arg("fmt").arg(&path).output().unwrap();
    assert!(fmt.status.success());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nhello\n\n@Assistant:\n**Tool Use:** `slack.list` (`t1`)\n\n```json\n{}\n```\n"
    );
    let again = flemmad()
        .args(["fmt", "--check"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(again.status.success());
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["parse", "fmt"] {
        let out = flemmad().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: flemmad"), "{text}");
    }
}

#[test]
fn parse_eval_json_prints_conversation_resolved_config_and_positions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.chat");
    std::fs::write(
        &path,
        "```rhai\nlet who = \"QA\";\nflemma.opt.provider = \"openai\";\nflemma.opt.thinking = \"low\";\n```\n@You:\nHello {{ who }} and {{ nobody }}\n",
    )
    .unwrap();
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(config_home.join("flemma")).unwrap();
    std::fs::write(
        config_home.join("flemma/config.toml"),
        "[parameters]\ntemperature = 0.5\n",
    )
    .unwrap();
    let out = flemmad()
        .args(["parse", "--eval", "--json"])
        .arg(&path)
        .env("XDG_CONFIG_HOME", &config_home)
        .env_remove("FLEMMA_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = &json["conversation"]["messages"][0]["parts"][0]["text"];
    assert_eq!(text, "Hello QA and {{ nobody }}");
    assert_eq!(json["config"]["provider"], "openai");
    // Switching provider in the frontmatter brings that provider's default model.
    assert_eq!(json["config"]["model"], "gpt-5.4");
    assert_eq!(json["config"]["parameters"]["temperature"], 0.5);
    assert_eq!(json["config_sources"]["provider"], "frontmatter");
    assert_eq!(
        json["config_sources"]["parameters.temperature"],
        "config file"
    );
    assert_eq!(json["config_sources"]["parameters.thinking"], "frontmatter");
    let diagnostic = &json["diagnostics"][0];
    assert_eq!(diagnostic["severity"], "warning");
    assert_eq!(diagnostic["range"]["start"]["line"], 6);
    assert!(diagnostic["message"].as_str().unwrap().contains("nobody"));
}
