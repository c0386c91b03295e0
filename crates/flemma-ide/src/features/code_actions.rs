//! Code actions: on a pending placeholder "Approve" and "Reject"; on a running tool "Move to
//! background" and "Execute now"; on the document "Send", "Cancel" and "Approve all"; quick fixes
//! that convert Lua frontmatter to Rhai and split a legacy inline role marker; and the whole-file
//! `fmt` normalisation.
//!
//! Commands name the `flemma.*` LSP command and its arguments after the document: the front end
//! puts the document's uri first (`flemma.approve [uri, toolId]`).

use flemma_syntax::{
    DiagnosticCode, Document, FrontmatterLanguage, NodeAt, SegmentKind, Status, TextEdit,
    TextRange, write,
};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Fixes a problem at the cursor.
    QuickFix,
    /// Acts on the whole document (send, cancel, approve all, fmt).
    Source,
}

/// A `flemma.*` command and its arguments after the document's uri.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub name: &'static str,
    pub args: Vec<Value>,
}

/// An action: an edit of the document, a command, or both.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeAction {
    pub title: String,
    pub kind: ActionKind,
    pub edit: Option<Vec<TextEdit>>,
    pub command: Option<Command>,
}

/// What the engine knows about the document that the text does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DocumentState {
    /// A request is streaming (or tools are running) for this document.
    pub busy: bool,
    /// The chat is not trusted, and that changes something (its frontmatter set an option it
    /// may not, or a call waits for approval because of where it came from): "Trust this
    /// folder" is offered.
    pub untrusted: bool,
}

/// The actions for the cursor range `range` (a point when empty).
pub fn code_actions(doc: &Document, range: TextRange, state: DocumentState) -> Vec<CodeAction> {
    let mut out = Vec::new();
    placeholder_actions(doc, range, &mut out);
    quick_fixes(doc, range, &mut out);
    compact_action(doc, range, state, &mut out);
    undo_compaction_action(doc, range, state, &mut out);
    document_actions(doc, state, &mut out);
    out
}

fn command(title: &str, kind: ActionKind, name: &'static str, args: Vec<Value>) -> CodeAction {
    CodeAction {
        title: title.to_owned(),
        kind,
        edit: None,
        command: Some(Command { name, args }),
    }
}

fn placeholder_actions(doc: &Document, range: TextRange, out: &mut Vec<CodeAction>) {
    let Some(NodeAt::Segment(_, segment)) = doc.node_at(range.start) else {
        return;
    };
    let SegmentKind::ToolResult(result) = &segment.kind else {
        return;
    };
    let id = json!(result.tool_use_id);
    let empty = result
        .fence
        .as_ref()
        .is_some_and(|f| doc.slice(f.content).trim().is_empty());
    match result.suffix.as_ref().and_then(|s| s.status()) {
        Some(Status::Pending) => {
            out.push(command(
                &format!("Approve `{}`", result.tool_use_id),
                ActionKind::QuickFix,
                "flemma.approve",
                vec![id.clone()],
            ));
            out.push(command(
                &format!("Reject `{}`", result.tool_use_id),
                ActionKind::QuickFix,
                "flemma.reject",
                vec![id],
            ));
        }
        Some(Status::Approved) if empty && super::job_id_of(result).is_none() => {
            out.push(command(
                &format!("Move `{}` to the background", result.tool_use_id),
                ActionKind::QuickFix,
                "flemma.background",
                vec![id.clone()],
            ));
            out.push(command(
                &format!("Execute `{}` now", result.tool_use_id),
                ActionKind::QuickFix,
                "flemma.execute",
                vec![id],
            ));
        }
        _ => {}
    }
}

fn quick_fixes(doc: &Document, range: TextRange, out: &mut Vec<CodeAction>) {
    for diagnostic in doc.diagnostics() {
        let touches = diagnostic.range.start <= range.end && range.start <= diagnostic.range.end;
        if !touches || diagnostic.code != DiagnosticCode::LegacyInlineRole {
            continue;
        }
        if let Some((edit, description)) = doc.split_legacy_marker(diagnostic.range) {
            out.push(CodeAction {
                title: capitalise(&description),
                kind: ActionKind::QuickFix,
                edit: Some(vec![edit]),
                command: None,
            });
        }
    }
    if let Some(frontmatter) = doc.frontmatter() {
        let inside = range.start < frontmatter.range.end;
        if inside && frontmatter.language == FrontmatterLanguage::Lua {
            out.extend(convert_lua(doc));
        }
    }
}

