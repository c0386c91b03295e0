//! `edit` on real files in temporary directories.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_tools::builtin::edit;
use flemma_tools::context::{Outcome, PathGuard, RunContext};
use serde_json::{Value, json};

/// Allows writes under one directory only, after resolving symlinks and `..`.
#[derive(Debug)]
struct UnderRoot(PathBuf);

impl PathGuard for UnderRoot {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        let resolved = match std::fs::canonicalize(path) {
            Ok(p) => p,
            Err(_) => {
                let parent = path.parent().ok_or("no parent")?;
                let parent = std::fs::canonicalize(parent).map_err(|e| e.to_string())?;
                parent.join(path.file_name().ok_or("no file name")?)
            }
        };
        if resolved.starts_with(&self.0) {
            Ok(resolved)
        } else {
            Err(format!(
                "{} is outside {}",
                resolved.display(),
                self.0.display()
            ))
        }
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ctx: RunContext,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let sandbox = root.join("project");
    std::fs::create_dir(&sandbox).unwrap_or_else(|e| panic!("{e}"));
    let ctx = RunContext::new(sandbox.clone(), Arc::new(UnderRoot(sandbox.clone())));
    Fixture {
        _dir: dir,
        root,
        ctx,
    }
}

impl Fixture {
    fn put(&self, name: &str, content: &[u8]) -> PathBuf {
        let p = self.ctx.cwd.join(name);
        std::fs::write(&p, content).unwrap_or_else(|e| panic!("write {name}: {e}"));
        p
    }
    fn get(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.ctx.cwd.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
    }
    fn run(&self, input: Value) -> Outcome {
        edit::run(&self.ctx, &input)
    }
}

fn call(path: &str, edits: &[(&str, &str)]) -> Value {
    let edits: Vec<Value> = edits
        .iter()
        .map(|(o, n)| json!({"old": o, "new": n}))
        .collect();
    json!({"label": "t", "path": path, "edits": edits, "dry_run": null})
}

const GO: &str = "package main\n\nfunc main() {\n\tcount := 1\n\tprint(count)\n}\n";

#[test]
fn applies_edits_and_reports_headline_and_diff() {
    let f = fixture();
    f.put("main.go", GO.as_bytes());
    let out = f.run(call(
        "main.go",
        &[
            ("count := 1", "count := 2"),
            ("package main", "package app"),
        ],
    ));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        String::from_utf8_lossy(&f.get("main.go")),
        "package app\n\nfunc main() {\n\tcount := 2\n\tprint(count)\n}\n"
    );
    assert_eq!(
        out.text,
        concat!(
            "main.go: 2 edit(s) applied, +2 -2 lines, first change at line 1\n",
            "-1 │ package main\n",
            "+1 │ package app\n",
            " 2 │ \n",
            " 3 │ func main() {\n",
            "-4 │ \tcount := 1\n",
            "+4 │ \tcount := 2\n",
            " 5 │ \tprint(count)\n",
        )
    );
}

#[test]
fn dry_run_writes_nothing() {
    let f = fixture();
    f.put("main.go", GO.as_bytes());
    let mut input = call("main.go", &[("count := 1", "count := 3")]);
    input["dry_run"] = json!(true);
    let out = f.run(input);
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text
            .starts_with("Dry run, nothing written — main.go: 1 edit(s) applied")
    );
    assert!(out.text.contains("+4 │ \tcount := 3"), "{}", out.text);
    assert_eq!(f.get("main.go"), GO.as_bytes());
}

#[test]
fn ambiguous_old_is_refused_with_lines_and_nothing_written() {
    let f = fixture();
    let text = "x = 1\ny = 2\nx = 1\n";
    f.put("a.py", text.as_bytes());
    let out = f.run(call("a.py", &[("y = 2", "y = 3"), ("x = 1", "x = 9")]));
    assert!(out.is_error);
    assert!(
        out.text.contains(
            "a.py: edit #2: old text appears 2 times (lines 1, 3) — to change ONE of them"
        ),
        "{}",
        out.text
    );
    assert!(
        out.text
            .ends_with("nothing was written: 1 of 2 edit(s) refused, the file is unchanged")
    );
    assert_eq!(
        f.get("a.py"),
        text.as_bytes(),
        "the good edit #1 was not applied either"
    );
}

#[test]
fn overlapping_and_repeated_edits_are_refused() {
    let f = fixture();
    f.put("t.txt", b"alpha beta gamma\n");
    let out = f.run(call("t.txt", &[("alpha beta", "A"), ("beta gamma", "B")]));
    assert!(out.is_error);
    assert!(
        out.text.contains("edits #1 and #2 overlap (lines 1 and 1)"),
        "{}",
        out.text
    );
    let out = f.run(call("t.txt", &[("beta", "B"), ("beta", "C")]));
    assert!(
        out.text.contains("edits #1 and #2 change the same text"),
        "{}",
        out.text
    );
    assert_eq!(f.get("t.txt"), b"alpha beta gamma\n");
}

