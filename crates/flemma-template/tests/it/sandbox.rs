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
