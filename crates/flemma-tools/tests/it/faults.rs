//! Fault tests with real processes and real files in temp dirs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_tools::builtin::{bash, ls, read, write};
use flemma_tools::registry::Registry;
use flemma_tools::sandbox::{PathPolicy, resolve_path};
use flemma_tools::store::ResultStore;
use flemma_tools::{Outcome, RunContext};
use serde_json::json;

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    (dir, root)
}

fn context(root: &Path) -> RunContext {
    RunContext::new(root, Arc::new(PathPolicy::new([root.to_path_buf()])))
}

fn store(root: &Path) -> ResultStore {
    let config = flemma_config::resolve(&[])
        .expect("defaults")
        .config
        .tools
        .store;
    ResultStore::new(&config, Some(&root.join("t.chat")), 0, &|_| None)
}

fn sh(ctx: &RunContext, command: &str) -> Outcome {
    bash::run(
        ctx,
        &json!({"label": "t", "command": command, "timeout": null}),
    )
}

/// Whether `pid` is a live (non-zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

#[test]
fn bash_success_exit_code_and_environment() {
    let (_dir, root) = temp();
    let mut ctx = context(&root);
    ctx.env
        .push(("FLEMMA_TOOLS_STORE_PATH".into(), "/store/here".into()));
    let ok = sh(
        &ctx,
        "echo $PAGER $GIT_PAGER $FLEMMA_TOOLS_STORE_PATH; pwd; read x; echo rc=$?",
    );
    assert!(!ok.is_error, "{ok:?}");
    assert_eq!(
        ok.text,
        format!("cat cat /store/here\n{}\nrc=1\n", root.display())
    );
    let failed = sh(&ctx, "echo to stderr >&2; exit 3");
    assert!(failed.is_error);
    assert_eq!(failed.text, "to stderr\n[exit code: 3]");
}

#[test]
fn bash_timeout_kills_the_whole_group() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let started = Instant::now();
    let out = bash::run(
        &ctx,
        &json!({"label": "t", "command": "sleep 300 & echo $!; sleep 301", "timeout": 1}),
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert!(
        out.text.ends_with("[error: 1s timeout exceeded]"),
        "{}",
        out.text
    );
    let pid: u32 = out
        .text
        .lines()
        .next()
        .and_then(|l| l.parse().ok())
        .expect("pid");
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(pid), "the sleep child {pid} survived the timeout");
}

#[test]
fn bash_background_job_does_not_block_the_return() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let started = Instant::now();
    let out = sh(&ctx, "sleep 20 & echo $!");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited for the job"
    );
    assert!(!out.is_error);
    let pid: u32 = out.text.trim().parse().expect("pid");
    // Clean up the job we deliberately left running.
    flemma_tools::process::kill_group(pid);
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
}

#[test]
fn bash_cancel_kills_and_says_so() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let cancel = ctx.cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        cancel.cancel();
    });
    let started = Instant::now();
    let out = sh(&ctx, "echo begun; sleep 300");
    canceller.join().expect("join");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(out.is_error);
    assert_eq!(out.text, "begun\n[error: cancelled]");
}

#[test]
fn bash_invalid_utf8_is_replaced_not_lost() {
    let (_dir, root) = temp();
    let out = sh(&context(&root), r"printf 'ok \xff\xfe end\n'");
    assert!(!out.is_error);
    assert_eq!(out.text, "ok \u{fffd}\u{fffd} end\n");
}

#[test]
fn bash_huge_output_reads_both_ends_and_stores_everything() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let store = store(&root);
    let registry = Registry::builtin();
    // 200 MB of numbered lines: first line "start", last line "end".
    let command = "echo start; yes 0123456789abcdef0123456789abcdef0123456789abcdef | head -c 200000000; echo; echo end";
    let out = registry
        .execute(
            "bash",
            json!({"label": "t", "command": command, "timeout": 60}),
            &ctx,
            &store,
            "call1",
        )
        .expect("valid call");
    assert!(!out.is_error);
    let stored = store.path_for("tool", "bash", "call1");
    assert!(
        out.text
            .contains(&format!("Full output: {}", stored.display())),
        "{}",
        &out.text[out.text.len().saturating_sub(400)..]
    );
    assert!(out.text.len() < 60 * 1024);
    assert!(out.text.contains("\nend\n[Output truncated"));
    let size = std::fs::metadata(&stored).expect("stored").len();
    assert_eq!(size, 6 + 200_000_000 + 1 + 4);
    // The runner's own readback holds both ends with the gap marker.
    let raw = sh(&ctx, command);
    assert!(raw.text.starts_with("start\n"));
    assert!(
        raw.text
            .contains("[... output too large to read back in full ...]")
    );
    assert!(raw.text.ends_with("\nend\n"));
    assert!(raw.text.len() < 2 * 1024 * 1024 + 100);
}

