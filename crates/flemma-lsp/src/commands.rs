//! How a `flemma/*` request or `flemma.*` command names its document in a language server
//! session: an open document's URI as it is, else a `file://` URI or a path (relative paths
//! against the workspace root) compared with the open documents by path. The requests
//! themselves are `flemma-protocol`'s ([`flemma_protocol::methods::FlemmaRequest`]).

use std::path::Path;

use flemma_protocol::document::{document_path, normalize, path_to_uri, uri_to_path};
use flemma_protocol::error::RequestError;

/// `flemma.trustFolder [uri]`: trust the folder of the chat (`flemmad trust DIR`). Only an
/// editor's user gives it: trusting a folder widens what its chats may do, so it is never a
/// `flemma/*` request another program (or a sandboxed tool) can make on the daemon's API
/// (docs/security.md).
pub(crate) const TRUST_FOLDER: &str = "flemma.trustFolder";

/// Every command, as advertised in `executeCommandProvider.commands`: the command of every
/// `flemma/*` request, and the editor-only [`TRUST_FOLDER`].
pub(crate) fn commands() -> Vec<String> {
    let mut commands: Vec<String> = flemma_protocol::methods::commands().collect();
    commands.push(TRUST_FOLDER.to_owned());
    commands
}

/// The URI of the document `argument` names for `method`: an open document's URI (matched as
/// written, else by path), or the `file://` URI of the path it names (a chat no editor has
/// open here; whether it exists is the engine's to say).
pub(crate) fn resolve_document<'a>(
    method: &str,
    argument: &str,
    open: impl Iterator<Item = &'a str> + Clone,
    root: Option<&Path>,
) -> Result<String, RequestError> {
    if let Some(uri) = open.clone().find(|uri| *uri == argument) {
        return Ok(uri.to_owned());
    }
    let wanted = document_path(method, argument, root)?;
    let same = |uri: &&str| uri_to_path(uri).is_some_and(|path| normalize(&path) == wanted);
    if let Some(uri) = open.into_iter().find(same) {
        return Ok(uri.to_owned());
    }
    Ok(path_to_uri(&wanted))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const OPEN: &[&str] = &[
        "file:///work/a%20b/t.chat",
        "file:///work/x.chat",
        "untitled:1",
    ];

    fn resolve(arg: &str) -> Result<String, RequestError> {
        resolve_document(
            "flemma/send",
            arg,
            OPEN.iter().copied(),
            Some(Path::new("/work")),
        )
    }

    #[test]
    fn every_request_is_a_command_and_trusting_a_folder_is_only_one() {
        let commands = commands();
        for method in flemma_protocol::methods::METHODS {
            let command = flemma_protocol::methods::command_of(method).unwrap();
            assert!(commands.contains(&command), "{command}");
        }
        assert!(commands.iter().any(|c| c == TRUST_FOLDER));
        assert_eq!(commands.len(), flemma_protocol::methods::METHODS.len() + 1);
        assert!(!flemma_protocol::methods::METHODS.contains(&"flemma/trustFolder"));
    }

    #[test]
    fn documents_resolve_by_uri_absolute_or_relative_path() {
        assert_eq!(resolve("file:///work/x.chat").unwrap(), OPEN[1]);
        assert_eq!(resolve("untitled:1").unwrap(), OPEN[2]);
        assert_eq!(resolve("a b/t.chat").unwrap(), OPEN[0]);
        assert_eq!(resolve("./a b/../x.chat").unwrap(), OPEN[1]);
        assert_eq!(resolve("/work/x.chat").unwrap(), OPEN[1]);
        // A document not open here is named by its file URI (the engine checks it exists).
        assert_eq!(resolve("nope.chat").unwrap(), "file:///work/nope.chat");
        assert!(resolve("file://elsewhere/x.chat").is_err());
        let no_root = resolve_document("flemma/send", "x.chat", OPEN.iter().copied(), None);
        assert!(no_root.unwrap_err().message.contains("absolute path"));
    }
}
