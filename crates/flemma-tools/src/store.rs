//! The result store: where full outputs live (truncation overflow, `flemma.save_to`,
//! `materialize`). Files are created `0600`, directories `0700`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use flemma_config::{Backup, Store};

use crate::sandbox::expand_env;

/// The store of one chat (or of an unsaved document).
#[derive(Debug, Clone)]
pub struct ResultStore {
    /// The directory results go to (`FLEMMA_TOOLS_STORE_PATH`).
    dir: PathBuf,
    /// File name pattern inside `dir` (`{{ source }}_{{ name }}_{{ id }}.txt`).
    file_pattern: String,
    backup: Backup,
    pub materialize: bool,
    pub preview_lines: u64,
    pub preview_bytes: u64,
}

/// Why a store path could not be worked out or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("could not create the store directory {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not back up {} before overwriting it: {source}", path.display())]
    Backup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Refused(String),
}

impl ResultStore {
    /// The store for `chat_path` (or an unsaved document numbered `document_id`) under
    /// `config`, expanding variables through `env`.
    pub fn new(
        config: &Store,
        chat_path: Option<&Path>,
        document_id: u64,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let format = match chat_path {
            Some(chat) => match config.path_format.as_str() {
                "$chat" => {
                    let dir = chat.parent().unwrap_or(Path::new("/"));
                    let name = chat
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    format!(
                        "{}/.flemma/{name}/{{{{ source }}}}_{{{{ name }}}}_{{{{ id }}}}.txt",
                        dir.display()
                    )
                }
                "$state" => format!(
                    "${{XDG_STATE_HOME:-$HOME/.flemma}}/flemma/store/{}/{{{{ source }}}}_{{{{ name }}}}_{{{{ id }}}}.txt",
                    flatten(chat)
                ),
                template => template
                    .replace("{{ __filename }}", &chat.display().to_string())
                    .replace("{{ flemma.path.flatten(__filename) }}", &flatten(chat)),
            },
            None => config.unnamed_path_format.clone(),
        };
        let format = format
            .replace("{{ flemma.pid }}", &std::process::id().to_string())
            .replace("{{ bufnr }}", &document_id.to_string());
        let format = expand_env(&format, env);
        let (dir, file_pattern) = match format.rsplit_once('/') {
            Some((dir, file)) => (PathBuf::from(dir), file.to_string()),
            None => (PathBuf::from("."), format),
        };
        Self {
            dir,
            file_pattern,
            backup: config.backup,
            materialize: config.materialize,
            preview_lines: config.preview.lines,
            preview_bytes: config.preview.bytes,
        }
    }

    /// The store directory (exported to `bash` as `FLEMMA_TOOLS_STORE_PATH`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store path of a result: `source` (`tool` or `job`), tool name, call id.
    pub fn path_for(&self, source: &str, name: &str, id: &str) -> PathBuf {
        let safe = |s: &str| s.replace(['/', '\0'], "_");
        self.dir.join(
            self.file_pattern
                .replace("{{ source }}", &safe(source))
                .replace("{{ name }}", &safe(name))
                .replace("{{ id }}", &safe(id)),
        )
    }

    /// Writes a result by streaming `write_body` into `path` (backing up an existing file
    /// first), creating directories `0700` and the file `0600`.
    pub fn write_with(
        &self,
        path: &Path,
        write_body: &mut dyn FnMut(&mut File) -> std::io::Result<()>,
    ) -> Result<(), StoreError> {
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|source| StoreError::CreateDir {
                    path: parent.to_path_buf(),
                    source,
                })?;
        }
        if self.backup == Backup::Version && path.exists() {
            let backup = next_version(path);
            std::fs::rename(path, &backup).map_err(|source| StoreError::Backup {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let write_error = |source| StoreError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(write_error)?;
        write_body(&mut file).map_err(write_error)?;
        file.flush().map_err(write_error)
    }
}

/// The next free `<stem>.<n>.<ext>` beside `path`.
pub fn next_version(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path.extension().map(|e| e.to_string_lossy().into_owned());
    (1u64..)
        .map(|n| {
            let name = match &ext {
                Some(ext) => format!("{stem}.{n}.{ext}"),
                None => format!("{stem}.{n}"),
            };
            path.with_file_name(name)
        })
        .find(|candidate| !candidate.exists())
        .unwrap_or_else(|| path.with_extension("bak"))
}

/// `/home/user/notes/x.chat` → `home--user--notes--x.chat`.
pub fn flatten(path: &Path) -> String {
    path.to_string_lossy()
        .trim_start_matches('/')
        .replace('/', "--")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Store {
        Store {
            path_format: "$chat".into(),
            unnamed_path_format: "/tmp/flemma/unnamed/{{ flemma.pid }}/{{ bufnr }}/{{ source }}_{{ name }}_{{ id }}.txt".into(),
            materialize: false,
            preview: flemma_config::Preview { lines: 10, bytes: 2048 },
            backup: Backup::Version,
        }
    }

    #[test]
    fn chat_preset_lands_next_to_the_chat() {
        let store = ResultStore::new(&config(), Some(Path::new("/n/example.chat")), 0, &|_| None);
        assert_eq!(
            store.path_for("tool", "bash", "toolu_01"),
            PathBuf::from("/n/.flemma/example.chat/tool_bash_toolu_01.txt")
        );
    }

    #[test]
    fn files_are_private_and_versions_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let chat = dir.path().join("a.chat");
        let store = ResultStore::new(&config(), Some(&chat), 0, &|_| None);
        let path = store.path_for("tool", "bash", "1");
        for body in ["one", "two"] {
            store
                .write_with(&path, &mut |f| f.write_all(body.as_bytes()))
                .expect("write");
        }
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "two");
        let backup = path.with_file_name("tool_bash_1.1.txt");
        assert_eq!(std::fs::read_to_string(backup).expect("read"), "one");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = std::fs::metadata(store.dir())
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);
    }
}
