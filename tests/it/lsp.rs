//! End-to-end tests of `flemmad lsp` over stdio, with scripted clients behaving like Helix and
//! VS Code (tests/support/lsp_client.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/lsp_client.rs"]
pub(crate) mod lsp_client;

use std::time::{Duration, Instant};

use lsp_client::{Client, Flavor, offset_of};
use serde_json::{Value, json};

const URI: &str = "file:///work/demo/talk.chat";

/// A conversation with a tool use, a pending placeholder answering it and a job result.
const CHAT: &str = "@You:\nrun the tests 🙂 中文\n\n@Assistant:\n**Tool Use:** `bash` (`t中🙂1`)\n```json\n{\"command\":\"make test\"}\n```\n\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"ls\"}\n```\n\n@You:\n**Tool Result:** `t中🙂1` (pending)\n```\n```\n\n**Tool Result:** `t2` (pending job=job_ab12)\n```\n```\n\n**Job Result:** `job_ab12`\n```\nfile.txt\n```\n";

fn start(flavor: Flavor, args: &[&str]) -> Client {
    let mut client = Client::start(flavor, args);
    client.initialize(std::path::Path::new("/work/demo"));
    client
}

fn text_position(client: &Client, needle: &str) -> Value {
    let offset = client.text(URI).find(needle).expect(needle);
    client.position(URI, offset)
}

#[test]
fn initialize_negotiates_the_encoding_and_answers_fast() {
    for (flavor, expected) in [(Flavor::Helix, "utf-8"), (Flavor::VsCode, "utf-16")] {
        let mut client = Client::start(flavor, &[]);
        let (result, elapsed) = client.initialize(std::path::Path::new("/tmp"));
        assert_eq!(result["capabilities"]["positionEncoding"], expected);
        assert_eq!(result["capabilities"]["textDocumentSync"]["change"], 2);
        let commands = result["capabilities"]["executeCommandProvider"]["commands"]
            .as_array()
            .unwrap();
        for command in [
            "flemma.send",
            "flemma.cancel",
            "flemma.approve",
            "flemma.reject",
            "flemma.approveAll",
            "flemma.background",
            "flemma.execute",
            "flemma.status",
            "flemma.jobs",
            "flemma.usage",
            "flemma.switch",
            "flemma.compact",
            "flemma.compactUndo",
        ] {
            assert!(
                commands.contains(&json!(command)),
                "{command} not advertised"
            );
        }
        // The goal is < 50 ms; the bound here leaves room for a loaded test machine.
        assert!(
            elapsed < Duration::from_secs(2),
            "initialize took {elapsed:?}"
        );
        assert!(client.shutdown().success());
    }
}

#[test]
fn incremental_multibyte_edits_stay_in_sync_in_both_encodings() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = start(flavor, &[]);
        client.open(URI, CHAT);
        // Type after the emoji and the CJK on the same line, then replace a CJK char.
        let after_cjk = client.text(URI).find("中文").unwrap() + "中文".len();
        client.type_at(URI, after_cjk, " 🎉x");
        let cjk = client.text(URI).find("文").unwrap();
        client.replace(URI, cjk, cjk + "文".len(), "字👍");
        let after_emoji = client.text(URI).find("🙂").unwrap() + "🙂".len();
        client.type_at(URI, after_emoji, "é");
        // The server's mirror must equal the buffer: a completion on a new line typed right
        // after the multibyte text replaces exactly the partial marker in the client's text,
        // and the tool use under a position right after multibyte text is found.
        let after_party = client.text(URI).find("🎉x").unwrap() + "🎉x".len();
        client.type_at(URI, after_party, "\n@Ass");
        let cursor = after_party + "\n@Ass".len();
        let items = client
            .request(
                "textDocument/completion",
                json!({"textDocument": {"uri": URI}, "position": client.position(URI, cursor),
                       "context": {"triggerKind": 1}}),
            )
            .unwrap();
        let item = &items.as_array().unwrap()[0];
        assert_eq!(item["label"], "@Assistant:", "{flavor:?}");
        let start = offset_of(
            client.text(URI),
            &item["textEdit"]["range"]["start"],
            client.units,
        );
        let end = offset_of(
            client.text(URI),
            &item["textEdit"]["range"]["end"],
            client.units,
        );
        assert_eq!(&client.text(URI)[start..end], "@Ass", "{flavor:?}");
        assert!(
            client
                .text(URI)
                .contains("run the tests 🙂é 中字👍 🎉x\n@Ass"),
            "{flavor:?}"
        );
        client.replace(URI, after_party, cursor, "");
        let definition = client
            .request(
                "textDocument/definition",
                json!({"textDocument": {"uri": URI}, "position": text_position(&client, "`bash` (`t中")}),
            )
            .unwrap();
        let start = offset_of(
            client.text(URI),
            &definition["range"]["start"],
            client.units,
        );
        let end = offset_of(client.text(URI), &definition["range"]["end"], client.units);
        assert_eq!(
            &client.text(URI)[start..end],
            "**Tool Result:** `t中🙂1` (pending)",
            "{flavor:?}"
        );
        client.shutdown();
    }
}

