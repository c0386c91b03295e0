//! The context meter on a ~10 MB conversation (docs/context.md): the first estimate (every
//! message measured), and the estimate after typing in the last message (the case of an editor:
//! only that message is measured again, the others' counts are kept).

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_conversation::{Conversation, Message, Part, Role};
use flemma_wire::Meter;
use std::hint::black_box;

const TARGET: usize = 10 * 1024 * 1024;

/// An agentic conversation: a question, a `bash` call, its ~4 kB result, a reply; repeated.
fn conversation() -> Conversation {
    let mut messages = Vec::new();
    let mut size = 0;
    let mut turn = 0;
    let output: String = (0..80)
        .map(|i| format!("src/module_{i}.rs:{i}: fn handler_{i}(request: &Request) -> Response\n"))
        .collect();
    while size < TARGET {
        let question =
            format!("Turn {turn}: look at the handlers and tell me which ones allocate.");
        let reply = format!(
            "In turn {turn} the handlers 3, 17 and 42 allocate a String per request; the others borrow."
        );
        size += question.len() + output.len() + reply.len();
        messages.push(Message {
            role: Role::User,
            parts: vec![Part::text(question)].into(),
            span: None,
        });
        messages.push(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolUse {
                id: format!("t{turn}"),
                name: "bash".into(),
                input: serde_json::json!({"command": "grep -n fn src"}),
                raw_input: "{\"command\":\"grep -n fn src\"}".into(),
            }]
            .into(),
            span: None,
        });
        messages.push(Message {
            role: Role::User,
            parts: vec![Part::ToolResult {
                tool_use_id: format!("t{turn}"),
                content: vec![Part::text(output.clone())],
                is_error: false,
            }]
            .into(),
            span: None,
        });
        messages.push(Message {
            role: Role::Assistant,
            parts: vec![Part::text(reply)].into(),
            span: None,
        });
        turn += 1;
    }
    Conversation {
        system: vec![Part::text("You are a careful reviewer.")],
        messages,
    }
}

fn meter(c: &mut Criterion) {
    let mut conversation = conversation();
    c.bench_function("meter/first_estimate_10MB", |b| {
        b.iter(|| black_box(Meter::new().estimate(&conversation, &[])))
    });
    let mut meter = Meter::new();
    meter.estimate(&conversation, &[]);
    let mut typed = String::from("And now? ");
    c.bench_function("meter/after_typing_in_the_last_message_10MB", |b| {
        b.iter(|| {
            typed.push('x');
            if let Some(last) = conversation.messages.last_mut() {
                last.parts = vec![Part::text(typed.clone())].into();
            }
            black_box(meter.estimate(&conversation, &[]))
        })
    });
}

criterion_group!(benches, meter);
criterion_main!(benches);
