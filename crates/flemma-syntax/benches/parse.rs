//! Parser benchmarks on a generated 10 MB chat (prose, code fences, tool blocks, thinking,
//! templates). Figures: full parse throughput, re-analysis after appending 100 bytes at the end,
//! the memchr line-count floor on the same text, and the tree's memory (printed once).
//!
//! Run: `cargo bench -p flemma-syntax --bench parse`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flemma_syntax::{Document, TextEdit, TextRange};

/// A deterministic chat of about `target` bytes.
pub fn generate_chat(target: usize) -> String {
    let mut out = String::with_capacity(target + 4096);
    out.push_str("```rhai\nlet project = \"demo\";\nflemma.opt.thinking = \"medium\";\n```\n");
    out.push_str("@System:\nYou are a careful assistant for {{ project }}.\n\n");
    let mut turn = 0u64;
    while out.len() < target {
        turn += 1;
        out.push_str(&format!(
            "@You:\nPlease look at @./src/module_{turn}.rs and explain the failing test {{{{ project }}}}.\n\
             It started after the refactor of the parser; here is the log:\n\n```\nerror[E0308]: mismatched types\n  --> src/lib.rs:{turn}:5\n```\n\n"
        ));
        out.push_str("@Assistant:\nLet me read the file first. The error says the types do not match, which usually means the\nsignature changed while a caller kept the old argument order. I will check both places.\n\n");
        out.push_str(&format!(
            "**Tool Use:** `read` (`toolu_{turn:020}`)\n```json\n{{\"label\":\"reading module\",\"limit\":200,\"offset\":1,\"path\":\"src/module_{turn}.rs\"}}\n```\n\n"
        ));
        out.push_str(&format!(
            "<thinking anthropic:signature=\"EtYDCkYICxgCKkAVHEWRYo6R{turn:08}\">\nThe user wants an explanation. Read the file, then compare the call sites.\n</thinking>\n\n"
        ));
        out.push_str(&format!(
            "@You:\n**Tool Result:** `toolu_{turn:020}`\n```\n"
        ));
        for line in 0..20 {
            out.push_str(&format!("{line:4} fn handler_{line}(input: &str) -> Result<Output, Error> {{ parse(input) }}\n"));
        }
        out.push_str("```\n\n@Assistant:\nThe function `handler_3` now takes `&str` but the test passes a `String`.\nChange the call to pass a reference:\n\n```rust\nlet out = handler_3(&input)?;\nassert_eq!(out.kind, Kind::Ok);\n```\n\nThat makes the types line up and the test passes again.\n\n");
    }
    out
}

fn benches(c: &mut Criterion) {
    let text = generate_chat(10 * 1024 * 1024);
    let doc = Document::parse(text.as_str());
    let tree = doc.tree_heap_bytes();
    eprintln!(
        "[memory] text {:.2} MB, tree {:.2} MB ({:.2}x the file), messages {}",
        text.len() as f64 / 1e6,
        tree as f64 / 1e6,
        tree as f64 / text.len() as f64,
        doc.messages().len()
    );

    let mut group = c.benchmark_group("parse_10mb");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function("full_parse", |b| {
        b.iter(|| Document::parse(black_box(text.as_str())))
    });
    group.bench_function("memchr_line_count", |b| {
        b.iter(|| memchr::memchr_iter(b'\n', black_box(text.as_bytes())).count())
    });
    group.finish();

    let mut group = c.benchmark_group("incremental");
    let chunk = format!(
        "{:<99}\n",
        "streamed text of the assistant's reply, one hundred bytes with the line break"
    );
    assert_eq!(chunk.len(), 100);
    let mut with_capacity = String::with_capacity(text.len() + 4096);
    with_capacity.push_str(&text);
    with_capacity.push_str("@Assistant:\nThe reply starts here.\n");
    let mut doc = Document::parse(with_capacity);
    group.bench_function("append_100_bytes", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let at = doc.text().len();
                let started = Instant::now();
                doc.append(black_box(&chunk));
                total += started.elapsed();
                doc.edit(&TextEdit::replace(TextRange::new(at, at + 100), ""))
                    .expect("the edit is inside the text");
            }
            total
        })
    });
    let middle = doc.messages()[doc.messages().len() / 2].content.start + 6;
    group.bench_function("edit_in_the_middle", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                doc.edit(black_box(&TextEdit::insert(middle, "typed ")))
                    .expect("the edit is inside the text");
                total += started.elapsed();
                doc.edit(&TextEdit::replace(TextRange::new(middle, middle + 6), ""))
                    .expect("the edit is inside the text");
            }
            total
        })
    });
    group.finish();
}

criterion_group!(parse, benches);
criterion_main!(parse);
