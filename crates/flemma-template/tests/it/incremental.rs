//! Evaluation is linear in the size of the chat, and incremental with a [`TemplateCache`]: after
//! an edit only the messages from the edit on are evaluated again, with the same result as a
//! fresh evaluation.

use crate::common;

#[path = "common/agentic.rs"]
mod agentic;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestHost, text_of};
use flemma_template::{
    EvalOptions, Evaluation, Progress, ProgressCallback, TemplateCache, evaluate,
};

fn cached(cache: &TemplateCache) -> EvalOptions {
    EvalOptions {
        cache: Some(cache.clone()),
        ..EvalOptions::default()
    }
}

/// Evaluates `text` once with `cache` and once fresh, checks they agree, returns the cached one.
fn eval_both(host: &TestHost, text: &str, cache: &TemplateCache) -> Evaluation {
    let with_cache = host.eval_with(text, cached(cache));
    let fresh = host.eval(text);
    assert_eq!(with_cache.conversation, fresh.conversation);
    assert_eq!(with_cache.diagnostics, fresh.diagnostics);
    with_cache
}

fn fastest_evaluation(text: &str) -> Duration {
    let doc = flemma_syntax::parse(text);
    let host = TestHost::new().shared();
    (0..2)
        .map(|_| {
            let start = Instant::now();
            let evaluation = evaluate(&doc, host.clone(), &EvalOptions::default());
            assert!(
                evaluation.diagnostics.is_empty(),
                "{:?}",
                evaluation.diagnostics
            );
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

#[test]
fn evaluation_time_grows_linearly_with_the_chat() {
    // Before: every tool result looked its tool use up by scanning the whole document, so 4×
    // the messages took about 12× the time (2 MB → 8 MB). Linear is 4×; allow noise.
    // Wall-clock time on a shared machine is noisy (other processes take the cores between the
    // two measurements), so the ratio is measured up to five times and the best one counts: a
    // quadratic evaluation is slow in every attempt.
    let (small_chat, large_chat) = (
        agentic::agentic_chat(1_000_000),
        agentic::agentic_chat(4_000_000),
    );
    let mut attempts = Vec::new();
    for _ in 0..5 {
        let small = fastest_evaluation(&small_chat);
        let large = fastest_evaluation(&large_chat);
        let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
        if ratio < 7.0 {
            return;
        }
        attempts.push(format!("{ratio:.1}× ({small:?} → {large:?})"));
    }
    panic!("4× the chat took, in each attempt: {}", attempts.join(", "));
}

#[test]
fn an_edit_in_the_last_message_evaluates_only_that_message() {
    let host = TestHost::new();
    let cache = TemplateCache::new();
    let text = agentic::agentic_chat(200_000);
    let first = eval_both(&host, &text, &cache);
    assert_eq!(first.stats.messages_reused, 0);
    let messages = first.stats.messages_evaluated;
    assert!(messages > 300, "{messages}");

    let edited = text.replace(agentic::LAST_QUESTION, "@You:\nIs {{ project }} green?\n");
    let second = eval_both(&host, &edited, &cache);
    assert_eq!(second.stats.messages_evaluated, 1);
    assert_eq!(second.stats.messages_reused, messages - 1);
    let last = second.conversation.messages.len() - 1;
    assert_eq!(text_of(&second, last), "Is flemmad green?");

    // Unchanged: nothing to evaluate.
    let third = eval_both(&host, &edited, &cache);
    assert_eq!(third.stats.messages_evaluated, 0);
}

#[test]
fn variables_that_persist_see_the_edited_history() {
    let host = TestHost::new();
    let cache = TemplateCache::new();
    let text = "```rhai\nlet base = 10;\n```\n@You:\n{% count = base + 1 %}{% let local = 5 %}one {{ local }}\n\n@Assistant:\nok\n\n@You:\ncount={{ count }}\n\n@Assistant:\nok\n\n@You:\nlocal={{ local }}\n";
    let first = eval_both(&host, text, &cache);
    assert_eq!(text_of(&first, 2), "count=11");
    assert_eq!(text_of(&first, 4), "local={{ local }}");

    // An edit in the first message changes what the later ones see.
    let edited = text.replace("base + 1", "base + 2");
    let second = eval_both(&host, &edited, &cache);
    assert_eq!(text_of(&second, 2), "count=12");
    assert_eq!(second.stats.messages_reused, 0);

    // An edit in the frontmatter too.
    let edited = edited.replace("let base = 10;", "let base = 20;");
    let third = eval_both(&host, &edited, &cache);
    assert_eq!(text_of(&third, 2), "count=22");
    assert_eq!(third.stats.messages_reused, 0);
}

#[test]
fn messages_that_read_files_are_evaluated_again() {
    let host = TestHost::new();
    let cache = TemplateCache::new();
    host.write("status.md", "red");
    let text = "@You:\n{% status = include(\"status.md\") %}now {{ status }}\n\n@Assistant:\nok\n\n@You:\nwas {{ status }}\n\n@You:\nsee @./status.md\n";
    let first = eval_both(&host, text, &cache);
    assert_eq!(text_of(&first, 0), "now red");
    assert_eq!(text_of(&first, 2), "was red");

    host.write("status.md", "green");
    let second = eval_both(&host, text, &cache);
    assert_eq!(text_of(&second, 0), "now green");
    assert_eq!(text_of(&second, 2), "was green");
    // The file changed a variable: everything after the first message is evaluated again.
    assert_eq!(second.stats.messages_reused, 0);
}

#[test]
fn a_file_read_that_leaves_the_variables_alone_keeps_the_rest_cached() {
    let host = TestHost::new();
    let cache = TemplateCache::new();
    host.write("prompt.md", "Be brief.");
    let text = "```rhai\nlet who = \"QA\";\n```\n@System:\n{{ include(\"prompt.md\") }}\n\n@You:\nhello {{ who }}\n\n@Assistant:\nhi\n\n@You:\nbye {{ who }}\n";
    eval_both(&host, text, &cache);
    let again = eval_both(&host, text, &cache);
    assert_eq!(again.stats.messages_evaluated, 1, "only the system prompt");
    assert_eq!(again.stats.messages_reused, 3);
}

#[test]
fn notes_between_messages_do_not_stop_reuse() {
    let host = TestHost::new();
    let cache = TemplateCache::new();
    let text = "@You:\n{{ 1 + 1 }}\n\n@Note:\nnot sent\n\n@Assistant:\nok\n\n@You:\n{{ 2 + 2 }}\n";
    eval_both(&host, text, &cache);
    let edited = text.replace("{{ 2 + 2 }}", "{{ 3 + 3 }}");
    let again = eval_both(&host, &edited, &cache);
    assert_eq!(text_of(&again, 2), "6");
    assert_eq!(again.stats.messages_reused, 2);
    assert_eq!(again.stats.messages_evaluated, 1);
}

#[test]
fn the_clock_is_read_again() {
    let host = TestHost::new();
    let cache = TemplateCache::new();
    let text = "@You:\ntoday {{ date() }}\n";
    eval_both(&host, text, &cache);
    let again = eval_both(&host, text, &cache);
    assert_eq!(again.stats.messages_evaluated, 1);
}

#[test]
fn documents_are_cached_apart() {
    let one = TestHost::new();
    let two = TestHost::new();
    let cache = TemplateCache::new();
    eval_both(&one, "@You:\n{{ 1 + 1 }}\n", &cache);
    let other = eval_both(&two, "@You:\n{{ 2 + 2 }}\n", &cache);
    assert_eq!(text_of(&other, 0), "4");
    let again = eval_both(&one, "@You:\n{{ 1 + 1 }}\n", &cache);
    assert_eq!(again.stats.messages_reused, 1);
    assert_eq!(cache.cached_messages(Some(&one.path("chat.chat"))), 1);
    cache.forget_document(Some(&one.path("chat.chat")));
    assert_eq!(cache.cached_messages(Some(&one.path("chat.chat"))), 0);
}

#[test]
fn progress_is_reported_through_the_messages() {
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let record = seen.clone();
    let text = agentic::agentic_chat(1_500_000);
    let doc = flemma_syntax::parse(text.as_str());
    let options = EvalOptions {
        progress: Some(ProgressCallback::new(move |progress| {
            record
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(progress);
        })),
        ..EvalOptions::default()
    };
    evaluate(&doc, TestHost::new().shared(), &options);
    let seen = seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].bytes_done < w[1].bytes_done));
    let last = seen.last().copied().unwrap_or(Progress {
        messages_done: 0,
        messages_total: 1,
        bytes_done: 0,
        bytes_total: 1,
    });
    assert_eq!(last.messages_done, last.messages_total);
    assert_eq!(last.bytes_done, text.len());
    assert_eq!(last.bytes_total, text.len());
}
