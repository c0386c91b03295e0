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
    // One `replace` would build terabytes: refused before it is built.
    let (evaluation, elapsed) = timed(
        &host,
        "@You:\n{% let s = \"x\"; s.pad(4000000, \"x\"); let t = \"y\"; t.pad(4000, \"y\"); s.replace(\"x\", t); %}\n",
    );
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

/// Files are read only when regular: a FIFO (or a socket) is refused at once (one with no
/// writer would block the reader forever), and the reference's literal text is sent; devices
/// are in `/dev`, which is never read at all (not even opened).
#[test]
fn devices_and_fifos_are_not_read() {
    let host = TestHost::new();
    let fifo = host.path("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success());
    assert_eq!(made.ok(), Some(true), "mkfifo");
    std::os::unix::fs::symlink("/dev/zero", host.path("zero")).expect("a link");
    let text = format!(
        "@You:
A @//dev/zero and @/{fifo} and @./zero and {{{{ include(\"/dev/zero\") }}}}\n{{{{ include(\"{fifo}\") }}}}\n",
        fifo = fifo.display()
    );
    let (evaluation, elapsed) = timed(&host, &text);
    assert!(elapsed < BOUND, "took {elapsed:?}");
    let messages: Vec<&str> = evaluation
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    let count = |what: &str| messages.iter().filter(|m| m.contains(what)).count();
    assert_eq!(count("not a regular file"), 2, "{messages:#?}");
    assert_eq!(
        count("in /dev, which flemmad never reads"),
        3,
        "{messages:#?}"
    );
    assert_eq!(
        blocking(&evaluation).len(),
        1,
        "the include of the FIFO blocks: {messages:#?}"
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

/// The worst templates we could write within the limits: each loops over one operation that
/// is as slow as the limits allow (a whole 10,000-item array or map compared, copied or
/// printed; a 4 MiB string replaced, padded or joined; the largest `split`, `each` and `date`).
/// Each setup sits inside the loop's script, so it is inside the budget too.
fn worst_templates(host: &TestHost) -> Vec<(&'static str, String)> {
    host.write("big.md", "a".repeat(3 * 1024 * 1024));
    let array = "let a = []; a.pad(10000, \"xxxxxxxxxxxxxxxx\");";
    let numbers = "let a = []; a.pad(10000, 123456789);";
    let map = "let m = #{}; for i in 0..10000 { m[`k${i}`] = i; }";
    let string = "let s = \"x\"; s.pad(4194000, \"x\");";
    [
        ("array ==", format!("{array} loop {{ a == a; }}")),
        ("array copy", format!("{array} loop {{ let b = a; }}")),
        ("array contains", format!("{array} loop {{ a.contains(\"y\"); }}")),
        ("array to_string", format!("{numbers} loop {{ let t = a.to_string(); }}")),
        ("array sort", "let a = []; for i in 0..10000 { a.push(`${i * 7919 % 10007}`); } loop { let b = a; b.sort(); }".to_owned()),
        ("nested arrays", "let a = []; a.pad(99, 1); let b = []; b.pad(99, a); loop { let c = b; c == b; }".to_owned()),
        ("map copy", format!("{map} loop {{ let c = m; }}")),
        ("map print", format!("{map} loop {{ let t = `${{m}}`; }}")),
        ("map keys", format!("{map} loop {{ let k = m.keys(); }}")),
        ("string replace", format!("{string} loop {{ s.replace(\"x\", \"y\"); s.replace(\"y\", \"x\"); }}")),
        ("string replace pairs", format!("{string} loop {{ s.replace(\"xx\", \"yy\"); s.replace(\"yy\", \"xx\"); }}")),
        ("string join", "let s = \"x\"; s.pad(2097000, \"x\"); loop { let t = s + s; }".to_owned()),
        ("string pad", "loop { let s = \"\"; s.pad(4194000, \"abcdefghij\"); }".to_owned()),
        ("string contains", format!("{string} loop {{ s.contains(\"y\"); }}")),
        ("string split", "let s = \"a,\"; s.pad(19998, \"a,\"); loop { let p = s.split(\",\"); }".to_owned()),
        ("string upper", format!("{string} loop {{ let t = s; t.make_upper(); }}")),
        ("each", "let a = []; a.pad(1666, 1); loop { let e = each(a); }".to_owned()),
        ("date", "let f = \"%B\"; f.pad(690000, \"%B\"); loop { let d = date(f); }".to_owned()),
        ("include", "loop { let t = include(\"big.md\"); }".to_owned()),
        ("counting", "let i = 0; loop { i += 1; }".to_owned()),
    ]
    .into_iter()
    .map(|(name, code)| (name, format!("@You:\n{{% {code} %}}\n")))
    .collect()
}

/// What a budget may be overrun by here: one operation, on a loaded 2-core CI machine in a
/// test build. Checking the clock every 512 operations, one of these templates ran 4–7 s past
/// the 3 s budget of an evaluation (issue 26), and single runs took seconds.
const OVERRUN: Duration = Duration::from_millis(450);

/// Each worst template stops at its run's 90 ms budget (or a size limit) within one operation.
#[test]
fn the_worst_templates_stop_at_the_run_budget() {
    let host = TestHost::new();
    let budget = flemma_template::Limits::default().time_budget;
    let mut slowest = Duration::ZERO;
    for (name, text) in worst_templates(&host) {
        let started = Instant::now();
        let evaluation = host.eval(&text);
        let elapsed = started.elapsed();
        println!("{name}: {elapsed:?}");
        slowest = slowest.max(elapsed);
        let errors = blocking(&evaluation);
        assert_eq!(errors.len(), 1, "{name}: {:#?}", evaluation.diagnostics);
        assert!(
            ["time budget of 90 ms", "too large", "add up to more than"]
                .iter()
                .any(|why| errors[0].message.contains(why)),
            "{name}: {}",
            errors[0].message
        );
        assert!(
            elapsed < budget + OVERRUN,
            "{name}: {elapsed:?}, over the {budget:?} budget by more than {OVERRUN:?}"
        );
    }
    println!("slowest: {slowest:?}");
}

/// A chat made of the worst templates, many times over, stops at the evaluation's 3 s budget
/// within one operation: the later templates are not run (one diagnostic says so).
#[test]
fn a_chat_of_the_worst_templates_stops_at_the_evaluation_budget() {
    let host = TestHost::new();
    let limits = flemma_template::Limits::default();
    let messages: Vec<String> = worst_templates(&host)
        .into_iter()
        .filter(|(name, _)| *name != "include")
        .map(|(_, text)| text)
        .collect();
    let text = messages
        .iter()
        .cycle()
        .take(80)
        .map(|message| format!("{message}\n@Assistant:\nok\n\n"))
        .collect::<String>();
    let started = Instant::now();
    let evaluation = host.eval(&text);
    let elapsed = started.elapsed();
    println!("80 worst templates: {elapsed:?}");
    assert!(
        evaluation
            .diagnostics
            .iter()
            .any(|d| d.message.contains("were not evaluated")),
        "the budget ran out before the last template: {:#?}",
        evaluation.diagnostics.last()
    );
    assert!(
        elapsed < limits.evaluation_budget + OVERRUN,
        "{elapsed:?}, over the {:?} budget by more than {OVERRUN:?}",
        limits.evaluation_budget
    );
}

/// The functions the sandbox measures before building (`replace`, `pad`, `split`, `split_rev`,
/// `to_chars`) give the standard package's results.
#[test]
fn measured_functions_give_the_standard_results() {
    let host = TestHost::new();
    let evaluation = host.eval(concat!(
        "@You:\n{% let s = \"a,b,,c\"; %}",
        "{{ s.split(\",\") }}|{{ s.split(',') }}|{{ s.split(\",\", 2) }}|{{ s.split(',', 3) }}|",
        "{{ s.split_rev(\",\") }}|{{ s.split_rev(',', 2) }}|{{ s.split(\"\") }}|",
        "{{ \" a  b \".split() }}|{{ \"\".split(\",\") }}|{{ s.split(\";\") }}|{{ \"héllo\".to_chars() }}|",
        "{% let r = \"banana\"; r.replace(\"an\", \"AN\"); %}{{ r }}|",
        "{% let r = \"banana\"; r.replace('a', \"<>\"); %}{{ r }}|",
        "{% let r = \"banana\"; r.replace(\"na\", '_'); %}{{ r }}|",
        "{% let r = \"ab\"; r.replace(\"\", \"-\"); %}{{ r }}|",
        "{% let p = \"hé\"; p.pad(6, \"xyz\"); %}{{ p }}|",
        "{% let p = \"hé\"; p.pad(4, '*'); %}{{ p }}|",
        "{% let p = \"hello\"; p.pad(3, '*'); %}{{ p }}\n",
    ));
    common::assert_clean(&evaluation);
    let text = common::text_of(&evaluation, 0);
    let parts: Vec<&str> = text.split('|').collect();
    assert_eq!(
        parts,
        [
            r#"["a","b","","c"]"#,
            r#"["a","b","","c"]"#,
            r#"["a","b,,c"]"#,
            r#"["a","b",",c"]"#,
            r#"["c","","b","a"]"#,
            r#"["c","a,b,"]"#,
            r#"["","a",",","b",",",",","c",""]"#,
            r#"["a","b"]"#,
            r#"[""]"#,
            r#"["a,b,,c"]"#,
            r#"["h","é","l","l","o"]"#,
            "bANANa",
            "b<>n<>n<>",
            "ba__",
            "-a-b-",
            "héxyzx",
            "hé**",
            "hello",
        ]
    );
}

/// A run that the machine kept waiting (here: a file that takes 200 ms to arrive, as a thread
/// preempted on a loaded machine would) is not stopped for the wait: the budget stops a run
/// that used half of it on the CPU. A three-line frontmatter must not fail on a busy CI machine.
#[test]
fn a_run_kept_waiting_is_not_stopped_for_the_wait() {
    #[derive(Debug)]
    struct Slow(TestHost);
    impl flemma_template::Host for Slow {
        fn read_file(&self, path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
            std::thread::sleep(Duration::from_millis(200));
            self.0.read_file(path, limit)
        }
        fn home_dir(&self) -> Option<std::path::PathBuf> {
            self.0.home_dir()
        }
        fn now(&self) -> std::time::SystemTime {
            self.0.now()
        }
        fn environment(&self) -> flemma_template::PersonalityContext {
            self.0.environment()
        }
        fn run_filter(
            &self,
            argv: &[String],
            input: &[u8],
            timeout: Duration,
        ) -> std::io::Result<Vec<u8>> {
            self.0.run_filter(argv, input, timeout)
        }
    }
    let host = TestHost::new();
    host.write("slow.md", "arrived");
    let text = "@You:\n{{ include(\"slow.md\") }} {% let x = 1; x += 1; %}{{ x }}\n";
    let path = host.write("chat.chat", text);
    let evaluation = flemma_template::evaluate(
        &flemma_syntax::parse(text),
        Arc::new(Slow(host)),
        &EvalOptions {
            path: Some(path),
            ..EvalOptions::default()
        },
    );
    common::assert_clean(&evaluation);
    assert_eq!(common::text_of(&evaluation, 0), "arrived 2");
}
