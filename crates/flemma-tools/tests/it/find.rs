//! `find` against a real directory tree, once per backend (`fdfind`/`fd`, `git ls-files`,
//! `find`), each with a `PATH` holding only that backend's program.

use std::path::PathBuf;
use std::sync::Arc;

use flemma_tools::builtin::find::{self, Backend};
use flemma_tools::context::{Outcome, RunContext};
use serde_json::{Value, json};

use crate::search_support::{NoWrites, system};

struct Tree {
    _dir: tempfile::TempDir,
    project: PathBuf,
    bin: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let project = dir.path().join("project");
    for path in [
        "src/main.rs",
        "src/lib.rs",
        "src/deep/mod.rs",
        "Cargo.toml",
        "README.md",
        "node_modules/pkg/index.rs",
        "target/debug/build.rs",
        ".venv/lib.rs",
    ] {
        let p = project.join(path);
        std::fs::create_dir_all(p.parent().unwrap_or(&project)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&p, "x\n").unwrap_or_else(|e| panic!("{e}"));
    }
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap_or_else(|e| panic!("{e}"));
    Tree {
        _dir: dir,
        project,
        bin,
    }
}

impl Tree {
    fn expose(&self, name: &str) -> bool {
        let Some(real) = system(name) else {
            eprintln!("note: {name} is not installed here — skipping this backend's test");
            return false;
        };
        std::os::unix::fs::symlink(real, self.bin.join(name)).unwrap_or_else(|e| panic!("{e}"));
        true
    }
    fn ctx(&self) -> RunContext {
        let mut ctx = RunContext::new(self.project.clone(), Arc::new(NoWrites));
        ctx.env = vec![("PATH".into(), self.bin.display().to_string())];
        ctx
    }
    fn run(&self, input: Value) -> Outcome {
        find::run(&self.ctx(), &input)
    }
}

fn q(pattern: &str) -> Value {
    json!({"label": "t", "pattern": pattern, "path": null, "limit": null})
}

fn check_backend(t: &Tree, expected: Backend) {
    assert_eq!(
        find::pick_backend(&t.ctx(), ".").map(|(b, _)| b),
        Some(expected)
    );
    let out = t.run(q("*.rs"));
    assert_eq!(
        out,
        Outcome::ok("src/deep/mod.rs\nsrc/lib.rs\nsrc/main.rs"),
        "{expected:?}"
    );
    assert_eq!(
        t.run(q("*.{toml,md}")).text,
        "Cargo.toml\nREADME.md",
        "{expected:?}"
    );
    assert_eq!(
        t.run(q("src/**/mod.rs")).text,
        "src/deep/mod.rs",
        "{expected:?}"
    );
    let mut in_src = q("*.rs");
    in_src["path"] = json!("src/deep");
    assert_eq!(t.run(in_src).text, "src/deep/mod.rs", "{expected:?}");
    let mut limited = q("*.rs");
    limited["limit"] = json!(1);
    let out = t.run(limited);
    assert_eq!(out.text.lines().count(), 2, "{}", out.text);
    assert!(out.text.ends_with("or raise `limit`]"), "{}", out.text);
    assert_eq!(t.run(q("*.py")), Outcome::ok("No files match *.py in ."));
}

#[test]
fn fd_backend() {
    let t = tree();
    if t.expose("fdfind") || t.expose("fd") {
        check_backend(&t, Backend::Fd);
    }
}

#[test]
fn git_ls_files_backend() {
    let t = tree();
    if !t.expose("git") {
        return;
    }
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&t.project)
        .status()
        .is_ok_and(|s| s.success());
    assert!(init, "git init failed");
    check_backend(&t, Backend::GitLsFiles);
}

#[test]
fn find_backend() {
    let t = tree();
    if t.expose("find") {
        check_backend(&t, Backend::Find);
    }
}

#[test]
fn bad_input_is_explained() {
    let t = tree();
    let mut missing = q("*.rs");
    missing["path"] = json!("nowhere");
    assert_eq!(
        t.run(missing),
        Outcome::error("nowhere is not a directory — give the directory to search in `path`")
    );
    assert!(
        t.run(q("*.rs"))
            .text
            .contains("none of `fd`, `fdfind`, `git` or `find`")
    );
    let unclosed = t.run(q("src/[ab.rs"));
    assert!(unclosed.is_error);
    assert!(
        unclosed
            .text
            .starts_with("`src/[ab.rs` is not a valid glob: unclosed character class"),
        "{}",
        unclosed.text
    );
}
