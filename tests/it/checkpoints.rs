//! Checkpoints around the calls that change files, `flemmad changes` and `flemmad rewind`,
//! through the binary against the mock provider: a conversation whose `write`, `edit` and
//! `bash` create, change, delete and rename files in a git repository; each call's diff; the
//! files put back byte for byte; a file you changed since is refused without `--force`; the
//! repository's own `.git` untouched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

use crate::common::{chat, flemmad_command, git, read, stderr, write_user_config};

/// Every file under `.git` with its content: what the user's repository is.
fn snapshot(git: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![git.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(
                    path.strip_prefix(git).unwrap().display().to_string(),
                    std::fs::read(&path).unwrap(),
                );
            }
        }
    }
    out
}

/// `flemmad ARGS` for `chat` against the mock provider at `base`, run to its end.
pub(crate) fn flemmad(
    chat: &crate::common::Chat,
    base: &str,
    args: &[&str],
) -> impl std::future::Future<Output = Output> + use<> {
    let mut command = flemmad_command(chat, base);
    command.args(args);
    async move { command.output().await.unwrap() }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_shows_each_call_and_rewind_puts_the_files_back() {
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = chat("@You:\nTidy the notes.\n");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(
        &chat,
        "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n",
    );
    std::fs::write(project.join("src.txt"), "alpha\n").unwrap();
    git(&project, &["init", "--quiet"]);
    git(&project, &["add", "src.txt"]);
    git(&project, &["commit", "--quiet", "-m", "mine"]);
    let repository = snapshot(&project.join(".git"));

    // One call a turn: calls that run at once share their changes (the first to end gets them).
    mock.push(Turn::text("Writing.").tool_call_with_id(
        "write",
        "t_write",
        json!({"label": "notes", "path": "notes.txt", "content": "one\n"}),
    ));
    mock.push(Turn::text("Editing.").tool_call_with_id(
        "edit",
        "t_edit",
        json!({"label": "src", "path": "src.txt", "dry_run": null,
               "oldText": null, "newText": null,
               "edits": [{"old": "alpha", "new": "beta"}]}),
    ));
    mock.push(Turn::text("Tidying.").tool_call_with_id(
        "bash",
        "t_bash",
        json!({"label": "tidy", "command": "rm notes.txt && mv src.txt moved.txt", "timeout": null}),
    ));
    mock.push(Turn::text("Done."));
    let run = |args: &[&str]| flemmad(&chat, &base, args);
    let file = chat.path.display().to_string();
    let out = run(&["send", &file]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!project.join("notes.txt").exists(), "{}", read(&chat.path));
    assert_eq!(read(&project.join("moved.txt")), "beta\n");

    // What each call changed, in order.
    let out = run(&["changes", &file]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let all = stdout(&out);
    let write = all.find("== t_write (write): 1 file changed").expect(&all);
    let edit = all.find("== t_edit (edit): 1 file changed").expect(&all);
    let bash = all.find("== t_bash (bash): 2 files changed").expect(&all);
    assert!(write < edit && edit < bash, "{all}");
    assert!(
        all.contains("+one") && all.contains("-alpha") && all.contains("+beta"),
        "{all}"
    );
    let out = run(&["changes", &file, "--call", "t_edit"]).await;
    let one = stdout(&out);
    assert!(one.contains("-alpha") && !one.contains("t_bash"), "{one}");
    // By answer: the second `@Assistant:` message made the edit.
    let out = run(&["changes", &file, "--turn", "2"]).await;
    let second = stdout(&out);
    assert!(
        second.starts_with("== t_edit (edit): 1 file changed")
            && !second.contains("t_write")
            && !second.contains("t_bash"),
        "{second}"
    );
    let out = run(&["changes", &file, "--turn", "9"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has 4 answers (`@Assistant:` messages); --turn counts them from 1"),
        "{}",
        stderr(&out)
    );
    let out = run(&["changes", &file, "--call", "nope"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no checkpoint of the call `nope`"));

    // Back to before the `bash` call: the deleted file and the renamed one return, the new
    // name goes away; the chat is not touched.
    let chat_text = read(&chat.path);
    let out = run(&["rewind", &file, "--to", "t_bash"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&project.join("notes.txt")), "one\n");
    assert_eq!(read(&project.join("src.txt")), "beta\n");
    assert!(!project.join("moved.txt").exists(), "{}", stdout(&out));
    assert_eq!(read(&chat.path), chat_text);

    // A file you changed since is not overwritten without --force, and nothing changes.
    std::fs::write(project.join("src.txt"), "mine\n").unwrap();
    for extra in [None, Some("--dry-run")] {
        let mut args = vec!["rewind", file.as_str(), "--to", "t_write"];
        args.extend(extra);
        let out = run(&args).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("nothing was changed: this file was changed since")
                && stderr(&out).contains("src.txt"),
            "{}",
            stderr(&out)
        );
        assert!(
            stdout(&out).contains("would restore src.txt"),
            "{}",
            stdout(&out)
        );
        assert_eq!(read(&project.join("src.txt")), "mine\n");
        assert!(project.join("notes.txt").exists());
    }
    let out = run(&["rewind", &file, "--to", "t_write", "--force"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&project.join("src.txt")), "alpha\n");
    assert!(!project.join("notes.txt").exists());
    assert!(!project.join("moved.txt").exists());

    // The user's repository is exactly as it was.
    assert_eq!(snapshot(&project.join(".git")), repository);

    // `flemmad doctor` says what the checkpoints take, and where.
    let out = run(&["doctor", "--json"]).await;
    let findings: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let finding = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "checkpoints")
        .unwrap_or_else(|| panic!("{findings:#}"));
    let message = finding["message"].as_str().unwrap();
    let folder = project.join("state/flemma/checkpoints");
    assert!(
        message.ends_with(&format!(
            " KiB for 1 project in {} (delete the folder to forget them)",
            folder.display()
        )) && !message.starts_with("0.0 "),
        "{message}"
    );
}

/// Review before approval (issue 35): `flemmad status --diff` shows what each pending `write`
/// and `edit` would change, against the file as it is now, and writes nothing. An `edit` whose
/// text is no longer in the file says so (the tool's own refusal); `bash` has no diff.
#[tokio::test]
async fn status_diff_shows_what_pending_writes_and_edits_would_change() {
    let mock = MockProvider::start().await.unwrap();
    let body = concat!(
        "@You:\nTidy.\n\n@Assistant:\n",
        "**Tool Use:** `write` (`w1`)\n```json\n{\"path\": \"new.txt\", \"content\": \"fresh\\n\"}\n```\n\n",
        "**Tool Use:** `edit` (`e1`)\n```json\n{\"path\": \"notes.md\", \"oldText\": \"beta\", \"newText\": \"BETA\"}\n```\n\n",
        "**Tool Use:** `edit` (`e2`)\n```json\n{\"path\": \"notes.md\", \"oldText\": \"gamma\", \"newText\": \"G\"}\n```\n\n",
        "**Tool Use:** `bash` (`b1`)\n```json\n{\"command\": \"true\"}\n```\n\n",
        "@You:\n",
        "**Tool Result:** `w1` (pending)\n```\n```\n\n",
        "**Tool Result:** `e1` (pending)\n```\n```\n\n",
        "**Tool Result:** `e2` (pending)\n```\n```\n\n",
        "**Tool Result:** `b1` (pending)\n```\n```\n",
    );
    let chat = chat(body);
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("notes.md"), "alpha\nbeta\n").unwrap();
    let status = |extra: &[&str]| {
        let mut command = flemmad_command(&chat, &mock.base_url());
        command
            .args(["status", "--no-daemon"])
            .args(extra)
            .arg(&chat.path);
        command.output()
    };
    let out = status(&["--diff"]).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for expected in [
        "    --- a/new.txt\n    +++ b/new.txt\n    @@ -0,0 +1 @@ (hunk 1)\n    +fresh\n",
        "    --- a/notes.md\n    +++ b/notes.md\n    @@ -1,2 +1,2 @@ (hunk 1)\n     alpha\n    -beta\n    +BETA\n",
        "    (no diff: notes.md: edit #1",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    let bash = text
        .lines()
        .position(|l| l.contains("`bash` (b1)"))
        .unwrap();
    assert!(
        text.lines()
            .nth(bash + 1)
            .is_none_or(|next| !next.starts_with("    ")),
        "no diff for bash:\n{text}"
    );
    let out = status(&["--json"]).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = json["unresolved"].as_array().unwrap();
    let call = |id: &str| calls.iter().find(|c| c["toolId"] == id).unwrap().clone();
    assert!(call("e1")["diff"].as_str().unwrap().contains("+BETA"));
    assert!(call("e2")["diffError"].as_str().unwrap().contains("gamma"));
    assert_eq!(call("b1").get("diff"), None);
    // Nothing was written.
    assert!(!dir.join("new.txt").exists());
    assert_eq!(read(&dir.join("notes.md")), "alpha\nbeta\n");
}

/// `flemmad send --diff`: when a call waits for approval, the listing shows under each `write`
/// and `edit` what it would change (the same diff as `status --diff`); without `--diff` it
/// does not.
#[tokio::test]
async fn send_diff_lists_what_the_pending_edit_would_change() {
    let mock = MockProvider::start().await.unwrap();
    let chat = chat("@You:\nFix the notes.\n");
    write_user_config(&chat, "[tools]\nauto_approve = [\"read\"]\n");
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("notes.md"), "alpha\nbeta\n").unwrap();
    let edit = |id: &str| {
        Turn::text("Fixing.").tool_call_with_id(
            "edit",
            id,
            json!({"label": "fix", "path": "notes.md", "oldText": "beta", "newText": "BETA"}),
        )
    };
    mock.push(edit("e1"));
    let mut command = flemmad_command(&chat, &mock.base_url());
    command
        .args(["send", "--no-daemon", "--diff"])
        .arg(&chat.path);
    let out = command.output().await.unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("  `edit` (e1), asked by ")
            && err.contains(
                "    --- a/notes.md\n    +++ b/notes.md\n    @@ -1,2 +1,2 @@ (hunk 1)\n     alpha\n    -beta\n    +BETA\n"
            ),
        "{err}"
    );
    assert_eq!(read(&dir.join("notes.md")), "alpha\nbeta\n");
    // Without --diff, the listing is as before.
    let mut command = flemmad_command(&chat, &mock.base_url());
    command.args(["send", "--no-daemon"]).arg(&chat.path);
    let out = command.output().await.unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!stderr(&out).contains("+++ b/notes.md"), "{}", stderr(&out));
}

