//! The advance cycle, streaming, approvals and cancellation, as data: a chat before, inputs,
//! the effects (edits are checked through the text), and the chat after.

use crate::common::*;
use flemma_engine::*;

#[test]
fn a_plain_reply_streams_under_assistant_and_ends_with_an_empty_you() {
    let mut d = Driver::new("@You:\nHello\n");
    assert_eq!(
        d.send(Input::Advance),
        ["emit request:sending", "start request 1"]
    );
    assert_eq!(d.shell, "@You:\nHello\n\n@Assistant:\n");
    let lines = d.reply(1, vec![text("Hi "), text("there.")]);
    assert_eq!(
        lines,
        [
            "emit request:finished",
            "emit usage:updated",
            "emit conversation:idle",
            "stopped Idle"
        ]
    );
    assert_eq!(
        d.shell,
        "@You:\nHello\n\n@Assistant:\nHi there.\n\n@You:\n\n"
    );
}

#[test]
fn text_typed_before_the_anchor_shifts_it_and_text_after_stays_after() {
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("One"),
    });
    // The user fixes a typo in their message and types below the reply.
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::insert(11, ", world")],
    });
    d.type_at_end("\nTYPED");
    d.reply(1, vec![text(" two")]);
    assert_eq!(
        d.shell,
        "@You:\nHello, world\n\n@Assistant:\nOne two\n\n@You:\n\n\nTYPED"
    );
}

#[test]
fn a_line_break_an_editor_adds_after_the_streamed_text_is_not_kept_below_the_reply() {
    // Neovim ends every buffer with a line break: after streamed text without one, its text
    // (and so the engine's) has one more. The chat still ends as `flemmad send` ends it.
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("One"),
    });
    d.type_at_end("\n");
    d.reply(1, vec![text(" two")]);
    assert_eq!(d.shell, "@You:\nHello\n\n@Assistant:\nOne two\n\n@You:\n\n");
}

#[test]
fn text_typed_over_the_end_of_the_reply_stays_after_it() {
    // The one `Assoc` rule: the end of the reply is mapped with `Before`, so a replacement
    // across it leaves it at the start of the user's text, and the reply goes on before it.
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("One"),
    });
    d.type_at_end("\nTYPED");
    let anchor = d.shell.find("\nTYPED").unwrap();
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::replace(
            flemma_syntax::TextRange::new(anchor - 1, anchor + 3),
            "X",
        )],
    });
    d.reply(1, vec![text(" two")]);
    assert_eq!(
        d.shell,
        "@You:\nHello\n\n@Assistant:\nOn two\n\n@You:\n\nXPED"
    );
}

#[test]
fn deleting_the_reply_being_written_cancels_the_request() {
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("partial"),
    });
    let len = d.shell.len();
    let lines = d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::replace(
            flemma_syntax::TextRange::new(12, len),
            "",
        )],
    });
    assert_eq!(lines[0], "cancel request 1");
    assert!(lines.last().is_some_and(|l| l.starts_with("stopped Error")));
    // A late event writes nothing.
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("more"),
    });
    assert_eq!(d.shell, "@You:\nHello\n");
}

#[test]
fn cancel_with_content_writes_the_abort_marker_and_without_removes_the_role_line() {
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("Half"),
    });
    let lines = d.send(Input::Cancel {
        scope: CancelScope::Request,
    });
    assert_eq!(lines[0], "cancel request 1");
    assert_eq!(
        d.shell,
        "@You:\nHello\n\n@Assistant:\nHalf\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n\n@You:\n\n"
    );

    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::StreamEnded {
        request: RequestId(1),
        outcome: StreamOutcome::Cancelled,
    });
    assert_eq!(d.shell, "@You:\nHello\n");
}

#[test]
fn a_failure_after_content_keeps_it_with_the_abort_marker() {
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("Some"),
    });
    let lines = d.send(Input::StreamEnded {
        request: RequestId(1),
        outcome: StreamOutcome::Failed {
            message: "overloaded".into(),
            retryable: true,
        },
    });
    assert_eq!(
        lines.last().map(String::as_str),
        Some("stopped Error { message: \"overloaded\" }")
    );
    assert!(d.shell.contains("Some\n\n<!-- flemma:aborted:"));
    assert_eq!(
        d.event("request:finished")
            .map(|e| e.data["status"].clone()),
        Some("errored".into())
    );
}

