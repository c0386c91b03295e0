//! `grep` against a real directory tree, once per backend: each run gets a `PATH` holding only
//! the programs that backend may use (a temp dir of symlinks), so the fallbacks are really taken.

use std::path::PathBuf;
use std::sync::Arc;

use flemma_tools::builtin::grep::{self, Backend};
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
    let files: &[(&str, &str)] = &[
        ("src/main.rs", "fn main() {\n    let answer = 42;\n}\n"),
        ("src/lib.rs", "pub fn helper() -> u32 {\n    7\n}\n"),
        ("notes.txt", "answer: 42 is the answer\nnothing here\n"),
        ("node_modules/pkg/index.js", "const answer = 42;\n"),
        (".git/config", "answer = 42\n"),
        ("target/debug/out.txt", "answer 42\n"),
        ("vendor/x.rs", "let answer = 42;\n"),
    ];
    for (path, content) in files {
        let p = project.join(path);
        std::fs::create_dir_all(p.parent().unwrap_or(&project)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&p, content).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(project.join("blob.bin"), b"answer 42\0\x01\x02")
        .unwrap_or_else(|e| panic!("{e}"));
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap_or_else(|e| panic!("{e}"));
    Tree {
        _dir: dir,
        project,
        bin,
    }
}

impl Tree {
    /// Puts the named system programs (and only them) on this tree's `PATH`.
    fn expose(&self, names: &[&str]) -> bool {
        for n in names {
            let Some(real) = system(n) else {
                eprintln!("note: {n} is not installed here — skipping this backend's test");
                return false;
            };
            std::os::unix::fs::symlink(real, self.bin.join(n)).unwrap_or_else(|e| panic!("{e}"));
        }
        true
    }

    /// A `grep` that refuses `-P`, like a grep built without PCRE.
    fn grep_without_perl(&self) -> bool {
        let Some(real) = system("grep") else {
            eprintln!("note: grep is not installed here — skipping");
            return false;
        };
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -P ] && {{ echo 'grep: support for the -P option is not compiled into this build' >&2; exit 2; }}; done\nexec {} \"$@\"\n",
            real.display()
        );
        let p = self.bin.join("grep");
        std::fs::write(&p, script).unwrap_or_else(|e| panic!("{e}"));
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        true
    }

    fn ctx(&self) -> RunContext {
        let mut ctx = RunContext::new(self.project.clone(), Arc::new(NoWrites));
        ctx.env = vec![("PATH".into(), self.bin.display().to_string())];
        ctx
    }

    fn run(&self, input: Value) -> Outcome {
        grep::run(&self.ctx(), &input)
    }
}

fn q(pattern: &str) -> Value {
    json!({"label": "t", "pattern": pattern, "path": null, "glob": null, "limit": null})
}

fn sorted(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// The same answers, whatever the backend.
fn check_backend(t: &Tree, expected: Backend) {
    assert_eq!(grep::pick_backend(&t.ctx()).map(|(b, _)| b), Some(expected));
    let out = t.run(q(r"answer\s*=\s*\d+"));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        sorted(&out.text),
        vec!["src/main.rs:2:     let answer = 42;"],
        "{expected:?}"
    );

    let out = t.run(q(r"\w+: \d"));
    assert_eq!(
        out.text, "notes.txt:1: answer: 42 is the answer",
        "{expected:?}"
    );

    let mut glob = q("fn ");
    glob["glob"] = json!("lib.rs");
    assert_eq!(
        t.run(glob).text,
        "src/lib.rs:1: pub fn helper() -> u32 {",
        "{expected:?}"
    );

    let mut in_path = q("answer");
    in_path["path"] = json!("src");
    assert_eq!(
        t.run(in_path).text,
        "src/main.rs:2:     let answer = 42;",
        "{expected:?}"
    );

    let mut limited = q("answer|fn");
    limited["limit"] = json!(2);
    let out = t.run(limited);
    assert_eq!(out.text.lines().count(), 3, "{}", out.text);
    assert!(out.text.ends_with("or raise `limit`]"), "{}", out.text);

    let out = t.run(q("no such text anywhere"));
    assert_eq!(
        out,
        Outcome::ok("No matches for /no such text anywhere/ in .")
    );
}

#[test]
fn ripgrep_backend() {
    let t = tree();
    if t.expose(&["rg"]) {
        check_backend(&t, Backend::Ripgrep);
    }
}

#[test]
fn grep_perl_backend() {
    let t = tree();
    if t.expose(&["grep"]) {
        check_backend(&t, Backend::GrepPerl);
    }
}

#[test]
fn grep_extended_backend_translates_classes() {
    let t = tree();
    if t.grep_without_perl() {
        check_backend(&t, Backend::GrepExtended);
    }
}

#[test]
fn bad_regex_and_missing_path_are_errors() {
    let t = tree();
    if !t.expose(&["rg"]) {
        return;
    }
    let out = t.run(q("(unclosed"));
    assert!(out.is_error, "{}", out.text);
    assert!(
        out.text.starts_with("grep: the search failed (rg)"),
        "{}",
        out.text
    );
    let mut missing = q("x");
    missing["path"] = json!("nowhere");
    assert_eq!(
        t.run(missing),
        Outcome::error("nowhere does not exist — give a file or directory to search")
    );
}

#[test]
fn no_search_program_says_what_to_install() {
    let t = tree();
    let out = t.run(q("x"));
    assert!(out.is_error);
    assert!(
        out.text.contains("neither `rg` nor `grep` is on the PATH"),
        "{}",
        out.text
    );
}
