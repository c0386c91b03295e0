//! A CRLF chat keeps its convention: every piece of text the engine writes (the `@Assistant:`
//! line and the reply, placeholders, tool and job results, abort markers, the closing `@You:`,
//! recovered orphans) uses `\r\n`. Each test runs the same inputs on the LF and the CRLF form of
//! a chat and checks that the CRLF result is exactly the LF result with `\r\n` breaks.

use crate::common::*;
use flemma_engine::*;

fn crlf(text: &str) -> String {
    text.replace('\n', "\r\n")
}

fn has_bare_lf(text: &str) -> bool {
    text.bytes()
        .enumerate()
        .any(|(i, b)| b == b'\n' && (i == 0 || text.as_bytes()[i - 1] != b'\r'))
}

/// Runs `script` on the chat as LF and as CRLF; returns the LF result after checking the CRLF
/// one equals it converted, that no edit of the engine held a bare LF, and that it parses.
fn on_both(before: &str, script: impl Fn(&mut Driver)) -> String {
    let mut lf = Driver::new(before);
    script(&mut lf);
    let mut cr = Driver::new(&crlf(before));
    script(&mut cr);
    for effect in &cr.effects {
        if let Effect::Edit { edits } = effect {
            for edit in edits {
                assert!(!has_bare_lf(&edit.new_text), "bare LF written: {edit:?}");
            }
        }
    }
    assert_eq!(
        cr.shell,
        crlf(&lf.shell),
        "the CRLF run differs from the LF run"
    );
    assert_eq!(cr.engine.line_ending(), flemma_syntax::LineEnding::CrLf);
    assert_well_formed(&cr.shell);
    lf.shell
}

#[test]
fn a_reply_with_tool_calls_placeholders_and_results_is_written_in_crlf() {
    let after = on_both("@You:\nList and test.\n", |d| {
        d.send(Input::Advance);
        let mut events = vec![text("Line one\nline two\n")];
        events.extend(call(0, "t1", "ls", r#"{"path":"."}"#));
        events.extend(call(1, "t2", "bash", r#"{"command":"make"}"#));
        d.reply(1, events);
        d.send(finished("t1", "README.md\nsrc/\n"));
        d.send(Input::Reject {
            tool_id: "t2".into(),
            reason: Some("not now".into()),
        });
        d.reply(2, vec![text("Done.")]);
    });
    assert!(after.contains("**Tool Result:** `t1`\n```\nREADME.md\nsrc/\n```\n"));
    assert!(after.contains("User feedback: not now"));
    assert!(after.ends_with("Done.\n\n@You:\n\n"), "{after}");
}

#[test]
fn the_abort_marker_and_a_cancelled_tool_are_written_in_crlf() {
    on_both("@You:\nGo.\n", |d| {
        d.send(Input::Advance);
        d.send(Input::Stream {
            request: RequestId(1),
            event: text("partial\nreply"),
        });
        d.send(Input::Cancel {
            scope: CancelScope::Request,
        });
        let eol = d.engine.line_ending().as_str();
        d.type_at_end(&format!("Again, with a tool.{eol}"));
        d.send(Input::Advance);
        d.reply(2, call(0, "t1", "sleep", "{}"));
        d.send(Input::Cancel {
            scope: CancelScope::All,
        });
    });
}

#[test]
fn job_results_and_recovered_orphans_are_written_in_crlf() {
    let before = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `t1` (job=job_k7x2m9qa)\n```\nRunning as a background job `job_k7x2m9qa`.\n```\n\n@Assistant:\nWaiting.\n\n@You:\nAre you done?\n";
    let after = on_both(before, |d| {
        d.send(Input::Load);
    });
    assert!(after.contains("Job lost: session ended before completion."));
    let after = on_both("@You:\nStart a job.\n", |d| {
        d.send(Input::Advance);
        d.reply(1, call(0, "t1", "sleep", r#"{"flemma.background":true}"#));
        let job = d
            .engine
            .jobs()
            .next()
            .map(|j| j.job_id.clone())
            .unwrap_or_default();
        d.reply(2, vec![text("Waiting.")]);
        d.send(Input::JobFinished {
            job_id: job,
            text: "slept\nwell".into(),
            is_error: false,
        });
    });
    assert!(after.contains("**Job Result:**"), "{after}");
}

#[test]
fn a_crlf_pair_split_between_two_stream_events_stays_one_line_break() {
    let mut d = Driver::new("@You:\r\nHi\r\n");
    d.send(Input::Advance);
    d.reply(1, vec![text("one\r"), text("\ntwo")]);
    assert_eq!(
        d.shell,
        "@You:\r\nHi\r\n\r\n@Assistant:\r\none\r\ntwo\r\n\r\n@You:\r\n\r\n"
    );
}

#[test]
fn an_empty_chat_takes_the_convention_of_the_first_line_break_typed() {
    let mut d = Driver::new("");
    d.type_at_end("@You:\r\nHi\r\n");
    d.send(Input::Advance);
    d.reply(1, vec![text("a\nb")]);
    assert!(!has_bare_lf(&d.shell), "{:?}", d.shell);
}