#[test]
fn a_refusal_stops_as_refused_and_keeps_the_partial_reply() {
    let mut d = Driver::new("@You:\nHello\n");
    d.send(Input::Advance);
    d.send(Input::Stream {
        request: RequestId(1),
        event: text("I won't"),
    });
    let lines = d.send(Input::StreamEnded {
        request: RequestId(1),
        outcome: StreamOutcome::Refused {
            message: "the model refused to answer: policy".into(),
        },
    });
    assert_eq!(
        lines.last().map(String::as_str),
        Some("stopped Refused { message: \"the model refused to answer: policy\" }")
    );
    assert!(
        d.shell.contains("I won't\n\n<!-- flemma:aborted:"),
        "{}",
        d.shell
    );
    assert!(
        flemma_syntax::parse(d.shell.clone())
            .diagnostics()
            .is_empty()
    );
}

#[test]
fn approved_tools_run_and_autopilot_sends_their_results() {
    let mut d = Driver::new("@You:\nList and read.\n");
    d.send(Input::Advance);
    let mut events = vec![text("Looking.")];
    events.extend(call(0, "t1", "ls", r#"{"path":"."}"#));
    events.extend(call(1, "t2", "read", r#"{"path":"a.txt"}"#));
    let lines = d.reply(1, events);
    assert_eq!(
        lines,
        [
            // While a call's arguments stream, progress says `Composing a tool call`.
            "emit request:composing",
            "emit request:composed",
            "emit request:composing",
            "emit request:composed",
            "emit request:finished",
            "emit usage:updated",
            "emit tool:executing",
            r#"start ls t1 {"path":"."}"#,
            "emit tool:executing",
            r#"start read t2 {"path":"a.txt"}"#,
        ]
    );
    let composing = d.event("request:composing").expect("composing");
    assert_eq!(
        composing.data,
        serde_json::json!({"requestId": 1, "toolId": "t2", "toolName": "read"})
    );
    assert_eq!(
        d.shell,
        "@You:\nList and read.\n\n@Assistant:\nLooking.\n\n**Tool Use:** `ls` (`t1`)\n```json\n{\"path\":\".\"}\n```\n\n**Tool Use:** `read` (`t2`)\n```json\n{\"path\":\"a.txt\"}\n```\n\n@You:\n**Tool Result:** `t1` (approved)\n```\n```\n\n**Tool Result:** `t2` (approved)\n```\n```\n\n"
    );
    assert_eq!(d.send(finished("t2", "hello")), ["emit tool:completed"]);
    let lines = d.send(finished("t1", "a.txt"));
    assert_eq!(
        lines,
        [
            "emit tool:completed",
            "emit request:sending",
            "start request 2"
        ]
    );
    assert!(d.shell.ends_with(
        "@You:\n**Tool Result:** `t1`\n```\na.txt\n```\n\n**Tool Result:** `t2`\n```\nhello\n```\n\n@Assistant:\n"
    ));
    d.reply(2, vec![text("Done.")]);
    assert!(d.shell.ends_with("@Assistant:\nDone.\n\n@You:\n\n"));
    assert_well_formed(&d.shell);
}

#[test]
fn a_pending_call_stops_the_cycle_with_one_approval_batch_and_approve_resumes() {
    let mut d = Driver::new("@You:\nRun it.\n");
    d.send(Input::Advance);
    let mut events = call(0, "t1", "bash", r#"{"command":"make"}"#);
    events.extend(call(1, "t2", "bash", r#"{"command":"make test"}"#));
    let lines = d.reply(1, events);
    assert_eq!(
        lines[6..],
        [
            "emit tool:approval-required",
            "stopped AwaitingApproval { tool_ids: [\"t1\", \"t2\"] }"
        ]
    );
    let batch = &d.event("tool:approval-required").map(|e| e.data.clone());
    let batch = batch.as_ref().map(|b| b["tools"].as_array().map(Vec::len));
    assert_eq!(batch, Some(Some(2)));
    assert_eq!(
        d.engine.pending_calls()[0].resolver,
        "urn:flemma:approval:catch-all"
    );
    // Approving one re-stops on the other; rejecting it with a reason lets the cycle go on.
    let lines = d.send(Input::Approve {
        tool_id: "t1".into(),
    });
    assert!(lines.is_empty(), "{lines:?}");
    let lines = d.send(Input::Reject {
        tool_id: "t2".into(),
        reason: Some("just run make".into()),
    });
    assert_eq!(
        lines,
        [
            "emit tool:executing",
            r#"start bash t1 {"command":"make"}"#,
            "emit tool:declined"
        ]
    );
    assert!(
        d.shell
            .contains("**Tool Result:** `t2` (error)\n```\nUser feedback: just run make\n```\n")
    );
    // The rejection is told with what the model gets (the ACP agent's final update of it).
    assert_eq!(
        d.event("tool:declined").map(|e| e.data),
        Some(
            serde_json::json!({"toolId": "t2", "toolName": "bash", "status": "rejected", "output": "User feedback: just run make"})
        )
    );
    d.send(finished("t1", "ok"));
    // A finished tool's event carries its output.
    assert_eq!(
        d.event("tool:completed").map(|e| e.data["output"].clone()),
        Some(serde_json::json!("ok"))
    );
    assert_eq!(d.engine.request(), Some(RequestId(2)));
}

/// Issue 31, fault 3: an input that does not fit the tool's schema is checked before approval:
/// the call gets its error result at once and never waits; the valid call beside it does.
#[test]
fn an_input_that_does_not_fit_gets_its_error_at_once_and_never_waits_for_approval() {
    let mut d = Driver::new("@You:\nRun it.\n");
    d.send(Input::Advance);
    let mut events = call(0, "t1", "bash", r#"{"label":"no command"}"#);
    events.extend(call(1, "t2", "bash", r#"{"command":"make"}"#));
    let lines = d.reply(1, events);
    assert_eq!(
        lines[6..],
        [
            "emit tool:approval-required",
            "stopped AwaitingApproval { tool_ids: [\"t2\"] }"
        ]
    );
    assert!(
        d.shell.contains(
            "**Tool Result:** `t1` (error)\n```\nthe input does not fit the schema of `bash`: (root): missing required property `command`. Call the tool again with an input that fits its schema.\n```"
        ),
        "{}",
        d.shell
    );
    assert!(
        d.shell.contains("**Tool Result:** `t2` (pending)"),
        "{}",
        d.shell
    );
    let pending: Vec<String> = d
        .engine
        .pending_calls()
        .into_iter()
        .map(|c| c.tool_id)
        .collect();
    assert_eq!(pending, ["t2"]);
    // Once the valid call is approved, it runs; the invalid one never does.
    let lines = d.send(Input::Approve {
        tool_id: "t2".into(),
    });
    assert_eq!(
        lines,
        ["emit tool:executing", r#"start bash t2 {"command":"make"}"#]
    );
}

#[test]
fn unknown_tools_invalid_input_and_denied_calls_get_error_results() {
    let mut d = Driver::new("@You:\nGo.\n");
    d.send(Input::Advance);
    let mut events = call(0, "t1", "nope", "{}");
    events.extend(call(1, "t2", "rm", r#"{"path":"/"}"#));
    d.reply(1, events);
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (error)\n```\nUnknown tool `nope`")
    );
    assert!(
        d.shell
            .contains("**Tool Result:** `t2` (error)\n```\nrm is not allowed here\n```")
    );
    // Both are final, so autopilot sent them.
    assert_eq!(d.engine.request(), Some(RequestId(2)));

    let invalid = "@You:\nx\n\n@Assistant:\n**Tool Use:** `read` (`t9`)\n```json\nnot json\n```\n";
    let mut d = Driver::new(invalid);
    d.send(Input::Advance);
    assert!(
        d.shell.contains(
            "**Tool Result:** `t9` (error)\n```\nThe input of `read` is not a JSON object"
        )
    );
}

#[test]
fn placeholders_go_above_text_the_user_already_typed() {
    let before = "@You:\nq\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n@You:\nmy next question\n";
    let mut d = Driver::new(before);
    d.send(Input::Advance);
    assert!(
        d.shell
            .ends_with("@You:\n**Tool Result:** `t1` (pending)\n```\n```\n\nmy next question\n"),
        "{}",
        d.shell
    );
}

#[test]
fn user_content_in_pending_is_the_result_and_in_approved_pauses() {
    let before = "@You:\nq\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `t1` (pending)\n```\nI ran it: ok\n```\n";
    let mut d = Driver::new(before);
    d.send(Input::Advance);
    assert!(
        d.shell
            .contains("**Tool Result:** `t1`\n```\nI ran it: ok\n```\n")
    );
    assert_eq!(d.engine.request(), Some(RequestId(1)));

    let approved = before.replace("(pending)", "(approved)");
    let mut d = Driver::new(&approved);
    let lines = d.send(Input::Advance);
    assert_eq!(lines, ["stopped UserContentInApproved { tool_id: \"t1\" }"]);
    assert_eq!(d.shell, approved);
}

#[test]
fn text_typed_into_a_running_tools_block_is_never_replaced() {
    let mut d = Driver::new("@You:\nq\n");
    d.send(Input::Advance);
    d.reply(1, call(0, "t1", "read", r#"{"path":"x"}"#));
    let at = d.shell.rfind("```\n```").map(|i| i + 4).unwrap_or(0);
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::insert(at, "mine\n")],
    });
    let lines = d.send(finished("t1", "tool output"));
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (approved)\n```\nmine\n```\n")
    );
    assert!(d.shell.contains("tool output"));
    assert_eq!(
        lines.last().map(String::as_str),
        Some("stopped UserContentInApproved { tool_id: \"t1\" }")
    );
}

#[test]
fn max_concurrent_limits_running_tools_and_the_rest_wait_approved() {
    let mut d = Driver::new("@You:\nq\n");
    d.send(Input::Advance);
    let mut events = Vec::new();
    for i in 0..5 {
        events.extend(call(
            i,
            &format!("t{i}"),
            "read",
            &format!(r#"{{"path":"{i}"}}"#),
        ));
    }
    d.reply(1, events);
    assert_eq!(d.engine.running_tools(), ["t0", "t1"]);
    assert_eq!(d.shell.matches("(approved)").count(), 5);
    d.send(finished("t0", "0"));
    assert_eq!(d.engine.running_tools(), ["t1", "t2"]);
    for i in 1..5 {
        d.send(finished(&format!("t{i}"), &i.to_string()));
    }
    assert_eq!(d.engine.request(), Some(RequestId(2)));
    assert_eq!(d.shell.matches("(approved)").count(), 0);
}

#[test]
fn autopilot_stops_after_max_turns_with_the_exact_message() {
    let config = EngineConfig {
        max_turns: 2,
        ..EngineConfig::default()
    };
    let mut d = Driver::with(config, "@You:\nloop\n");
    d.send(Input::Advance);
    let mut last = Vec::new();
    for turn in 1..=3u64 {
        d.reply(
            turn,
            call(
                0,
                &format!("t{turn}"),
                "read",
                &format!(r#"{{"path":"{turn}"}}"#),
            ),
        );
        last = d.send(finished(&format!("t{turn}"), "x"));
    }
    assert_eq!(
        last.last().map(String::as_str),
        Some("stopped MaxTurns { message: \"Autopilot stopped – exceeded 2 consecutive turns.\" }")
    );
}

#[test]
fn the_sixth_identical_call_stops_autopilot_with_an_error() {
    let mut d = Driver::new("@You:\nloop\n");
    d.send(Input::Advance);
    let mut last = Vec::new();
    for turn in 1..=6u64 {
        d.reply(
            turn,
            call(0, &format!("t{turn}"), "read", r#"{"path":"same"}"#),
        );
        last = d.send(finished(&format!("t{turn}"), "same output"));
    }
    assert!(
        d.shell.contains(
            "**Tool Result:** `t3`\n```\nsame output\n\n[LOOP_DETECTED: You have attempted"
        )
    );
    assert!(d.shell.contains(
        "**Tool Result:** `t6` (error)\n```\n[error: the model repeated the same read call 6 times"
    ));
    assert!(
        last.last().is_some_and(|l| l.starts_with("stopped Error")),
        "{last:?}"
    );
    assert_eq!(d.engine.request(), None);
}

#[test]
fn cancelling_everything_aborts_running_and_waiting_tools() {
    let config = EngineConfig {
        max_concurrent: 1,
        ..EngineConfig::default()
    };
    let mut d = Driver::with(config, "@You:\nq\n");
    d.send(Input::Advance);
    let mut events = call(0, "t1", "read", r#"{"path":"1"}"#);
    events.extend(call(1, "t2", "read", r#"{"path":"2"}"#));
    d.reply(1, events);
    let lines = d.send(Input::Cancel {
        scope: CancelScope::All,
    });
    assert_eq!(
        lines,
        [
            "kill t1",
            "emit tool:declined",
            "emit tool:declined",
            "stopped Cancelled"
        ]
    );
    assert_eq!(d.shell.matches("(aborted)").count(), 2);
    // A late result of the killed tool is dropped; the next advance sends the aborted results.
    assert!(d.send(finished("t1", "late")).is_empty());
    d.send(Input::Advance);
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (error)\n```\nResponse interrupted by the user.\n```")
    );
    assert_eq!(d.engine.request(), Some(RequestId(2)));
}

/// A tool whose output after a cancel is kept (`ask_agent` in flemmad: what the agent answered
/// so far; `read` stands for it here) gets it in its `aborted` block; the next advance sends
/// it as the call's error result.
#[test]
fn a_cancelled_call_whose_output_is_kept_gets_it_in_its_aborted_block() {
    let config = EngineConfig {
        kept_when_cancelled: vec!["read".into()],
        ..EngineConfig::default()
    };
    let mut d = Driver::with(config, "@You:\nq\n");
    d.send(Input::Advance);
    d.reply(1, call(0, "t1", "read", r#"{"path":"1"}"#));
    d.send(Input::Cancel {
        scope: CancelScope::All,
    });
    assert_eq!(d.shell.matches("(aborted)").count(), 1, "{}", d.shell);
    // Its late output is written (another tool's is dropped: the test above); the block
    // stays aborted.
    d.send(finished("t1", "part 1.\n[stopped: cancelled]"));
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (aborted)\n```\npart 1.\n[stopped: cancelled]\n```"),
        "{}",
        d.shell
    );
    // A second late output changes nothing.
    d.send(finished("t1", "again"));
    assert!(!d.shell.contains("again"), "{}", d.shell);
    d.send(Input::Advance);
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (error)\n```\npart 1.\n[stopped: cancelled]\n```"),
        "{}",
        d.shell
    );
}

#[test]
fn approving_an_unknown_id_is_refused_with_the_pending_ids() {
    let mut d = Driver::new("@You:\nq\n");
    let lines = d.send(Input::Approve {
        tool_id: "nope".into(),
    });
    assert_eq!(
        lines,
        ["refused no unresolved tool call `nope` in this document; pending: none"]
    );
    let lines = d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::insert(99, "x")],
    });
    assert!(lines[0].starts_with("refused the change does not fit"));
}

#[test]
fn usage_and_cost_are_summed_per_document() {
    let config = EngineConfig {
        prices: Some(Prices {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
            long_context: None,
        }),
        ..EngineConfig::default()
    };
    let mut d = Driver::with(config, "@You:\nq\n");
    d.send(Input::Advance);
    // Issue 31's request: 120 uncached input tokens and 2,048 read from the cache (2,168 in
    // all, as the decoders normalise it), 57 output. Cached tokens are billed once, at the
    // cache price: $0.0018, not the $0.0080 of billing them as input too.
    let usage = flemma_conversation::Usage {
        input_tokens: 2168,
        output_tokens: 57,
        cache_read_tokens: 2048,
        ..Default::default()
    };
    d.reply(
        1,
        vec![text("a"), flemma_conversation::StreamEvent::Usage { usage }],
    );
    assert_eq!(d.engine.usage().input_tokens, 2168);
    let cost = d.engine.cost().unwrap_or_default();
    let expected = (120.0 * 3.0 + 2048.0 * 0.3 + 57.0 * 15.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost}");
    let saved = d.engine.cache_saved().unwrap_or_default();
    assert!((saved - 2048.0 * 2.7 / 1e6).abs() < 1e-12, "{saved}");
    let updated = d.event("usage:updated").map(|e| e.data.clone());
    let updated = updated.expect("usage:updated");
    assert_eq!(updated["usage"]["input_tokens"], 2168);
    assert_eq!(updated["costUsd"].as_f64(), Some(cost));
    assert_eq!(updated["cacheSavedUsd"].as_f64(), Some(saved));
}

#[test]
fn rate_limits_of_a_response_are_kept_and_told() {
    let mut d = Driver::with(EngineConfig::default(), "@You:\nq\n");
    d.send(Input::Advance);
    let limits = flemma_conversation::RateLimits {
        windows: vec![flemma_conversation::RateLimitWindow {
            name: "primary".into(),
            used_percent: 42.0,
            window_minutes: Some(300),
            resets_at: Some(1_800_000_000),
        }],
    };
    d.reply(
        1,
        vec![
            flemma_conversation::StreamEvent::RateLimits {
                limits: limits.clone(),
            },
            text("a"),
        ],
    );
    assert_eq!(d.engine.rate_limits(), Some(&limits));
    let told = d.event("rate-limits:updated").map(|e| e.data.clone());
    assert_eq!(
        told.expect("rate-limits:updated")["rateLimits"]["windows"][0]["usedPercent"],
        42.0
    );
    let updated = d.event("usage:updated").map(|e| e.data.clone());
    assert_eq!(
        updated.expect("usage:updated")["rateLimits"]["windows"][0]["windowMinutes"],
        300
    );
    // The reply's text holds nothing of it.
    assert!(!d.engine.text().contains("42"), "{}", d.engine.text());
}

#[test]
fn no_autopilot_does_one_step() {
    let config = EngineConfig {
        autopilot: false,
        ..EngineConfig::default()
    };
    let mut d = Driver::with(config, "@You:\nq\n");
    d.send(Input::Advance);
    let lines = d.reply(1, call(0, "t1", "read", "{}"));
    assert_eq!(lines.last().map(String::as_str), Some("stopped StepDone"));
    d.send(Input::Advance);
    let lines = d.send(finished("t1", "x"));
    assert_eq!(lines.last().map(String::as_str), Some("stopped StepDone"));
    d.send(Input::Advance);
    assert_eq!(d.engine.request(), Some(RequestId(2)));
}

#[test]
fn the_worked_example_of_docs_engine_md() {
    let mut d = Driver::new("@You:\nList the files, then run the tests.\n");
    d.send(Input::Advance);
    let mut events = call(0, "t1", "ls", r#"{"path":"."}"#);
    events.extend(call(1, "t2", "bash", r#"{"command":"make test"}"#));
    let lines = d.reply(1, events);
    assert_eq!(
        lines,
        [
            "emit request:composing",
            "emit request:composed",
            "emit request:composing",
            "emit request:composed",
            "emit request:finished",
            "emit usage:updated",
            "emit tool:executing",
            r#"start ls t1 {"path":"."}"#
        ]
    );
    let lines = d.send(finished("t1", "README.md\nsrc/"));
    assert_eq!(
        lines,
        [
            "emit tool:completed",
            "emit tool:approval-required",
            "stopped AwaitingApproval { tool_ids: [\"t2\"] }"
        ]
    );
    assert_eq!(
        d.shell,
        "@You:\nList the files, then run the tests.\n\n@Assistant:\n**Tool Use:** `ls` (`t1`)\n```json\n{\"path\":\".\"}\n```\n\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"make test\"}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nREADME.md\nsrc/\n```\n\n**Tool Result:** `t2` (pending)\n```\n```\n\n"
    );
    let lines = d.send(Input::Approve {
        tool_id: "t2".into(),
    });
    assert_eq!(
        lines,
        [
            "emit tool:executing",
            r#"start bash t2 {"command":"make test"}"#
        ]
    );
}

#[test]
fn deleting_an_early_tool_result_after_an_advance_gets_it_a_placeholder_again() {
    // The engine scans only the messages after its settled prefix; an edit inside the prefix
    // must make it look there again.
    let turn = |id: &str| {
        format!(
            "@You:\nGo {id}.\n\n@Assistant:\n**Tool Use:** `ls` (`{id}`)\n```json\n{{\"path\":\".\"}}\n```\n\n@You:\n**Tool Result:** `{id}`\n```\nout {id}\n```\n\n@Assistant:\nDone {id}.\n\n"
        )
    };
    let chat = format!("{}{}@You:\nAnd now?\n", turn("t1"), turn("t2"));
    let mut d = Driver::new(&chat);
    assert_eq!(
        d.send(Input::Advance),
        ["emit request:sending", "start request 1"]
    );
    d.send(Input::Cancel {
        scope: CancelScope::Request,
    });
    let result = "**Tool Result:** `t1`\n```\nout t1\n```\n";
    let at = d
        .shell
        .find(result)
        .expect("the first result is in the chat");
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::replace(
            flemma_syntax::TextRange::new(at, at + result.len()),
            "",
        )],
    });
    let lines = d.send(Input::Advance);
    assert_eq!(
        lines,
        ["emit tool:executing", r#"start ls t1 {"path":"."}"#],
        "{}",
        d.shell
    );
    assert!(
        d.shell.contains("**Tool Result:** `t1` (approved)"),
        "{}",
        d.shell
    );
}

/// Two tools run; the user deletes the result block of one of them.
fn two_running_tools() -> Driver {
    let mut d = Driver::new("@You:\nq\n");
    d.send(Input::Advance);
    let mut events = call(0, "t0", "read", r#"{"path":"a"}"#);
    events.extend(call(1, "t1", "read", r#"{"path":"b"}"#));
    d.reply(1, events);
    assert_eq!(d.engine.running_tools(), ["t0", "t1"]);
    d
}

#[test]
fn a_result_block_deleted_while_its_tool_runs_gets_the_output_in_a_new_block() {
    let mut d = two_running_tools();
    let (_, segment, _) = d.engine.document().tool_result("t0").expect("placeholder");
    let range = segment.range;
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::replace(range, "")],
    });
    let lines = d.send(finished("t0", "output a"));
    assert_eq!(lines, ["emit tool:completed"], "the tool is not run again");
    assert_eq!(
        d.event("tool:completed").map(|e| e.data["written"].clone()),
        Some("restored".into())
    );
    d.send(finished("t1", "output b"));
    assert_eq!(d.engine.request(), Some(RequestId(2)));
    assert!(
        d.shell
            .contains("**Tool Result:** `t1`\n```\noutput b\n```\n\n**Tool Result:** `t0`\n```\noutput a\n```\n"),
        "{}",
        d.shell
    );
    assert_eq!(
        d.log.iter().filter(|l| l.starts_with("start read")).count(),
        2
    );
    assert_well_formed(&d.shell);
}

#[test]
fn a_turn_deleted_while_its_tools_run_drops_their_output_and_stops_without_sending() {
    let mut d = two_running_tools();
    let start = d.shell.find("\n@Assistant:").expect("the turn") + 1;
    let end = d.shell.len();
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::replace(
            flemma_syntax::TextRange::new(start, end),
            "",
        )],
    });
    d.send(finished("t0", "output a"));
    assert_eq!(
        d.event("tool:completed").map(|e| e.data["written"].clone()),
        Some("dropped".into())
    );
    let lines = d.send(finished("t1", "output b"));
    let stop = lines.last().cloned().unwrap_or_default();
    assert!(
        stop.starts_with("stopped Error")
            && stop.contains("was removed from the file while the tool ran"),
        "{lines:?}"
    );
    assert_eq!(d.engine.request(), None, "nothing is sent");
    assert_eq!(d.shell, "@You:\nq\n\n", "the text as the user left it");
}

/// A chat the last process was streaming a reply into when it ended (the shell's record).
fn cut_reply(text: &str) -> Driver {
    let mut d = Driver::new(text);
    d.engine = d.engine.clone().recovering(Recovery {
        reply_streaming: true,
        ..Recovery::default()
    });
    d
}

/// Issue 33, fault 3: a chat that ends with a finished `@Assistant:` message (written by hand,
/// or its closing `@You:` deleted) is not a cut reply when no process was streaming into it:
/// loading leaves it as it is, and an advance has nothing to send.
#[test]
fn a_finished_reply_without_a_streaming_record_is_left_alone_and_nothing_is_sent() {
    for text in [
        "@You:\nTell me.\n\n@Assistant:\nOnce upon a time, the end.\n",
        "@You:\nHello\n\n@Assistant:\n",
        "@You:\nCode?\n\n@Assistant:\n````rust\nfn main() {\n",
    ] {
        let mut d = Driver::new(text);
        assert!(d.send(Input::Load).is_empty(), "{text:?}");
        assert_eq!(d.shell, text);
        let lines = d.send(Input::Advance);
        assert!(
            lines.last().is_some_and(|l| l.starts_with("stopped Idle")),
            "{lines:?}"
        );
        assert_eq!(d.engine.request(), None, "nothing is sent");
        assert_eq!(d.shell, text, "the text as the user wrote it");
    }
}

#[test]
fn a_reply_cut_off_by_a_killed_process_is_marked_on_load_and_the_next_advance_continues_it() {
    let mut d = cut_reply("@You:\nTell me.\n\n@Assistant:\nOnce upon a ti");
    assert_eq!(d.send(Input::Load), ["emit document:recovered"]);
    assert_eq!(
        d.shell,
        "@You:\nTell me.\n\n@Assistant:\nOnce upon a ti\n\n<!-- flemma:aborted: Response cut off: the process writing it ended before it finished. -->\n\n@You:\n\n"
    );
    assert_well_formed(&d.shell);
    assert!(d.send(Input::Load).is_empty(), "recovered once");
    assert_eq!(
        d.send(Input::Advance),
        ["emit request:sending", "start request 1"]
    );
}

#[test]
fn a_reply_cut_off_because_writing_failed_says_so_on_load() {
    let mut d = Driver::new("@You:\nTell me.\n\n@Assistant:\nOnce upon a ti");
    d.engine = d.engine.clone().recovering(Recovery {
        reply_streaming: true,
        write_failed: Some("No space left on device (os error 28)".into()),
        ..Recovery::default()
    });
    assert_eq!(d.send(Input::Load), ["emit document:recovered"]);
    assert_eq!(
        d.shell,
        "@You:\nTell me.\n\n@Assistant:\nOnce upon a ti\n\n<!-- flemma:aborted: Response cut off: writing the chat failed (No space left on device (os error 28)); the reply stopped there. -->\n\n@You:\n\n"
    );
    assert_well_formed(&d.shell);
}

/// Interrupted calls (issue 27): a call the last process started and that still has an empty
/// `(approved)` placeholder was running when it ended; it may have run, so it waits for the
/// user again instead of running a second time. A call it never started runs; one whose
/// result is there stays as it is.
#[test]
fn a_call_that_was_running_when_its_process_ended_waits_for_approval_again() {
    let chat = "@You:\nq\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"touch x\"}\n```\n\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"touch y\"}\n```\n\n**Tool Use:** `bash` (`t3`)\n```json\n{\"command\":\"touch z\"}\n```\n\n@You:\n**Tool Result:** `t1` (approved)\n```\n```\n\n**Tool Result:** `t2` (approved)\n```\n```\n\n**Tool Result:** `t3`\n```\ndone\n```\n";
    let mut d = Driver::new(chat);
    d.engine = d.engine.clone().recovering(Recovery {
        started_calls: vec!["t1".into(), "t3".into()],
        ..Recovery::default()
    });
    assert_eq!(d.send(Input::Load), ["emit document:recovered"]);
    let recovered = d.event("document:recovered").unwrap();
    assert_eq!(recovered.data["interrupted"], serde_json::json!(["t1"]));
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (pending interrupted)\n```\n```"),
        "{}",
        d.shell
    );
    assert!(d.shell.contains("**Tool Result:** `t2` (approved)"));
    assert!(d.shell.contains("**Tool Result:** `t3`\n```\ndone"));
    // t2 was never started: it runs; t1 waits for the user, named as interrupted.
    let lines = d.send(Input::Advance);
    assert!(
        lines.iter().any(|l| l.starts_with("start bash t2")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains(" t1 ")), "{lines:?}");
    let lines = d.send(finished("t2", "made y"));
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("stopped AwaitingApproval")),
        "{lines:?}"
    );
    let pending = d.engine.pending_calls();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_id, "t1");
    assert_eq!(pending[0].resolver, flemma_engine::INTERRUPTED_RESOLVER);
    // Approving it runs it again (the user decided); the word stays as a record.
    d.send(Input::Approve {
        tool_id: "t1".into(),
    });
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (approved interrupted)"),
        "{}",
        d.shell
    );
    assert!(
        d.log.iter().any(|l| l.starts_with("start bash t1")),
        "{:?}",
        d.log
    );
    // Told once: a second load changes nothing.
    assert!(d.send(Input::Load).is_empty());
}

#[test]
fn a_cut_reply_inside_a_code_fence_gets_the_fence_closed_before_the_marker() {
    let mut d = cut_reply("@You:\nCode?\n\n@Assistant:\nHere:\n````rust\nfn main() {\n");
    d.send(Input::Load);
    assert_eq!(
        d.shell,
        "@You:\nCode?\n\n@Assistant:\nHere:\n````rust\nfn main() {\n````\n\n<!-- flemma:aborted: Response cut off: the process writing it ended before it finished. -->\n\n@You:\n\n"
    );
    assert_well_formed(&d.shell);
}

#[test]
fn an_assistant_line_without_content_left_by_a_killed_process_is_removed_on_load() {
    let mut d = cut_reply("@You:\nHello\n\n@Assistant:\n");
    d.send(Input::Load);
    assert_eq!(d.shell, "@You:\nHello\n");
    let mut d = cut_reply("@You:\r\nHello\r\n\r\n@Assistant:\r\n");
    d.send(Input::Load);
    assert_eq!(d.shell, "@You:\r\nHello\r\n");
}
