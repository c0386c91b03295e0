//! What a chat says, as ACP session updates: the history `session/load` replays, and the tool
//! calls and results a prompt announces as they appear in the file. Pure: a text in, updates
//! out.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, ContentChunk, Diff, SessionUpdate, TextContent, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
};
use flemma_syntax::{Document, Role, SegmentKind, Status, ToolUse};
use serde_json::Value;

/// The history of `chat`, in order: the user's text, replies, thinking, and every tool call
/// with its final status (`completed`; `failed` for a result marked `(error)`, rejected or
/// denied; `pending` while it waits). `cwd` is the base of the tools' relative paths.
pub fn history(chat: &str, cwd: &Path) -> Vec<SessionUpdate> {
    let doc = flemma_syntax::parse(chat);
    let mut updates = Vec::new();
    for message in doc.messages() {
        match message.role {
            Role::You => {
                let text = user_text(&doc, message);
                if !text.is_empty() {
                    updates.push(SessionUpdate::UserMessageChunk(chunk(text)));
                }
            }
            Role::Assistant => {
                let mut text = String::new();
                for segment in &message.segments {
                    match &segment.kind {
                        SegmentKind::Thinking(thinking) => {
                            flush(&mut updates, &mut text);
                            let body = doc.slice(thinking.content).trim();
                            if !body.is_empty() {
                                updates
                                    .push(SessionUpdate::AgentThoughtChunk(chunk(body.to_owned())));
                            }
                        }
                        SegmentKind::ToolUse(tool) => {
                            flush(&mut updates, &mut text);
                            updates.push(SessionUpdate::ToolCall(tool_call_with_result(
                                &doc, tool, cwd,
                            )));
                        }
                        SegmentKind::Aborted(_) => {}
                        _ => text.push_str(doc.slice(segment.range)),
                    }
                }
                flush(&mut updates, &mut text);
            }
            Role::System | Role::Other(_) => {}
        }
    }
    updates
}

fn flush(updates: &mut Vec<SessionUpdate>, text: &mut String) {
    let reply = flemma_syntax::write::unescape_model_text(text.trim()).into_owned();
    if !reply.is_empty() {
        updates.push(SessionUpdate::AgentMessageChunk(chunk(reply)));
    }
    text.clear();
}

fn chunk(text: String) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// The text a `@You:` message holds, without its tool and job results.
fn user_text(doc: &Document, message: &flemma_syntax::Message) -> String {
    let mut text = String::new();
    for segment in &message.segments {
        match segment.kind {
            SegmentKind::ToolResult(_) | SegmentKind::JobResult(_) => {}
            _ => text.push_str(doc.slice(segment.range)),
        }
    }
    text.trim().to_owned()
}

/// The kind of a tool, by name.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read" => ToolKind::Read,
        "write" | "edit" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "grep" | "find" | "ls" => ToolKind::Search,
        "fetch" => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// The call's input (`{}` when its fence is not a JSON object).
