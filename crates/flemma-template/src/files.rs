//! `@./file` references and binary includes: path resolution, MIME detection, attachment parts.

use std::path::{Path, PathBuf};

pub(crate) use flemma_protocol::document::normalize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flemma_config::reach::never_read;
use flemma_conversation::Part;

use crate::host::human_bytes;
use crate::{Host, ReadScope};

/// What one evaluation reads, and how much: only files its [`ReadScope`] allows, never those
/// of [`never_read`] (judged on the path as written and on its real path, links followed), each
/// at most `Limits::max_file_bytes`, all of them together at most `Limits::max_read_bytes`.
/// Shared by everything that reads during the evaluation (file references, `include()`,
/// template modules, project context files, the images of tool results).
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    per_file: u64,
    total: u64,
    left: Arc<AtomicU64>,
    scope: Arc<Scope>,
}

/// Where an evaluation reads, resolved once.
#[derive(Debug)]
struct Scope {
    /// The real paths of the folders files must lie in (`None`: anywhere).
    within: Option<Vec<PathBuf>>,
    /// Why a file outside them is not read.
    why: String,
    /// The home directory, as given and as its real path.
    homes: Vec<PathBuf>,
}

/// Why a file was not read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The chat may not read it: why (`it is in /proc, which flemmad never reads…`).
    Refused(String),
    /// Reading it failed (missing, not a regular file, too large…).
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Refused(why) => f.write_str(why),
            ReadError::Io(error) => error.fmt(f),
        }
    }
}

impl Reader {
    /// The reader of one evaluation through `host`: `scope`'s folders and the home directory
    /// are resolved to their real paths here.
    pub(crate) fn new(limits: &crate::Limits, scope: &ReadScope, host: &dyn Host) -> Self {
        let real = |path: &Path| host.real_path(path).unwrap_or_else(|| normalize(path));
        let mut homes: Vec<PathBuf> = host.home_dir().into_iter().collect();
        if let Some(home) = homes.first().and_then(|home| host.real_path(home)) {
            if !homes.contains(&home) {
                homes.push(home);
            }
        }
        Self {
            per_file: limits.max_file_bytes,
            total: limits.max_read_bytes,
            left: Arc::new(AtomicU64::new(limits.max_read_bytes)),
            scope: Arc::new(Scope {
                within: scope
                    .within
                    .as_ref()
                    .map(|folders| folders.iter().map(|folder| real(folder)).collect()),
                why: scope.why.clone(),
                homes,
            }),
        }
    }

    /// The same reader, budget included, reading anywhere but what is never read (for the
    /// files the user's configuration names: template modules by absolute path).
    pub(crate) fn anywhere(&self) -> Self {
        Self {
            scope: Arc::new(Scope {
                within: None,
                why: String::new(),
                homes: self.scope.homes.clone(),
            }),
            ..self.clone()
        }
    }

    /// Why `path` may not be read, judged on the path as written (`real: false`: only what is
    /// never read) or on its real path (`real: true`: also the scope's folders).
    fn judge(&self, path: &Path, real: bool) -> Result<(), String> {
        let homes: Vec<&Path> = self.scope.homes.iter().map(PathBuf::as_path).collect();
        if let Some(never) = never_read(path, &homes) {
            return Err(never.to_string());
        }
        match &self.scope.within {
            Some(folders) if real && !folders.iter().any(|folder| path.starts_with(folder)) => {
                Err(self.scope.why.clone())
            }
            _ => Ok(()),
        }
    }

    /// Why the file at `path` may not be read (what `file_readable()` answers `false` for).
    pub(crate) fn refusal(&self, host: &dyn Host, path: &Path) -> Option<String> {
        self.judge(path, false)
            .and_then(|()| match host.real_path(path) {
                Some(real) => self.judge(&real, true),
                None => Ok(()),
            })
            .err()
    }

    /// Reads the regular file `path` through `host`, if the chat may read it and within the
    /// budget. The error says what was not read and why (never read, outside the scope, not a
    /// regular file, larger than one file may be, or past what the evaluation may read in all).
    pub(crate) fn read(&self, host: &dyn Host, path: &Path) -> Result<Vec<u8>, ReadError> {
        self.judge(path, false).map_err(ReadError::Refused)?;
        let left = self.left.load(Ordering::Relaxed);
        let (limit, by_total) = if left < self.per_file {
            (left, true)
        } else {
            (self.per_file, false)
        };
        let too_large = || {
            let why = if by_total {
                format!(
                    "the files this chat reads (file references, include(), project files) would add up to more than {}; it was not read",
                    human_bytes(self.total)
                )
            } else {
                format!(
                    "it is larger than {}, the most a chat reads from one file; it was not read",
                    human_bytes(self.per_file)
                )
            };
            ReadError::Io(std::io::Error::new(std::io::ErrorKind::FileTooLarge, why))
        };
        let refusal = std::cell::RefCell::new(None);
        let allow = |real: &Path| {
            self.judge(real, true)
                .inspect_err(|why| *refusal.borrow_mut() = Some(why.clone()))
        };
        let bytes = match host.read_file_checked(path, limit, &allow) {
            Ok(bytes) => bytes,
            Err(error) => {
                return Err(match refusal.into_inner() {
                    Some(why) => ReadError::Refused(why),
                    None if error.kind() == std::io::ErrorKind::FileTooLarge => too_large(),
                    None => ReadError::Io(error),
                });
            }
        };
        let size = bytes.len() as u64;
        if size > limit {
            return Err(too_large());
        }
        self.left.fetch_sub(size.min(left), Ordering::Relaxed);
        Ok(bytes)
    }
}

