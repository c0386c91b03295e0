//! `flemmad tools` end to end: a real binary, real chats in temp dirs, a real sandbox when
//! `bwrap` is usable here, and the fallback with `bwrap` hidden from `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn chat_dir() -> (tempfile::TempDir, PathBuf) {
    // Outside /tmp, which the default sandbox policy leaves writable as a whole.
    let dir = crate::common::outside_tmp("flemmad-tools-");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::write(root.join("my.chat"), "@You:\nhi\n").expect("chat");
    (dir, root)
}

fn flemmad(root: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flemmad"));
    command
        .args(args)
        .current_dir(root)
        .env("XDG_CONFIG_HOME", root.join("config-home"))
        .env_remove("FLEMMA_CONFIG");
    command
}

fn run(root: &Path, args: &[&str]) -> Output {
    flemmad(root, args).output().expect("flemmad runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn bwrap_usable() -> bool {
    flemma_tools::sandbox::bwrap_availability().is_ok()
}

#[test]
fn lists_tools_for_the_chat_with_frontmatter_and_approval() {
    let (_dir, root) = chat_dir();
    std::fs::write(
        root.join("fm.chat"),
        "```json\n{\"flemma\": {\"tools\": {\"enabled\": [\"bash\", \"read\"], \"auto_approve\": [\"read\"]}}}\n```\n@You:\nhi\n",
    )
    .expect("chat");
    let out = run(&root, &["tools", "--chat", "fm.chat", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let names: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["bash", "read"]);
    assert_eq!(report["tools"][1]["approval"]["verdict"], "approve");
    assert_eq!(
        report["tools"][1]["approval"]["resolver"],
        "urn:flemma:approval:config"
    );
    let bash = &report["tools"][0];
    let expected = if bwrap_usable() {
        ("approve", "urn:flemma:approval:sandbox")
    } else {
        ("require_approval", "urn:flemma:approval:default")
    };
    assert_eq!(
        (
            bash["approval"]["verdict"].as_str(),
            bash["approval"]["resolver"].as_str()
        ),
        (Some(expected.0), Some(expected.1))
    );
    assert_eq!(bash["input_schema"]["required"][0], "label");
    assert_eq!(
        bash["wire_schema"]["required"],
        serde_json::json!([
            "label",
            "command",
            "timeout",
            "flemma.background",
            "flemma.save_to"
        ])
    );
    assert_eq!(report["cwd"], root.display().to_string());
}

#[test]
fn run_prints_the_result_text_and_exit_codes() {
    let (_dir, root) = chat_dir();
    let ok = run(
        &root,
        &[
            "tools",
            "run",
            "bash",
            r#"{"label":"x","command":"echo hello","timeout":null}"#,
            "--chat",
            "my.chat",
        ],
    );
    assert_eq!(
        (ok.status.code(), stdout(&ok).as_str()),
        (Some(0), "hello\n")
    );
    let failed = run(
        &root,
        &[
            "tools",
            "run",
            "bash",
            r#"{"label":"x","command":"echo partial; exit 7","timeout":null}"#,
        ],
    );
    assert_eq!(
        (failed.status.code(), stdout(&failed).as_str()),
        (Some(1), "partial\n[exit code: 7]\n")
    );
    let unknown = run(&root, &["tools", "run", "raed", "{}"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("did you mean `read`?"),
        "{}",
        stderr(&unknown)
    );
    let bad_json = run(&root, &["tools", "run", "read", "{path"]);
    assert_eq!(bad_json.status.code(), Some(2));
    assert!(stderr(&bad_json).contains("not valid JSON"));
    let mismatch = run(
        &root,
        &[
            "tools",
            "run",
            "ls",
            r#"{"label":"x","path":null,"max_depth":"deep","limit":null}"#,
        ],
    );
    assert_eq!(mismatch.status.code(), Some(2));
    assert!(
        stderr(&mismatch).contains("max_depth: expected integer or null, got string"),
        "{}",
        stderr(&mismatch)
    );
    let missing = run(
        &root,
        &[
            "tools",
            "run",
            "read",
            r#"{"label":"x","path":"nope.md","offset":null,"limit":null}"#,
            "--chat",
            "my.chat",
        ],
    );
    assert_eq!(
        (missing.status.code(), stdout(&missing).as_str()),
        (Some(1), "nope.md does not exist. Create it with write\n")
    );
}

#[test]
fn write_outside_the_policy_is_refused_and_nothing_is_written() {
    let (_dir, root) = chat_dir();
    let (_other, elsewhere) = chat_dir();
    let target = elsewhere.join("stolen.txt");
    let input = format!(
        r#"{{"label":"x","path":"{}","content":"x"}}"#,
        target.display()
    );
    let out = run(
        &root,
        &["tools", "run", "write", &input, "--chat", "my.chat"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("Refused to write"),
        "{}",
        stdout(&out)
    );
    assert!(!target.exists());
    let inside = run(
        &root,
        &[
            "tools",
            "run",
            "write",
            r#"{"label":"x","path":"notes/a.md","content":"hi\n"}"#,
            "--chat",
            "my.chat",
        ],
    );
    assert_eq!(inside.status.code(), Some(0), "{}", stdout(&inside));
    assert_eq!(
        std::fs::read_to_string(root.join("notes/a.md")).expect("written"),
        "hi\n"
    );
}

#[test]
fn huge_output_lands_in_the_chat_store() {
    let (_dir, root) = chat_dir();
    let out = run(
        &root,
        &[
            "tools",
            "run",
            "bash",
            r#"{"label":"x","command":"seq 1 100000","timeout":null}"#,
            "--chat",
            "my.chat",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let notice = text.lines().last().expect("notice");
    assert!(
        notice.starts_with("[Output truncated: showing the last 2000 of 100000 lines"),
        "{notice}"
    );
    let path = notice
        .split("Full output: ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(']'))
        .expect("path");
    assert!(path.starts_with(&format!("{}/.flemma/my.chat/tool_bash_", root.display())));
    assert_eq!(
        std::fs::read_to_string(path)
            .expect("stored")
            .lines()
            .count(),
        100_000
    );
    assert!(text.starts_with("98001\n"));
}

#[test]
fn sandboxed_bash_cannot_write_outside_and_fallback_without_bwrap() {
    let (_dir, root) = chat_dir();
    let (_other, elsewhere) = chat_dir();
    let command = format!("touch {}/x && echo wrote", elsewhere.display());
    let input = serde_json::json!({"label": "x", "command": command, "timeout": null}).to_string();
    if bwrap_usable() {
        let out = run(
            &root,
            &["tools", "run", "bash", &input, "--chat", "my.chat"],
        );
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(
            stdout(&out).contains("Read-only file system"),
            "{}",
            stdout(&out)
        );
        assert!(!elsewhere.join("x").exists());
    } else {
        eprintln!("note: bwrap is not usable here; only the fallback is tested");
    }
    // Hide bwrap: a PATH holding only bash and the commands used.
    let bin = root.join("bin");
    std::fs::create_dir(&bin).expect("bin");
    for program in ["bash", "touch"] {
        let real = flemma_tools::process::find_on_path(program).expect("program on PATH");
        std::os::unix::fs::symlink(real, bin.join(program)).expect("symlink");
    }
    let listed = flemmad(&root, &["tools", "--chat", "my.chat"])
        .env("PATH", &bin)
        .output()
        .expect("runs");
    assert!(
        stdout(&listed).contains("sandbox: none: bwrap is not installed"),
        "{}",
        stdout(&listed)
    );
    assert!(stdout(&listed).contains("bash  [require_approval by urn:flemma:approval:default]"));
    let out = flemmad(
        &root,
        &["tools", "run", "bash", &input, "--chat", "my.chat"],
    )
    .env("PATH", &bin)
    .output()
    .expect("runs");
    assert_eq!(
        (out.status.code(), stdout(&out).as_str()),
        (Some(0), "wrote\n")
    );
}
