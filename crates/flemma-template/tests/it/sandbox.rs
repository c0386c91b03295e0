//! Hostile templates end quickly with a clear blocking diagnostic; the sandbox has no IO.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use common::{TestHost, blocking};
use flemma_template::{EvalOptions, Evaluation};

/// Generous for CI on 2 shared cores in debug builds; the measured time is printed.
const BOUND: Duration = Duration::from_secs(2);

fn timed(host: &TestHost, text: &str) -> (Evaluation, Duration) {
    let started = Instant::now();
    let evaluation = host.eval(text);
    let elapsed = started.elapsed();
    println!("{text:?}: {elapsed:?}");
    (evaluation, elapsed)
}

#[track_caller]
fn assert_stopped(evaluation: &Evaluation, elapsed: Duration, expected: &str) {
    assert_stopped_by(evaluation, elapsed, &[expected]);
}

/// One blocking diagnostic whose message contains one of `expected`.
#[track_caller]
fn assert_stopped_by(evaluation: &Evaluation, elapsed: Duration, expected: &[&str]) {
    assert!(elapsed < BOUND, "took {elapsed:?}");
    let errors = blocking(evaluation);
    assert_eq!(errors.len(), 1, "{:#?}", evaluation.diagnostics);
    assert!(
        expected.iter().any(|e| errors[0].message.contains(e)),
        "{}",
        errors[0].message
    );
}

#[test]
fn endless_loops_stop_at_the_time_budget() {
    let host = TestHost::new();
    for text in [
        "```rhai\nfn spin() { loop {} }\n```\n@You:\n{{ spin() }}\n",
        "@You:\n{% loop { } %}\n",
        "```rhai\nlet i = 0;\nwhile true { i += 1; }\n```\n@You:\nhi\n",
    ] {
        let (evaluation, elapsed) = timed(&host, text);
        // Whichever comes first: the time budget or the operations limit (fast release builds).
        assert_stopped_by(
            &evaluation,
            elapsed,
            &["time budget of 90 ms", "too many operations"],
        );
    }
}

#[test]
fn huge_strings_arrays_and_recursion_are_refused() {
    let host = TestHost::new();
    let (evaluation, elapsed) = timed(&host, "@You:\n{{ \"x\".pad(1000000000, \"x\") }}\n");
    assert_stopped(&evaluation, elapsed, "too large");
    let (evaluation, elapsed) = timed(&host, "@You:\n{% let s = \"x\"; loop { s += s; } %}\n");
    assert_stopped(&evaluation, elapsed, "too large");
    let (evaluation, elapsed) = timed(&host, "@You:\n{% let a = []; loop { a.push(1); } %}\n");
    assert!(elapsed < BOUND);
    assert_eq!(blocking(&evaluation).len(), 1);
    let (evaluation, elapsed) = timed(
        &host,
        "```rhai\nfn deep(n) { deep(n + 1) }\n```\n@You:\n{{ deep(0) }}\n",
    );
    assert_stopped(&evaluation, elapsed, "recursed too deeply");
}

#[test]
fn cancellation_stops_an_evaluation() {
    let host = TestHost::new();
    let cancel = Arc::new(AtomicBool::new(true));
    let options = EvalOptions {
        cancel: Some(cancel),
        ..EvalOptions::default()
    };
    let started = Instant::now();
    let evaluation = host.eval_with(
        "@You:\n{% loop {} %}\n@Assistant:\nok\n@You:\nshort {{ 1 }}\n",
        options,
    );
    assert_stopped(&evaluation, started.elapsed(), "evaluation cancelled");
    assert!(evaluation.conversation.messages.is_empty());
}

#[test]
fn eval_modules_and_printing_are_unavailable() {
    let host = TestHost::new();
    let (evaluation, _) = timed(&host, "@You:\n{% eval(\"1\") %}\n");
    assert_eq!(blocking(&evaluation).len(), 1);
    let (evaluation, _) = timed(&host, "@You:\n{% import \"std\" as s; %}\n");
    assert_eq!(blocking(&evaluation).len(), 1);
    let (evaluation, _) = timed(
        &host,
        "@You:\n{% print(\"to tracing, not stdout\"); debug(1); %}ok\n",
    );
    assert!(
        evaluation.diagnostics.is_empty(),
        "{:#?}",
        evaluation.diagnostics
    );
    assert_eq!(common::text_of(&evaluation, 0), "ok");
}

