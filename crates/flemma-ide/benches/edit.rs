//! Diagnostics after a keystroke, through [`AnalysisHost`] (the path the language server
//! takes): a 10 MB chat shaped like a long agentic session, one character typed in its last
//! message (and one in the middle message), then the analysis that the diagnostics are
//! published from (goal: < 30 ms); and opening the chat (a cold analysis).
//!
//! `cargo bench -p flemma-ide --bench edit -- --warm-up-time 1 --measurement-time 3`

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_ide::{AnalysisHost, ConfigInput, DocumentId};
use flemma_syntax::{TextEdit, TextRange};
use flemma_template::{Host, PersonalityContext};

/// No files, fixed environment: measures the analysis, not the disk.
#[derive(Debug)]
struct NoFiles;

impl Host for NoFiles {
    fn read_file(&self, path: &Path, _limit: u64) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} (the bench reads no files)", path.display()),
        ))
    }
    fn home_dir(&self) -> Option<PathBuf> {
        None
    }
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
    }
    fn environment(&self) -> PersonalityContext {
        PersonalityContext::default()
    }
    fn run_filter(
        &self,
        _: &[String],
        _: &[u8],
        _: std::time::Duration,
    ) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::other("the bench runs no filters"))
    }
}

/// Turns of a templated question, a reply with a tool use and its result, to about `bytes`.
fn agentic_chat(bytes: usize) -> String {
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(8);
    let mut text = String::from("```rhai\nlet project = \"flemmad\";\n```\n");
    let mut turn = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "@You:\nStep {turn} of {{{{ project }}}}, please. {filler}\n\n\
             @Assistant:\nRunning step {turn}. {filler}\n\n\
             **Tool Use:** `bash` (`toolu_{turn:08}`)\n```json\n{{\"command\":\"cargo test --step {turn}\"}}\n```\n\n\
             @You:\n**Tool Result:** `toolu_{turn:08}`\n```\nok {turn}: {filler}\n```\n\n"
        ));
        turn += 1;
    }
    text.push_str("@You:\nAll steps of {{ project }} done?\n");
    text
}

fn bench(c: &mut Criterion) {
    let text = agentic_chat(10 * 1024 * 1024);
    let mut host = AnalysisHost::new(Arc::new(NoFiles), ConfigInput::default());
    let id = DocumentId::new("/bench/big.chat");
    host.set_text(id.clone(), text.clone());
    assert!(
        !host
            .analysis(&id)
            .is_ok_and(|a| a.has_blocking_diagnostics()),
        "the generated chat has no blocking problem"
    );
    // Typing in the last message: insert a character, next time delete it again.
    let at = text.len() - 2;
    host.apply_edits(&id, &[TextEdit::insert(at, "x")])
        .expect("the edit fits");
    let stats = host
        .analysis(&id)
        .expect("the document is open")
        .evaluation
        .stats;
    assert_eq!(
        stats.messages_evaluated, 1,
        "an edit in the last message evaluates only that message: {stats:?}"
    );
    host.apply_edits(
        &id,
        &[TextEdit::replace(
            TextRange {
                start: at,
                end: at + 1,
            },
            "",
        )],
    )
    .expect("the edit fits");
    let mut typed = false;
    c.bench_function(
        "1-char edit in the last message of a 10 MB chat → diagnostics",
        |b| {
            b.iter(|| {
                let edit = if typed {
                    TextEdit::replace(
                        TextRange {
                            start: at,
                            end: at + 1,
                        },
                        "",
                    )
                } else {
                    TextEdit::insert(at, "x")
                };
                typed = !typed;
                host.apply_edits(&id, &[edit]).expect("the edit fits");
                host.analysis(&id)
                    .expect("the document is open")
                    .diagnostics
                    .len()
            })
        },
    );
    let middle = text.len() / 2;
    let middle = text[middle..].find("please").map_or(middle, |i| i + middle);
    let mut typed = false;
    c.bench_function(
        "1-char edit in the middle message of a 10 MB chat → diagnostics",
        |b| {
            b.iter(|| {
                let edit = if typed {
                    TextEdit::replace(
                        TextRange {
                            start: middle,
                            end: middle + 1,
                        },
                        "",
                    )
                } else {
                    TextEdit::insert(middle, "x")
                };
                typed = !typed;
                host.apply_edits(&id, &[edit]).expect("the edit fits");
                host.analysis(&id)
                    .expect("the document is open")
                    .diagnostics
                    .len()
            })
        },
    );
    // Opening the chat: parse and analyse from nothing (a fresh host, so no cache).
    let mut group = c.benchmark_group("open");
    group.sample_size(10);
    group.bench_function("open a 10 MB chat → first diagnostics", |b| {
        b.iter(|| {
            let mut host = AnalysisHost::new(Arc::new(NoFiles), ConfigInput::default());
            host.set_text(id.clone(), text.as_str());
            host.analysis(&id)
                .expect("the document is open")
                .diagnostics
                .len()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