#[test]
fn diagnostics_are_published_after_an_edit_with_code_source_and_version() {
    let mut client = start(Flavor::Helix, &[]);
    client.open(URI, CHAT);
    let first = client.wait_notification("textDocument/publishDiagnostics", |_| true);
    assert_eq!(first["version"], 0);
    // The analysis's diagnostics: each pending placeholder blocks a send, on its header line.
    let pending: Vec<&Value> = first["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "template-tool")
        .collect();
    assert_eq!(pending.len(), 2, "{first}");
    // A hint (4): waiting for the user is the flow, not an error (issue 31).
    assert_eq!(pending[0]["severity"], 4);
    assert_eq!(pending[0]["source"], "flemma");
    assert_eq!(
        pending[0]["data"],
        json!({"blocking": true, "stage": "template"})
    );
    assert!(
        pending[0]["message"]
            .as_str()
            .unwrap()
            .contains("`t中🙂1` is waiting for approval")
    );
    assert_eq!(pending[0]["range"]["start"]["line"], 15);
    // An unclosed fence at the end.
    let end = client.text(URI).len();
    client.type_at(URI, end, "\n```rust\nfn main() {}\n");
    let after = client.wait_notification("textDocument/publishDiagnostics", |p| p["version"] == 1);
    let unclosed = after["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "unclosed-fence")
        .expect("an unclosed-fence diagnostic");
    assert_eq!(unclosed["severity"], 1);
    assert_eq!(unclosed["source"], "flemma");
    // Outside an assistant reply an unclosed fence blocks a send, with the fix as the hint.
    assert_eq!(unclosed["data"]["blocking"], true);
    assert_eq!(unclosed["data"]["stage"], "syntax");
    assert!(
        unclosed["message"]
            .as_str()
            .unwrap()
            .contains("hint: close the fence"),
        "{unclosed}"
    );
    client.shutdown();
}

#[test]
fn hover_and_definition_on_tool_and_job_blocks() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = start(flavor, &[]);
        client.open(URI, CHAT);
        // The approval decision comes from the chat's analysis (computed off the main loop:
        // hover never waits for it), published with the first diagnostics.
        client.wait_notification("textDocument/publishDiagnostics", |p| p["uri"] == URI);
        let hover = |client: &mut Client, needle: &str| {
            client
                .request(
                    "textDocument/hover",
                    json!({"textDocument": {"uri": URI}, "position": text_position(client, needle)}),
                )
                .unwrap()
        };
        let on_use = hover(&mut client, "`bash` (`t2`)");
        let markdown = on_use["contents"]["value"].as_str().unwrap();
        assert!(
            markdown.contains("**Tool** `bash` (call `t2`)"),
            "{markdown}"
        );
        // The input pretty-printed, and what the chat's approval chain decides for the call
        // (`bash` asks the user, or runs when a sandbox holds it).
        assert!(markdown.contains("\"command\": \"ls\""), "{markdown}");
        assert!(
            markdown.contains("\nApproval: asks the user by urn:flemma:approval:")
                || markdown.contains("\nApproval: approved by urn:flemma:approval:"),
            "{markdown}"
        );
        let on_result = hover(&mut client, "`t2` (pending job");
        let markdown = on_result["contents"]["value"].as_str().unwrap();
        assert!(markdown.contains("of `t2`: pending"), "{markdown}");
        assert!(markdown.contains("Job `job_ab12`: completed"), "{markdown}");
        let on_job = hover(&mut client, "`job_ab12`\n```\nfile");
        assert!(
            on_job["contents"]["value"]
                .as_str()
                .unwrap()
                .contains("**Job result** of `job_ab12`")
        );
        let definition = |client: &mut Client, needle: &str| {
            let target = client
                .request(
                    "textDocument/definition",
                    json!({"textDocument": {"uri": URI}, "position": text_position(client, needle)}),
                )
                .unwrap();
            assert_eq!(target["uri"], URI);
            let start = offset_of(client.text(URI), &target["range"]["start"], client.units);
            client.text(URI)[start..].lines().next().unwrap().to_owned()
        };
        assert_eq!(
            definition(&mut client, "`t2` (pending job"),
            "**Job Result:** `job_ab12`"
        );
        assert_eq!(
            definition(&mut client, "`job_ab12`\n```\nfile"),
            "**Tool Result:** `t2` (pending job=job_ab12)"
        );
        // Plain text has neither.
        let none = client
            .request(
                "textDocument/hover",
                json!({"textDocument": {"uri": URI}, "position": text_position(&client, "run the")}),
            )
            .unwrap();
        assert!(none.is_null());
        client.shutdown();
    }
}