/// The diff is checked when the call runs (issue 35): a pending `edit` or `write` records the
/// file it was reviewed against; approved after the file changed, it writes nothing and says
/// so (a tool error the model reads). In process, through a daemon, and proposed under a
/// daemon that is gone when the call is approved and run (the record outlives it). Approved
/// with the file unchanged, a call runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_change_to_a_file_changed_since_its_review_writes_nothing() {
    for mode in ["in process", "daemon", "daemon restarted"] {
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let chat = chat("@You:\nFix the notes.\n");
        write_user_config(&chat, "[tools]\nauto_approve = [\"read\"]\n");
        let dir = chat.path.parent().unwrap();
        std::fs::write(dir.join("notes.md"), "alpha\nbeta\n").unwrap();
        std::fs::write(dir.join("kept.md"), "one\n").unwrap();
        mock.push(
            Turn::text("Fixing.")
                .tool_call_with_id(
                    "edit",
                    "e1",
                    json!({"label": "fix", "path": "notes.md", "oldText": "beta", "newText": "BETA"}),
                )
                .tool_call_with_id(
                    "write",
                    "w1",
                    json!({"label": "new", "path": "new.md", "content": "fresh\n"}),
                )
                .tool_call_with_id(
                    "edit",
                    "e2",
                    json!({"label": "keep", "path": "kept.md", "oldText": "one", "newText": "ONE"}),
                ),
        );
        mock.push(Turn::text("Understood."));
        let mut daemon =
            (mode != "in process").then(|| crate::daemon_watch::Served::start(&chat, &base, &[]));
        let file = chat.path.display().to_string();
        // Through a daemon, `send` follows the cycle until it stops (waiting for approval).
        let send = |daemon: &Option<_>| match daemon {
            Some(_) => vec!["send", file.as_str()],
            None => vec!["send", "--no-daemon", file.as_str()],
        };
        let out = flemmad(&chat, &base, &send(&daemon)).await;
        assert_eq!(out.status.code(), Some(3), "{mode}: {}", stderr(&out));
        let text = crate::common::wait_until_contains(&chat.path, "(pending)", mode);
        assert!(text.contains("`e2` (pending)"), "{mode}: {text}");
        // The daemon records what the calls are reviewed against once the placeholders are
        // written: the change below comes after it.
        let records = dir.join("state/flemma/reviewed");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::fs::read_dir(&records).map_or(0, Iterator::count) == 0 {
            assert!(std::time::Instant::now() < deadline, "{mode}: no record");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if mode == "daemon restarted" {
            daemon = None;
        }
        // Meanwhile, someone changes the file under review and creates the one to be written.
        std::fs::write(dir.join("notes.md"), "alpha\nbeta\ngamma\n").unwrap();
        std::fs::write(dir.join("new.md"), "mine\n").unwrap();
        let approve = match &daemon {
            Some(_) => vec!["approve", file.as_str(), "--all"],
            None => vec!["approve", "--no-daemon", file.as_str(), "--all"],
        };
        let out = flemmad(&chat, &base, &approve).await;
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        if mock.queued() > 0 {
            let out = flemmad(&chat, &base, &send(&daemon)).await;
            assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
        }
        let text = crate::common::wait_until_contains(&chat.path, "Understood.", mode);
        drop(daemon);
        assert_eq!(
            read(&dir.join("notes.md")),
            "alpha\nbeta\ngamma\n",
            "{mode}: {text}"
        );
        assert_eq!(read(&dir.join("new.md")), "mine\n", "{mode}: {text}");
        assert_eq!(read(&dir.join("kept.md")), "ONE\n", "{mode}: {text}");
        for expected in [
            "**Tool Result:** `e1` (error)\n```\nnothing was written: notes.md was changed after this call was proposed",
            "**Tool Result:** `w1` (error)\n```\nnothing was written: new.md was created after this call was proposed",
            "Review the change again against the file as it is now and approve it again",
        ] {
            assert!(text.contains(expected), "{mode}: {expected:?} in:\n{text}");
        }
        assert!(
            !text.contains("**Tool Result:** `e2` (error)"),
            "{mode}: {text}"
        );
        // Each call's record went when it ran.
        assert_eq!(
            std::fs::read_dir(&records).unwrap().count(),
            0,
            "{mode}: records left"
        );
        // The model was told.
        let requests = mock.requests();
        let last = requests.last().unwrap().body.to_string();
        assert!(
            last.contains("notes.md was changed after this call was proposed"),
            "{mode}: {last}"
        );
    }
}