/// Resolves a reference path as the parser decoded it (`./x`, `../x`, `~/x`, `/abs`) against
/// `base` (the chat file's directory) and `home`.
pub(crate) fn resolve_reference(
    path: &str,
    base: &Path,
    home: Option<&Path>,
) -> Result<PathBuf, String> {
    if let Some(rest) = path.strip_prefix("~/") {
        return match home {
            Some(home) => Ok(normalize(&home.join(rest))),
            None => Err(format!(
                "cannot resolve '{path}': the home directory is unknown; use a relative or absolute path"
            )),
        };
    }
    let candidate = Path::new(path);
    if candidate.is_absolute() {
        Ok(normalize(candidate))
    } else {
        Ok(normalize(&base.join(candidate)))
    }
}

/// The MIME type of `bytes`, by content first (PNG, JPEG, GIF, WEBP, PDF), then by extension.
pub(crate) fn detect_mime(path: &Path, bytes: &[u8]) -> String {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return "image/png".into();
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return "image/jpeg".into();
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return "image/gif".into();
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return "image/webp".into();
    }
    if bytes.starts_with(b"%PDF-") {
        return "application/pdf".into();
    }
    if let Some(mime) = mime_guess::from_path(path).first() {
        return mime.essence_str().to_string();
    }
    if std::str::from_utf8(bytes).is_ok() && !bytes.contains(&0) {
        return "text/plain".into();
    }
    "application/octet-stream".into()
}

/// Whether text of this MIME type can be embedded as a text file part.
fn is_textual(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or(mime).trim();
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-sh"
                | "application/toml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/sql"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
}

/// Turns file bytes into an attachment part, or says why it cannot.
pub(crate) fn attachment(written: &str, mime: &str, bytes: Vec<u8>) -> Result<Part, String> {
    let essence = mime
        .split(';')
        .next()
        .unwrap_or(mime)
        .trim()
        .to_ascii_lowercase();
    if matches!(
        essence.as_str(),
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    ) {
        return Ok(Part::Image {
            mime: essence,
            data: bytes,
            path: written.to_string(),
        });
    }
    if essence == "application/pdf" {
        return Ok(Part::Pdf {
            data: bytes,
            path: written.to_string(),
        });
    }
    if is_textual(&essence) {
        return match String::from_utf8(bytes) {
            Ok(text) => Ok(Part::TextFile {
                mime: mime.to_string(),
                text,
                path: written.to_string(),
            }),
            Err(_) => Err(format!(
                "'{written}' is declared as {mime} but is not valid UTF-8 text; fix the file or its ;type="
            )),
        };
    }
    Err(format!(
        "'{written}' has the unsupported type {mime}; attach text, PNG/JPEG/GIF/WEBP images or PDFs (override with ;type=…)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_home_and_absolute_paths() {
        let base = Path::new("/chats/project");
        assert_eq!(
            resolve_reference("./a/../b.md", base, None).ok(),
            Some(PathBuf::from("/chats/project/b.md"))
        );
        assert_eq!(
            resolve_reference("../x.txt", base, None).ok(),
            Some(PathBuf::from("/chats/x.txt"))
        );
        assert_eq!(
            resolve_reference("~/notes.md", base, Some(Path::new("/home/u"))).ok(),
            Some(PathBuf::from("/home/u/notes.md"))
        );
        assert!(resolve_reference("~/notes.md", base, None).is_err());
        assert_eq!(
            resolve_reference("/var/log/app.log", base, None).ok(),
            Some(PathBuf::from("/var/log/app.log"))
        );
    }

    #[test]
    fn detects_mime_by_content_before_extension() {
        assert_eq!(
            detect_mime(Path::new("x.txt"), b"\x89PNG\r\n\x1a\nrest"),
            "image/png"
        );
        assert_eq!(
            detect_mime(Path::new("x.bin"), b"%PDF-1.7"),
            "application/pdf"
        );
        assert_eq!(detect_mime(Path::new("x.jpg"), b"not really"), "image/jpeg");
        assert_eq!(detect_mime(Path::new("x.md"), b"# title"), "text/markdown");
        assert_eq!(detect_mime(Path::new("x"), b"plain"), "text/plain");
        assert_eq!(
            detect_mime(Path::new("x"), b"\0\x01"),
            "application/octet-stream"
        );
    }
}