#[test]
fn symbols_and_folding_ranges() {
    let mut client = start(Flavor::VsCode, &[]);
    client.open(URI, CHAT);
    let symbols = client
        .request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": URI}}),
        )
        .unwrap();
    let names: Vec<&str> = symbols
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["@You:", "@Assistant:", "@You:"]);
    let children: Vec<&str> = symbols[1]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(children, ["bash", "bash"]);
    assert_eq!(symbols[1]["children"][0]["detail"], "t中🙂1");
    let folds = client
        .request(
            "textDocument/foldingRange",
            json!({"textDocument": {"uri": URI}}),
        )
        .unwrap();
    let lines: Vec<(u64, u64)> = folds
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["startLine"].as_u64().unwrap(),
                f["endLine"].as_u64().unwrap(),
            )
        })
        .collect();
    // The assistant message (lines 3..=12) and its first tool use block (4..=7).
    assert!(lines.contains(&(3, 12)), "{lines:?}");
    assert!(lines.contains(&(4, 7)), "{lines:?}");
    client.shutdown();
}

/// Issue 31: the chat's structure as semantic tokens (role markers, tool blocks with their
/// status, the job result), positioned in each client's encoding.
#[test]
fn semantic_tokens_mark_roles_tool_blocks_and_statuses() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = Client::start(flavor, &[]);
        let (initialized, _) = client.initialize(std::path::Path::new("/work/demo"));
        let legend = &initialized["capabilities"]["semanticTokensProvider"]["legend"];
        let types: Vec<&str> = legend["tokenTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let modifiers: Vec<&str> = legend["tokenModifiers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        client.open(URI, CHAT);
        let tokens = client
            .request(
                "textDocument/semanticTokens/full",
                json!({"textDocument": {"uri": URI}}),
            )
            .unwrap();
        let data: Vec<u64> = tokens["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        // Decode: the text each token covers, its type and its modifiers.
        let text = client.text(URI).to_owned();
        let (mut line, mut character) = (0, 0);
        let mut decoded = Vec::new();
        for token in data.chunks(5) {
            if token[0] > 0 {
                (line, character) = (line + token[0], token[1]);
            } else {
                character += token[1];
            }
            let start = offset_of(
                &text,
                &json!({"line": line, "character": character}),
                client.units,
            );
            let end = offset_of(
                &text,
                &json!({"line": line, "character": character + token[2]}),
                client.units,
            );
            let names: Vec<&str> = (0..modifiers.len())
                .filter(|n| token[4] & (1 << n) != 0)
                .map(|n| modifiers[n])
                .collect();
            decoded.push((
                text[start..end].to_owned(),
                types[token[3] as usize],
                names.join(","),
            ));
        }
        let decoded: Vec<(&str, &str, &str)> = decoded
            .iter()
            .map(|(t, k, m)| (t.as_str(), *k, m.as_str()))
            .collect();
        assert_eq!(
            decoded,
            [
                ("@You:", "keyword", "user,role"),
                ("@Assistant:", "keyword", "assistant,role"),
                ("**Tool Use:** `bash` (`t中🙂1`)", "function", "toolUse"),
                ("**Tool Use:** `bash` (`t2`)", "function", "toolUse"),
                ("@You:", "keyword", "user,role"),
                (
                    "**Tool Result:** `t中🙂1` (pending)",
                    "function",
                    "toolResult,pending"
                ),
                (
                    "**Tool Result:** `t2` (pending job=job_ab12)",
                    "function",
                    "toolResult,pending"
                ),
                ("**Job Result:** `job_ab12`", "function", "jobResult"),
            ],
            "{flavor:?}"
        );
        client.shutdown();
    }
}

