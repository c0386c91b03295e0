//! Review before approval in the editors and on the command line (issue 35, docs/review.md): a
//! pending `write` or `edit` call's proposal (`flemma/proposal`), new content for it written
//! back into the call's input (`flemma/reviseProposal`), and some of its hunks approved, the
//! others rejected with a reason (`flemma/approveHunks`, `flemmad approve --hunks`).
//!
//! Everything is computed against the file as it is on disk now (as `status --diff` and the
//! hover are) from the chat's text as the caller sees it (an editor's buffer, else the file).

use std::path::Path;

use flemma_protocol::engine::{ProposalHunk, ProposalResult};
use flemma_tools::review::ProposedChange;
use serde_json::Value;

/// A pending `write` or `edit` call and the change it would make now.
#[derive(Debug)]
pub struct Pending {
    pub tool: String,
    pub input: Value,
    pub change: ProposedChange,
}

/// The pending call `tool_id` of the chat `path` whose text is `text`, with its change; `Err`
/// says why there is none (not pending, not a `write`/`edit`, the tool's own refusal).
pub fn pending(
    path: &Path,
    text: String,
    tool_id: &str,
    context: &crate::process_context::ProcessContext,
) -> Result<Pending, String> {
    let loaded = crate::chat::load_text(
        "proposal",
        flemma_ide::Purpose::Inspect,
        path,
        text,
        context,
    )
    .map_err(|error| match error {
        crate::chat::LoadError::Unreadable { error, .. } => format!("{error:#}"),
        crate::chat::LoadError::Failed { message, .. } => message,
    })?;
    let doc = &*loaded.analysis.document;
    let unresolved = flemma_ide::actions::awaits_approval(doc, tool_id);
    let Some((_, _, tool_use)) = doc.tool_use(tool_id).filter(|_| unresolved) else {
        let pending = flemma_ide::actions::pending_ids(doc);
        return Err(format!(
            "`{tool_id}` is no tool call waiting for approval in {} (pending: {}): only a pending call's change can be reviewed",
            path.display(),
            if pending.is_empty() {
                "none".to_owned()
            } else {
                pending.join(", ")
            }
        ));
    };
    let input: Value = tool_use
        .fence
        .as_ref()
        .and_then(|fence| serde_json::from_str(doc.slice(fence.content)).ok())
        .filter(Value::is_object)
        .ok_or_else(|| format!("the input of `{tool_id}` is not a JSON object"))?;
    let mut setup = crate::tool_setup::ToolSetup::for_chat(context, &loaded.analysis, path)
        .map_err(|error| format!("the tools of {} cannot be set up: {error}", path.display()))?;
    // Against the disk, as every diff of a proposal (an editor's unsaved buffer is not seen).
    setup.ctx.editor = None;
    match flemma_tools::review::proposed_change(&tool_use.name, &input, &setup.ctx) {
        None => Err(format!(
            "`{tool_id}` is a `{}` call: only `write` and `edit` calls have a change to review (what other tools do cannot be known before they run)",
            tool_use.name
        )),
        Some(Err(why)) => Err(format!("the change of `{tool_id}` cannot be shown: {why}")),
        Some(Ok(change)) => Ok(Pending {
            tool: tool_use.name.clone(),
            input,
            change,
        }),
    }
}

/// The answer of `flemma/proposal`.
pub fn result(pending: &Pending) -> ProposalResult {
    let change = &pending.change;
    ProposalResult {
        tool: pending.tool.clone(),
        shown: change.shown.clone(),
        path: change.path.display().to_string(),
        before: change.before.clone(),
        after: change.after.clone(),
        diff: change.unified_diff(),
        hunks: change
            .hunks()
            .into_iter()
            .map(|hunk| ProposalHunk {
                number: u32::try_from(hunk.number).unwrap_or(u32::MAX),
                header: hunk.header,
                diff: hunk.diff,
            })
            .collect(),
    }
}

/// The call's input written so that it leaves its file as `content` (`flemma/reviseProposal`).
pub fn revised_input(pending: &Pending, content: &str) -> Result<Value, String> {
    flemma_tools::review::input_for(&pending.tool, &pending.input, &pending.change, content)
}

/// Some hunks approved: the input that applies those only, and the note its result ends
/// with (which hunks were rejected, and why). Refuses no hunk at all, a hunk that does not
/// exist, and every hunk (that is an approval of the whole call).
pub fn approved_in_part(
    pending: &Pending,
    hunks: &[u32],
    reason: Option<&str>,
) -> Result<(Value, String), String> {
    let total = pending.change.hunks().len();
    let mut approved: Vec<usize> = hunks.iter().map(|n| *n as usize).collect();
    approved.sort_unstable();
    approved.dedup();
    if approved.is_empty() {
        return Err(
            "no hunk named: name the hunks to approve (numbered from 1, as the proposal shows them), or reject the whole call"
                .into(),
        );
    }
    let narrowed = pending.change.narrowed(&approved)?;
    if approved.len() == total {
        return Err(format!(
            "hunks {} are every hunk of the change: approve the call itself",
            list(&approved)
        ));
    }
    let input = revised_input(pending, &narrowed)?;
    let rejected: Vec<usize> = (1..=total).filter(|n| !approved.contains(n)).collect();
    let why = match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(reason) => format!(" User feedback: {reason}"),
        None => String::new(),
    };
    let note = format!(
        "The user approved only part of this change to {}: hunk{} {} of {total} applied; hunk{} {} rejected and not applied (the file does not have them).{why}",
        pending.change.shown,
        plural(approved.len()),
        list(&approved),
        plural(rejected.len()),
        list(&rejected),
    );
    Ok((input, note))
}

fn list(numbers: &[usize]) -> String {
    numbers
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Records that the pending call `tool_id` of `chat` runs `pending` narrowed to `hunks` (what
/// [`crate::reviewed::check`] finds when it runs); returns the note.
pub fn record_in_part(
    dirs: &crate::user_dirs::UserDirs,
    chat: &Path,
    tool_id: &str,
    pending: &Pending,
    hunks: &[u32],
    reason: Option<&str>,
) -> Result<String, String> {
    let (input, note) = approved_in_part(pending, hunks, reason)?;
    crate::reviewed::approve_in_part(
        dirs,
        chat,
        tool_id,
        &pending.change.path,
        input,
        note.clone(),
    )?;
    Ok(note)
}
