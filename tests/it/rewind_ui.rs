//! What a conversation changed and the way back, from an editor and through the daemon
//! (issue 35): `flemma/changes` lists each call's files with their line counts, `flemmad
//! rewind --both` through the running daemon puts the files back and cuts the chat as an edit
//! of the editor that has it open (the file is not written under it; what was typed is kept),
//! and the `flemma.rewind` command does the same from the editor.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::{Value, json};

use crate::common::{chat, git, read, stderr, write_user_config};
use crate::lsp::lsp_client::{Client, Flavor};

fn command(client: &mut Client, name: &str, arguments: Value) -> Value {
    let answer = client.request(
        "workspace/executeCommand",
        json!({"command": name, "arguments": arguments}),
    );
    answer.unwrap_or_else(|error| panic!("{name}: {error}"))
}

/// Pumps the editor (it applies the daemon's edits) until its buffer satisfies `done`.
fn pump_until(client: &mut Client, uri: &str, done: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(client.text(uri)) {
        assert!(Instant::now() < deadline, "{}", client.text(uri));
        client.pump(Duration::from_millis(20));
    }
}

/// The document's code lenses as (line, title, command, arguments).
fn lenses(client: &mut Client, uri: &str) -> Vec<(u64, String, String, Value)> {
    let answer = client
        .request(
            "textDocument/codeLens",
            json!({"textDocument": {"uri": uri}}),
        )
        .unwrap();
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|lens| {
            (
                lens["range"]["start"]["line"].as_u64().unwrap(),
                lens["command"]["title"].as_str().unwrap().to_owned(),
                lens["command"]["command"].as_str().unwrap().to_owned(),
                lens["command"]["arguments"].clone(),
            )
        })
        .collect()
}

/// The 0-based line `needle` starts on in `text`.
fn line_of(text: &str, needle: &str) -> u64 {
    text[..text.find(needle).unwrap()].matches('\n').count() as u64
}

/// Waits until no driver works on the document (the cut's driver ends after its last write).
fn wait_idle(client: &mut Client, uri: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while command(client, "flemma.status", json!([uri]))["state"] != "idle" {
        assert!(Instant::now() < deadline, "the cut's driver did not stop");
        client.pump(Duration::from_millis(20));
    }
}