/// A project in a folder that an enclosing repository ignores (a scratch folder under its
/// `build/`, as tests' temp folders under `target/`), with and without a repository of its
/// own: its checkpoints record the project's files, not the enclosing repository's view (in
/// which they are ignored), so `changes` sees the call and `rewind` undoes it; the enclosing
/// repository is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_under_a_repository_that_ignores_it_is_recorded() {
    for own_repository in [false, true] {
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let outer = tempfile::tempdir().unwrap();
        git(outer.path(), &["init", "--quiet"]);
        std::fs::write(outer.path().join(".gitignore"), "build/\n").unwrap();
        std::fs::write(outer.path().join("outer.txt"), "outer\n").unwrap();
        git(outer.path(), &["add", ".gitignore", "outer.txt"]);
        git(outer.path(), &["commit", "--quiet", "-m", "outer"]);
        let outer_git = outer.path().join(".git");
        let outer_repository = snapshot(&outer_git);
        let chat = crate::common::chat_under(outer, "build/scratch", "@You:\nNote it.\n");
        let project = chat.path.parent().unwrap().to_path_buf();
        if own_repository {
            git(&project, &["init", "--quiet"]);
        }
        write_user_config(&chat, "[tools]\nauto_approve = [\"$standard\"]\n");
        std::fs::write(project.join("src.txt"), "alpha\n").unwrap();
        mock.push(Turn::text("Noting.").tool_call_with_id(
            "write",
            "t_note",
            json!({"label": "note", "path": "notes.txt", "content": "one\n"}),
        ));
        mock.push(Turn::text("Editing.").tool_call_with_id(
            "edit",
            "t_edit",
            json!({"label": "src", "path": "src.txt", "oldText": "alpha", "newText": "beta"}),
        ));
        mock.push(Turn::text("Done."));
        let run = |args: &[&str]| flemmad(&chat, &base, args);
        let file = chat.path.display().to_string();
        let out = run(&["send", &file]).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(read(&project.join("src.txt")), "beta\n");

        let out = run(&["changes", &file]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let all = stdout(&out);
        assert!(
            all.contains("== t_note (write): 1 file changed\n")
                && all.contains("+++ b/notes.txt\n")
                && all.contains("== t_edit (edit): 1 file changed\n")
                && all.contains("-alpha\n+beta\n")
                && !all.contains("outer.txt"),
            "own repository: {own_repository}\n{all}"
        );
        let out = run(&["rewind", &file, "--to", "t_note"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            stdout(&out),
            "restored src.txt\nremoved notes.txt\n",
            "own repository: {own_repository}"
        );
        assert!(!project.join("notes.txt").exists());
        assert_eq!(read(&project.join("src.txt")), "alpha\n");
        assert_eq!(snapshot(&outer_git), outer_repository);
    }
}

/// `rewind --both` and `--chat` (issue 35): the chat is cut back to just before the answer
/// that made the call, byte for byte, the whole chat kept in the state folder first (where no
/// tool writes) and put back exactly by `--undo-chat`; `--dry-run` changes nothing; a chat
/// changed since the cut is not overwritten by the undo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_chat_cuts_the_chat_back_and_undo_chat_puts_it_back() {
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = chat("@You:\nKeep notes.\n");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(&chat, "[tools]\nauto_approve = [\"$standard\"]\n");
    mock.push(Turn::text("First.").tool_call_with_id(
        "write",
        "t_one",
        json!({"label": "one", "path": "one.txt", "content": "1\n"}),
    ));
    mock.push(Turn::text("Second.").tool_call_with_id(
        "write",
        "t_two",
        json!({"label": "two", "path": "two.txt", "content": "2\n"}),
    ));
    mock.push(Turn::text("Done."));
    let run = |args: &[&str]| flemmad(&chat, &base, args);
    let file = chat.path.display().to_string();
    let out = run(&["send", &file]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let whole = read(&chat.path);
    let second = whole.find("@Assistant:\nSecond.").expect(&whole);
    let cut_line = whole[..second].matches('\n').count() + 1;

    // --dry-run says what, and changes nothing.
    let out = run(&["rewind", &file, "--to", "t_two", "--both", "--dry-run"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "would remove two.txt\nwould cut the chat from line {cut_line} (the `@Assistant:` message that made `t_two`, and the 3 messages after it)\n"
        )
    );
    assert_eq!(read(&chat.path), whole);
    assert!(project.join("two.txt").exists());

    let out = run(&["rewind", &file, "--to", "t_two", "--both"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!project.join("two.txt").exists());
    assert_eq!(read(&project.join("one.txt")), "1\n");
    assert_eq!(read(&chat.path), whole[..second]);
    // The whole chat, in the state folder, named on stderr.
    let err = stderr(&out);
    let kept = err
        .split("is kept in ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect(&err);
    assert!(
        kept.starts_with(&project.join("state/flemma/rewound/").display().to_string()),
        "{err}"
    );
    assert_eq!(read(Path::new(kept)), whole);
    assert!(err.contains("--undo-chat` puts it back"), "{err}");

    // Back, byte for byte; a second undo has nothing to put back.
    let out = run(&["rewind", &file, "--undo-chat"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&chat.path), whole);
    assert!(!Path::new(kept).exists());
    let out = run(&["rewind", &file, "--undo-chat"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("never cut back"), "{}", stderr(&out));

    // --chat alone leaves the files; an undo after the chat changed is refused.
    let out = run(&["rewind", &file, "--to", "t_one", "--chat"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&chat.path), "@You:\nKeep notes.\n\n");
    assert!(project.join("one.txt").exists());
    std::fs::write(&chat.path, "@You:\nKeep notes, and more.\n").unwrap();
    let out = run(&["rewind", &file, "--undo-chat"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the chat changed since it was cut back"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&chat.path), "@You:\nKeep notes, and more.\n");
    // A call the chat does not have: exit 2, nothing changed.
    let out = run(&["rewind", &file, "--to", "nope", "--both"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(project.join("one.txt").exists());
}

/// A file over the size limit (16 MiB) is left out of checkpoints: `changes` does not show it
/// and `rewind` leaves it alone, while the call's other files are recorded and put back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_over_the_size_limit_are_left_out() {
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = chat("@You:\nMake files.\n");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(
        &chat,
        "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n",
    );
    mock.push(Turn::text("Making.").tool_call_with_id(
        "bash",
        "t_make",
        json!({"label": "make", "command": "head -c 17000000 /dev/zero > big.bin && echo x > small.txt", "timeout": null}),
    ));
    mock.push(Turn::text("Done."));
    let run = |args: &[&str]| flemmad(&chat, &base, args);
    let file = chat.path.display().to_string();
    let out = run(&["send", &file]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::metadata(project.join("big.bin")).unwrap().len(),
        17_000_000
    );
    let out = run(&["changes", &file]).await;
    let all = stdout(&out);
    assert!(
        all.starts_with("== t_make (bash): 1 file changed\n") && !all.contains("big.bin"),
        "{all}"
    );
    let out = run(&["rewind", &file, "--to", "t_make"]).await;
    assert_eq!(stdout(&out), "removed small.txt\n", "{}", stderr(&out));
    assert!(project.join("big.bin").exists());
}

/// Pruning (`[checkpoints]`): after a call, another chat of the project whose last checkpoint
/// is older than `max_age_days` loses its checkpoints, and over `max_size_mb` the other chats'
/// go oldest first; the chat that made the call keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_and_oversized_checkpoints_of_other_chats_are_pruned() {
    for limit in ["max_age_days = 1", "max_size_mb = 1"] {
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let chat = chat("@You:\nMake a file.\n");
        let dir = chat.path.parent().unwrap().to_path_buf();
        let other = dir.join("other.chat");
        std::fs::write(&other, "@You:\nMake another.\n").unwrap();
        write_user_config(
            &chat,
            &format!(
                "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n\n[checkpoints]\n{limit}\n"
            ),
        );
        // The first chat's call: long ago, or a file of 2 MB that does not compress.
        mock.push(Turn::text("Making.").tool_call_with_id(
            "bash",
            "t_old",
            json!({"label": "make", "command": "head -c 2000000 /dev/urandom > random.bin", "timeout": null}),
        ));
        mock.push(Turn::text("Done."));
        mock.push(Turn::text("Making.").tool_call_with_id(
            "write",
            "t_new",
            json!({"label": "new", "path": "new.txt", "content": "new\n"}),
        ));
        mock.push(Turn::text("Done."));
        let file = chat.path.display().to_string();
        let mut send = flemmad_command(&chat, &base);
        send.args(["send", &file]);
        if limit.starts_with("max_age") {
            send.env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z");
        }
        let out = send.output().await.unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let out = flemmad(&chat, &base, &["changes", &file]).await;
        assert!(
            stdout(&out).starts_with("== t_old (bash): 1 file changed"),
            "{limit}: {}",
            stdout(&out)
        );
        // Pruning is looked at once an hour per project: forget when it last was.
        let checkpoints = dir.join("state/flemma/checkpoints");
        for entry in std::fs::read_dir(&checkpoints).unwrap() {
            let _ = std::fs::remove_file(entry.unwrap().path().join("pruned"));
        }
        let other_file = other.display().to_string();
        let out = flemmad(&chat, &base, &["send", &other_file]).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

        let out = flemmad(&chat, &base, &["changes", &file]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), "", "{limit}");
        assert!(
            stderr(&out).contains("no call of"),
            "{limit}: {}",
            stderr(&out)
        );
        let out = flemmad(&chat, &base, &["changes", &other_file]).await;
        assert!(
            stdout(&out).starts_with("== t_new (write): 1 file changed"),
            "{limit}: {}",
            stdout(&out)
        );
    }
}

/// A chat in use for longer than `max_age_days` loses its own old points, not all of them:
/// the calls of long ago are gone from `changes` and `rewind`, the recent ones stay whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_in_use_for_long_loses_only_its_old_points() {
    let mock = MockProvider::start().await.unwrap();
    let base = mock.base_url();
    let chat = chat("@You:\nMake files.\n");
    let dir = chat.path.parent().unwrap().to_path_buf();
    write_user_config(
        &chat,
        "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n\n[checkpoints]\nmax_age_days = 1\n",
    );
    // Two calls long ago.
    for (id, name) in [("t_old1", "one.txt"), ("t_old2", "two.txt")] {
        mock.push(Turn::text("Making.").tool_call_with_id(
            "write",
            id,
            json!({"label": "make", "path": name, "content": "old\n"}),
        ));
    }
    mock.push(Turn::text("Done."));
    let file = chat.path.display().to_string();
    let mut send = flemmad_command(&chat, &base);
    send.args(["send", &file])
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z");
    let out = send.output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = flemmad(&chat, &base, &["changes", &file]).await;
    assert!(stdout(&out).contains("== t_old1"), "{}", stdout(&out));

    // Today: one more call; pruning is due (forget when it last was).
    let checkpoints = dir.join("state/flemma/checkpoints");
    for entry in std::fs::read_dir(&checkpoints).unwrap() {
        let _ = std::fs::remove_file(entry.unwrap().path().join("pruned"));
    }
    let mut text = read(&chat.path);
    if !text.trim_end().ends_with("@You:") {
        text.push_str("\n@You:\n");
    }
    text.push_str("One more.\n");
    std::fs::write(&chat.path, text).unwrap();
    mock.push(Turn::text("Making.").tool_call_with_id(
        "write",
        "t_new",
        json!({"label": "make", "path": "two.txt", "content": "new\n"}),
    ));
    mock.push(Turn::text("Done."));
    let out = flemmad(&chat, &base, &["send", &file]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let out = flemmad(&chat, &base, &["changes", &file]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let all = stdout(&out);
    assert!(all.starts_with("== t_new (write): 1 file changed"), "{all}");
    assert!(!all.contains("t_old"), "{all}");
    let out = flemmad(&chat, &base, &["rewind", &file, "--to", "t_old1"]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no checkpoint of the call `t_old1`"),
        "{}",
        stderr(&out)
    );
    // The recent call is still rewound byte for byte.
    let out = flemmad(&chat, &base, &["rewind", &file, "--to", "t_new"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&dir.join("two.txt")), "old\n");
}
