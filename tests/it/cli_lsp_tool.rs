//! The `lsp` tool through `flemmad tools run`, against a REAL language server: this
//! workspace's own `flemmad lsp --stdio --no-daemon`, which serves `.chat` files (definition of a
//! tool use → its result, hover, document symbols, diagnostics).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

const TALK: &str = "@You:\nRun the tests, see @./notes.md\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\": \"make test\", \"label\": \"running tests\"}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nall green\n```\n";

/// A temp dir with a driver chat whose frontmatter lists `servers`, and `talk.chat`.
fn workspace(servers: &[String]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let frontmatter = json!({"flemma": {"tools": {"lsp": {"servers": servers}}}});
    std::fs::write(
        root.join("driver.chat"),
        format!("```json\n{frontmatter}\n```\n@You:\nhi\n"),
    )
    .expect("driver chat");
    std::fs::write(root.join("talk.chat"), TALK).expect("talk chat");
    std::fs::write(root.join("notes.md"), "# Notes\n").expect("notes");
    crate::common::trust_folder(&root, &root.join("config-home"));
    (dir, root)
}

fn flemmad_server() -> String {
    format!("{} lsp --stdio --no-daemon", env!("CARGO_BIN_EXE_flemmad"))
}

fn tools(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .arg("tools")
        .arg("--chat")
        .arg(root.join("driver.chat"))
        .args(args)
        .current_dir(root)
        .env("XDG_CONFIG_HOME", root.join("config-home"))
        .env("XDG_RUNTIME_DIR", root.join("runtime"))
        .env_remove("FLEMMA_CONFIG")
        .output()
        .expect("flemmad runs")
}

