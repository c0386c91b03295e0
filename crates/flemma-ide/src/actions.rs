//! The edits behind approving and rejecting tool calls (`flemmad approve` / `reject`, the
//! `flemma.approve` / `flemma.reject` commands of the language server): a `pending` placeholder's
//! status is rewritten in place with its meta kept; a rejection with a reason becomes an error
//! result whose fence holds `User feedback: <reason>` (chat-format.md §7.2).

use flemma_syntax::{Document, SegmentKind, Status, TextEdit};

/// Why a placeholder cannot be approved or rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    #[error("there is no tool result placeholder for `{tool_id}` in this chat{}", list(.pending))]
    Unknown {
        tool_id: String,
        pending: Vec<String>,
    },
    #[error("the tool call `{tool_id}` is not waiting for approval: {state}{}", list(.pending))]
    NotPending {
        tool_id: String,
        /// `its status is `approved`` or `it already has its result`.
        state: String,
        pending: Vec<String>,
    },
    #[error("no tool call in this chat waits for approval")]
    NothingPending,
}

fn list(pending: &[String]) -> String {
    if pending.is_empty() {
        "; no tool call waits for approval".to_owned()
    } else {
        format!(
            "; waiting for approval: {}",
            pending
                .iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The ids of the `pending` placeholders, in document order.
pub fn pending_ids(doc: &Document) -> Vec<String> {
    doc.placeholders(Some(Status::Pending))
        .into_iter()
        .map(|(_, _, result)| result.tool_use_id.clone())
        .collect()
}

/// Whether the call `tool_id` still waits for the user: it has no result yet, or its result is
/// the `pending` placeholder. (What a proposal can be reviewed or revised for.)
pub fn awaits_approval(doc: &Document, tool_id: &str) -> bool {
    doc.unresolved_tool_uses()
        .iter()
        .any(|(_, _, tool_use)| tool_use.id == tool_id)
        || check_pending(doc, tool_id).is_ok()
}

/// Checks that `tool_id` has a `pending` placeholder.
pub fn check_pending(doc: &Document, tool_id: &str) -> Result<(), ActionError> {
    let Some((_, _, result)) = doc.tool_result(tool_id) else {
        return Err(ActionError::Unknown {
            tool_id: tool_id.to_owned(),
            pending: pending_ids(doc),
        });
    };
    let state = match result.suffix.as_ref().and_then(|s| s.status()) {
        Some(Status::Pending) => return Ok(()),
        Some(status) => format!("its status is `{status}`"),
        None => "it already has its result".to_owned(),
    };
    Err(ActionError::NotPending {
        tool_id: tool_id.to_owned(),
        state,
        pending: pending_ids(doc),
    })
}

fn placeholder_gone(doc: &Document, tool_id: &str) -> ActionError {
    ActionError::Unknown {
        tool_id: tool_id.to_owned(),
        pending: pending_ids(doc),
    }
}

/// The edits approving each of `tool_ids` (all must be pending; nothing is edited otherwise).
pub fn approve(doc: &Document, tool_ids: &[String]) -> Result<Vec<TextEdit>, ActionError> {
    let mut edits = Vec::with_capacity(tool_ids.len());
    for tool_id in tool_ids {
        check_pending(doc, tool_id)?;
        if edits.iter().any(|(id, _)| id == tool_id) {
            continue;
        }
        let edit = doc
            .set_tool_result_status(tool_id, Some(Status::Approved))
            .ok_or_else(|| placeholder_gone(doc, tool_id))?;
        edits.push((tool_id.clone(), edit));
    }
    Ok(edits.into_iter().map(|(_, edit)| edit).collect())
}

/// Every pending id and the edits approving them.
pub fn approve_all(doc: &Document) -> Result<(Vec<String>, Vec<TextEdit>), ActionError> {
    let ids = pending_ids(doc);
    if ids.is_empty() {
        return Err(ActionError::NothingPending);
    }
    let edits = approve(doc, &ids)?;
    Ok((ids, edits))
}

/// The edit rejecting `tool_id`: status `rejected`, or with a reason an error result holding
/// `User feedback: <reason>`.
pub fn reject(
    doc: &Document,
    tool_id: &str,
    reason: Option<&str>,
) -> Result<TextEdit, ActionError> {
    check_pending(doc, tool_id)?;
    match reason {
        None => doc.set_tool_result_status(tool_id, Some(Status::Rejected)),
        Some(reason) => doc.resolve_tool_result(
            tool_id,
            &format!("User feedback: {reason}"),
            true,
            "",
            is_compact(doc, tool_id),
        ),
    }
    .ok_or_else(|| placeholder_gone(doc, tool_id))
}

/// Whether the placeholder's fence follows its header without a blank line.
fn is_compact(doc: &Document, tool_id: &str) -> bool {
    doc.tool_result(tool_id)
        .and_then(
            |(_, segment, result)| match (&segment.kind, &result.fence) {
                (SegmentKind::ToolResult(_), Some(fence)) => {
                    Some(fence.open.start == result.header.end + 1)
                }
                _ => None,
            },
        )
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = "@You:\nrun\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"pwd\"}\n```\n\n@You:\n**Tool Result:** `t1` (pending)\n```\n```\n\n**Tool Result:** `t2` (pending)\n```\n```\n";

    fn apply(text: &str, edits: &[TextEdit]) -> String {
        flemma_syntax::apply_edits(text, edits).unwrap()
    }

    #[test]
    fn approving_rewrites_the_status_only() {
        let doc = flemma_syntax::parse(CHAT);
        let edits = approve(&doc, &["t2".to_owned()]).unwrap();
        let text = apply(CHAT, &edits);
        assert!(text.contains("`t2` (approved)"), "{text}");
        assert!(text.contains("`t1` (pending)"), "{text}");
        assert_eq!(text.len(), CHAT.len() + 1);
    }

    #[test]
    fn approve_all_takes_every_pending_call() {
        let doc = flemma_syntax::parse(CHAT);
        let (ids, edits) = approve_all(&doc).unwrap();
        assert_eq!(ids, ["t1", "t2"]);
        let text = apply(CHAT, &edits);
        assert!(!text.contains("(pending)"), "{text}");
        let again = flemma_syntax::parse(text.as_str());
        assert_eq!(approve_all(&again), Err(ActionError::NothingPending));
    }

    #[test]
    fn a_reason_becomes_user_feedback() {
        let doc = flemma_syntax::parse(CHAT);
        let edit = reject(&doc, "t1", Some("not now")).unwrap();
        let text = apply(CHAT, &[edit]);
        assert!(
            text.contains("**Tool Result:** `t1` (error)\n```\nUser feedback: not now\n```"),
            "{text}"
        );
        let doc = flemma_syntax::parse(CHAT);
        let text = apply(CHAT, &[reject(&doc, "t2", None).unwrap()]);
        assert!(text.contains("`t2` (rejected)"), "{text}");
    }

    #[test]
    fn unknown_and_resolved_ids_list_the_pending_ones() {
        let doc = flemma_syntax::parse(CHAT);
        let error = approve(&doc, &["t9".to_owned()]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no tool result placeholder for `t9` in this chat; waiting for approval: `t1`, `t2`"
        );
        let approved = apply(CHAT, &approve(&doc, &["t1".to_owned()]).unwrap());
        let doc = flemma_syntax::parse(approved.as_str());
        let error = reject(&doc, "t1", None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the tool call `t1` is not waiting for approval: its status is `approved`; waiting for approval: `t2`"
        );
    }

    #[test]
    fn a_call_awaits_approval_until_it_has_a_result() {
        let doc = flemma_syntax::parse(CHAT);
        assert!(awaits_approval(&doc, "t1"));
        let approved = apply(CHAT, &approve(&doc, &["t1".to_owned()]).unwrap());
        let doc = flemma_syntax::parse(approved.as_str());
        assert!(
            !awaits_approval(&doc, "t1"),
            "an approved call is no proposal"
        );
        assert!(awaits_approval(&doc, "t2"));
        assert!(!awaits_approval(&doc, "t9"));
        // A call with no placeholder yet (the model just wrote it) still waits.
        let unresolved = CHAT.split("\n@You:\n**Tool Result:**").next().unwrap();
        let doc = flemma_syntax::parse(unresolved);
        assert!(awaits_approval(&doc, "t1") && awaits_approval(&doc, "t2"));
    }
}
