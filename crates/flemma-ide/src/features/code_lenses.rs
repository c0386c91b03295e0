//! Code lenses: on each `@Assistant:` message whose tool calls changed the project's files,
//! "N files changed", "Diff" and "Rewind" (issue 35, docs/review.md). What each call changed
//! comes from the caller (the checkpoints, which this crate does not read): a map from tool
//! use id to the number of files that call changed.

use std::collections::HashMap;

use flemma_syntax::{Document, Role, TextRange};
use serde_json::json;

use super::code_actions::{ActionKind, CodeAction, Command};

/// A lens over `range` (a message's role line).
#[derive(Debug, Clone, PartialEq)]
pub struct CodeLens {
    pub range: TextRange,
    pub title: String,
    /// Its command, with the arguments after the document's uri.
    pub command: Command,
}

/// The lenses of `doc`, given how many files each call changed (`changed`, by tool use id;
/// calls that changed nothing are not in it). The files of an answer with several calls are
/// added up; "Diff" shows and "Rewind" goes back before its first call that changed files
/// (`flemma.changes [uri, toolId]`, `flemma.rewind [uri, toolId, files, chat]`: the files and
/// the chat).
pub fn change_lenses(doc: &Document, changed: &HashMap<String, usize>) -> Vec<CodeLens> {
    if changed.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for message in doc.messages() {
        let Some((first, files)) = message_changes(message, changed) else {
            continue;
        };
        let lens = |title: String, name: &'static str, args| CodeLens {
            range: message.role_line,
            title,
            command: Command { name, args },
        };
        out.push(lens(
            format!("{files} file{} changed", if files == 1 { "" } else { "s" }),
            "flemma.changes",
            vec![json!(first)],
        ));
        out.push(lens(
            "Diff".to_owned(),
            "flemma.changes",
            vec![json!(first)],
        ));
        out.push(lens(
            "Rewind".to_owned(),
            "flemma.rewind",
            vec![json!(first), json!(true), json!(true)],
        ));
    }
    out
}

/// The first call of an `@Assistant:` message that changed files, and how many files its
/// calls changed in all (`None` for any other message).
fn message_changes(
    message: &flemma_syntax::Message,
    changed: &HashMap<String, usize>,
) -> Option<(String, usize)> {
    if message.role != Role::Assistant {
        return None;
    }
    let mut first = None;
    let mut files = 0;
    for (_, tool_use) in message.tool_uses() {
        if let Some(count) = changed.get(&tool_use.id) {
            first.get_or_insert(tool_use.id.clone());
            files += count;
        }
    }
    Some((first?, files))
}

/// The lenses' "Rewind" as a code action, for editors without code lenses (Helix): on an
/// `@Assistant:` message whose calls changed files, the files and the chat back to before its
/// first such call (`flemma.rewind [uri, toolId, true, true]`). None while a request runs (a
/// rewind is refused then).
pub fn change_actions(
    doc: &Document,
    range: TextRange,
    changed: &HashMap<String, usize>,
    busy: bool,
) -> Vec<CodeAction> {
    let Some(index) = doc.message_index_at(range.start).filter(|_| !busy) else {
        return Vec::new();
    };
    let Some((first, files)) = message_changes(&doc.messages()[index], changed) else {
        return Vec::new();
    };
    vec![CodeAction {
        title: format!(
            "Rewind to before this message (its {files} changed file{} and the chat after it)",
            if files == 1 { "" } else { "s" }
        ),
        kind: ActionKind::Source,
        edit: None,
        command: Some(Command {
            name: "flemma.rewind",
            args: vec![json!(first), json!(true), json!(true)],
        }),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_that_changed_files_gets_its_lenses() {
        let text = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `read` (`r1`)\n```json\n{}\n```\n\n**Tool Use:** `write` (`w1`)\n```json\n{}\n```\n\n**Tool Use:** `bash` (`b1`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `r1`\n```\n```\n\n@Assistant:\nNo calls.\n\n@You:\nMore.\n\n@Assistant:\n**Tool Use:** `bash` (`b2`)\n```json\n{}\n```\n";
        let doc = flemma_syntax::parse(text.to_owned());
        let changed: HashMap<String, usize> = [
            ("w1".to_owned(), 1),
            ("b1".to_owned(), 2),
            ("zz".to_owned(), 9),
        ]
        .into_iter()
        .collect();
        let lenses = change_lenses(&doc, &changed);
        let titles: Vec<&str> = lenses.iter().map(|l| l.title.as_str()).collect();
        assert_eq!(titles, ["3 files changed", "Diff", "Rewind"]);
        assert_eq!(doc.slice(lenses[0].range), "@Assistant:\n");
        assert_eq!(lenses[0].range.start, text.find("@Assistant:").unwrap_or(0));
        assert_eq!(lenses[1].command.name, "flemma.changes");
        assert_eq!(lenses[1].command.args, vec![json!("w1")]);
        assert_eq!(lenses[2].command.name, "flemma.rewind");
        assert_eq!(
            lenses[2].command.args,
            vec![json!("w1"), json!(true), json!(true)]
        );
        let one: HashMap<String, usize> = [("b2".to_owned(), 1)].into_iter().collect();
        let lenses = change_lenses(&doc, &one);
        assert_eq!(lenses[0].title, "1 file changed");
        assert_eq!(
            lenses[0].range.start,
            text.rfind("@Assistant:").unwrap_or(0)
        );
        assert!(change_lenses(&doc, &HashMap::new()).is_empty());
    }

    #[test]
    fn the_rewind_is_a_code_action_on_the_message_that_changed_files() {
        let text = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `write` (`w1`)\n```json\n{}\n```\n\n@You:\n**Tool Result:** `w1`\n```\nok\n```\n\n@Assistant:\nDone.\n";
        let doc = flemma_syntax::parse(text.to_owned());
        let changed: HashMap<String, usize> = [("w1".to_owned(), 2)].into_iter().collect();
        let at = |needle: &str| {
            let start = text.find(needle).unwrap_or(0);
            TextRange::new(start, start)
        };
        let actions = change_actions(&doc, at("**Tool Use:**"), &changed, false);
        assert_eq!(actions.len(), 1);
        assert_eq!(
            actions[0].title,
            "Rewind to before this message (its 2 changed files and the chat after it)"
        );
        let command = actions[0]
            .command
            .as_ref()
            .map(|c| (c.name, c.args.clone()));
        assert_eq!(
            command,
            Some(("flemma.rewind", vec![json!("w1"), json!(true), json!(true)]))
        );
        assert!(change_actions(&doc, at("Done."), &changed, false).is_empty());
        assert!(change_actions(&doc, at("Go."), &changed, false).is_empty());
        assert!(change_actions(&doc, at("**Tool Use:**"), &changed, true).is_empty());
    }
}
