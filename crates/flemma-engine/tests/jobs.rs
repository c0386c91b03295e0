//! Background jobs: entry, delivery placement, FIFO, `flemma.jobs.status`, orphan recovery,
//! and the autopilot resume delay.

use crate::common::*;
use flemma_engine::*;

/// A chat where the model started `bash` in the background (job id from seed 0).
fn backgrounded() -> (Driver, String) {
    let mut d = Driver::new("@You:\nBuild it.\n");
    d.send(Input::Advance);
    d.send(Input::Approve {
        tool_id: "x".into(),
    });
    let mut events = call(0, "t1", "sleep", r#"{"flemma.background":true,"secs":5}"#);
    events.insert(0, text("Starting the build."));
    d.reply(1, events);
    let job = d
        .engine
        .jobs()
        .next()
        .map(|j| j.job_id.clone())
        .unwrap_or_default();
    (d, job)
}

#[test]
fn a_model_initiated_job_gets_a_placeholder_and_the_conversation_goes_on() {
    let (d, job) = backgrounded();
    assert!(ids::is_job_id(&job), "{job}");
    assert!(
        d.log
            .contains(&format!(r#"start sleep t1 {{"secs":5}} background {job}"#)),
        "{:?}",
        d.log
    );
    assert!(d.shell.contains(&format!(
        "**Tool Result:** `t1` (job={job})\n```\nRunning as a background job `{job}`. Use `flemma.jobs.status`"
    )));
    let submitted = d
        .event("job:submitted")
        .map(|e| e.data.clone())
        .unwrap_or_default();
    assert_eq!(submitted["activeCount"], 1);
    assert_eq!(submitted["toolName"], "sleep");
    // The placeholder is final, so autopilot sent at once.
    assert_eq!(d.engine.request(), Some(RequestId(2)));
}

#[test]
fn a_job_finishing_mid_stream_is_delivered_before_the_next_send() {
    let (mut d, job) = backgrounded();
    let lines = d.send(Input::JobFinished {
        job_id: job.clone(),
        text: "built".into(),
        is_error: false,
    });
    assert!(lines.is_empty(), "{lines:?}");
    d.reply(2, call(0, "t2", "read", r#"{"path":"log"}"#));
    d.send(finished("t2", "log text"));
    // Delivered with the tool results of the next send, after them.
    assert!(
        d.shell.contains(&format!(
            "**Tool Result:** `t2`\n```\nlog text\n```\n\n**Job Result:** `{job}`\n```\nbuilt\n```\n"
        )),
        "{}",
        d.shell
    );
    let completed = d
        .event("job:completed")
        .map(|e| e.data.clone())
        .unwrap_or_default();
    assert_eq!(completed["success"], true);
    assert_eq!(completed["activeCount"], 0);
}

#[test]
fn a_job_finishing_at_idle_reuses_the_empty_you_and_schedules_a_resume() {
    let (mut d, job) = backgrounded();
    d.reply(2, vec![text("I'll wait.")]);
    assert!(d.shell.ends_with("I'll wait.\n\n@You:\n\n"));
    let lines = d.send(Input::JobFinished {
        job_id: job.clone(),
        text: "built".into(),
        is_error: false,
    });
    let at = d.now + 2000;
    assert_eq!(
        lines,
        [
            "emit job:completed".to_owned(),
            format!("timer 1 at {at}"),
            "emit autopilot:resume-scheduled".to_owned()
        ]
    );
    assert!(d.shell.ends_with(&format!(
        "@You:\n**Job Result:** `{job}`\n```\nbuilt\n```\n\n"
    )));
    let lines = d.send(Input::Timer { id: TimerId(1) });
    assert_eq!(
        lines,
        [
            "emit autopilot:resumed",
            "emit request:sending",
            "start request 3"
        ]
    );
}

#[test]
fn any_user_edit_during_the_resume_delay_cancels_it() {
    let (mut d, job) = backgrounded();
    d.reply(2, vec![text("Waiting.")]);
    d.send(Input::JobFinished {
        job_id: job,
        text: "built".into(),
        is_error: false,
    });
    let lines = d.type_at_end("wait, ");
    assert_eq!(lines, ["cancel timer 1", "emit autopilot:resume-cancelled"]);
    assert!(d.send(Input::Timer { id: TimerId(1) }).is_empty());
}

#[test]
fn results_go_above_a_you_the_user_is_typing_in_and_several_share_one_block() {
    let mut d = Driver::new("@You:\nGo.\n");
    d.send(Input::Advance);
    let mut events = call(0, "t1", "sleep", r#"{"flemma.background":true,"n":1}"#);
    events.extend(call(
        1,
        "t2",
        "sleep",
        r#"{"flemma.background":true,"n":2}"#,
    ));
    d.reply(1, events);
    d.reply(2, vec![text("Both started.")]);
    d.type_at_end("my question");
    let jobs: Vec<String> = d.engine.jobs().map(|j| j.job_id.clone()).collect();
    let [a, b] = [&jobs[0], &jobs[1]];
    // The job table is ordered by id; deliver in completion order: b first.
    d.send(Input::JobFinished {
        job_id: b.clone(),
        text: "second".into(),
        is_error: true,
    });
    assert!(d.shell.ends_with(&format!(
        "Both started.\n\n@You:\n**Job Result:** `{b}` (error)\n```\nsecond\n```\n\n@You:\n\nmy question"
    )), "{}", d.shell);
    assert_well_formed(&d.shell);
    let _ = a;
}

#[test]
fn a_user_moves_a_running_tool_to_the_background() {
    let mut d = Driver::new("@You:\nGo.\n");
    d.send(Input::Advance);
    d.reply(1, call(0, "t1", "sleep", r#"{"n":1}"#));
    assert_eq!(d.engine.running_tools(), ["t1"]);
    let lines = d.send(Input::Background {
        tool_id: "t1".into(),
    });
    assert_eq!(
        lines,
        [
            "emit job:submitted",
            "emit request:sending",
            "start request 2"
        ]
    );
    let job = d
        .engine
        .jobs()
        .next()
        .map(|j| j.job_id.clone())
        .unwrap_or_default();
    assert!(
        d.shell
            .contains(&format!("**Tool Result:** `t1` (job={job})"))
    );
    // The tool's outcome may come back under its tool id.
    d.reply(2, vec![text("ok")]);
    d.send(finished("t1", "slept"));
    assert!(
        d.shell
            .contains(&format!("**Job Result:** `{job}`\n```\nslept\n```"))
    );
    // Only a running tool can move.
    let lines = d.send(Input::Background {
        tool_id: "t1".into(),
    });
    assert!(lines[0].starts_with("refused"));
}

#[test]
fn jobs_status_answers_from_the_table_and_the_text() {
    let (mut d, job) = backgrounded();
    let status = |d: &mut Driver, turn: u64, id: &str| {
        d.reply(
            turn,
            call(
                0,
                id,
                "flemma.jobs.status",
                &format!(r#"{{"job_id":"{job}"}}"#),
            ),
        );
        let (_, _, result) = d.engine.document().tool_result(id).expect("a result");
        let fence = result.fence.as_ref().expect("a fence");
        let answer: serde_json::Value =
            serde_json::from_str(d.engine.document().slice(fence.content)).expect("JSON");
        assert_eq!(answer["job_id"], job.as_str(), "{answer}");
        answer
    };
    // Flemma 0.13's JSON: the status and the seconds the job has run.
    d.now += 12_000;
    let running = status(&mut d, 2, "s1");
    assert_eq!(running["status"], "running");
    assert_eq!(running["tool"], "sleep");
    assert_eq!(running["elapsed_seconds"], 12);
    d.now += 3_000;
    d.send(Input::JobFinished {
        job_id: job.clone(),
        text: "done".into(),
        is_error: false,
    });
    d.now += 60_000;
    let pending = status(&mut d, 3, "s2");
    assert_eq!(pending["status"], "completed (delivery pending)");
    // Elapsed stops when the job ends.
    assert_eq!(pending["elapsed_seconds"], 15);
    assert_eq!(status(&mut d, 4, "s3")["status"], "completed");
    // The user deletes the job result block.
    let doc = d.engine.document();
    let (_, segment, _) = doc.job_result(&job).expect("delivered");
    let range = segment.range;
    d.send(Input::TextChanged {
        edits: vec![flemma_syntax::TextEdit::replace(range, "")],
    });
    assert_eq!(
        status(&mut d, 5, "s4")["status"],
        "completed (removed from conversation)"
    );
}

#[test]
fn orphans_are_recovered_on_load() {
    let before = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `t1` (job=job_k7x2m9qa)\n```\nRunning as a background job `job_k7x2m9qa`.\n```\n\n@Assistant:\nWaiting.\n\n@You:\nAre you done?\n";
    let mut d = Driver::new(before);
    let lines = d.send(Input::Load);
    assert_eq!(lines, ["emit document:recovered"]);
    assert_eq!(
        d.shell,
        "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `t1` (error job=job_k7x2m9qa)\n```\nRunning as a background job `job_k7x2m9qa`.\n```\n\n@Assistant:\nWaiting.\n\n@You:\n**Job Result:** `job_k7x2m9qa` (error)\n```\nJob lost: session ended before completion.\n```\n\n@You:\nAre you done?\n"
    );
    assert_well_formed(&d.shell);
    // Loading again finds nothing to recover.
    assert!(d.send(Input::Load).is_empty());
}

#[test]
fn a_re_run_reuses_the_job_id() {
    let before = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `sleep` (`t1`)\n```json\n{\"flemma.background\":true}\n```\n\n@You:\n**Tool Result:** `t1` (approved job=job_aaaaaaaa)\n```\n```\n";
    let mut d = Driver::new(before);
    let lines = d.send(Input::Advance);
    assert_eq!(lines[0], "start sleep t1 {} background job_aaaaaaaa");
    assert!(
        d.shell
            .contains("**Tool Result:** `t1` (job=job_aaaaaaaa)\n")
    );
}

#[test]
fn a_hundred_jobs_are_delivered_exactly_once_in_completion_order() {
    let mut d = Driver::new("@You:\nGo.\n");
    d.send(Input::Advance);
    let mut events = Vec::new();
    for i in 0..100 {
        events.extend(call(
            i,
            &format!("t{i}"),
            "sleep",
            &format!(r#"{{"flemma.background":true,"n":{i}}}"#),
        ));
    }
    d.reply(1, events);
    d.reply(2, vec![text("All started.")]);
    let jobs: Vec<String> = d.engine.jobs().map(|j| j.job_id.clone()).collect();
    assert_eq!(jobs.len(), 100);
    for (i, job) in jobs.iter().enumerate().rev() {
        d.send(Input::JobFinished {
            job_id: job.clone(),
            text: format!("out {i}"),
            is_error: false,
        });
    }
    for (i, job) in jobs.iter().enumerate() {
        assert_eq!(
            d.shell.matches(&format!("**Job Result:** `{job}`")).count(),
            1
        );
        assert_eq!(d.shell.matches(&format!("out {i}\n")).count(), 1);
    }
    assert_eq!(d.engine.active_jobs(), 0);
    assert_eq!(
        d.events()
            .iter()
            .filter(|e| e.name == "job:completed")
            .count(),
        100
    );
    assert_well_formed(&d.shell);
}
