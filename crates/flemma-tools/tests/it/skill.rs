//! `read_skill` against a real skills directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_tools::builtin::skill;
use flemma_tools::context::{Outcome, PathGuard, RunContext};
use serde_json::json;

#[derive(Debug)]
struct NoWrites;
impl PathGuard for NoWrites {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        Err(format!("{} — read_skill never writes", path.display()))
    }
}

fn ctx(cwd: &Path) -> RunContext {
    RunContext::new(cwd, Arc::new(NoWrites))
}

fn put(p: PathBuf, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap_or(Path::new("/"))).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn catalogue_description_and_reading() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let skills = dir.path().join("skills");
    put(skills.join("release.md"), "# Cutting a release\n\nSteps…\n");
    put(
        skills.join("pdf/SKILL.md"),
        "---\nname: pdf\ndescription: Fill and split PDF files\n---\n# PDF\nUse qpdf.\n",
    );
    // A flat file wins over a directory of the same name.
    put(skills.join("both.md"), "flat wins\n");
    put(skills.join("both/SKILL.md"), "nested loses\n");
    put(skills.join("notes.txt"), "not a skill\n");
    std::fs::create_dir_all(skills.join("empty")).unwrap_or_else(|e| panic!("{e}"));
    // A secret outside the skills directory.
    put(dir.path().join("secret.md"), "secret\n");

    let spec = skill::spec(&skills).unwrap_or_else(|| panic!("declared"));
    assert_eq!(
        spec.description,
        "Read the full instructions of a skill before doing a task it covers. Skills:\n  both — flat wins\n  pdf — Fill and split PDF files\n  release — Cutting a release"
    );
    let c = ctx(dir.path());
    let read = |name: &str| skill::run(&c, &json!({"label": "t", "name": name}), &skills);
    assert_eq!(
        read("pdf").text,
        "---\nname: pdf\ndescription: Fill and split PDF files\n---\n# PDF\nUse qpdf.\n"
    );
    assert_eq!(read("both"), Outcome::ok("flat wins\n"));
    assert_eq!(
        read("nope"),
        Outcome::error("No skill named \"nope\". Available skills: both, pdf, release")
    );
    for bad in ["../secret", "/etc/passwd", "pdf/SKILL", ".."] {
        let out = read(bad);
        assert!(out.is_error, "{bad}");
        assert!(
            out.text.contains("is not a skill name"),
            "{bad}: {}",
            out.text
        );
        assert!(!out.text.contains("secret\n"));
    }
}

#[test]
fn not_declared_without_skills() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(skill::spec(dir.path()), None);
    assert_eq!(skill::spec(&dir.path().join("missing")), None);
}