#[test]
fn not_found_shows_the_closest_region_with_real_line_numbers() {
    let f = fixture();
    f.put("main.go", GO.as_bytes());
    let old = "func main() {\n    count := 2\n    print(count)\n}";
    let out = f.run(call("main.go", &[(old, "")]));
    assert!(out.is_error);
    assert_eq!(
        out.text,
        concat!(
            "main.go: edit #1: old text not found — it must match the file exactly, including indentation and line breaks:\n",
            "  │ func main() {\n",
            "  │     count := 2\n",
            "  │     print(count)\n",
            "  │ }\n",
            "the closest the file comes to it — copy these lines:\n",
            "  │ 3 │ func main() {\n",
            "  │ 4 │ \tcount := 1\n",
            "  │ 5 │ \tprint(count)\n",
            "  │ 6 │ }\n",
            "nothing was written: 1 of 1 edit(s) refused, the file is unchanged",
        )
    );
    let out = f.run(call("main.go", &[("nothing like it\nat all\nreally", "")]));
    assert!(
        out.text.contains("no part of the file comes close"),
        "{}",
        out.text
    );
}

#[test]
fn spaces_from_the_model_become_the_files_tabs() {
    let f = fixture();
    f.put("main.go", GO.as_bytes());
    let old = "    count := 1\n    print(count)";
    let new = "    count := 1\n    if count > 0 {\n        print(count)\n    }";
    let out = f.run(call("main.go", &[(old, new)]));
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.contains(" · 1 matched ignoring whitespace"),
        "{}",
        out.text
    );
    assert_eq!(
        String::from_utf8_lossy(&f.get("main.go")),
        "package main\n\nfunc main() {\n\tcount := 1\n\tif count > 0 {\n\t\tprint(count)\n\t}\n}\n"
    );
}

#[test]
fn crlf_file_keeps_crlf() {
    let f = fixture();
    f.put("w.txt", b"one\r\ntwo\r\nthree\r\n");
    let out = f.run(call("w.txt", &[("two\n", "2\nzwei\n")]));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(f.get("w.txt"), b"one\r\n2\r\nzwei\r\nthree\r\n");
}

#[test]
fn flemma_form_is_one_edit() {
    let f = fixture();
    f.put("a.txt", b"hello world\n");
    let out = f.run(json!({"label": "t", "path": "a.txt", "oldText": "world", "newText": "there"}));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(f.get("a.txt"), b"hello there\n");
}

#[test]
fn missing_file_directory_and_binary_are_clear_errors() {
    let f = fixture();
    let out = f.run(call("nope.txt", &[("a", "b")]));
    assert_eq!(
        out,
        Outcome::error(
            "nope.txt does not exist. edit changes an existing file; create it with write"
        )
    );
    std::fs::create_dir(f.ctx.cwd.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        f.run(call("sub", &[("a", "b")]))
            .text
            .contains("is a directory")
    );
    f.put("bin", &[0xff, 0xfe, b'a', 0x00]);
    let out = f.run(call("bin", &[("a", "b")]));
    assert!(
        out.is_error && out.text.contains("not UTF-8"),
        "{}",
        out.text
    );
    assert_eq!(f.get("bin"), [0xff, 0xfe, b'a', 0x00]);
    let out = f.run(json!({"label": "t", "path": "bin", "edits": []}));
    assert!(
        out.is_error && out.text.contains("at least one edit"),
        "{}",
        out.text
    );
}

#[test]
fn refuses_paths_outside_the_sandbox() {
    let f = fixture();
    let outside = f.root.join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap_or_else(|e| panic!("{e}"));
    // `..` and an absolute path.
    for path in ["../outside.txt", outside.to_str().unwrap_or_default()] {
        let out = f.run(call(path, &[("secret", "changed")]));
        assert!(out.is_error, "{path}: {}", out.text);
        assert!(out.text.contains("refused by the sandbox"), "{}", out.text);
    }
    // A symlink inside that points outside.
    std::os::unix::fs::symlink(&outside, f.ctx.cwd.join("link.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = f.run(call("link.txt", &[("secret", "changed")]));
    assert!(out.text.contains("refused by the sandbox"), "{}", out.text);
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap_or_default(),
        "secret\n"
    );
}

#[test]
fn symlink_inside_the_sandbox_edits_its_target_and_keeps_permissions() {
    let f = fixture();
    let target = f.put("script.sh", b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&target, f.ctx.cwd.join("alias.sh"))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = f.run(call("alias.sh", &[("echo hi", "echo bye")]));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(f.get("script.sh"), b"#!/bin/sh\necho bye\n");
    let link =
        std::fs::symlink_metadata(f.ctx.cwd.join("alias.sh")).unwrap_or_else(|e| panic!("{e}"));
    assert!(link.file_type().is_symlink(), "the link is still a link");
    let mode = std::fs::metadata(&target)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o755);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(&f.ctx.cwd)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".flemma-edit-")),
        "{names:?}"
    );
}