#[test]
fn changes_and_rewind_from_the_editor_and_through_the_daemon() {
    use crate::daemon_two_editors::daemon_and_editor;
    let runtime = crate::common::one_worker_runtime();
    let _inside = runtime.enter();
    let mock = runtime.block_on(MockProvider::start()).unwrap();
    let base = mock.base_url();
    let chat = chat("@You:\nKeep notes.\n");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(
        &chat,
        "[tools]\nauto_approve = [\"$standard\", \"+bash\"]\n",
    );
    // The daemon's own folders are not the project's files.
    std::fs::write(project.join(".gitignore"), "run/\ncache/\nstate/\n").unwrap();
    std::fs::write(project.join("src.txt"), "alpha\nbeta\n").unwrap();
    git(&project, &["init", "--quiet"]);
    mock.push(Turn::text("Writing.").tool_call_with_id(
        "write",
        "t_write",
        json!({"label": "notes", "path": "notes.txt", "content": "one\ntwo\nthree\n"}),
    ));
    mock.push(Turn::text("Editing.").tool_call_with_id(
        "bash",
        "t_bash",
        json!({"label": "tidy", "command": "printf 'alpha\\nBETA\\ngamma\\n' > src.txt && rm notes.txt", "timeout": null}),
    ));
    mock.push(Turn::text("Done."));
    let file = chat.path.display().to_string();
    let out = runtime.block_on(crate::checkpoints::flemmad(&chat, &base, &["send", &file]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&project.join("src.txt")), "alpha\nBETA\ngamma\n");
    let sent = read(&chat.path);

    let (_daemon, mut editor, uri) = daemon_and_editor(Flavor::Helix, &base, &chat, &sent);

    // A lens on each answer that changed files: its count, the diff, the way back.
    let first = lenses(&mut editor, &uri);
    assert_eq!(
        first,
        [
            (
                3,
                "1 file changed".to_owned(),
                "flemma.changes".to_owned(),
                json!([uri, "t_write"])
            ),
            (
                3,
                "Diff".to_owned(),
                "flemma.changes".to_owned(),
                json!([uri, "t_write"])
            ),
            (
                3,
                "Rewind".to_owned(),
                "flemma.rewind".to_owned(),
                json!([uri, "t_write", true, true])
            ),
            (
                line_of(&sent, "@Assistant:\nEditing."),
                "2 files changed".to_owned(),
                "flemma.changes".to_owned(),
                json!([uri, "t_bash"])
            ),
            (
                line_of(&sent, "@Assistant:\nEditing."),
                "Diff".to_owned(),
                "flemma.changes".to_owned(),
                json!([uri, "t_bash"])
            ),
            (
                line_of(&sent, "@Assistant:\nEditing."),
                "Rewind".to_owned(),
                "flemma.rewind".to_owned(),
                json!([uri, "t_bash", true, true])
            ),
        ]
    );

    // Helix has no code lenses: the lens's Rewind is a code action on the answer too.
    let answer_line = line_of(&sent, "@Assistant:\nEditing.") + 1;
    let actions = editor
        .request(
            "textDocument/codeAction",
            json!({
                "textDocument": {"uri": uri},
                "range": {"start": {"line": answer_line, "character": 0},
                          "end": {"line": answer_line, "character": 0}},
                "context": {"diagnostics": []}
            }),
        )
        .unwrap();
    let rewinds: Vec<&Value> = actions
        .as_array()
        .unwrap()
        .iter()
        .filter(|action| action["command"]["command"] == "flemma.rewind")
        .collect();
    assert_eq!(rewinds.len(), 1, "{actions:#}");
    assert_eq!(
        rewinds[0]["title"],
        "Rewind to before this message (its 2 changed files and the chat after it)"
    );
    assert_eq!(
        rewinds[0]["command"]["arguments"],
        json!([uri, "t_bash", true, true])
    );

    // Each call's files, with their line counts and diff.
    let changes = command(&mut editor, "flemma.changes", json!([uri]));
    let calls = changes["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{changes:#}");
    assert_eq!(calls[0]["toolId"], "t_write");
    assert_eq!(
        calls[0]["files"],
        json!([{"path": "notes.txt", "added": 3, "removed": 0}])
    );
    assert_eq!(calls[1]["tool"], "bash");
    assert_eq!(
        calls[1]["files"],
        json!([{"path": "notes.txt", "added": 0, "removed": 3},
               {"path": "src.txt", "added": 2, "removed": 1}])
    );
    assert!(
        calls[1]["diff"].as_str().unwrap().contains("+gamma"),
        "{changes:#}"
    );
    let one = command(&mut editor, "flemma.changes", json!([uri, "t_write"]));
    assert_eq!(one["calls"].as_array().unwrap().len(), 1, "{one:#}");
    let unknown = editor.request(
        "workspace/executeCommand",
        json!({"command": "flemma.changes", "arguments": [uri, "t_nope"]}),
    );
    assert!(
        format!("{unknown:?}").contains("no checkpoint of the call `t_nope`"),
        "{unknown:?}"
    );

    // Typed in the editor, not saved: in the question (before the cut) and at the end.
    let question = editor.text(&uri).find("Keep notes.").unwrap() + "Keep notes".len();
    editor.type_at(&uri, question, " tidy");
    let end = editor.text(&uri).len();
    editor.type_at(&uri, end, "\n@You:\nAnd now?\n");
    let typed = editor.text(&uri).to_owned();

    // `rewind --both` through the daemon: the files put back, the chat cut in the buffer.
    let mut rewind = crate::common::flemmad_command(&chat, &base);
    rewind
        .args(["rewind", &file, "--to", "t_bash", "--both"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = rewind.spawn().unwrap();
    let cut_at = typed.find("@Assistant:\nEditing.").unwrap();
    pump_until(&mut editor, &uri, |text| !text.contains("Editing."));
    let out = runtime.block_on(child.wait_with_output()).unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}{}", stderr(&out));
    assert!(
        said.contains("restored src.txt")
            && said.contains("restored notes.txt")
            && said.contains("cut the chat from line")
            && said.contains("(through the daemon)"),
        "{said}"
    );
    assert_eq!(read(&project.join("src.txt")), "alpha\nbeta\n");
    assert_eq!(read(&project.join("notes.txt")), "one\ntwo\nthree\n");
    assert_eq!(editor.text(&uri), &typed[..cut_at]);
    assert!(editor.text(&uri).contains("Keep notes tidy."));
    assert_eq!(read(&chat.path), sent, "the editor owns the document");
    // Nothing typed is lost: the whole buffer as it was is kept.
    let archive = stderr(&out)
        .split("is kept in ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap()
        .to_owned();
    assert_eq!(read(std::path::Path::new(&archive)), typed);

    // The rewind was recorded: the lens of the answer cut away is gone, the first one stays.
    let after_cut = lenses(&mut editor, &uri);
    assert_eq!(after_cut.len(), 3, "{after_cut:?}");
    assert_eq!(after_cut[0].1, "1 file changed");

    // The editor's command: back to before the first call, files and chat.
    let before = editor.text(&uri).to_owned();
    let answer = command(
        &mut editor,
        "flemma.rewind",
        json!([uri, "t_write", true, true]),
    );
    assert_eq!(answer["removed"], json!(["notes.txt"]), "{answer:#}");
    assert_eq!(answer["refused"], false);
    assert_eq!(answer["chat"]["messages"], 2, "{answer:#}");
    pump_until(&mut editor, &uri, |text| !text.contains("Writing."));
    wait_idle(&mut editor, &uri);
    assert!(!project.join("notes.txt").exists());
    assert_eq!(read(&project.join("src.txt")), "alpha\nbeta\n");
    let cut = before.find("@Assistant:\nWriting.").unwrap();
    assert_eq!(editor.text(&uri), &before[..cut]);
    assert_eq!(read(&chat.path), sent);
    assert!(lenses(&mut editor, &uri).is_empty());

    // A dry run changes nothing; a call not in the chat is refused at once.
    let dry = command(
        &mut editor,
        "flemma.rewind",
        json!([uri, "t_write", true, false, false, true]),
    );
    assert_eq!(dry["dryRun"], true, "{dry:#}");
    let refused = editor.request(
        "workspace/executeCommand",
        json!({"command": "flemma.rewind", "arguments": [uri, "t_write", false, true]}),
    );
    assert!(
        format!("{refused:?}").contains("the chat has no tool call `t_write`"),
        "{refused:?}"
    );
    editor.shutdown();
    runtime.block_on(mock.shutdown());
}