fn input_of(doc: &Document, tool: &ToolUse) -> Value {
    tool.fence
        .as_ref()
        .and_then(|fence| serde_json::from_str::<Value>(doc.slice(fence.content)).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}

/// A tool call as announced when it appears: `pending`, with title (its label), kind, raw
/// input and, for file tools, its location.
pub fn tool_call(doc: &Document, tool: &ToolUse, cwd: &Path) -> ToolCall {
    call(&tool.id, &tool.name, input_of(doc, tool), cwd)
}

/// The call `id` of the tool `name` with `input` (an object; anything else counts as `{}`), as
/// announced when the engine tells of it: `pending`, with title (its label), kind, raw input
/// and, for file tools, its location.
pub fn call(id: &str, name: &str, input: Value, cwd: &Path) -> ToolCall {
    let input = Some(input)
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let title = input
        .get("label")
        .and_then(Value::as_str)
        .filter(|label| !label.trim().is_empty())
        .map_or_else(|| name.to_owned(), str::to_owned);
    let mut call = ToolCall::new(id.to_owned(), title)
        .kind(tool_kind(name))
        .status(ToolCallStatus::Pending);
    if let Some(path) = file_of(name, &input, cwd) {
        call = call.locations(vec![ToolCallLocation::new(path)]);
    }
    call.raw_input(input)
}

/// The final update of a call of the tool `name` with `input` whose result is `output`:
/// `completed` (with a diff for a `write` or `edit`) or `failed`.
pub fn finished(
    name: &str,
    input: &Value,
    output: &str,
    failed: bool,
    cwd: &Path,
) -> ToolCallUpdateFields {
    let status = if failed {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let mut content = Vec::new();
    if !failed {
        content.extend(diffs(name, input, cwd));
    }
    let output = output.trim_end();
    if !output.is_empty() {
        content.push(ToolCallContent::Content(Content::new(ContentBlock::Text(
            TextContent::new(output.to_owned()),
        ))));
    }
    ToolCallUpdateFields::new().status(status).content(content)
}

/// The tool call with its result when the file has one (for a replay).
fn tool_call_with_result(doc: &Document, tool: &ToolUse, cwd: &Path) -> ToolCall {
    let mut call = tool_call(doc, tool, cwd);
    if let Some(fields) = result_fields(doc, &tool.id, cwd) {
        call.update(fields);
    }
    call
}

/// A tool's `path` as the editor knows the file: absolute and normalised (`src/../x.rs` is
/// `<cwd>/x.rs`), so that an editor finding its buffers by path finds this one.
pub fn editor_path(cwd: &Path, path: &str) -> std::path::PathBuf {
    flemma_protocol::document::normalize(&cwd.join(path))
}

/// The absolute path a file tool works on.
fn file_of(name: &str, input: &Value, cwd: &Path) -> Option<std::path::PathBuf> {
    if !matches!(name, "read" | "write" | "edit" | "ls" | "grep" | "find") {
        return None;
    }
    let path = input.get("path").and_then(Value::as_str)?;
    Some(editor_path(cwd, path))
}

/// What the result of `tool_id` says, once it is final: status and output (and a diff for
/// `write` and `edit` that succeeded). `None` while there is no result or it waits
/// (`pending`, `approved`).
pub fn result_fields(doc: &Document, tool_id: &str, cwd: &Path) -> Option<ToolCallUpdateFields> {
    let (_, _, result) = doc.tool_result(tool_id)?;
    let status = result.suffix.as_ref().and_then(|s| s.status());
    let failed = match status {
        None => false,
        Some(Status::Error | Status::Rejected | Status::Denied | Status::Aborted) => true,
        Some(Status::Pending | Status::Approved) => return None,
    };
    let output = result
        .fence
        .as_ref()
        .map(|fence| doc.slice(fence.content))
        .unwrap_or_default();
    let (name, input) = match doc.tool_use(tool_id) {
        Some((_, _, tool)) => (tool.name.as_str(), input_of(doc, tool)),
        None => ("", Value::Null),
    };
    Some(finished(name, &input, output, failed, cwd))
}

/// The diff content of a `write` (the new file) or an `edit` (each replaced text).
fn diffs(name: &str, input: &Value, cwd: &Path) -> Vec<ToolCallContent> {
    let Some(path) = input.get("path").and_then(Value::as_str) else {
        return Vec::new();
    };
    let path = editor_path(cwd, path);
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    match name {
        "write" => text(input, "content")
            .map(|content| ToolCallContent::Diff(Diff::new(path, content)))
            .into_iter()
            .collect(),
        "edit" => {
            let edits: Vec<&Value> = match input.get("edits").and_then(Value::as_array) {
                Some(list) => list.iter().collect(),
                None => vec![input],
            };
            edits
                .into_iter()
                .filter_map(|edit| {
                    // `edits: [{old, new}]`, or Flemma's one `oldText`/`newText`.
                    let either = |short: &str, long: &str| text(edit, short).or(text(edit, long));
                    let new = either("new", "newText")?;
                    Some(ToolCallContent::Diff(
                        Diff::new(path.clone(), new).old_text(either("old", "oldText")),
                    ))
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The update of a tool call that started running.
pub fn in_progress(tool_id: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        tool_id.to_owned(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CHAT: &str = r#"```json
{"flemma": {"tools": {"bash": {"cwd": "../.."}}}}
```
@You:
List the files, then delete build/.

@Assistant:
<thinking>
The user wants a listing.
</thinking>
Let me look.

**Tool Use:** `ls` (`t1`)
```json
{"label": "list the project", "path": "."}
```

**Tool Use:** `bash` (`t2`)
```json
{"label": "delete build", "command": "rm -rf build"}
```

@You:
**Tool Result:** `t1`
```
src/
build/
```

**Tool Result:** `t2` (rejected)
```
The user rejected this call.
```

@Assistant:
Done: I listed the files and did not delete build/.
<!-- flemma:aborted: cancelled by the user -->

@You:
"#;

    #[test]
    fn the_history_replays_in_order_with_final_statuses() {
        let updates = history(CHAT, Path::new("/p"));
        let got: Vec<Value> = updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect();
        let kinds: Vec<&str> = got
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "agent_thought_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call",
                "agent_message_chunk"
            ]
        );
        assert_eq!(
            got[0]["content"],
            json!({"type": "text", "text": "List the files, then delete build/."})
        );
        assert_eq!(got[1]["content"]["text"], "The user wants a listing.");
        assert_eq!(got[2]["content"]["text"], "Let me look.");
        assert_eq!(got[3]["toolCallId"], "t1");
        assert_eq!(got[3]["title"], "list the project");
        assert_eq!(got[3]["kind"], "search");
        assert_eq!(got[3]["status"], "completed");
        assert_eq!(got[3]["locations"], json!([{"path": "/p"}]));
        assert_eq!(got[3]["rawInput"]["path"], ".");
        assert_eq!(got[3]["content"][0]["content"]["text"], "src/\nbuild/");
        assert_eq!(got[4]["toolCallId"], "t2");
        assert_eq!(got[4]["kind"], "execute");
        assert_eq!(got[4]["status"], "failed");
        assert_eq!(
            got[5]["content"]["text"],
            "Done: I listed the files and did not delete build/."
        );
    }

    #[test]
    fn a_pending_call_replays_pending_and_an_error_failed() {
        let chat = "@You:\nq\n\n@Assistant:\n**Tool Use:** `read` (`a`)\n```json\n{\"label\": \"r\", \"path\": \"x\"}\n```\n\n**Tool Use:** `write` (`b`)\n```json\n{\"label\": \"w\", \"path\": \"y\", \"content\": \"new\"}\n```\n\n@You:\n**Tool Result:** `a` (pending)\n```\n```\n\n**Tool Result:** `b` (error)\n```\nno space\n```\n";
        let got: Vec<Value> = history(chat, Path::new("/p"))
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect();
        // `pending` is the default status: it is left out.
        assert_eq!(got[1].get("status"), None, "{}", got[1]);
        assert_eq!(got[1]["kind"], "read");
        assert_eq!(got[2]["status"], "failed");
        assert_eq!(got[2]["kind"], "edit");
        assert_eq!(got[2]["content"][0]["content"]["text"], "no space");
    }

    #[test]
    fn a_successful_write_carries_its_diff() {
        let chat = "@You:\nq\n\n@Assistant:\n**Tool Use:** `write` (`b`)\n```json\n{\"label\": \"w\", \"path\": \"y.txt\", \"content\": \"new\\n\"}\n```\n\n@You:\n**Tool Result:** `b`\n```\nwrote 4 bytes\n```\n";
        let got = serde_json::to_value(&history(chat, Path::new("/p"))[1]).unwrap();
        assert_eq!(got["status"], "completed");
        assert_eq!(
            got["content"][0],
            json!({"type": "diff", "path": "/p/y.txt", "newText": "new\n"})
        );
        assert_eq!(got["content"][1]["content"]["text"], "wrote 4 bytes");
    }

    #[test]
    fn a_successful_edit_carries_each_replacement_as_a_diff() {
        let chat = "@You:\nq\n\n@Assistant:\n**Tool Use:** `edit` (`e`)\n```json\n{\"label\": \"e\", \"path\": \"x.rs\", \"edits\": [{\"old\": \"a\", \"new\": \"b\"}, {\"old\": \"c\", \"new\": \"d\"}]}\n```\n\n@You:\n**Tool Result:** `e`\n```\nx.rs: 2 edit(s) applied\n```\n";
        let got = serde_json::to_value(&history(chat, Path::new("/p"))[1]).unwrap();
        assert_eq!(got["status"], "completed");
        assert_eq!(
            got["content"][0],
            json!({"type": "diff", "path": "/p/x.rs", "oldText": "a", "newText": "b"})
        );
        assert_eq!(
            got["content"][1],
            json!({"type": "diff", "path": "/p/x.rs", "oldText": "c", "newText": "d"})
        );
    }

    #[test]
    fn any_text_replays_without_panicking() {
        for chat in [
            "",
            "@You:",
            "@Assistant:\n```\nopen",
            "@You:\n**Tool Result:** `x`\n",
        ] {
            let _ = history(chat, Path::new("/"));
        }
    }
}
