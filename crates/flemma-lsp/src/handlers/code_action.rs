//! `textDocument/codeAction`: every action of `flemma_ide::features::code_actions` (approve and
//! reject on a pending placeholder, background/execute on a running tool, send or cancel,
//! approve all, convert Lua frontmatter, split a legacy marker, normalise the file, and the code
//! lenses' "Rewind" on an answer that changed files). Commands
//! carry `[uri, …args]`; edits are versioned workspace edits (Helix resolves nothing lazily:
//! everything is in the action).

use flemma_ide::features::code_actions::{self, ActionKind, DocumentState};
use flemma_ide::features::code_lenses::change_actions;
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, CodeActionResponse, Command,
};
use serde_json::Value;

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{from_proto, to_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: CodeActionParams,
) -> HandlerResult<Option<CodeActionResponse>> {
    let uri = params.text_document.uri;
    // Checked first: an unknown document is an error, whatever the backend knows.
    document(session, &uri)?;
    let changed = session.backend.changed_files(uri.as_str());
    let (open, syntax) = document(session, &uri)?;
    let range = from_proto::range(&open.index, syntax.text(), params.range, session.encoding);
    // From the last finished analysis: a code action never waits for an evaluation.
    let untrusted = session.analyses.untrusted(uri.as_str());
    let state = DocumentState {
        busy: open.engine.busy(),
        untrusted,
    };
    // "Review changes" on a pending `write` or `edit` (its own file: issue 35).
    let reviews = super::review::review_actions(syntax, range, uri.as_str());
    // The code lenses' "Rewind", for editors without lenses (Helix).
    let rewinds = changed.map_or_else(Vec::new, |changed| {
        change_actions(syntax, range, &changed, state.busy)
    });
    let actions = code_actions::code_actions(syntax, range, state)
        .into_iter()
        .chain(rewinds)
        .map(|action| {
            let command = action.command.map(|command| {
                let mut arguments = vec![Value::from(uri.as_str())];
                arguments.extend(command.args);
                Command::new(
                    action.title.clone(),
                    command.name.to_owned(),
                    Some(arguments),
                )
            });
            let edit = action.edit.map(|edits| {
                to_proto::workspace_edit(open, syntax.text(), &edits, session.encoding)
            });
            CodeActionOrCommand::CodeAction(CodeAction {
                title: action.title,
                kind: Some(match action.kind {
                    ActionKind::QuickFix => CodeActionKind::QUICKFIX,
                    ActionKind::Source => CodeActionKind::SOURCE,
                }),
                edit,
                command,
                ..Default::default()
            })
        })
        .chain(reviews)
        .collect();
    Ok(Some(actions))
}
