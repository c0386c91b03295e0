//! Faults through the binary: many tool calls under `tools.max_concurrent`, a user deleting a
//! running tool's block or its whole turn, `SIGKILL` mid-stream and mid-tool, and a CRLF chat.
//! Real `flemmad send` processes against `flemma-mock-provider`, real `bash` tools in a
//! temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{Chat, chat, read, send_command, stderr};
use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

/// Anthropic through the mock; `bash` auto-approved (so the tests need no `approve` step),
/// `max_concurrent` as given.
fn faults_chat(max_concurrent: u64, body: &str) -> Chat {
    let frontmatter = format!(
        r#"```json
{{"flemma": {{"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {{"auto_approve": ["$standard", "+bash"], "auto_approve_sandboxed": false,
            "max_concurrent": {max_concurrent}, "autopilot": {{"resume_delay": 100}}}}}}}}
```
"#
    );
    common::trusted_chat(&format!("{frontmatter}{body}"))
}

fn bash(turn: Turn, id: &str, command: &str) -> Turn {
    turn.tool_call_with_id(
        "bash",
        id,
        json!({"label": "run", "command": command, "timeout": null}),
    )
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

fn no_error_diagnostics(text: &str) {
    let doc = flemma_syntax::parse(text);
    let errors: Vec<_> = doc
        .diagnostics()
        .into_iter()
        .filter(|d| d.severity == flemma_syntax::Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{text}");
}

/// Waits until the file contains `needle`.
async fn wait_for(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = read(path);
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never appeared in\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sigkill(child: &tokio::process::Child) {
    let pid = child.id().expect("the child runs").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
}

/// The most tools that ran at once, from the `start`/`end` nanosecond stamps each wrote.
fn most_at_once(dir: &Path, count: usize) -> usize {
    let mut moments: Vec<(u128, i32)> = Vec::new();
    for i in 0..count {
        let stamps = std::fs::read_to_string(dir.join(format!("stamps_{i}")))
            .unwrap_or_else(|_| panic!("tool {i} did not run"));
        let mut lines = stamps.lines();
        let start: u128 = lines.next().unwrap().parse().unwrap();
        let end: u128 = lines.next().unwrap().parse().unwrap();
        assert!(lines.next().is_none(), "tool {i} ran more than once");
        moments.push((start, 1));
        moments.push((end, -1));
    }
    // Ends before starts at the same instant: touching runs do not overlap.
    moments.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in moments {
        now += step;
        most = most.max(now);
    }
    most as usize
}

#[tokio::test]
async fn twenty_tool_calls_run_at_most_three_at_once_and_all_results_land_in_order() {
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(3, "@You:\nRun twenty things.\n");
    let dir = chat.path.parent().unwrap().to_path_buf();
    let mut turn = Turn::text("Twenty at once.");
    for i in 0..20 {
        turn = bash(
            turn,
            &format!("b{i:02}"),
            &format!(
                "date +%s%N >> stamps_{i}; sleep 0.2; echo result of {i}; date +%s%N >> stamps_{i}"
            ),
        );
    }
    mock.push(turn);
    mock.push(Turn::text("All twenty ran."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        most_at_once(&dir, 20),
        3,
        "max_concurrent = 3 is the limit and is reached"
    );
    let text = read(&chat.path);
    let mut at = 0;
    for i in 0..20 {
        let block = format!("**Tool Result:** `b{i:02}`\n```\nresult of {i}\n```\n");
        let found = text[at..]
            .find(&block)
            .unwrap_or_else(|| panic!("result {i} missing or out of order in\n{text}"));
        at += found + block.len();
    }
    assert_eq!(text.matches("**Tool Result:**").count(), 20);
    assert!(text.ends_with("All twenty ran.\n\n@You:\n\n"), "{text}");
    // The second request carried all twenty results.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].body.to_string();
    assert_eq!(body.matches("\"tool_result\"").count(), 20, "{body}");
    no_error_diagnostics(&text);
}

/// Two tools; `slow` runs long enough for the test to edit the file while it runs, `quick` lands
/// first.
fn two_tools(mock: &MockProvider, dir: &Path) {
    let slow = format!(
        "echo ran >> {}; sleep 1.5; echo slow output",
        dir.join("slow_runs").display()
    );
    mock.push(bash(
        bash(Turn::text("Two tools."), "slow", &slow),
        "quick",
        "echo quick output",
    ));
}

#[tokio::test]
async fn a_tool_block_deleted_while_its_tool_runs_gets_the_output_in_a_new_block() {
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(2, "@You:\nGo.\n");
    let dir = chat.path.parent().unwrap().to_path_buf();
    two_tools(&mock, &dir);
    mock.push(Turn::text("Both are back."));
    let child = send_command(&chat, &mock.base_url())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = wait_for(&chat.path, "quick output").await;
    let placeholder = "**Tool Result:** `slow` (approved)\n```\n```\n\n";
    assert!(text.contains(placeholder), "{text}");
    std::fs::write(&chat.path, text.replacen(placeholder, "", 1)).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("`bash` (slow) finished: success; its result block had been removed from the file, so the output went into a new one"),
        "{err}"
    );
    let text = read(&chat.path);
    assert_eq!(
        text.matches("**Tool Result:** `slow`\n```\nslow output\n```\n")
            .count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("**Tool Result:** `quick`\n```\nquick output\n```\n"),
        "{text}"
    );
    assert!(text.ends_with("Both are back.\n\n@You:\n\n"), "{text}");
    assert_eq!(read(&dir.join("slow_runs")), "ran\n", "the tool ran once");
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn a_turn_deleted_while_its_tool_runs_is_left_deleted_and_nothing_is_sent() {
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(2, "@You:\nGo.\n");
    let dir = chat.path.parent().unwrap().to_path_buf();
    two_tools(&mock, &dir);
    let child = send_command(&chat, &mock.base_url())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = wait_for(&chat.path, "quick output").await;
    let turn = text.find("\n@Assistant:").expect("the turn");
    let left = format!("{}\nI changed my mind.\n", &text[..turn]);
    std::fs::write(&chat.path, &left).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "the turn that called it had been removed from the file: its output was dropped"
        ),
        "{err}"
    );
    assert!(
        err.contains("was removed from the file while the tool ran, so its output was dropped and nothing more was sent; send again to continue"),
        "{err}"
    );
    assert_eq!(read(&chat.path), left, "the file is as the user left it");
    assert_eq!(
        mock.requests().len(),
        1,
        "nothing was sent after the deletion"
    );
    // The conversation goes on from the file as it is.
    mock.push(Turn::text("Fine, changed."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(
        text.ends_with("I changed my mind.\n\n@Assistant:\nFine, changed.\n\n@You:\n\n"),
        "{text}"
    );
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn sigkill_mid_stream_leaves_a_valid_chat_and_the_next_send_goes_on() {
    let mock = MockProvider::start().await.unwrap();
    let before = "@You:\nTell me a long story.\n";
    let chat = faults_chat(2, before);
    let story: String = (1..=60)
        .map(|i| format!("Sentence number {i} of the story.\n"))
        .collect();
    mock.push(Turn::text(story.clone()).bytes_per_sec(400));
    let original = read(&chat.path);
    let child = send_command(&chat, &mock.base_url())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&chat.path, "Sentence number 3 ").await;
    sigkill(&child);
    let _ = child.wait_with_output().await;
    let text = read(&chat.path);
    let start = format!("{original}\n@Assistant:\n");
    let written = text
        .strip_prefix(&start)
        .unwrap_or_else(|| panic!("the file is not the old text plus the reply so far:\n{text}"));
    assert!(story.starts_with(written), "a torn or mixed reply:\n{text}");
    assert!(written.contains("Sentence number 3 "), "{text}");
    no_error_diagnostics(&text);
    // The next send marks the reply as cut off and continues the conversation.
    mock.push(Turn::text("Where was I? The end."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("flemmad: the reply an earlier session was writing had been cut off"),
        "{}",
        stderr(&out)
    );
    let after = read(&chat.path);
    let marked = format!(
        "{text}\n\n<!-- flemma:aborted: Response cut off: the process writing it ended before it finished. -->\n\n@You:\n\n@Assistant:\nWhere was I? The end.\n\n@You:\n\n"
    );
    assert_eq!(after, marked);
    let requests = mock.requests();
    let sent = requests.last().unwrap().body.to_string();
    assert!(
        sent.contains("Response cut off"),
        "the model is told: {sent}"
    );
    no_error_diagnostics(&after);
}

/// A tool that was running when its `flemmad` was killed may have done its work (issue 27):
/// the next send does not run it again on its own. Its placeholder waits for approval again,
/// marked `interrupted`, and the send says so and exits 3; approved, it runs a second time.
#[tokio::test]
async fn sigkill_mid_tool_leaves_the_call_waiting_for_approval_and_approving_runs_it_again() {
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(2, "@You:\nRun it.\n");
    let dir = chat.path.parent().unwrap().to_path_buf();
    // The first run starts a long sleep; a re-run answers at once and counts.
    let command = "if [ -f started ]; then echo run >> runs; echo second run; else touch started; echo $$ > tool.pid; exec sleep 20; fi";
    mock.push(bash(Turn::text("Running."), "k1", command));
    let child = send_command(&chat, &mock.base_url())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let placeholder = "**Tool Result:** `k1` (approved)\n```\n```\n";
    wait_for(&chat.path, placeholder).await;
    while !dir.join("tool.pid").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sigkill(&child);
    let _ = child.wait_with_output().await;
    // The tool outlives a SIGKILLed flemmad; end it (its pid is the one it wrote).
    let tool_pid = read(&dir.join("tool.pid")).trim().to_owned();
    let _ = std::process::Command::new("kill").arg(&tool_pid).status();
    let text = read(&chat.path);
    let placeholder = format!("{placeholder}\n");
    assert!(text.ends_with(&placeholder), "{text}");
    no_error_diagnostics(&text);
    let before = text.strip_suffix(&placeholder).unwrap().to_owned();

    // The next send asks instead of running it a second time.
    let out = run(send_command(&chat, &mock.base_url())).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("`k1`")
            && err.contains("may have run")
            && err.contains("urn:flemma:approval:interrupted"),
        "{err}"
    );
    assert!(!dir.join("runs").exists(), "the tool did not run again");
    assert_eq!(mock.requests().len(), 1, "nothing was sent");
    let waiting = read(&chat.path);
    assert_eq!(
        waiting,
        format!("{before}**Tool Result:** `k1` (pending interrupted)\n```\n```\n\n")
    );
    no_error_diagnostics(&waiting);

    // The user decides: approved, it runs again and the conversation goes on.
    let mut approve = common::flemmad_command(&chat, &mock.base_url());
    approve.args(["approve", &chat.path.display().to_string(), "k1"]);
    let out = run(approve).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    mock.push(Turn::text("It ran the second time."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        read(&dir.join("runs")),
        "run\n",
        "run once more, when approved"
    );
    let after = read(&chat.path);
    assert_eq!(
        after,
        format!(
            "{before}**Tool Result:** `k1` (interrupted)\n```\nsecond run\n```\n\n@Assistant:\nIt ran the second time.\n\n@You:\n\n"
        )
    );
    no_error_diagnostics(&after);
}

/// A reply whose writes fail (the chat made read-only mid-stream, as a read-only or full disk
/// does) stops; once the file can be written again, the next send marks what was left with
/// why it stopped — the write failed — not "the process writing it ended" (issue 27).
#[tokio::test]
async fn a_reply_cut_by_a_failed_write_is_marked_with_why_once_the_file_can_be_written() {
    use std::os::unix::fs::PermissionsExt as _;
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(2, "@You:\nTell me a long story.\n");
    let story: String = (1..=60)
        .map(|i| format!("Sentence number {i} of the story.\n"))
        .collect();
    mock.push(Turn::text(story).bytes_per_sec(400));
    let child = send_command(&chat, &mock.base_url())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&chat.path, "Sentence number 2 ").await;
    let mode = |mode: u32| {
        std::fs::set_permissions(&chat.path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(0o444);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the send stopped")
        .unwrap();
    mode(0o644);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("read-only"), "{}", stderr(&out));
    let left = read(&chat.path);
    assert!(
        !left.contains("flemma:aborted"),
        "nothing could be written: {left}"
    );

    mock.push(Turn::text("Where was I? The end."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = read(&chat.path);
    let marker = after
        .lines()
        .find(|line| line.starts_with("<!-- flemma:aborted:"))
        .unwrap_or_else(|| panic!("marked:\n{after}"));
    assert!(
        marker.starts_with("<!-- flemma:aborted: Response cut off: writing the chat failed (")
            && marker.contains("read-only"),
        "{marker}"
    );
    assert!(after.starts_with(&left), "{after}");
    assert!(
        after.ends_with("@Assistant:\nWhere was I? The end.\n\n@You:\n\n"),
        "{after}"
    );
    no_error_diagnostics(&after);
    // Said once: a later cut reply is the process's again.
    let state = chat.path.parent().unwrap().join("state/flemma/interrupted");
    assert!(
        std::fs::read_dir(&state).map_or(true, |mut d| d.next().is_none()),
        "the record is gone once recovered"
    );
}

#[tokio::test]
async fn a_crlf_chat_with_a_tool_call_keeps_crlf_everywhere() {
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(2, "@You:\nList, please.\n");
    let crlf = read(&chat.path).replace('\n', "\r\n");
    std::fs::write(&chat.path, &crlf).unwrap();
    mock.push(bash(
        Turn::text("Listing.\nOne moment."),
        "c1",
        "printf 'a\\nb\\n'",
    ));
    mock.push(Turn::text("Two lines:\na and b."));
    let out = run(send_command(&chat, &mock.base_url())).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = read(&chat.path);
    let bare = text
        .bytes()
        .enumerate()
        .filter(|&(i, b)| b == b'\n' && (i == 0 || text.as_bytes()[i - 1] != b'\r'))
        .count();
    assert_eq!(bare, 0, "bare LF in {text:?}");
    assert!(text.starts_with(&crlf), "{text:?}");
    assert!(
        text.contains("**Tool Result:** `c1`\r\n```\r\na\r\nb\r\n```\r\n"),
        "{text:?}"
    );
    assert!(
        text.ends_with("Two lines:\r\na and b.\r\n\r\n@You:\r\n\r\n"),
        "{text:?}"
    );
    // The model got LF line ends.
    let sent = mock.requests()[1].body.to_string();
    assert!(!sent.contains("\\r\\n"), "{sent}");
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn sigkill_at_any_moment_of_a_stream_leaves_the_old_text_plus_a_prefix_of_the_reply() {
    // Writes as often as possible (no coalescing), killed at eight different moments of the
    // stream. The moments count from the first write (the `@Assistant:` header), not from the
    // spawn: how long a process takes to start on a loaded machine is not what is tested.
    let story: String = (1..=400)
        .map(|i| format!("Line {i} of a reply written as fast as it streams.\n"))
        .collect();
    let mut mid_stream = 0;
    for (round, delay_ms) in [0u64, 50, 100, 150, 200, 250, 300, 350]
        .into_iter()
        .enumerate()
    {
        let mock = MockProvider::start().await.unwrap();
        let chat = chat(&format!(
            "```json\n{{\"flemma\": {{\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\", \"editing\": {{\"coalesce_ms\": 0}}}}}}\n```\n@You:\nRound {round}.\n"
        ));
        let original = read(&chat.path);
        mock.push(Turn::text(story.clone()).bytes_per_sec(40_000));
        let child = send_command(&chat, &mock.base_url())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&chat.path, "@Assistant:").await;
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        sigkill(&child);
        let _ = child.wait_with_output().await;
        let text = read(&chat.path);
        if text == original {
            continue; // killed before the first write: the old text, whole
        }
        let written = text
            .strip_prefix(&format!("{original}\n@Assistant:\n"))
            .unwrap_or_else(|| panic!("round {round}: not the old text plus a reply:\n{text}"));
        // Either the reply so far, or (killed after the end) the whole reply and the prompt.
        let finished = format!("{story}\n@You:\n\n");
        assert!(
            story.starts_with(written) || written == finished,
            "round {round}: a torn or mixed reply:\n{text}"
        );
        if !written.is_empty() && written.len() < story.len() {
            mid_stream += 1;
        }
        no_error_diagnostics(&text);
    }
    assert!(
        mid_stream >= 4,
        "only {mid_stream} of 8 kills landed mid-stream"
    );
}

