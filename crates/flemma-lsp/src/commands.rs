//! The `flemma.*` LSP commands (`workspace/executeCommand`) and their positional arguments.
//!
//! `flemma.approve`, `flemma.reject` and `flemma.approveAll` are answered by the session itself
//! (they edit the placeholder through `workspace/applyEdit`); the others go to the engine
//! through [`Backend`](crate::Backend).

use std::path::{Path, PathBuf};

use serde_json::Value;

use flemma_protocol::methods::FlemmaRequest;

use crate::backend::EngineCommand;

/// Every command, as advertised in `executeCommandProvider.commands`. Each is also a
/// `flemma/*` method of `rpc.sock`, except `flemma.trustFolder`: trusting a folder widens what
/// its chats may do, so it is never a request another program (or a sandboxed tool) can make
/// on the daemon's API (docs/security.md).
pub const COMMANDS: &[&str] = &[
    "flemma.send",
    "flemma.cancel",
    "flemma.approve",
    "flemma.reject",
    "flemma.approveAll",
    "flemma.background",
    "flemma.execute",
    "flemma.status",
    "flemma.jobs",
    "flemma.usage",
    "flemma.switch",
    "flemma.trustFolder",
];

/// A parsed command, its document resolved to an open document's URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Approve {
        uri: String,
        tool_id: String,
    },
    Reject {
        uri: String,
        tool_id: String,
        reason: Option<String>,
    },
    ApproveAll {
        uri: String,
    },
    /// Trust the folder of the chat (`flemmad trust DIR`).
    TrustFolder {
        uri: String,
    },
    Engine(EngineCommand),
}

impl Command {
    pub fn uri(&self) -> &str {
        match self {
            Command::Approve { uri, .. }
            | Command::Reject { uri, .. }
            | Command::ApproveAll { uri }
            | Command::TrustFolder { uri } => uri,
            Command::Engine(c) => c.uri(),
        }
    }
}

/// Parses `command` with its positional `arguments`; `resolve` turns the document argument (a
/// URI or a path, relative to the workspace root) into an open document's URI.
pub(crate) fn parse(
    command: &str,
    arguments: &[Value],
    resolve: impl Fn(&str) -> Result<String, String>,
) -> Result<Command, String> {
    let usage = match command {
        "flemma.send" | "flemma.cancel" | "flemma.approveAll" | "flemma.status" | "flemma.jobs"
        | "flemma.usage" | "flemma.trustFolder" => "[uri]",
        "flemma.switch" => "[uri, model]",
        "flemma.approve" | "flemma.background" | "flemma.execute" => "[uri, toolId]",
        "flemma.reject" => "[uri, toolId, reason?]",
        other => {
            return Err(format!(
                "unknown command `{other}`; flemmad knows {}",
                COMMANDS.join(", ")
            ));
        }
    };
    let string_at = |i: usize, name: &str| -> Result<String, String> {
        match arguments.get(i) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(other) => Err(format!(
                "`{command}` takes {usage}: argument {} ({name}) must be a non-empty string, got {other}",
                i + 1
            )),
            None => Err(format!(
                "`{command}` takes {usage}: argument {} ({name}) is missing",
                i + 1
            )),
        }
    };
    let uri = resolve(&string_at(0, "uri")?)?;
    Ok(match command {
        "flemma.send" => Command::Engine(EngineCommand::Send { uri }),
        "flemma.cancel" => Command::Engine(EngineCommand::Cancel { uri }),
        "flemma.status" => Command::Engine(EngineCommand::Status { uri }),
        "flemma.jobs" => Command::Engine(EngineCommand::Jobs { uri }),
        "flemma.usage" => Command::Engine(EngineCommand::Usage { uri }),
        "flemma.switch" => Command::Engine(EngineCommand::Switch {
            uri,
            model: string_at(1, "model")?,
        }),
        "flemma.approveAll" => Command::ApproveAll { uri },
        "flemma.trustFolder" => Command::TrustFolder { uri },
        "flemma.approve" => Command::Approve {
            uri,
            tool_id: string_at(1, "toolId")?,
        },
        "flemma.background" => Command::Engine(EngineCommand::Background {
            uri,
            tool_id: string_at(1, "toolId")?,
        }),
        "flemma.execute" => Command::Engine(EngineCommand::Execute {
            uri,
            tool_id: string_at(1, "toolId")?,
        }),
        _ => Command::Reject {
            uri,
            tool_id: string_at(1, "toolId")?,
            reason: match arguments.get(2) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.trim().is_empty() => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(format!(
                        "`flemma.reject` takes [uri, toolId, reason?]: the reason must be a string, got {other}"
                    ));
                }
            },
        },
    })
}