/// Runs the `lsp` tool; (exit code, stdout, stderr).
fn lsp(root: &Path, input: serde_json::Value) -> (Option<i32>, String, String) {
    let mut full =
        json!({"label": "ask", "symbol": null, "line": null, "column": null, "new_name": null});
    if let (Some(full), Some(input)) = (full.as_object_mut(), input.as_object()) {
        full.extend(input.clone());
    }
    let out = tools(root, &["run", "lsp", &full.to_string()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn definition_hover_symbols_through_the_real_server() {
    let (_dir, root) = workspace(&[flemmad_server()]);
    // Definition of a tool use (found by its id) is its result's header.
    let (code, out, err) = lsp(
        &root,
        json!({"action": "definition", "path": "talk.chat", "symbol": "`t1`"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "talk.chat:11:1  **Tool Result:** `t1`\n", "{err}");
    // The same by position (line 5, inside `t1`), and the reverse jump from the result.
    let (code, out, _) = lsp(
        &root,
        json!({"action": "definition", "path": "talk.chat", "line": 5, "column": 25}),
    );
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "talk.chat:11:1  **Tool Result:** `t1`\n")
    );
    let (_, out, _) = lsp(
        &root,
        json!({"action": "definition", "path": "talk.chat", "symbol": "t1", "line": 11}),
    );
    assert_eq!(out, "talk.chat:5:1  **Tool Use:** `bash` (`t1`)\n");
    // Hover: the server's Markdown as it sent it.
    let (code, out, err) = lsp(
        &root,
        json!({"action": "hover", "path": "talk.chat", "symbol": "t1"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("bash") && out.contains("make test"), "{out}");
    // Symbols: the messages with their blocks indented under them.
    let (code, out, err) = lsp(&root, json!({"action": "symbols", "path": "talk.chat"}));
    assert_eq!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 5, "{out}");
    assert!(
        lines.iter().any(|l| l.starts_with("  ")
            && l.contains("bash")
            && l.contains("[t1]")
            && l.ends_with("line 5")),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  ") && l.contains("result t1") && l.ends_with("line 11")),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| !l.starts_with(' ') && l.ends_with("line 4")),
        "{out}"
    );
    assert_eq!(
        servers_in(&root),
        0,
        "every server was shut down with its flemmad"
    );
}

/// How many processes run in `root` (the servers started there).
fn servers_in(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == root))
        .count()
}

#[test]
fn diagnostics_clean_and_broken_files() {
    let (_dir, root) = workspace(&[flemmad_server()]);
    let (code, out, err) = lsp(&root, json!({"action": "diagnostics", "path": "talk.chat"}));
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "no diagnostics: talk.chat is clean\n", "{err}");
    // An unclosed code fence in a user message is an error the server publishes.
    std::fs::write(
        root.join("broken.chat"),
        "@You:\nlook:\n```\nnever closed\n",
    )
    .expect("write");
    let (code, out, err) = lsp(
        &root,
        json!({"action": "diagnostics", "path": "broken.chat"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let mut lines = out.lines();
    let head = lines.next().unwrap_or_default();
    assert!(
        head.ends_with("diagnostic(s) in broken.chat:") && !head.starts_with('0'),
        "{out}"
    );
    assert!(
        lines.any(|l| l.starts_with("error broken.chat:3:1 ")),
        "{out}"
    );
}

#[test]
fn failures_are_clear_text_results() {
    let (_dir, root) = workspace(&[flemmad_server()]);
    let (code, out, _) = lsp(
        &root,
        json!({"action": "hover", "path": "notes.md", "symbol": "Notes"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "[lsp: no language server for \"notes.md\" — configured: flemmad (.chat)]\n"
    );
    let (code, out, _) = lsp(
        &root,
        json!({"action": "definition", "path": "talk.chat", "symbol": "nowhere"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(out, "[lsp: \"nowhere\" not found in talk.chat]\n");
    let (code, out, _) = lsp(
        &root,
        json!({"action": "definition", "path": "talk.chat", "line": 2, "column": 99}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "[lsp: column 99 is past the end of line 2 (30 characters)]\n"
    );
    let (code, out, _) = lsp(
        &root,
        json!({"action": "definition", "path": "talk.chat", "symbol": "Run"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "[lsp: no definition found for \"Run\" in talk.chat (1 occurrence tried)]\n"
    );
    let (code, out, _) = lsp(
        &root,
        json!({"action": "rename", "path": "talk.chat", "symbol": "t1"}),
    );
    assert_eq!(code, Some(1));
    assert!(out.starts_with("[lsp: rename needs new_name — call lsp again with {\"action\": \"rename\", \"path\": \"talk.chat\", \"symbol\": \"t1\""), "{out}");
    // This server cannot rename: its refusal is reported and the file is untouched.
    let (code, out, _) = lsp(
        &root,
        json!({"action": "rename", "path": "talk.chat", "symbol": "t1", "new_name": "t2"}),
    );
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with("[lsp: flemmad: rename failed: ") && out.contains("textDocument/rename"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("talk.chat")).expect("read"),
        TALK
    );
}

/// A script in `root` named `name` (on no `PATH`: configured by its full path).
fn script(root: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = root.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

/// The driver chat of `root` rewritten with `flemma` options.
fn configure(root: &Path, flemma: serde_json::Value) {
    let frontmatter = json!({ "flemma": flemma });
    std::fs::write(
        root.join("driver.chat"),
        format!("```json\n{frontmatter}\n```\n@You:\nhi\n"),
    )
    .expect("driver chat");
}

#[test]
fn a_server_that_dies_or_hangs_gives_a_clear_error_and_leaves_no_process() {
    let (_dir, root) = workspace(&[]);
    std::fs::write(root.join("a.txt"), "alpha\n").expect("a.txt");
    let dying = script(
        &root,
        "dying-ls",
        "echo 'dying-ls: cannot find its config' >&2\nexit 3",
    );
    let hanging = script(&root, "hanging-ls", "exec sleep 60");
    configure(
        &root,
        json!({"tools": {"default_timeout": 1, "lsp": {
            "servers": [dying],
            "extensions": {"dying-ls": ["txt"]}}}}),
    );
    let (code, out, _) = lsp(
        &root,
        json!({"action": "hover", "path": "a.txt", "symbol": "alpha"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "[lsp: dying-ls: the server exited saying: dying-ls: cannot find its config; it is started again on the next call]\n"
    );
    configure(
        &root,
        json!({"tools": {"default_timeout": 1, "lsp": {
            "servers": [hanging],
            "extensions": {"hanging-ls": ["txt"]}}}}),
    );
    let started = std::time::Instant::now();
    let (code, out, _) = lsp(
        &root,
        json!({"action": "hover", "path": "a.txt", "symbol": "alpha"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(out, "[lsp: hanging-ls: initialize timed out after 1s]\n");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(servers_in(&root), 0, "the hanging server was killed");
}

#[test]
fn declared_only_when_a_configured_server_is_on_the_path() {
    let (_dir, root) = workspace(&["no-such-language-server --stdio".to_owned()]);
    let out = tools(&root, &["--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.contains(&"lsp"), "{names:?}");
    // Run by hand, it says why there is no server.
    let (code, out, _) = lsp(&root, json!({"action": "symbols", "path": "talk.chat"}));
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "[lsp: no language server for \"talk.chat\" — configured: none on the PATH; not found on the PATH: no-such-language-server (no extensions: set tools.lsp.extensions.no-such-language-server)]\n"
    );

    let (_dir, root) = workspace(&[flemmad_server(), "no-such-language-server".to_owned()]);
    let out = tools(&root, &["--json"]);
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let lsp = listing["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "lsp")
        .expect("lsp is declared");
    let description = lsp["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("Servers available: flemmad (.chat)."),
        "{description}"
    );
}

/// With `rust-analyzer` on `PATH`: definition, references and a rename across two files of a
/// small Cargo project. Ignored by default (rust-analyzer needs seconds to load the sysroot).
#[test]
#[ignore = "needs rust-analyzer on PATH and several seconds"]
fn rust_analyzer_definition_references_and_rename() {
    // A rustup proxy without the component is on PATH but cannot run: ask it first.
    let works = Command::new("rust-analyzer")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    let analyzer = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("rust-analyzer"))
            .find(|candidate| candidate.is_file())
    });
    let (true, Some(analyzer)) = (works, analyzer) else {
        eprintln!("rust-analyzer is not on PATH or does not run; skipped");
        return;
    };
    let (_dir, root) = workspace(&[analyzer.display().to_string()]);
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("manifest");
    std::fs::write(
        root.join("src/main.rs"),
        "mod people;\n\nfn main() {\n    people::greet(\"é😀\");\n}\n",
    )
    .expect("main");
    std::fs::write(
        root.join("src/people.rs"),
        "/// Says hello.\npub fn greet(name: &str) {\n    println!(\"hi {name}\");\n}\n",
    )
    .expect("people");
    let (code, out, err) = lsp(
        &root,
        json!({"action": "definition", "path": "src/main.rs", "symbol": "people::greet"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "src/people.rs:2:8  pub fn greet(name: &str) {\n");
    let (code, out, err) = lsp(
        &root,
        json!({"action": "references", "path": "src/people.rs", "symbol": "greet"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("2 reference(s):\n"), "{out}");
    assert!(
        out.contains("src/main.rs:4:13  people::greet(\"é😀\");"),
        "{out}"
    );
    let (code, out, err) = lsp(
        &root,
        json!({"action": "rename", "path": "src/people.rs", "symbol": "greet", "new_name": "welcome"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.starts_with("renamed to welcome: 2 edit(s) in 2 file(s)\n"),
        "{out}"
    );
    assert!(
        out.contains("src/main.rs: 1 edit(s)") && out.contains("src/people.rs: 1 edit(s)"),
        "{out}"
    );
    let main = std::fs::read_to_string(root.join("src/main.rs")).expect("main");
    assert!(main.contains("people::welcome(\"é😀\");"), "{main}");
    assert_eq!(servers_in(&root), 0);
}

/// With `clangd` on `PATH` (Debian's `clangd` package; `.ci/run` should install it):
/// definition, references, hover and a rename across three C files of which one has a line with
/// multi-byte characters before the symbol (the columns in characters, the wire in clangd's
/// encoding). Without clangd it says so and checks nothing.
#[test]
fn clangd_definition_references_hover_and_a_rename_across_files() {
    let works = Command::new("clangd")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !works {
        eprintln!("clangd is not on PATH; skipped (apt-get install clangd)");
        return;
    }
    let (_dir, root) = workspace(&["clangd".to_owned()]);
    let main =
        "#include \"greet.h\"\n\nint main(void) {\n    /* é😀 */ greet(\"x\");\n    return 0;\n}\n";
    std::fs::write(root.join("main.c"), main).expect("main.c");
    std::fs::write(root.join("greet.h"), "void greet(const char *name);\n").expect("greet.h");
    std::fs::write(
        root.join("greet.c"),
        "#include \"greet.h\"\n#include <stdio.h>\n\nvoid greet(const char *name) { printf(\"hi %s\\n\", name); }\n",
    )
    .expect("greet.c");
    let dir = root.display();
    std::fs::write(
        root.join("compile_commands.json"),
        format!(
            r#"[{{"directory":"{dir}","file":"main.c","arguments":["cc","-c","main.c"]}},{{"directory":"{dir}","file":"greet.c","arguments":["cc","-c","greet.c"]}}]"#
        ),
    )
    .expect("compile_commands.json");
    let (code, out, err) = lsp(
        &root,
        json!({"action": "definition", "path": "main.c", "symbol": "greet"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.starts_with("greet.h:1:6  void greet(const char *name);")
            || out.starts_with("greet.c:4:6  void greet("),
        "{out}"
    );
    let (code, out, err) = lsp(
        &root,
        json!({"action": "references", "path": "greet.h", "symbol": "greet"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("3 reference(s):\n"), "{out}");
    assert!(
        out.contains("main.c:4:14  /* é😀 */ greet(\"x\");"),
        "{out}"
    );
    let (code, out, err) = lsp(
        &root,
        json!({"action": "hover", "path": "main.c", "line": 4, "column": 16}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("void greet(const char *name)"), "{out}");
    let (code, out, err) = lsp(
        &root,
        json!({"action": "rename", "path": "main.c", "symbol": "greet", "new_name": "welcome"}),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out,
        "renamed to welcome: 3 edit(s) in 3 file(s)\ngreet.c: 1 edit(s)\ngreet.h: 1 edit(s)\nmain.c: 1 edit(s)\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("main.c")).expect("main.c"),
        main.replace("greet(\"x\")", "welcome(\"x\")"),
        "only the symbol changed; the include of greet.h stays"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("greet.h")).expect("greet.h"),
        "void welcome(const char *name);\n"
    );
    assert_eq!(servers_in(&root), 0);
}