/// Issue 31: a client that shows `collapsedText` gets what each fold hides (thinking is a
/// `comment` fold, so it can be closed by kind); one that does not gets none.
#[test]
fn folding_ranges_carry_their_previews_for_clients_that_show_them() {
    let chat = "@Assistant:\n<thinking>\nlet me think\n</thinking>\nDone.\n\n@You:\n**Tool Result:** `t1`\n```\n1\n2\n3\n```\n";
    let folds_of = |client: &mut Client| -> Vec<Value> {
        client.open(URI, chat);
        client
            .request(
                "textDocument/foldingRange",
                json!({"textDocument": {"uri": URI}}),
            )
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let mut neovim_like = Client::start(Flavor::Helix, &[]);
    neovim_like.extra_text_document_capabilities =
        json!({"foldingRange": {"lineFoldingOnly": true, "foldingRange": {"collapsedText": true}}});
    neovim_like.initialize(std::path::Path::new("/work/demo"));
    let folds = folds_of(&mut neovim_like);
    let thinking = folds
        .iter()
        .find(|f| f["startLine"] == 1)
        .expect("a fold on the thinking block");
    assert_eq!(thinking["kind"], "comment");
    assert_eq!(
        thinking["collapsedText"],
        "<thinking> … </thinking> (3 lines)"
    );
    let result = folds
        .iter()
        .find(|f| f["startLine"] == 7)
        .expect("a fold on the tool result");
    assert_eq!(
        result["collapsedText"],
        "⬢ Tool Result: t1: 1↵2↵3 (6 lines)"
    );
    neovim_like.shutdown();

    let mut vscode = start(Flavor::VsCode, &[]);
    let folds = folds_of(&mut vscode);
    assert!(
        !folds.is_empty() && folds.iter().all(|f| f.get("collapsedText").is_none()),
        "{folds:?}"
    );
    vscode.shutdown();
}

fn code_actions(client: &mut Client, needle: &str) -> Vec<Value> {
    let position = text_position(client, needle);
    client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": {"start": position, "end": position}, "context": {"diagnostics": [], "triggerKind": 1}}),
        )
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Runs a code action's command and pumps until the edit it causes is in the buffer.
fn run_command(client: &mut Client, command: &Value) -> Result<Value, Value> {
    let seen = client.apply_edits_seen;
    let result = client.request(
        "workspace/executeCommand",
        json!({"command": command["command"], "arguments": command["arguments"]}),
    );
    if result.is_ok() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.apply_edits_seen == seen {
            assert!(Instant::now() < deadline, "no applyEdit after {command}");
            client.pump(Duration::from_millis(50));
        }
        // Let retries (a refused edit) settle.
        while client.pump(Duration::from_millis(200)) {}
    }
    result
}

