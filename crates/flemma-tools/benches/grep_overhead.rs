//! `grep` over this repository against ripgrep run directly with the same arguments: the
//! overhead of the tool (process setup, JSON decoding, formatting) above ripgrep's own time.
//! A pattern with fewer matches than the limit, so both read the whole tree.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_tools::RunContext;
use flemma_tools::builtin::grep::{self, GrepOptions};
use flemma_tools::sandbox::AllowAll;
use serde_json::json;

const PATTERN: &str = r"grep_over_the_\w+";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn grep_over_the_repository(c: &mut Criterion) {
    if !flemma_tools::process::on_path("rg") {
        eprintln!("rg is not on PATH; the grep overhead bench needs ripgrep");
        return;
    }
    let root = repository();
    let ctx = RunContext::new(&root, Arc::new(AllowAll));
    let options = GrepOptions::default();
    let input =
        json!({"label": "bench", "pattern": PATTERN, "path": null, "glob": null, "limit": null});
    let mut group = c.benchmark_group("grep_repository");
    group.sample_size(20);
    group.bench_function("flemma_grep_run", |b| {
        b.iter(|| {
            let out = grep::run_with(&ctx, &input, &options);
            assert!(!out.is_error, "{}", out.text);
        })
    });
    group.bench_function("ripgrep_alone", |b| {
        b.iter(|| {
            let mut command = Command::new("rg");
            command.current_dir(&root).args([
                "--json",
                "--line-number",
                "--hidden",
                "--no-messages",
            ]);
            for dir in &options.exclude {
                command.arg("--glob").arg(format!("!{dir}"));
            }
            let out = command
                .args(["--regexp", PATTERN, "--", "."])
                .stdin(Stdio::null())
                .output()
                .expect("rg runs");
            assert!(matches!(out.status.code(), Some(0 | 1)), "rg failed");
        })
    });
    group.finish();
}

criterion_group!(benches, grep_over_the_repository);
criterion_main!(benches);
