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

use crate::common::{chat, flemmad_command, read, stderr, write_user_config};

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

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "me")
        .env("GIT_AUTHOR_EMAIL", "me@example.org")
        .env("GIT_COMMITTER_NAME", "me")
        .env("GIT_COMMITTER_EMAIL", "me@example.org")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
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
    let run = |args: &[&str]| {
        let mut command = flemmad_command(&chat, &base);
        command.args(args);
        async move { command.output().await.unwrap() }
    };
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
}