#[test]
fn approve_and_reject_through_code_actions_and_commands() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = start(flavor, &[]);
        client.open(URI, CHAT);
        let actions = code_actions(&mut client, "**Tool Result:** `t中🙂1`");
        let titles: Vec<&str> = actions
            .iter()
            .map(|a| a["title"].as_str().unwrap())
            .collect();
        assert_eq!(
            titles,
            [
                "Approve `t中🙂1`",
                "Reject `t中🙂1`",
                "Send",
                "Approve all (2 pending)"
            ]
        );
        assert_eq!(actions[0]["kind"], "quickfix");
        assert_eq!(actions[2]["kind"], "source");
        // Commands carry [uri, …args].
        assert_eq!(actions[0]["command"]["arguments"], json!([URI, "t中🙂1"]));
        assert_eq!(actions[3]["command"]["arguments"], json!([URI]));
        let on_text: Vec<Value> = code_actions(&mut client, "run the tests")
            .into_iter()
            .map(|a| a["title"].clone())
            .collect();
        // On an earlier message: "compact up to here" too (docs/context.md).
        assert_eq!(
            on_text,
            [
                json!(
                    "Compact up to here (a summary replaces this message and those before it; the ones after stay)"
                ),
                json!("Send"),
                json!("Approve all (2 pending)")
            ]
        );
        run_command(&mut client, &actions[0]["command"]).unwrap();
        assert!(
            client
                .text(URI)
                .contains("**Tool Result:** `t中🙂1` (approved)\n```\n```\n"),
            "{}",
            client.text(URI)
        );
        // Approving again says why not.
        let again = run_command(&mut client, &actions[0]["command"]).unwrap_err();
        assert!(
            again["message"]
                .as_str()
                .unwrap()
                .contains("not waiting for approval: its status is `approved`")
        );
        // Reject with a reason, by relative path as Helix's `:lsp-workspace-command` sends it.
        let reject = json!({"command": "flemma.reject", "arguments": ["talk.chat", "t2", "use make test-unit"]});
        run_command(&mut client, &reject).unwrap();
        assert!(
            client.text(URI).contains(
                "**Tool Result:** `t2` (error job=job_ab12)\n```\nUser feedback: use make test-unit\n```\n"
            ),
            "{}",
            client.text(URI)
        );
        client.shutdown();
    }
}

#[test]
fn a_refused_command_edit_is_rebuilt_on_the_latest_text() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = start(flavor, &[]);
        client.open(URI, CHAT);
        // The user types at the top while the edit travels: the first edit is stale.
        client.type_before_next_apply = Some((URI.into(), 0, "typed first\n".into()));
        let approve_all = json!({"command": "flemma.approveAll", "arguments": [URI]});
        let result = run_command(&mut client, &approve_all).unwrap();
        assert_eq!(result["toolIds"], json!(["t中🙂1", "t2"]));
        assert_eq!(client.apply_edits_refused, 1, "{flavor:?}");
        let text = client.text(URI);
        assert!(text.starts_with("typed first\n@You:\n"));
        // The engine approved both (and, with autopilot, went on to run them: this chat's
        // inputs lack the required `label`, so they end as error results).
        assert!(!text.contains("(pending"), "{text}");
        assert!(
            text.contains("**Tool Result:** `t中🙂1` (")
                && text.contains("**Tool Result:** `t2` (")
                && text.contains("job=job_ab12)"),
            "{text}"
        );
        client.shutdown();
    }
}

#[test]
fn engine_commands_check_their_arguments_and_documents() {
    let mut client = start(Flavor::Helix, &[]);
    client.open(URI, CHAT);
    let error = client
        .request(
            "workspace/executeCommand",
            json!({"command": "flemma.switch", "arguments": [URI, "openai/"]}),
        )
        .unwrap_err();
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("provider/model"),
        "{error}"
    );
    // Nothing runs for the document: nothing to cancel, and it says so.
    let error = client
        .request(
            "workspace/executeCommand",
            json!({"command": "flemma.cancel", "arguments": [URI]}),
        )
        .unwrap_err();
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("nothing runs for"),
        "{error}"
    );
    let error = client
        .request(
            "workspace/executeCommand",
            json!({"command": "flemma.approve", "arguments": [URI]}),
        )
        .unwrap_err();
    assert_eq!(error["code"], -32602);
    assert!(error["message"].as_str().unwrap().contains("[uri, toolId]"));
    let error = client
        .request(
            "workspace/executeCommand",
            json!({"command": "flemma.send", "arguments": ["elsewhere.chat"]}),
        )
        .unwrap_err();
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("/work/demo/elsewhere.chat does not exist and no editor has it open")
    );
    client.shutdown();
}