#[test]
fn write_refuses_outside_symlink_and_dotdot() {
    let (_dir, root) = temp();
    let (_other, outside) = temp();
    let ctx = context(&root);
    let refuse = |path: &str| {
        let out = write::run(&ctx, &json!({"label": "t", "path": path, "content": "x"}));
        assert!(out.is_error, "{path}: {out:?}");
        assert!(out.text.starts_with("Refused to write"), "{}", out.text);
    };
    refuse(&outside.join("a.txt").display().to_string());
    std::os::unix::fs::symlink(&outside, root.join("link")).expect("symlink");
    refuse("link/a.txt");
    refuse("sub/../../escape.txt");
    std::os::unix::fs::symlink(outside.join("new.txt"), root.join("dangling")).expect("symlink");
    refuse("dangling");
    assert!(
        std::fs::read_dir(&outside).expect("read").count() == 0,
        "something was written outside"
    );
    assert!(!root.parent().expect("parent").join("escape.txt").exists());
}

#[test]
fn write_creates_parents_diffs_and_notices_identical_content() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let call = |content: &str| {
        write::run(
            &ctx,
            &json!({"label": "t", "path": "a/b/c.txt", "content": content}),
        )
    };
    let created = call("one\ntwo\n");
    assert!(!created.is_error);
    assert!(
        created.text.starts_with(
            "Created a/b/c.txt (2 lines, 8 bytes)\n--- a/a/b/c.txt\n+++ b/a/b/c.txt\n"
        )
    );
    let same = call("one\ntwo\n");
    assert_eq!(
        same.text,
        "a/b/c.txt already has this content; nothing written"
    );
    let changed = call("one\nthree\n");
    assert!(
        changed
            .text
            .starts_with("Overwrote a/b/c.txt (+1 -1 lines, now 2 lines)\n")
    );
    assert!(changed.text.contains("-two\n+three\n"));
    assert_eq!(
        std::fs::read_to_string(root.join("a/b/c.txt")).expect("read"),
        "one\nthree\n"
    );
}

#[test]
fn read_directory_fifo_missing_binary_and_sparse() {
    let (_dir, root) = temp();
    let mut ctx = context(&root);
    ctx.chat_path = Some(root.join("talk.chat"));
    let call = |path: &str| {
        read::run(
            &ctx,
            &json!({"label": "t", "path": path, "offset": null, "limit": null}),
        )
    };
    std::fs::create_dir(root.join("d")).expect("dir");
    assert!(call("d").text.contains("is a directory"));
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let started = Instant::now();
    let fifo = call("fifo");
    assert!(fifo.is_error && fifo.text.contains("not a regular file"));
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        call("nope.txt").text,
        "nope.txt does not exist. Create it with write"
    );
    std::fs::write(root.join("p.png"), b"\x89PNG\r\n\x1a\n\0\0\0rest").expect("png");
    let png = call("p.png");
    assert_eq!(
        (png.text.as_str(), png.is_error),
        ("@./p.png;type=image/png", false)
    );
    // An absolute path is written `@//…`, which the chat reads back as that path.
    let absolute = root.join("p.png");
    let png = read::run(&ctx, &json!({"label": "t", "path": absolute}));
    assert_eq!(png.text, format!("@/{};type=image/png", absolute.display()));
    // So is a relative path when the tool runs elsewhere than the chat's folder (where the
    // chat resolves `@./p.png`).
    let mut elsewhere = context(&root);
    elsewhere.chat_path = Some(root.join("d/talk.chat"));
    let png = read::run(&elsewhere, &json!({"label": "t", "path": "p.png"}));
    assert_eq!(png.text, format!("@/{};type=image/png", absolute.display()));
    // 3 GB sparse file that starts with text lines, then NULs without a newline.
    let big = std::fs::File::create(root.join("big.log")).expect("big");
    use std::io::Write;
    let mut writer = std::io::BufWriter::new(&big);
    for i in 0..20_000 {
        writeln!(writer, "line {i}").expect("write");
    }
    writer.flush().expect("flush");
    drop(writer);
    big.set_len(3 << 30).expect("sparse");
    let started = Instant::now();
    let window = read::run(
        &ctx,
        &json!({"label": "t", "path": "big.log", "offset": 10, "limit": 2}),
    );
    assert_eq!(
        window.text,
        "line 9\nline 10\n[Showing lines 10-11; more lines follow. Continue with offset 12.]"
    );
    let tail = read::run(
        &ctx,
        &json!({"label": "t", "path": "big.log", "offset": 20_000, "limit": null}),
    );
    assert!(tail.text.starts_with("line 19999\n"));
    assert!(
        tail.text.len() < 250 * 1024,
        "read kept {} bytes",
        tail.text.len()
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn ls_dirs_first_depth_and_limit() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    for path in ["b/inner/deep", "a"] {
        std::fs::create_dir_all(root.join(path)).expect("dir");
    }
    std::fs::write(root.join("0.txt"), "").expect("file");
    std::fs::write(root.join("b/x.txt"), "").expect("file");
    // flemmad's own scratch files (a chat's write in flight) are never listed.
    std::fs::write(root.join(".flemmad-Ab12Cd.tmp"), "").expect("file");
    std::fs::write(root.join("b/.flemmad-check-Xy34"), "").expect("file");
    let call = |input| ls::run(&ctx, &input);
    let one = call(json!({"label": "t", "path": null, "max_depth": null, "limit": null}));
    assert_eq!(one.text, "a/\nb/\n0.txt");
    let two = call(json!({"label": "t", "path": ".", "max_depth": 2, "limit": null}));
    assert_eq!(two.text, "a/\nb/\nb/inner/\nb/x.txt\n0.txt");
    let limited = call(json!({"label": "t", "path": ".", "max_depth": 3, "limit": 2}));
    assert!(
        limited
            .text
            .starts_with("a/\nb/\n[Listing stopped at 2 entries")
    );
}

