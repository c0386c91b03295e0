//! A chat's mode (docs/modes.md) through `flemmad send` against `flemma-mock-provider`, with
//! real tools in a project outside `/tmp`: `ask` lets only reading run and holds `bash` in a
//! sandbox where the project is read-only (enforced by the sandbox and the file tools, not
//! by what the model is told); `auto-edit` approves `write` and `edit` inside the project
//! and nothing else; an untrusted chat's frontmatter may make the mode stricter, never wider.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;
use std::time::Duration;

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

use crate::common::{
    Chat, chat_outside_tmp, read, result_line, result_of, send_command, stderr, write_user_config,
};

fn mode_chat(frontmatter_extra: &str) -> Chat {
    mode_chat_with(chat_outside_tmp, frontmatter_extra)
}

/// A chat made by `make` (outside `/tmp`, or in it).
fn mode_chat_with(make: fn(&str) -> Chat, frontmatter_extra: &str) -> Chat {
    let chat = make(&format!(
        "```json\n{{\"flemma\": {{\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\"{frontmatter_extra}}}}}\n```\n@You:\nWork on the project.\n"
    ));
    let dir = chat.path.parent().unwrap();
    std::fs::write(dir.join("notes.txt"), "remember the milk\n").unwrap();
    chat
}

async fn send(chat: &Chat, base: &str, mode: Option<&str>) -> Output {
    let mut command = send_command(chat, base);
    if let Some(mode) = mode {
        command.args(["--mode", mode]);
    }
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

fn write(id: &str, path: &str, content: &str) -> Turn {
    Turn::default().tool_call_with_id(
        "write",
        id,
        json!({"label": "write", "path": path, "content": content}),
    )
}

#[tokio::test]
async fn ask_mode_reads_and_refuses_every_change_even_what_the_settings_approve() {
    ask_mode_in(mode_chat("")).await;
}

/// A project under `/tmp` (where the sandbox has a private `/tmp` of its own) is seen, and
/// read-only, all the same.
#[tokio::test]
async fn ask_mode_holds_for_a_project_under_tmp_too() {
    ask_mode_in(mode_chat_with(crate::common::chat, "")).await;
}

async fn ask_mode_in(chat: Chat) {
    let mock = MockProvider::start().await.unwrap();
    let project = chat.path.parent().unwrap().to_path_buf();
    // The user's own settings approve everything here: only the mode stands in the way.
    write_user_config(
        &chat,
        "[tools]\nauto_approve = [\"read\", \"write\", \"bash\"]\n",
    );
    let sandboxed = flemma_tools::sandbox::bwrap_availability().is_ok();
    mock.push(
        write("w1", "created.txt", "should not exist\n")
            .tool_call_with_id(
                "read",
                "r1",
                json!({"label": "notes", "path": "notes.txt", "offset": null, "limit": null}),
            )
            .tool_call_with_id(
                "bash",
                "b1",
                json!({"label": "try", "command": "cat notes.txt; echo x > from-bash.txt; echo exit=$?", "timeout": null}),
            ),
    );
    mock.push(Turn::text("I could only look."));
    let out = send(&chat, &mock.base_url(), Some("ask")).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = read(&chat.path);
    assert!(result_line(&text, "w1").0.contains("(error)"), "{text}");
    assert!(result_of(&text, "w1").contains("ask mode"), "{text}");
    assert!(!project.join("created.txt").exists());
    assert!(
        result_of(&text, "r1").contains("remember the milk"),
        "{text}"
    );
    let shell = result_of(&text, "b1");
    if sandboxed {
        // It ran, read the project, and could not write into it.
        assert!(shell.contains("remember the milk"), "{shell}");
        assert!(shell.contains("Read-only file system"), "{shell}");
    } else {
        assert!(shell.contains("only in a sandbox"), "{shell}");
        assert!(result_line(&text, "b1").0.contains("(error)"), "{text}");
    }
    assert!(!project.join("from-bash.txt").exists());
    // The model was told why, in the request after the calls.
    let requests = mock.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("ask mode"), "{last}");
}

