//! Evaluation speed: a 1,000-message chat with a few expressions per message (target < 20 ms),
//! the frontmatter alone (target < 1 ms), chats shaped like long agentic sessions at 1, 10 and
//! 50 MB (target: 10 MB under 100 ms cold), and re-evaluating after an edit in the last message
//! with a [`TemplateCache`].

#[path = "../tests/it/common/agentic.rs"]
mod agentic;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_template::{
    EvalOptions, Host, PersonalityContext, TemplateCache, evaluate, evaluate_frontmatter,
};

/// No files, fixed environment: measures the evaluator, not the disk.
#[derive(Debug)]
struct NoFiles;

impl Host for NoFiles {
    fn read_file(&self, path: &Path, _limit: u64) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} (benchmark host has no files)", path.display()),
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
        argv: &[String],
        _input: &[u8],
        _timeout: Duration,
    ) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("{argv:?} (benchmark host runs no processes)"),
        ))
    }
}

const FRONTMATTER: &str = "```rhai\nlet recipient = \"QA team\";\nlet items = [\"alpha\", \"beta\", \"gamma\"];\nlet budget = 20000;\nflemma.opt.thinking = \"medium\";\nflemma.opt.anthropic.thinking_budget = budget;\nflemma.opt.tools = [\"bash\", \"read\"];\nflemma.opt.tools.append(\"grep\");\nflemma.opt.tools.auto_approve = [\"$readonly\", \"+bash\"];\n```\n";

fn long_chat(messages: usize) -> String {
    let mut text = String::from(FRONTMATTER);
    text.push_str("@System:\nYou help {{ recipient }}.\n\n");
    for i in 0..messages {
        if i % 2 == 0 {
            text.push_str(&format!(
                "@You:\nMessage {i} for {{{{ recipient }}}}: {{{{ items[{}] }}}} costs {{{{ format_number(budget * {i}) }}}}{{% if {i} % 3 == 0 {{ %}} (third){{% }} %}}.\n\n",
                i % 3
            ));
        } else {
            text.push_str(&format!(
                "@Assistant:\nReply {i} with some text that is never evaluated.\n\n"
            ));
        }
    }
    text
}

fn bench(c: &mut Criterion) {
    let cache = TemplateCache::new();
    let options = EvalOptions {
        cache: Some(cache.clone()),
        ..EvalOptions::default()
    };
    let host: Arc<dyn Host> = Arc::new(NoFiles);
    let chat = flemma_syntax::parse(long_chat(1_000));
    let evaluation = evaluate(&chat, host.clone(), &options);
    assert!(
        evaluation.diagnostics.is_empty(),
        "{:#?}",
        evaluation.diagnostics
    );
    assert_eq!(evaluation.conversation.messages.len(), 1_000);
    c.bench_function(
        "evaluate 1000 messages (warm: compiled templates cached)",
        |b| b.iter(|| evaluate(&chat, host.clone(), &options)),
    );
    c.bench_function(
        "evaluate 1000 messages (cold: compile cache cleared)",
        |b| {
            b.iter(|| {
                cache.clear();
                evaluate(&chat, host.clone(), &options)
            })
        },
    );
    let frontmatter_only = flemma_syntax::parse(format!("{FRONTMATTER}@You:\nhi\n"));
    c.bench_function("evaluate_frontmatter", |b| {
        b.iter(|| evaluate_frontmatter(&frontmatter_only, host.clone(), &options))
    });
    agentic_sessions(c, host);
}

fn agentic_sessions(c: &mut Criterion, host: Arc<dyn Host>) {
    let mut group = c.benchmark_group("agentic session");
    group.sample_size(10);
    for megabytes in [1, 2, 8, 10, 50] {
        let text = agentic::agentic_chat(megabytes * 1_000_000);
        let doc = flemma_syntax::parse(text.as_str());
        let evaluation = evaluate(&doc, host.clone(), &EvalOptions::default());
        assert!(
            evaluation.diagnostics.is_empty(),
            "{:#?}",
            evaluation.diagnostics
        );
        // Cold: a command such as `parse --eval` or `send` (no cache kept between runs).
        group.bench_function(format!("evaluate {megabytes} MB (cold)"), |b| {
            b.iter(|| evaluate(&doc, host.clone(), &EvalOptions::default()))
        });
        if megabytes == 2 || megabytes == 8 {
            continue;
        }
        // The language server after a keystroke in the last message: the document is parsed
        // again by the caller (not measured here); evaluation reuses every earlier message.
        let cache = TemplateCache::new();
        let options = EvalOptions {
            cache: Some(cache.clone()),
            ..EvalOptions::default()
        };
        evaluate(&doc, host.clone(), &options);
        let edits = [
            text.replace(
                agentic::LAST_QUESTION,
                "@You:
All steps of {{ project }} done? A
",
            ),
            text.replace(
                agentic::LAST_QUESTION,
                "@You:
All steps of {{ project }} done? B
",
            ),
        ];
        let edited = edits.map(flemma_syntax::parse);
        let mut turn = 0;
        group.bench_function(
            format!("re-evaluate {megabytes} MB after an edit in the last message"),
            |b| {
                b.iter(|| {
                    turn += 1;
                    let evaluation = evaluate(&edited[turn % 2], host.clone(), &options);
                    debug_assert_eq!(evaluation.stats.messages_evaluated, 1);
                    evaluation
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
