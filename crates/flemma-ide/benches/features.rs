//! Hover and definition on a 10 MB chat shaped like a long agentic session (goal: < 1 ms each).
//!
//! `cargo bench -p flemma-ide --bench features -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_ide::features::{
    Approvals, FileKind, FileSystem, definition::definition, hover::HoverContext, hover::hover,
};

/// A file system that knows nothing: the bench measures the analysis, not disk access.
struct NoFs;

impl FileSystem for NoFs {
    fn kind(&self, _: &Path) -> FileKind {
        FileKind::Missing
    }
    fn list(&self, _: &Path) -> Vec<(String, bool)> {
        Vec::new()
    }
    fn home(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// Turns of a question, a tool call and its result until the text reaches `size` bytes.
fn agentic_chat(size: usize) -> String {
    let mut text = String::with_capacity(size + 4096);
    let mut turn = 0;
    while text.len() < size {
        text.push_str(&format!(
            "@You:\nPlease look at step {turn} of the plan and run the checks; see @./notes.md for context.\n\n\
             @Assistant:\nRunning the checks for step {turn}.\n\
             **Tool Use:** `bash` (`call_{turn}`)\n```json\n{{\"command\": \"make check STEP={turn}\", \"label\": \"checking step {turn}\"}}\n```\n\n\
             @You:\n**Tool Result:** `call_{turn}`\n```\n{}\n```\n\n",
            "all checks passed\n".repeat(8)
        ));
        turn += 1;
    }
    text
}

fn bench(c: &mut Criterion) {
    let text = agentic_chat(10 * 1024 * 1024);
    let doc = flemma_syntax::parse(text.as_str());
    let first_use = text.find("`call_0`").expect("the chat has a first call");
    let middle_use = text
        .find(&format!("`call_{}`", doc.messages().len() / 6))
        .expect("the chat has a middle call");
    let last_result = text
        .rfind("**Tool Result:**")
        .expect("the chat has a result");
    let fs = NoFs;
    let approvals = Approvals::new();
    let jobs = |_: &str| None;
    let context = HoverContext {
        chat_dir: Path::new("/chats"),
        fs: &fs,
        jobs: &jobs,
        approvals: &approvals,
    };
    let mut group = c.benchmark_group("features_10mb");
    group.bench_function("hover_tool_use_middle", |b| {
        b.iter(|| hover(&doc, black_box(middle_use), &context))
    });
    group.bench_function("hover_tool_result_last", |b| {
        b.iter(|| hover(&doc, black_box(last_result), &context))
    });
    group.bench_function("definition_first_tool_use", |b| {
        b.iter(|| definition(&doc, black_box(first_use), Path::new("/chats"), &fs))
    });
    group.bench_function("definition_middle_tool_use", |b| {
        b.iter(|| definition(&doc, black_box(middle_use), Path::new("/chats"), &fs))
    });
    group.bench_function("definition_last_result", |b| {
        b.iter(|| definition(&doc, black_box(last_result), Path::new("/chats"), &fs))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