#[test]
fn malformed_messages_and_unknown_methods_get_errors_and_the_server_goes_on() {
    let mut client = start(Flavor::Helix, &[]);
    client.send_raw(b"Content-Length: 9\r\n\r\n{\"id\": 4,");
    let reply = client.next_raw(Duration::from_secs(10)).unwrap();
    assert_eq!(reply["error"]["code"], -32700);
    assert!(reply["id"].is_null());
    let invalid = br#"{"jsonrpc": "2.0", "id": 7, "method": 42}"#;
    let mut framed = format!("Content-Length: {}\r\n\r\n", invalid.len()).into_bytes();
    framed.extend_from_slice(invalid);
    client.send_raw(&framed);
    let reply = client.next_raw(Duration::from_secs(10)).unwrap();
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert_eq!(reply["id"], 7);
    let error = client
        .request("textDocument/rename", json!({}))
        .unwrap_err();
    assert_eq!(error["code"], -32601);
    let error = client
        .request("textDocument/hover", json!({"nonsense": true}))
        .unwrap_err();
    assert_eq!(error["code"], -32602);
    client.open(URI, CHAT);
    let symbols = client
        .request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": URI}}),
        )
        .unwrap();
    assert_eq!(symbols.as_array().unwrap().len(), 3);
    assert!(client.shutdown().success());
}

fn range_text<'a>(client: &'a Client, uri: &str, range: &Value) -> &'a str {
    let text = client.text(uri);
    let start = offset_of(text, &range["start"], client.units);
    let end = offset_of(text, &range["end"], client.units);
    &text[start..end]
}

#[test]
fn inlay_hints_preview_each_empty_placeholder_in_utf16_and_utf8() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = Client::start(flavor, &[]);
        let (result, _) = client.initialize(std::path::Path::new("/work/demo"));
        assert_eq!(result["capabilities"]["inlayHintProvider"], true);
        client.open(URI, CHAT);
        // A range from inside the multibyte first line to the end.
        let from = client.text(URI).find("中文").unwrap() + "中".len();
        let to = client.text(URI).len();
        let hints = client
            .request(
                "textDocument/inlayHint",
                json!({"textDocument": {"uri": URI},
                       "range": {"start": client.position(URI, from), "end": client.position(URI, to)}}),
            )
            .unwrap();
        let hints = hints.as_array().unwrap();
        // (The context meter's hint, on the last role line, is tested in `context.rs`.)
        let hints: Vec<&Value> = hints
            .iter()
            .filter(|h| !h["label"].as_str().unwrap().contains("input tokens"))
            .collect();
        let labels: Vec<&str> = hints.iter().map(|h| h["label"].as_str().unwrap()).collect();
        assert_eq!(labels, ["bash: $ make test", "bash: $ ls"], "{flavor:?}");
        let text = client.text(URI);
        let first_fence =
            text.find("`t中🙂1` (pending)\n```").unwrap() + "`t中🙂1` (pending)\n```".len();
        assert_eq!(
            offset_of(text, &hints[0]["position"], client.units),
            first_fence,
            "{flavor:?}"
        );
        // A range that holds no placeholder has no hints.
        let none = client
            .request(
                "textDocument/inlayHint",
                json!({"textDocument": {"uri": URI},
                       "range": {"start": client.position(URI, 0), "end": client.position(URI, from)}}),
            )
            .unwrap();
        assert_eq!(none, json!([]));
        client.shutdown();
    }
}

#[test]
fn completion_of_roles_tools_paths_and_frontmatter_options() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "# notes\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let uri = format!("file://{}/talk.chat", dir.path().display());
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = Client::start(flavor, &[]);
        let (result, _) = client.initialize(dir.path());
        let triggers = &result["capabilities"]["completionProvider"]["triggerCharacters"];
        assert_eq!(*triggers, json!(["@", ".", "/", "$"]));
        let text = "```rhai\nflemma.opt.thi\n```\n@You:\nsee 中🙂 @./no\n\n@Assistant:\n**Tool Use:** `ba\n";
        client.open(&uri, text);
        let complete = |client: &mut Client, after: &str| -> Vec<Value> {
            let offset = client.text(&uri).find(after).unwrap() + after.len();
            client
                .request(
                    "textDocument/completion",
                    json!({"textDocument": {"uri": uri}, "position": client.position(&uri, offset)}),
                )
                .unwrap()
                .as_array()
                .unwrap()
                .clone()
        };
        // A path after multibyte text: the replaced range is the partial name, in the
        // client's units.
        let paths = complete(&mut client, "@./no");
        let notes = paths
            .iter()
            .find(|i| i["label"].as_str().unwrap().contains("notes.md"))
            .unwrap_or_else(|| panic!("no notes.md in {paths:?}"));
        assert!(
            "@./no".ends_with(range_text(&client, &uri, &notes["textEdit"]["range"])),
            "{notes}"
        );
        // Tool names from the resolved configuration.
        let tools = complete(&mut client, "`ba");
        assert!(tools.iter().any(|i| i["label"] == "bash"), "{tools:?}");
        // Frontmatter options from the configuration schema.
        let options = complete(&mut client, "flemma.opt.thi");
        assert!(
            options.iter().any(|i| i["label"] == "thinking"),
            "{options:?}"
        );
        client.shutdown();
    }
}

