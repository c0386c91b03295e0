//! Evaluation speed: a 1,000-message chat with a few expressions per message (target < 20 ms)
//! and the frontmatter alone (target < 1 ms).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use flemma_template::{EvalOptions, Host, PersonalityContext, evaluate, evaluate_frontmatter};

/// No files, fixed environment: measures the evaluator, not the disk.
#[derive(Debug)]
struct NoFiles;

impl Host for NoFiles {
    fn read_file(&self, path: &Path) -> std::io::Result<Vec<u8>> {
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
        _dir: &Path,
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
    let cache = std::sync::Arc::new(flemma_template::CompileCache::default());
    let options = EvalOptions {
        compile_cache: Some(cache.clone()),
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