/// Replaces a Lua frontmatter with its Rhai translation, when the Lua is the declarative subset
/// the converter understands.
fn convert_lua(doc: &Document) -> Option<CodeAction> {
    let frontmatter = doc.frontmatter()?;
    if frontmatter.language != FrontmatterLanguage::Lua {
        return None;
    }
    let rhai = flemma_template::lua_frontmatter_to_rhai(doc.slice(frontmatter.code))?;
    let block = doc.in_line_ending(write::fenced("rhai", &rhai));
    Some(CodeAction {
        title: "Convert the Lua frontmatter to Rhai".to_owned(),
        kind: ActionKind::QuickFix,
        edit: Some(vec![TextEdit::replace(frontmatter.range, block)]),
        command: None,
    })
}

/// "Compact up to here" on any message but the system prompt and the last: `flemma.compact`
/// with the cursor's line (the messages after it are kept verbatim; docs/context.md).
fn compact_action(
    doc: &Document,
    range: TextRange,
    state: DocumentState,
    out: &mut Vec<CodeAction>,
) {
    let messages = doc.messages();
    let Some(index) = doc.message_index_at(range.start) else {
        return;
    };
    if state.busy
        || index + 1 >= messages.len()
        || messages[index].role == flemma_syntax::Role::System
    {
        return;
    }
    let line = doc.line_index().line_of(range.start);
    out.push(command(
        "Compact up to here (a summary replaces this message and those before it; the ones after stay)",
        ActionKind::Source,
        "flemma.compact",
        vec![json!(line)],
    ));
}

/// "Undo this compaction" on a compaction's summary: `flemma.compactUndo` with the cursor's
/// line (the turns its archive holds replace it, exactly as they were; docs/context.md).
fn undo_compaction_action(
    doc: &Document,
    range: TextRange,
    state: DocumentState,
    out: &mut Vec<CodeAction>,
) {
    let Some(index) = doc.message_index_at(range.start) else {
        return;
    };
    let message = &doc.messages()[index];
    let summary = message.role == flemma_syntax::Role::You
        && doc.slice(message.body).starts_with(write::COMPACTED_MARKER);
    if state.busy || !summary {
        return;
    }
    let line = doc.line_index().line_of(range.start);
    out.push(command(
        "Undo this compaction (the turns it replaced come back, exactly as they were)",
        ActionKind::Source,
        "flemma.compactUndo",
        vec![json!(line)],
    ));
}