#[test]
fn quick_fixes_convert_lua_frontmatter_and_split_a_legacy_marker() {
    let mut client = start(Flavor::VsCode, &[]);
    let text = "```lua\nflemma.opt.thinking = \"low\"\n```\n@You: hi there 🙂\n";
    client.open(URI, text);
    let lua = code_actions(&mut client, "flemma.opt");
    let convert = lua
        .iter()
        .find(|a| a["title"] == "Convert the Lua frontmatter to Rhai")
        .unwrap_or_else(|| panic!("{lua:?}"));
    let change = &convert["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 0);
    let edit = &change["edits"][0];
    assert_eq!(
        range_text(&client, URI, &edit["range"]),
        "```lua\nflemma.opt.thinking = \"low\"\n```\n"
    );
    assert!(
        edit["newText"]
            .as_str()
            .unwrap()
            .starts_with("```rhai\nflemma.opt.thinking = \"low\";"),
        "{edit}"
    );
    let legacy = code_actions(&mut client, "hi there");
    let split = legacy
        .iter()
        .find(|a| a["kind"] == "quickfix" && a["edit"].is_object())
        .unwrap_or_else(|| panic!("{legacy:?}"));
    let edit = &split["edit"]["documentChanges"][0]["edits"][0];
    let mut fixed = client.text(URI).to_owned();
    let start = offset_of(&fixed, &edit["range"]["start"], client.units);
    let end = offset_of(&fixed, &edit["range"]["end"], client.units);
    fixed.replace_range(start..end, edit["newText"].as_str().unwrap());
    assert!(fixed.ends_with("@You:\nhi there 🙂\n"), "{fixed:?}");
    client.shutdown();
}

#[test]
fn definition_of_a_file_reference_is_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "# notes\n").unwrap();
    let uri = format!("file://{}/talk.chat", dir.path().display());
    let mut client = start(Flavor::Helix, &[]);
    client.open(&uri, "@You:\nread 中 @./notes.md please\n");
    let offset = client.text(&uri).find("notes.md").unwrap() + 2;
    let target = client
        .request(
            "textDocument/definition",
            json!({"textDocument": {"uri": uri}, "position": client.position(&uri, offset)}),
        )
        .unwrap();
    assert_eq!(
        target["uri"],
        format!("file://{}/notes.md", dir.path().display())
    );
    client.shutdown();
}

/// Sends a `flemma/*` request and, when it succeeds with an edit to come, pumps until the edit
/// is in the buffer.
fn flemma_request(client: &mut Client, method: &str, params: Value) -> Result<Value, Value> {
    let seen = client.apply_edits_seen;
    let result = client.request(method, params);
    if result.as_ref().is_ok_and(|r| r.get("toolIds").is_some()) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.apply_edits_seen == seen {
            assert!(Instant::now() < deadline, "no applyEdit after {method}");
            client.pump(Duration::from_millis(50));
        }
        while client.pump(Duration::from_millis(200)) {}
    }
    result
}

