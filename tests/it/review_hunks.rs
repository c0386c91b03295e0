//! Per-hunk approval through the binary (issue 35): `flemmad approve FILE ID --hunks N,…
//! [--reason …]` applies the approved hunks of a pending `write` or `edit` only, and the call's
//! result tells the model which hunks were rejected and why. In process and through a daemon
//! (`flemma/approveHunks`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

use crate::checkpoints::flemmad;
use crate::common::{chat, read, stderr, write_user_config};

/// Twelve numbered lines: a change to the first and the last is two hunks.
const BEFORE: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_some_hunks_applies_those_and_tells_the_model_the_others() {
    for mode in ["in process", "daemon"] {
        let mock = MockProvider::start().await.unwrap();
        let base = mock.base_url();
        let chat = chat("@You:\nNumber the lines in words.\n");
        write_user_config(&chat, "[tools]\nauto_approve = [\"read\"]\n");
        let dir = chat.path.parent().unwrap();
        std::fs::write(dir.join("notes.md"), BEFORE).unwrap();
        std::fs::write(dir.join("list.md"), BEFORE).unwrap();
        let after = BEFORE
            .replace("1\n2\n", "one\n2\n")
            .replace("12\n", "twelve\n");
        mock.push(
            Turn::text("Rewriting.")
                .tool_call_with_id(
                    "write",
                    "w1",
                    json!({"label": "words", "path": "notes.md", "content": after}),
                )
                .tool_call_with_id(
                    "edit",
                    "e1",
                    json!({"label": "words", "path": "list.md", "edits": [
                        {"old": "1\n2\n", "new": "one\n2\n"},
                        {"old": "11\n12\n", "new": "11\ntwelve\n"}]}),
                ),
        );
        mock.push(Turn::text("Understood."));
        let daemon =
            (mode == "daemon").then(|| crate::daemon_watch::Served::start(&chat, &base, &[]));
        let file = chat.path.display().to_string();
        let with_mode = |args: &[&'static str]| -> Vec<String> {
            let mut all: Vec<String> = vec![args[0].to_owned()];
            if daemon.is_none() {
                all.push("--no-daemon".into());
            }
            all.push(file.clone());
            all.extend(args[1..].iter().map(|a| (*a).to_owned()));
            all
        };
        let run = |args: Vec<String>| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            flemmad(&chat, &base, &args)
        };
        let out = run(with_mode(&["send"])).await;
        assert_eq!(out.status.code(), Some(3), "{mode}: {}", stderr(&out));
        let text = crate::common::wait_until_contains(&chat.path, "`e1` (pending)", mode);
        assert!(text.contains("`w1` (pending)"), "{mode}: {text}");
        // A hunk that does not exist, or every hunk, is refused: nothing changes.
        let out = run(with_mode(&["approve", "w1", "--hunks", "3"])).await;
        assert_eq!(out.status.code(), Some(2), "{mode}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("there is no hunk 3") && stderr(&out).contains("2 hunks"),
            "{mode}: {}",
            stderr(&out)
        );
        let out = run(with_mode(&["approve", "w1", "--hunks", "1,2"])).await;
        assert_eq!(out.status.code(), Some(2), "{mode}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("approve the call itself"),
            "{mode}: {}",
            stderr(&out)
        );
        assert!(read(&chat.path).contains("`w1` (pending)"), "{mode}");
        // The write keeps its last hunk, the edit its first.
        let out = run(with_mode(&[
            "approve",
            "w1",
            "--hunks",
            "2",
            "--reason",
            "keep the first line as a digit",
        ]))
        .await;
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        let out = run(with_mode(&["approve", "e1", "--hunks", "1"])).await;
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        if mock.queued() > 0 {
            let out = run(with_mode(&["send"])).await;
            assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
        }
        let text = crate::common::wait_until_contains(&chat.path, "Understood.", mode);
        drop(daemon);
        assert_eq!(
            read(&dir.join("notes.md")),
            BEFORE.replace("12\n", "twelve\n"),
            "{mode}: {text}"
        );
        assert_eq!(
            read(&dir.join("list.md")),
            BEFORE.replace("1\n2\n", "one\n2\n"),
            "{mode}: {text}"
        );
        for expected in [
            "The user approved only part of this change to notes.md: hunk 2 of 2 applied; hunk 1 rejected and not applied (the file does not have them). User feedback: keep the first line as a digit",
            "The user approved only part of this change to list.md: hunk 1 of 2 applied; hunk 2 rejected and not applied",
        ] {
            assert!(text.contains(expected), "{mode}: {expected:?} in:\n{text}");
        }
        // The model was told.
        let requests = mock.requests();
        let last = requests.last().unwrap().body.to_string();
        assert!(
            last.contains("User feedback: keep the first line as a digit"),
            "{mode}: {last}"
        );
        // The records went when the calls ran.
        let records = dir.join("state/flemma/reviewed");
        assert_eq!(
            std::fs::read_dir(&records).map_or(0, Iterator::count),
            0,
            "{mode}: records left"
        );
    }
}