#[tokio::test]
async fn a_second_send_of_the_same_file_is_refused_at_once_naming_the_first() {
    let mock = MockProvider::start().await.unwrap();
    let chat = faults_chat(2, "@You:\nSlowly, please.\n");
    mock.push(Turn::text("A slow answer. ".repeat(20)).bytes_per_sec(300));
    let first = send_command(&chat, &mock.base_url())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = first.id().unwrap();
    wait_for(&chat.path, "A slow answer.").await;
    let started = Instant::now();
    let second = run(send_command(&chat, &mock.base_url())).await;
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&pid.to_string()),
        "names the other process: {err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused at once"
    );
    let out = tokio::time::timeout(Duration::from_secs(30), first.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mock.requests().len(), 1, "only the first send paid");
    let text = read(&chat.path);
    assert_eq!(text.matches("@Assistant:").count(), 1, "{text}");
    no_error_diagnostics(&text);
}

#[tokio::test]
async fn an_edit_from_another_program_during_the_resume_delay_cancels_the_resume() {
    let mock = MockProvider::start().await.unwrap();
    let chat = common::trusted_chat(
        r#"```json
{"flemma": {"provider": "anthropic", "model": "claude-sonnet-4-5",
  "tools": {"auto_approve": ["$standard", "+bash"], "auto_approve_sandboxed": false,
            "autopilot": {"resume_delay": 3000}}}}
```
@You:
Start the job.
"#,
    );
    mock.push(Turn::text("Starting.").tool_call_with_id(
        "bash",
        "r1",
        json!({"label": "job", "command": "sleep 0.3; echo job output", "timeout": null, "flemma.background": true}),
    ));
    mock.push(Turn::text("It runs."));
    let child = send_command(&chat, &mock.base_url())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = wait_for(&chat.path, "**Job Result:**").await;
    // Within the 3 s delay, another program appends a line.
    let edited = format!("{text}A note typed meanwhile.\n");
    std::fs::write(&chat.path, &edited).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("you edited the file: not continuing"), "{err}");
    assert_eq!(mock.requests().len(), 2, "no automatic send after the edit");
    assert_eq!(read(&chat.path), edited, "the edit is kept, nothing added");
}