/// Many slow templates share one budget per evaluation: 30 messages that would each spend their
/// whole per-run budget stop after the evaluation's budget, with one diagnostic saying the
/// later ones were not evaluated (issue 18: 400 such messages blocked a server for 36 s).
#[test]
fn many_slow_templates_stop_at_the_evaluation_budget() {
    let host = TestHost::new();
    let text = "@You:\n{% loop { } %}\n\n@Assistant:\nok\n\n".repeat(30);
    let options = EvalOptions {
        limits: flemma_template::Limits {
            time_budget: Duration::from_millis(40),
            evaluation_budget: Duration::from_millis(200),
            max_operations: u64::MAX,
            ..flemma_template::Limits::default()
        },
        ..EvalOptions::default()
    };
    let started = Instant::now();
    let evaluation = host.eval_with(&text, options);
    let elapsed = started.elapsed();
    println!("30 slow templates: {elapsed:?}");
    assert!(elapsed < BOUND, "took {elapsed:?}");
    let spent: Vec<_> = evaluation
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("were not evaluated"))
        .collect();
    assert_eq!(spent.len(), 1, "{:#?}", evaluation.diagnostics);
    assert!(spent[0].blocking);
    assert!(spent[0].message.contains("200 ms"), "{}", spent[0].message);
    let stopped = evaluation
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("time budget"))
        .count();
    assert!(
        (2..=7).contains(&stopped),
        "about 200 / 40 runs are stopped by their own budget, then none runs: {stopped}"
    );
}

/// Files are read only when regular: a device or a FIFO is refused at once (a FIFO with no
/// writer would block the reader forever), and the reference's literal text is sent.
#[test]
fn devices_and_fifos_are_not_read() {
    let host = TestHost::new();
    let fifo = host.path("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success());
    assert_eq!(made.ok(), Some(true), "mkfifo");
    let text = format!(
        "@You:\nA @//dev/zero and @/{} and {{{{ include(\"/dev/zero\") }}}}\n",
        fifo.display()
    );
    let (evaluation, elapsed) = timed(&host, &text);
    assert!(elapsed < BOUND, "took {elapsed:?}");
    let messages: Vec<&str> = evaluation
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.contains("not a regular file"))
            .count(),
        3,
        "{messages:#?}"
    );
    assert_eq!(
        blocking(&evaluation).len(),
        1,
        "the include blocks: {messages:#?}"
    );
}

/// One file is read up to `max_file_bytes`, all of an evaluation's files up to
/// `max_read_bytes`; what is cut is named in a diagnostic.
#[test]
fn reads_are_capped_per_file_and_per_evaluation() {
    let host = TestHost::new();
    host.write("big.txt", vec![b'a'; 300]);
    host.write("a.txt", vec![b'a'; 150]);
    host.write("b.txt", vec![b'b'; 150]);
    let options = || EvalOptions {
        limits: flemma_template::Limits {
            max_file_bytes: 200,
            max_read_bytes: 250,
            ..flemma_template::Limits::default()
        },
        ..EvalOptions::default()
    };
    let evaluation = host.eval_with("@You:\nsee @./big.txt\n", options());
    assert_eq!(
        evaluation.diagnostics.len(),
        1,
        "{:#?}",
        evaluation.diagnostics
    );
    let message = &evaluation.diagnostics[0].message;
    assert!(
        message.contains("big.txt") && message.contains("larger than 200 bytes"),
        "{message}"
    );
    assert!(common::text_of(&evaluation, 0).contains("@./big.txt"));

    let evaluation = host.eval_with("@You:\n@./a.txt and @./b.txt\n", options());
    assert_eq!(
        evaluation.diagnostics.len(),
        1,
        "{:#?}",
        evaluation.diagnostics
    );
    let message = &evaluation.diagnostics[0].message;
    assert!(
        message.contains("b.txt") && message.contains("add up to more than 250 bytes"),
        "{message}"
    );
}
