//! `bash` printing a large output (temp file, both-ends readback) against the same output sent
//! straight to a file by the shell.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_tools::RunContext;
use flemma_tools::builtin::bash;
use flemma_tools::sandbox::AllowAll;
use serde_json::json;

const PRODUCE: &str = "yes 0123456789abcdef0123456789abcdef0123456789abcdef | head -c 100000000";

fn large_output(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = RunContext::new(dir.path(), Arc::new(AllowAll));
    let mut group = c.benchmark_group("bash_100MB");
    group.sample_size(10);
    group.bench_function("flemma_bash_run", |b| {
        b.iter(|| {
            let out = bash::run(
                &ctx,
                &json!({"label": "b", "command": PRODUCE, "timeout": 120}),
            );
            assert!(!out.is_error);
        })
    });
    let target = dir.path().join("out.txt");
    let redirect = format!("{PRODUCE} > {}", target.display());
    group.bench_function("shell_redirect_to_file", |b| {
        b.iter(|| {
            let status = std::process::Command::new("bash")
                .args(["-c", &redirect])
                .status()
                .expect("bash");
            assert!(status.success());
        })
    });
    group.finish();
}

criterion_group!(benches, large_output);
criterion_main!(benches);
