//! How a request names its document (the `uri` param): a `file://` URI, an absolute path, or a
//! path relative to a directory the front end knows (the language server's workspace root). No
//! file system access: whether the document exists is the engine host's to say.

use std::path::{Component, Path, PathBuf};

use crate::error::RequestError;

/// The path of the document `uri` names for `method`: a `file://` URI, an absolute path, or a
/// path relative to `base` when there is one; `.` and `..` removed, so every spelling names the
/// same document. Without a `base` a relative path is refused (the daemon does not know its
/// caller's working directory).
pub fn document_path(
    method: &str,
    uri: &str,
    base: Option<&Path>,
) -> Result<PathBuf, RequestError> {
    let path = if uri.contains("://") {
        uri_to_path(uri).ok_or_else(|| {
            RequestError::invalid_params(format!(
                "{method}: `{uri}` is not a file:// URI of a local file; name the document by its file:// URI or its path"
            ))
        })?
    } else {
        let path = PathBuf::from(uri);
        match (path.is_absolute(), base) {
            (true, _) => path,
            (false, Some(base)) => base.join(path),
            (false, None) => {
                return Err(RequestError::invalid_params(format!(
                    "{method}: `{uri}` is not an absolute path or a file:// URI, and there is no directory to resolve it against (the daemon does not know your working directory); name the document by its absolute path"
                )));
            }
        }
    };
    Ok(normalize(&path))
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

/// `.` removed and `..` resolved lexically, without the file system (the path may not exist;
/// symlinks are kept): `/x/../../y` is `/y`, a relative `../a` keeps its `..`. The one rule
/// for every crate (documents, template paths, a chat's reach).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The path of a `file:` URI (percent-decoded); `None` for other schemes and other hosts.
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
    use crate::error::codes;

    #[test]
    fn uris_encode_what_a_path_may_hold() {
        let uri = path_to_uri(Path::new("/tmp/a b/c%d\u{e9}.chat"));
        assert_eq!(uri, "file:///tmp/a%20b/c%25d%C3%A9.chat");
        assert_eq!(
            uri_to_path(&uri).unwrap(),
            Path::new("/tmp/a b/c%d\u{e9}.chat")
        );
        assert_eq!(
            uri_to_path("file://localhost/x.chat").unwrap(),
            Path::new("/x.chat")
        );
        assert_eq!(uri_to_path("file://host/x.chat"), None);
        assert_eq!(uri_to_path("untitled:1"), None);
    }

    #[test]
    fn documents_are_uris_absolute_paths_or_paths_under_a_base() {
        let path =
            |uri: &str, base: Option<&str>| document_path("flemma/send", uri, base.map(Path::new));
        assert_eq!(
            path("/tmp/a/../b c.chat", None),
            Ok(PathBuf::from("/tmp/b c.chat"))
        );
        assert_eq!(
            path("file:///tmp/./b%20c.chat", None),
            Ok(PathBuf::from("/tmp/b c.chat"))
        );
        assert_eq!(
            path("sub/../talk.chat", Some("/work")),
            Ok(PathBuf::from("/work/talk.chat"))
        );
        let error = path("talk.chat", None).unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS);
        assert!(error.message.contains("absolute path"), "{error}");
        let error = path("file://host/x.chat", None).unwrap_err();
        assert!(error.message.contains("not a file:// URI"), "{error}");
    }
}
