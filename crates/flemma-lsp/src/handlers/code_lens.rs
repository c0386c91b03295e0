//! `textDocument/codeLens`: "N files changed · Diff · Rewind" on each `@Assistant:` message
//! whose tool calls changed the project's files (`flemma_ide::features::code_lenses`, with the
//! counts the backend keeps from the checkpoints). Commands carry `[uri, …args]`.

use flemma_ide::features::code_lenses::change_lenses;
use lsp_types::{CodeLens, CodeLensParams, Command};
use serde_json::Value;

use super::{HandlerResult, document};
use crate::session::Session;
use crate::to_proto;

pub(crate) fn handle(
    session: &mut Session,
    params: CodeLensParams,
) -> HandlerResult<Option<Vec<CodeLens>>> {
    let uri = params.text_document.uri;
    // Checked first: an unknown document is an error, whatever the backend knows.
    document(session, &uri)?;
    let Some(changed) = session.backend.changed_files(uri.as_str()) else {
        return Ok(Some(Vec::new()));
    };
    let (open, syntax) = document(session, &uri)?;
    let lenses = change_lenses(syntax, &changed)
        .into_iter()
        .map(|lens| {
            let mut arguments = vec![Value::from(uri.as_str())];
            arguments.extend(lens.command.args);
            CodeLens {
                range: to_proto::range(&open.index, syntax.text(), lens.range, session.encoding),
                command: Some(Command::new(
                    lens.title,
                    lens.command.name.to_owned(),
                    Some(arguments),
                )),
                data: None,
            }
        })
        .collect();
    Ok(Some(lenses))
}