#[test]
fn every_built_in_schema_compiles_and_takes_its_own_example_inputs() {
    let config = flemma_config::resolve(&[flemma_config::ConfigLayer::from_toml_str(
        "[tools.lsp]\nservers = [\"clangd\"]\n",
        flemma_config::LayerKind::UserFile,
    )
    .expect("a config layer")])
    .expect("resolves")
    .config;
    let registry = Registry::for_config(&config);
    assert!(
        registry.get("lsp").is_some(),
        "the lsp tool's schema is checked too"
    );
    for tool in registry.all() {
        assert_eq!(tool.input_schema().unusable(), None, "{}", tool.spec.name);
    }
    // Strict schemas: the nullable fields may be null or left out; the others may not.
    let read = registry.get("read").expect("read");
    let schema = read.input_schema();
    assert!(
        schema
            .check(&json!({"label": "t", "path": "a", "offset": null, "limit": null}))
            .is_ok()
    );
    assert!(schema.check(&json!({"label": "t", "path": "a"})).is_ok());
    let missing = schema
        .check(&json!({"path": "a"}))
        .expect_err("label is required");
    assert_eq!(missing.to_string(), "label: is required but missing");
}

#[test]
fn registry_rejects_bad_invocations_and_strips_harness_parameters() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let store = store(&root);
    let registry = Registry::builtin();
    let unknown = registry
        .execute("bsah", json!({}), &ctx, &store, "1")
        .expect_err("unknown");
    assert_eq!(
        unknown.to_string(),
        "unknown tool `bsah`; did you mean `bash`?"
    );
    let mismatch = registry
        .execute(
            "read",
            json!({"label": "t", "path": 3, "offset": null, "limit": null}),
            &ctx,
            &store,
            "1",
        )
        .expect_err("mismatch");
    assert!(
        mismatch
            .to_string()
            .ends_with("path: expected string, got integer")
    );
    let saved = registry
        .execute(
            "bash",
            json!({"label": "t", "command": "seq 1 100", "timeout": null,
                   "flemma.save_to": "out/seq.txt", "flemma.background": null}),
            &ctx,
            &store,
            "1",
        )
        .expect("valid");
    let target = root.join("out/seq.txt");
    assert_eq!(
        saved.text,
        format!(
            "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n[Output saved: {} — 292B, 100 lines]",
            target.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&target)
            .expect("saved")
            .lines()
            .count(),
        100
    );
    let refused = registry
        .execute(
            "bash",
            json!({"label": "t", "command": "echo hi", "timeout": null, "flemma.save_to": "/etc/flemma-nope"}),
            &ctx,
            &store,
            "2",
        )
        .expect("valid");
    assert!(
        refused
            .text
            .starts_with("hi\n[Output not saved: /etc/flemma-nope is outside"),
        "{}",
        refused.text
    );
    assert!(
        refused
            .text
            .ends_with(". Showing the full output instead.]")
    );
}

#[test]
fn resolution_of_missing_paths_under_symlinks() {
    let (_dir, root) = temp();
    std::fs::create_dir(root.join("real")).expect("dir");
    std::os::unix::fs::symlink(root.join("real"), root.join("alias")).expect("symlink");
    assert_eq!(
        resolve_path(&root.join("alias/new/../file.txt")),
        Ok(root.join("real/file.txt"))
    );
}

#[test]
fn closures_register_and_disables_save_to_ignores_the_redirect() {
    let (_dir, root) = temp();
    let ctx = context(&root);
    let store = store(&root);
    let mut registry = Registry::builtin();
    let greeting = String::from("hello from a closure");
    let mut spec = flemma_tools::builtin::jobs::spec();
    spec.name = "greet".into();
    registry.register(
        spec,
        move |_ctx, _input| Outcome::ok(greeting.clone()),
        flemma_tools::truncate::Keep::Head,
    );
    let out = registry
        .execute(
            "greet",
            json!({"label": "t", "job_id": "x", "flemma.save_to": "saved.txt"}),
            &ctx,
            &store,
            "1",
        )
        .expect("valid");
    assert_eq!(out.text, "hello from a closure");
    assert!(!root.join("saved.txt").exists());
}
