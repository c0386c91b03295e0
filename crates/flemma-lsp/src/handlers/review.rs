//! "Review changes" (issue 35, docs/review.md): a code action on a pending `write` or `edit`
//! call — its `**Tool Use:**` block or its `(pending)` placeholder — whose command,
//! `flemma.proposal [uri, toolId]`, answers the call's proposal (`flemma/proposal`: the file
//! now and after, the diff, its numbered hunks). The editors' plugins open it as a diff (VS
//! Code's diff editor between the file and a `flemma-proposal:` document, Neovim a diff split;
//! both save an edited proposal back with `flemma.reviseProposal`); another editor gets the
//! proposal as the command's answer, and its hover shows the diff.

use flemma_syntax::{Document, Status, TextRange};
use lsp_types::{CodeAction, CodeActionKind, CodeActionOrCommand, Command};
use serde_json::Value;

/// The tools whose pending calls have a proposal (`flemma_tools::review::proposed_change`).
const REVIEWED: [&str; 2] = ["write", "edit"];

/// The command of the action (`flemma/proposal`'s).
const PROPOSAL: &str = "flemma.proposal";

/// A "Review changes" action for each pending `write` or `edit` call whose tool use or
/// placeholder `range` touches.
pub(crate) fn review_actions(
    doc: &Document,
    range: TextRange,
    uri: &str,
) -> Vec<CodeActionOrCommand> {
    let touches = |r: TextRange| r.start <= range.end && range.start <= r.end;
    let pending_placeholders = doc.placeholders(Some(Status::Pending));
    let unresolved = doc.unresolved_tool_uses();
    let mut ids: Vec<&str> = Vec::new();
    for (_, segment, tool_use) in doc.messages().iter().flat_map(|m| {
        m.tool_uses()
            .map(move |(segment, tool_use)| (m, segment, tool_use))
    }) {
        if !REVIEWED.contains(&tool_use.name.as_str()) {
            continue;
        }
        let id = tool_use.id.as_str();
        let placeholder = pending_placeholders
            .iter()
            .find(|(_, _, result)| result.tool_use_id == id)
            .map(|(_, segment, _)| segment.range);
        let waiting = placeholder.is_some() || unresolved.iter().any(|(_, _, u)| u.id == id);
        if waiting
            && (touches(segment.range) || placeholder.is_some_and(touches))
            && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    ids.into_iter()
        .map(|id| {
            CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("Review changes of `{id}`"),
                kind: Some(CodeActionKind::QUICKFIX),
                command: Some(Command::new(
                    "Review changes".to_owned(),
                    PROPOSAL.to_owned(),
                    Some(vec![Value::from(uri), Value::from(id)]),
                )),
                ..Default::default()
            })
        })
        .collect()
}
