//! Engine step throughput with fake IO, and the engine's own time per advance on a 10 MB chat
//! (goal < 5 ms). Run: `cargo bench -p flemma-engine -- --warm-up-time 1 --measurement-time 3`.

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use flemma_conversation::StreamEvent;
use flemma_engine::*;
use serde_json::Value;

struct Policy;

impl ToolPolicy for Policy {
    fn decide(&self, _name: &str, _input: &Value) -> Decision {
        Decision::new(Verdict::Approve, "urn:flemma:approval:config")
    }
    fn capabilities(&self, _name: &str) -> Option<ToolInfo> {
        Some(ToolInfo::default())
    }
    fn check(&self, _name: &str, _input: &Value) -> Result<(), String> {
        Ok(())
    }
}

/// A chat of about `bytes` bytes: turns with text and a resolved tool call each, ending with a
/// new user message.
fn big_chat(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 4096);
    let mut turn = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "@You:\nQuestion {turn}: please look at the file and explain what it does in detail.\n\n@Assistant:\nLet me read it.\n\n**Tool Use:** `read` (`toolu_{turn:08}`)\n```json\n{{\"label\":\"reading\",\"path\":\"src/file{turn}.rs\"}}\n```\n\n@You:\n**Tool Result:** `toolu_{turn:08}`\n```\n{}\n```\n\n@Assistant:\n{}\n\n",
            "fn main() { println!(\"hello\"); }\n".repeat(20),
            "It prints hello. ".repeat(30)
        ));
        turn += 1;
    }
    text.push_str("@You:\nAnd now?\n");
    text
}

fn one_cycle(engine: &mut Engine, now: &mut u64) -> usize {
    let mut steps = 0;
    let mut step = |engine: &mut Engine, input: Input| {
        *now += 1;
        steps += 1;
        engine.handle(*now, input).len()
    };
    step(engine, Input::Advance);
    let request = engine.request().unwrap_or(RequestId(0));
    for i in 0..20 {
        step(
            engine,
            Input::Stream {
                request,
                event: StreamEvent::TextDelta {
                    text: format!("word{i} "),
                },
            },
        );
    }
    step(
        engine,
        Input::StreamEnded {
            request,
            outcome: StreamOutcome::Finished,
        },
    );
    let at = engine.text().len();
    step(
        engine,
        Input::TextChanged {
            edits: vec![flemma_syntax::TextEdit::insert(at, "next question\n")],
        },
    );
    steps
}

fn bench(c: &mut Criterion) {
    let policy: Arc<dyn ToolPolicy> = Arc::new(Policy);
    c.bench_function("cycle of 23 steps on a small chat", |b| {
        b.iter_batched(
            || {
                Engine::new(
                    EngineConfig::default(),
                    "@You:\nhi\n".into(),
                    policy.clone(),
                )
            },
            |mut engine| {
                let mut now = 0;
                one_cycle(&mut engine, &mut now)
            },
            BatchSize::SmallInput,
        )
    });
    // The same on a CRLF chat: every edit the engine writes goes through its line-ending
    // conversion (the reply text of each stream event included).
    c.bench_function("cycle of 23 steps on a small CRLF chat", |b| {
        b.iter_batched(
            || {
                Engine::new(
                    EngineConfig::default(),
                    "@You:\r\nhi\r\n".into(),
                    policy.clone(),
                )
            },
            |mut engine| {
                let mut now = 0;
                one_cycle(&mut engine, &mut now)
            },
            BatchSize::SmallInput,
        )
    });
    let big = big_chat(10 * 1024 * 1024);
    let engine = Engine::new(EngineConfig::default(), big, policy.clone());
    c.bench_function("advance + cancel on a 10 MB chat", |b| {
        // Steady state on one engine: the advance (categorize, execute, send, `@Assistant:`)
        // and the cancel that removes the empty `@Assistant:` line again.
        let mut engine = engine.clone();
        b.iter(|| {
            let sent = engine.handle(1, Input::Advance);
            let cancelled = engine.handle(
                2,
                Input::Cancel {
                    scope: CancelScope::Request,
                },
            );
            sent.len() + cancelled.len()
        })
    });
    c.bench_function("stream event on a 10 MB chat", |b| {
        let mut engine = engine.clone();
        engine.handle(1, Input::Advance);
        let request = engine.request().unwrap_or(RequestId(0));
        b.iter(|| {
            engine.handle(
                2,
                Input::Stream {
                    request,
                    event: StreamEvent::TextDelta {
                        text: "word ".into(),
                    },
                },
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