fn document_actions(doc: &Document, state: DocumentState, out: &mut Vec<CodeAction>) {
    if state.busy {
        out.push(command(
            "Cancel the request",
            ActionKind::Source,
            "flemma.cancel",
            vec![],
        ));
    } else {
        out.push(command("Send", ActionKind::Source, "flemma.send", vec![]));
    }
    if state.untrusted {
        out.push(command(
            "Trust this folder (its chats' frontmatter may then widen what they do; docs/security.md)",
            ActionKind::QuickFix,
            "flemma.trustFolder",
            vec![],
        ));
    }
    let pending = doc.placeholders(Some(Status::Pending)).len();
    if pending > 0 {
        out.push(command(
            &format!("Approve all ({pending} pending)"),
            ActionKind::Source,
            "flemma.approveAll",
            vec![],
        ));
    }
    let fmt = doc.format_edits();
    if !fmt.is_empty() {
        out.push(CodeAction {
            title: format!(
                "Normalise the file ({} change(s), as `flemmad fmt`)",
                fmt.len()
            ),
            kind: ActionKind::Source,
            edit: Some(fmt.into_iter().map(|(e, _)| e).collect()),
            command: None,
        });
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::fixture::cursor;

    fn actions(fixture: &str, state: DocumentState) -> (String, Vec<CodeAction>) {
        let (text, offset) = cursor(fixture);
        let doc = flemma_syntax::parse(text.as_str());
        let found = code_actions(&doc, TextRange::empty(offset), state);
        (text, found)
    }

    fn titles(actions: &[CodeAction]) -> Vec<&str> {
        actions.iter().map(|a| a.title.as_str()).collect()
    }

    const PENDING: &str = r#"@Assistant:
**Tool Use:** `bash` (`t1`)
```json
{"command": "ls", "label": "list"}
```

@You:
**Tool Result:** `t1` (pending)
```
$0```
"#;

    #[test]
    fn a_pending_placeholder_offers_approve_and_reject() {
        let (_, found) = actions(PENDING, DocumentState::default());
        assert_eq!(
            titles(&found),
            [
                "Approve `t1`",
                "Reject `t1`",
                "Send",
                "Approve all (1 pending)"
            ]
        );
        assert_eq!(
            found[0].command,
            Some(Command {
                name: "flemma.approve",
                args: vec![json!("t1")]
            })
        );
        assert_eq!(found[1].command.as_ref().unwrap().name, "flemma.reject");
    }

    #[test]
    fn a_message_before_the_last_offers_to_compact_up_to_it() {
        let chat = "@You:\none\n\n@Assistant:\nfi$0rst\n\n@You:\ntwo\n";
        let (_, found) = actions(chat, DocumentState::default());
        assert_eq!(
            found[0].command,
            Some(Command {
                name: "flemma.compact",
                args: vec![json!(4)]
            })
        );
        let last = "@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntw$0o\n";
        let (_, found) = actions(last, DocumentState::default());
        assert!(found.iter().all(|a| {
            a.command
                .as_ref()
                .is_none_or(|c| c.name != "flemma.compact")
        }));
    }

    #[test]
    fn a_compaction_summary_offers_its_undo() {
        let chat = "@You:\n<!-- flemma:compacted archive=\"/s/1.chat\" sha256=\"ab\" from=\"0\" -->\nThe 2 messages before this one were compacted.\n\nWe d$0id X.\n\n@You:\nnext\n";
        let (_, found) = actions(chat, DocumentState::default());
        let undo = found.iter().find_map(|a| {
            a.command
                .as_ref()
                .filter(|c| c.name == "flemma.compactUndo")
        });
        assert_eq!(
            undo,
            Some(&Command {
                name: "flemma.compactUndo",
                args: vec![json!(4)]
            })
        );
        // Not on another message, nor while the engine works on the chat.
        let elsewhere = chat.replace("$0", "").replace("next", "ne$0xt");
        let busy = DocumentState {
            busy: true,
            ..DocumentState::default()
        };
        for (text, state) in [(elsewhere.as_str(), DocumentState::default()), (chat, busy)] {
            let (_, found) = actions(text, state);
            assert!(found.iter().all(|a| {
                a.command
                    .as_ref()
                    .is_none_or(|c| c.name != "flemma.compactUndo")
            }));
        }
    }

    #[test]
    fn a_running_tool_offers_background_and_execute_and_a_busy_document_cancel() {
        let running = PENDING.replace("(pending)", "(approved)");
        let busy = DocumentState {
            busy: true,
            ..DocumentState::default()
        };
        let (_, found) = actions(&running, busy);
        let names: Vec<&str> = found
            .iter()
            .filter_map(|a| a.command.as_ref().map(|c| c.name))
            .collect();
        assert_eq!(
            names,
            ["flemma.background", "flemma.execute", "flemma.cancel"]
        );
    }

    #[test]
    fn an_untrusted_chat_that_loses_something_offers_to_trust_its_folder() {
        let untrusted = DocumentState {
            untrusted: true,
            ..DocumentState::default()
        };
        let (_, found) = actions("@You:\nhi$0\n", untrusted);
        let trust = found
            .iter()
            .find(|a| a.title.starts_with("Trust this folder"))
            .unwrap_or_else(|| panic!("{found:?}"));
        assert_eq!(
            trust.command,
            Some(Command {
                name: "flemma.trustFolder",
                args: vec![]
            })
        );
        let (_, found) = actions("@You:\nhi$0\n", DocumentState::default());
        assert!(!found.iter().any(|a| a.title.starts_with("Trust")));
    }

    #[test]
    fn a_legacy_marker_is_split_by_its_quick_fix() {
        let (text, found) = actions("@You:\nhi\n@Assis$0tant: hello\n", DocumentState::default());
        let split = found
            .iter()
            .find(|a| a.kind == ActionKind::QuickFix)
            .unwrap();
        let out = flemma_syntax::apply_edits(&text, split.edit.as_ref().unwrap()).unwrap();
        assert_eq!(out, "@You:\nhi\n@Assistant:\nhello\n");
        assert!(
            found
                .iter()
                .any(|a| a.title.starts_with("Normalise the file"))
        );
    }

    #[test]
    fn lua_frontmatter_converts_to_rhai() {
        let fixture = "```lua\n$0flemma.opt.thinking = \"low\"\n```\n@You:\nhi\n";
        let (text, found) = actions(fixture, DocumentState::default());
        let convert = found
            .iter()
            .find(|a| a.title.contains("Lua"))
            .unwrap_or_else(|| panic!("{found:?}"));
        let out = flemma_syntax::apply_edits(&text, convert.edit.as_ref().unwrap()).unwrap();
        assert_eq!(
            out,
            "```rhai\nflemma.opt.thinking = \"low\";\n```\n@You:\nhi\n"
        );
    }
}
