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
/// open here; whether it exists is the engine's to say). `~/…` is under `home`. A relative path
/// is first matched against the open documents (the one whose path ends with it): Helix sends
/// `%{buffer_name}` relative to its working directory, which need not be the workspace root
/// (`cd repo/notes && hx talk.chat` sends `talk.chat`, the root being `repo`); then it is taken
/// relative to `root`.
pub(crate) fn resolve_document<'a>(
    method: &str,
    argument: &str,
    open: impl Iterator<Item = &'a str> + Clone,
    root: Option<&Path>,
    home: Option<&Path>,
) -> Result<String, RequestError> {
    if let Some(uri) = open.clone().find(|uri| *uri == argument) {
        return Ok(uri.to_owned());
    }
    let open_path = |uri: &str| uri_to_path(uri).map(|p| normalize(&p));
    let expanded = match (argument.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest).to_string_lossy().into_owned(),
        _ => argument.to_owned(),
    };
    let relative = Path::new(&expanded);
    if !expanded.contains("://") && relative.is_relative() {
        // `./` and leading `../` dropped: `../talk.chat` from `repo/notes` is some `talk.chat`
        // (which one, the open documents tell).
        let suffix: std::path::PathBuf = normalize(relative)
            .components()
            .skip_while(|c| matches!(c, std::path::Component::ParentDir))
            .collect();
        let matching: Vec<&str> = open
            .clone()
            .filter(|uri| {
                !suffix.as_os_str().is_empty()
                    && open_path(uri).is_some_and(|p| p.ends_with(&suffix))
            })
            .collect();
        let under_root = root.map(|r| normalize(&r.join(relative)));
        match matching.as_slice() {
            [one] => return Ok((*one).to_owned()),
            [] => {}
            several => {
                if let Some(uri) = several
                    .iter()
                    .find(|uri| under_root.is_some() && open_path(uri) == under_root)
                {
                    return Ok((*uri).to_owned());
                }
                let paths: Vec<String> = several
                    .iter()
                    .filter_map(|uri| uri_to_path(uri))
                    .map(|p| p.display().to_string())
                    .collect();
                return Err(RequestError::invalid_params(format!(
                    "{method}: `{argument}` could be any of the open documents {}; name it by its full path",
                    paths.join(", ")
                )));
            }
        }
    }
    let wanted = document_path(method, &expanded, root)?;
    if let Some(uri) = open
        .into_iter()
        .find(|uri| open_path(uri).as_ref() == Some(&wanted))
    {
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
            None,
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
        // Without a root, a relative name still finds the open document that ends with it; any
        // other is refused.
        let no_root = resolve_document("flemma/send", "x.chat", OPEN.iter().copied(), None, None);
        assert_eq!(no_root.unwrap(), OPEN[1]);
        let no_root =
            resolve_document("flemma/send", "nope.chat", OPEN.iter().copied(), None, None);
        assert!(no_root.unwrap_err().message.contains("absolute path"));
    }

    #[test]
    fn relative_names_match_the_open_documents_and_tilde_is_home() {
        // Helix started in /repo/notes (the workspace root is the git root /repo).
        let open = [
            "file:///repo/notes/talk.chat",
            "file:///repo/a/t.chat",
            "file:///repo/b/t.chat",
            "file:///home/u/chats/x.chat",
        ];
        let resolve = |arg: &str| {
            resolve_document(
                "flemma/send",
                arg,
                open.iter().copied(),
                Some(Path::new("/repo")),
                Some(Path::new("/home/u")),
            )
        };
        assert_eq!(resolve("talk.chat").unwrap(), open[0]);
        assert_eq!(resolve("./talk.chat").unwrap(), open[0]);
        assert_eq!(resolve("notes/talk.chat").unwrap(), open[0]);
        assert_eq!(resolve("../a/t.chat").unwrap(), open[1]);
        assert_eq!(resolve("~/chats/x.chat").unwrap(), open[3]);
        // Two open documents end with the name: one under the root by that name wins, else
        // the user is asked for the full path.
        assert_eq!(resolve("b/t.chat").unwrap(), open[2]);
        let err = resolve("t.chat").unwrap_err().message;
        assert!(
            err.contains("/repo/a/t.chat")
                && err.contains("/repo/b/t.chat")
                && err.contains("full path"),
            "{err}"
        );
        // Not open: the file under the root, for the engine to find (or not).
        assert_eq!(resolve("other.chat").unwrap(), "file:///repo/other.chat");
    }
}