#[test]
fn flemma_requests_reach_the_same_code_as_the_commands() {
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = start(flavor, &[]);
        client.open(URI, CHAT);
        let approved = flemma_request(
            &mut client,
            "flemma/approve",
            json!({"uri": URI, "toolId": "t中🙂1"}),
        )
        .unwrap();
        assert_eq!(approved["toolIds"], json!(["t中🙂1"]), "{approved}");
        assert!(
            client.text(URI).contains("`t中🙂1` (approved)"),
            "{flavor:?}"
        );
        // A path relative to the workspace root, as with the commands.
        let rejected = flemma_request(
            &mut client,
            "flemma/reject",
            json!({"uri": "talk.chat", "toolId": "t2", "reason": "not now"}),
        )
        .unwrap();
        assert_eq!(rejected["toolIds"], json!(["t2"]));
        assert!(client.text(URI).contains("User feedback: not now"));
        // The same refusal as the command gives.
        let again = flemma_request(
            &mut client,
            "flemma/approve",
            json!({"uri": URI, "toolId": "t中🙂1"}),
        )
        .unwrap_err();
        assert_eq!(again["code"], -32602);
        assert!(
            again["message"]
                .as_str()
                .unwrap()
                .contains("not waiting for approval")
        );
        // Engine requests answer what the engine does for the document.
        let jobs = flemma_request(&mut client, "flemma/jobs", json!({"uri": "talk.chat"})).unwrap();
        assert!(jobs["jobs"].is_array(), "{jobs}");
        let usage = flemma_request(&mut client, "flemma/usage", json!({"uri": URI})).unwrap();
        assert_eq!(usage["inputTokens"], 0, "{usage}");
        let status = flemma_request(&mut client, "flemma/status", json!({"uri": URI})).unwrap();
        assert_eq!(status["path"], "/work/demo/talk.chat", "{status}");
        let error = flemma_request(
            &mut client,
            "flemma/switch",
            json!({"uri": URI, "model": "anthropic claude"}),
        )
        .unwrap_err();
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("provider/model"),
            "{error}"
        );
        let bad = client
            .request("flemma/approve", json!({"uri": URI}))
            .unwrap_err();
        assert_eq!(bad["code"], -32602);
        assert!(
            bad["message"]
                .as_str()
                .unwrap()
                .contains("missing field `toolId`"),
            "{bad}"
        );
        let unknown = client.request("flemma/explode", json!({})).unwrap_err();
        assert_eq!(unknown["code"], -32601);
        assert!(
            unknown["message"]
                .as_str()
                .unwrap()
                .contains("flemma/approveAll")
        );
        // The switch command takes its model positionally.
        let error = client
            .request(
                "workspace/executeCommand",
                json!({"command": "flemma.switch", "arguments": [URI]}),
            )
            .unwrap_err();
        assert!(
            error["message"].as_str().unwrap().contains("[uri, model]"),
            "{error}"
        );
        client.shutdown();
    }
}

/// Review before approval (issue 35): hover on an unresolved `edit` (its use or its pending
/// placeholder) shows what it would change, as a diff against the file as it is now; a call
/// with a final result shows none.
#[test]
fn hover_on_a_pending_edit_shows_its_change_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "alpha\nbeta\n").unwrap();
    let uri = format!("file://{}/review.chat", dir.path().display());
    let chat = concat!(
        "@You:\nTidy.\n\n@Assistant:\n",
        "**Tool Use:** `edit` (`e1`)\n```json\n{\"path\": \"notes.md\", \"oldText\": \"beta\", \"newText\": \"BETA\"}\n```\n\n",
        "**Tool Use:** `write` (`w1`)\n```json\n{\"path\": \"done.txt\", \"content\": \"x\"}\n```\n\n",
        "@You:\n**Tool Result:** `e1` (pending)\n```\n```\n\n",
        "**Tool Result:** `w1`\n```\nCreated done.txt\n```\n",
    );
    for flavor in [Flavor::Helix, Flavor::VsCode] {
        let mut client = Client::start(flavor, &[]);
        client.initialize(dir.path());
        client.open(&uri, chat);
        client.wait_notification("textDocument/publishDiagnostics", |p| p["uri"] == uri);
        let hover = |client: &mut Client, needle: &str| {
            let offset = client.text(&uri).find(needle).expect(needle);
            let position = client.position(&uri, offset);
            let answer = client
                .request(
                    "textDocument/hover",
                    json!({"textDocument": {"uri": uri}, "position": position}),
                )
                .unwrap();
            answer["contents"]["value"].as_str().unwrap().to_owned()
        };
        for needle in ["`edit` (`e1`)", "`e1` (pending)"] {
            let markdown = hover(&mut client, needle);
            assert!(
                markdown.contains(
                    "**Change** (against the file as it is now):\n\n```diff\n--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n```"
                ),
                "{needle}: {markdown}"
            );
        }
        let resolved = hover(&mut client, "`write` (`w1`)");
        assert!(!resolved.contains("**Change"), "{resolved}");
        client.shutdown();
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.md")).unwrap(),
        "alpha\nbeta\n"
    );
}