#[tokio::test]
async fn auto_edit_approves_edits_inside_the_project_and_asks_for_the_rest() {
    let mock = MockProvider::start().await.unwrap();
    let chat = mode_chat("");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(&chat, "[tools]\nauto_approve = [\"read\"]\n");
    let outside = project.parent().unwrap().join(format!(
        "outside-{}.txt",
        project.file_name().unwrap().to_string_lossy()
    ));
    mock.push(write("in1", "inside.txt", "inside\n").tool_call_with_id(
        "write",
        "out1",
        json!({"label": "write", "path": outside.display().to_string(), "content": "outside\n"}),
    ));
    let out = send(&chat, &mock.base_url(), Some("auto-edit")).await;
    let err = stderr(&out);
    // The edit inside ran; the one outside waits for approval (exit 3).
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(read(&project.join("inside.txt")), "inside\n");
    assert!(!outside.exists());
    assert!(err.contains("`write` (out1), asked by"), "{err}");
    assert!(!err.contains("`write` (in1), asked by"), "{err}");
}

#[tokio::test]
async fn without_a_mode_the_same_edit_waits_and_an_untrusted_chat_cannot_widen_it() {
    let mock = MockProvider::start().await.unwrap();
    // The chat (untrusted) asks for auto-edit in its frontmatter: ignored.
    let chat = mode_chat(", \"mode\": \"auto-edit\"");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(&chat, "[tools]\nauto_approve = [\"read\"]\n");
    mock.push(write("in1", "inside.txt", "inside\n"));
    let out = send(&chat, &mock.base_url(), None).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("`write` (in1)"), "{err}");
    assert!(!project.join("inside.txt").exists());
}

#[tokio::test]
async fn an_untrusted_chat_may_make_the_mode_stricter_than_the_send_asks() {
    let mock = MockProvider::start().await.unwrap();
    let chat = mode_chat(", \"mode\": \"ask\"");
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(&chat, "[tools]\nauto_approve = [\"read\", \"write\"]\n");
    mock.push(write("w1", "inside.txt", "inside\n"));
    mock.push(Turn::text("Refused, as the chat says."));
    let out = send(&chat, &mock.base_url(), Some("auto-edit")).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(result_of(&read(&chat.path), "w1").contains("ask mode"));
    assert!(!project.join("inside.txt").exists());
}

#[test]
fn an_unknown_mode_is_refused_with_the_modes_named() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .args(["send", "--mode", "yolo", "x.chat"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("auto-edit") && err.contains("default") && err.contains("ask"),
        "{err}"
    );
}

/// `flemma.mode` through a language server (the editors' way, and `flemma/mode` on
/// `rpc.sock`): the mode holds from the document's next send, shows in `flemma.status`, and
/// an unknown mode is refused naming the modes.
#[test]
fn an_editor_sets_the_mode_with_flemma_mode() {
    use crate::lsp::lsp_client::{Client, Flavor};
    let mock = crate::lsp_engine::Mock::start();
    let original = "```json\n{\"flemma\": {\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\"}}\n```\n@You:\nWrite the file.\n";
    let chat = chat_outside_tmp(original);
    let project = chat.path.parent().unwrap().to_path_buf();
    write_user_config(&chat, "[tools]\nauto_approve = [\"read\", \"write\"]\n");
    let uri = format!("file://{}", chat.path.display());
    let mut client = Client::start_with_env(Flavor::VsCode, &["--no-daemon"], &mock.env(&chat));
    client.initialize_with_options(&project, serde_json::Value::Null);
    client.open(&uri, original);
    let command = |client: &mut Client, name: &str, arguments: serde_json::Value| {
        client.request(
            "workspace/executeCommand",
            json!({"command": name, "arguments": arguments}),
        )
    };

    let refused = command(&mut client, "flemma.mode", json!([uri, "yolo"])).unwrap_err();
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("auto-edit, default, ask"), "{refused}");
    let answer = command(&mut client, "flemma.mode", json!([uri, "ask"])).unwrap();
    assert_eq!(answer["effective"], "ask", "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("read-only"),
        "{answer}"
    );
    let status = command(&mut client, "flemma.status", json!([uri])).unwrap();
    assert_eq!(status["mode"], "ask", "{status}");

    mock.provider()
        .push(write("w1", "created.txt", "should not exist\n"));
    mock.provider().push(Turn::text("Refused."));
    command(&mut client, "flemma.send", json!([uri])).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if client.text(&uri).contains("Refused.") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            client.text(&uri)
        );
        client.pump(Duration::from_millis(50));
    }
    let text = client.text(&uri);
    assert!(result_of(text, "w1").contains("ask mode"), "{text}");
    assert!(!project.join("created.txt").exists());
}