/// The command of a `flemma/*` request: the same [`Command`] its LSP command gives.
pub(crate) fn from_request(
    request: FlemmaRequest,
    resolve: impl Fn(&str) -> Result<String, String>,
) -> Result<Command, String> {
    use FlemmaRequest as R;
    Ok(match request {
        R::Send(p) => Command::Engine(EngineCommand::Send {
            uri: resolve(&p.uri)?,
        }),
        R::Cancel(p) => Command::Engine(EngineCommand::Cancel {
            uri: resolve(&p.uri)?,
        }),
        R::Status(p) => Command::Engine(EngineCommand::Status {
            uri: resolve(&p.uri)?,
        }),
        R::Jobs(p) => Command::Engine(EngineCommand::Jobs {
            uri: resolve(&p.uri)?,
        }),
        R::Usage(p) => Command::Engine(EngineCommand::Usage {
            uri: resolve(&p.uri)?,
        }),
        R::Switch(p) => Command::Engine(EngineCommand::Switch {
            uri: resolve(&p.uri)?,
            model: p.model,
        }),
        R::Background(p) => Command::Engine(EngineCommand::Background {
            uri: resolve(&p.uri)?,
            tool_id: p.tool_id,
        }),
        R::Execute(p) => Command::Engine(EngineCommand::Execute {
            uri: resolve(&p.uri)?,
            tool_id: p.tool_id,
        }),
        R::ApproveAll(p) => Command::ApproveAll {
            uri: resolve(&p.uri)?,
        },
        R::Approve(p) => Command::Approve {
            uri: resolve(&p.uri)?,
            tool_id: p.tool_id,
        },
        R::Reject(p) => Command::Reject {
            uri: resolve(&p.uri)?,
            tool_id: p.tool_id,
            reason: p.reason.filter(|r| !r.trim().is_empty()),
        },
    })
}

/// Finds the open document a command argument names: an open URI as is, else a `file:` URI or
/// a path compared by path. `~/…` is under `home`. A relative path is first matched against
/// the open documents (the one whose path ends with it): Helix sends `%{buffer_name}` relative
/// to its working directory, which need not be the workspace root (`cd repo/notes && hx
/// talk.chat` sends `talk.chat`, the root being `repo`); then it is taken relative to `root`.
pub(crate) fn resolve_document<'a>(
    argument: &str,
    open: impl Iterator<Item = &'a str> + Clone,
    root: Option<&Path>,
    home: Option<&Path>,
) -> Result<String, String> {
    if let Some(uri) = open.clone().find(|uri| *uri == argument) {
        return Ok(uri.to_owned());
    }
    let open_path = |uri: &str| uri_to_path(uri).map(|p| normalize(&p));
    let wanted = if argument.contains("://") {
        uri_to_path(argument)
    } else {
        let path = match (argument.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(argument),
        };
        if path.is_relative() {
            // `./` and leading `../` dropped: `../talk.chat` from `repo/notes` is some
            // `talk.chat` (which one, the open documents tell).
            let suffix = normalize(&path);
            let matching: Vec<&str> = open
                .clone()
                .filter(|uri| {
                    !suffix.as_os_str().is_empty()
                        && open_path(uri).is_some_and(|p| p.ends_with(&suffix))
                })
                .collect();
            let under_root = root.map(|r| normalize(&r.join(&path)));
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
                    return Err(format!(
                        "`{argument}` could be any of the open documents {}; name it by its full path",
                        paths.join(", ")
                    ));
                }
            }
        }
        Some(match (path.is_relative(), root) {
            (true, Some(root)) => root.join(path),
            _ => path,
        })
    };
    let wanted = wanted.map(|p| normalize(&p));
    if let Some(uri) = open
        .into_iter()
        .find(|uri| open_path(uri) == wanted && wanted.is_some())
    {
        return Ok(uri.to_owned());
    }
    // A chat file no editor has open: the engine works on it on disk.
    match wanted {
        Some(path) if path.is_absolute() && path.is_file() => Ok(path_to_uri(&path)),
        _ => Err(format!(
            "`{argument}` is neither a document open in this editor session nor a file; open the .chat file first, or name an existing file (a relative path is matched against the open documents, then taken from the workspace root{})",
            root.map(|r| format!(" {}", r.display()))
                .unwrap_or_default()
        )),
    }
}

