//! `textDocument/codeAction`: "Approve" and "Reject" on a pending placeholder, carrying the
//! `flemma.approve` / `flemma.reject` commands (Helix resolves nothing lazily: the command is
//! in the action).

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, CodeActionResponse, Command,
};

use super::{HandlerResult, document};
use crate::session::Session;
use crate::{features_shim, from_proto};

pub(crate) fn handle(
    session: &mut Session,
    params: CodeActionParams,
) -> HandlerResult<Option<CodeActionResponse>> {
    let uri = params.text_document.uri;
    let doc = document(session, &uri)?;
    let range = from_proto::range(&doc.index, doc.text(), params.range, session.encoding);
    let calls = features_shim::pending_calls_in(&doc.doc, range);
    let action = |title: String, command: &str, arguments: Vec<serde_json::Value>| {
        CodeActionOrCommand::CodeAction(CodeAction {
            title: title.clone(),
            kind: Some(CodeActionKind::QUICKFIX),
            command: Some(Command::new(title, command.to_owned(), Some(arguments))),
            ..Default::default()
        })
    };
    let mut actions = Vec::new();
    for call in &calls {
        let args = vec![uri.as_str().into(), call.tool_use_id.as_str().into()];
        actions.push(action(
            format!("Approve `{}` ({})", call.tool_name, call.tool_use_id),
            "flemma.approve",
            args.clone(),
        ));
        actions.push(action(
            format!("Reject `{}` ({})", call.tool_name, call.tool_use_id),
            "flemma.reject",
            args,
        ));
    }
    if doc
        .doc
        .placeholders(Some(flemma_syntax::Status::Pending))
        .len()
        > 1
        && !calls.is_empty()
    {
        actions.push(action(
            "Approve all pending tool calls".into(),
            "flemma.approveAll",
            vec![uri.as_str().into()],
        ));
    }
    Ok(Some(actions))
}