/// The `file://` URI of an absolute path (bytes outside the unreserved set percent-encoded).
pub fn path_to_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// `.` and `..` components removed without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The path of a `file:` URI (percent-decoded); `None` for other schemes.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let path = match rest.find('/') {
        Some(0) => rest,
        Some(i) if &rest[..i] == "localhost" => &rest[i..],
        _ => return None,
    };
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                decoded.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        decoded.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(decoded).ok().map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const OPEN: &[&str] = &["file:///work/a%20b/t.chat", "file:///work/x.chat"];

    fn resolve(arg: &str) -> Result<String, String> {
        resolve_document(arg, OPEN.iter().copied(), Some(Path::new("/work")), None)
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
        let err = resolve("t.chat").unwrap_err();
        assert!(
            err.contains("/repo/a/t.chat")
                && err.contains("/repo/b/t.chat")
                && err.contains("full path"),
            "{err}"
        );
        let err = resolve("other.chat").unwrap_err();
        assert!(err.contains("matched against the open documents"), "{err}");
    }

    #[test]
    fn uris_encode_what_a_path_may_hold() {
        let uri = path_to_uri(Path::new("/tmp/a b/c%d\u{e9}.chat"));
        assert_eq!(uri, "file:///tmp/a%20b/c%25d%C3%A9.chat");
        assert_eq!(
            uri_to_path(&uri).unwrap(),
            Path::new("/tmp/a b/c%d\u{e9}.chat")
        );
    }

    #[test]
    fn documents_resolve_by_uri_absolute_or_relative_path() {
        assert_eq!(resolve("file:///work/x.chat").unwrap(), OPEN[1]);
        assert_eq!(resolve("a b/t.chat").unwrap(), OPEN[0]);
        assert_eq!(resolve("./a b/../x.chat").unwrap(), OPEN[1]);
        assert_eq!(resolve("/work/x.chat").unwrap(), OPEN[1]);
        let err = resolve("nope.chat").unwrap_err();
        assert!(err.contains("neither a document open"), "{err}");
        // A file on disk that is not open resolves to its URI.
        let dir = std::env::temp_dir().join("flemma lsp resolve");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.chat");
        std::fs::write(&file, "@You:\nhi\n").unwrap();
        let uri = resolve(file.to_str().unwrap()).unwrap();
        assert!(uri.starts_with("file:///") && uri.ends_with("/flemma%20lsp%20resolve/t.chat"));
        assert_eq!(uri_to_path(&uri).unwrap(), file);
    }

    /// The commands only an editor's user gives (see [`COMMANDS`]).
    const EDITOR_ONLY: &[&str] = &["flemma.trustFolder"];

    #[test]
    fn every_flemma_request_has_its_command() {
        for method in flemma_protocol::methods::METHODS {
            let command = flemma_protocol::methods::command_of(method).unwrap();
            assert!(COMMANDS.contains(&command.as_str()), "{command}");
        }
        assert_eq!(
            COMMANDS.len(),
            flemma_protocol::methods::METHODS.len() + EDITOR_ONLY.len()
        );
        for command in EDITOR_ONLY {
            assert!(COMMANDS.contains(command), "{command}");
        }
    }

    #[test]
    fn arguments_are_checked_with_the_usage_in_the_error() {
        let ok = |s: &str| Ok::<_, String>(s.to_owned());
        let c = parse(
            "flemma.reject",
            &["u".into(), "t1".into(), "too slow".into()],
            ok,
        )
        .unwrap();
        assert_eq!(
            c,
            Command::Reject {
                uri: "u".into(),
                tool_id: "t1".into(),
                reason: Some("too slow".into())
            }
        );
        let err = parse("flemma.approve", &["u".into()], ok).unwrap_err();
        assert!(
            err.contains("[uri, toolId]") && err.contains("missing"),
            "{err}"
        );
        let err = parse("flemma.send", &[Value::from(3)], ok).unwrap_err();
        assert!(err.contains("must be a non-empty string"), "{err}");
        assert!(
            parse("flemma.nope", &[], ok)
                .unwrap_err()
                .contains("unknown command")
        );
    }
}
