//! The result store: where full outputs live (truncation overflow, `flemma.save_to`,
//! `materialize`). Files are created `0600`, directories `0700`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use flemma_config::{Backup, Store};

use crate::nofollow::Dir;
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
        let chat = chat_path.map(|chat| chat.display().to_string());
        let template = match (&chat, config.path_format.as_str()) {
            (Some(_), "$chat") => CHAT_PRESET,
            (Some(_), "$state") => STATE_PRESET,
            (Some(_), template) => template,
            (None, _) => config.unnamed_path_format.as_str(),
        };
        let format = render_template(
            template,
            &TemplateVariables {
                filename: chat.as_deref(),
                bufnr: document_id,
            },
        );
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

    /// Checks the store's place before anything is written there, and names it by its resolved
    /// path. When it lies inside the chat's directory (the default `.flemma/<chat>/`), every
    /// component below that directory must be a real directory or not exist yet: a store folder
    /// that is a symlink (a repository can ship one, pointing anywhere) is refused, since the
    /// store is writable by the model's sandboxed commands. Later writes walk the resolved path
    /// following no symlink ([`Self::write_with`]).
    pub fn verified(mut self, chat: Option<&Path>) -> Result<Self, StoreError> {
        let dir = std::path::absolute(&self.dir).unwrap_or_else(|_| self.dir.clone());
        let chat_dir = chat
            .and_then(|chat| std::path::absolute(chat).ok())
            .and_then(|chat| chat.parent().map(Path::to_path_buf));
        let inside = chat_dir.as_ref().and_then(|chat_dir| {
            let relative = dir.strip_prefix(chat_dir).ok()?;
            relative
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
                .then(|| (chat_dir.clone(), relative.to_path_buf()))
        });
        let Some((chat_dir, relative)) = inside else {
            // Elsewhere (`$state`, a configured template): the user's own place, resolved.
            self.dir = crate::sandbox::resolve_path(&dir).map_err(StoreError::Refused)?;
            return Ok(self);
        };
        // Links above the chat's directory are the user's own; below it, none is followed.
        let chat_dir = crate::sandbox::resolve_path(&chat_dir).map_err(StoreError::Refused)?;
        let mut at = chat_dir.clone();
        for component in relative.components() {
            at.push(component);
            match at.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = std::fs::read_link(&at)
                        .map(|t| format!(" (to {})", t.display()))
                        .unwrap_or_default();
                    return Err(StoreError::Refused(format!(
                        "the tool store folder {} is a symbolic link{target}; flemmad writes tool output only inside the chat's directory and never through a link — remove the link (`rm {}`) and send again",
                        at.display(),
                        at.display()
                    )));
                }
                Ok(meta) if !meta.is_dir() => {
                    return Err(StoreError::Refused(format!(
                        "the tool store folder {} is not a directory; remove it and send again",
                        at.display()
                    )));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.dir = chat_dir.join(relative);
        Ok(self)
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
    /// first), creating directories `0700` and the file `0600`. No symlink is followed on the
    /// way or at the file (the store lies where sandboxed commands may write).
    pub fn write_with(
        &self,
        path: &Path,
        write_body: &mut dyn FnMut(&mut File) -> std::io::Result<()>,
    ) -> Result<(), StoreError> {
        let path = &std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(StoreError::Refused(format!(
                "{} names no file in the store",
                path.display()
            )));
        };
        let dir = Dir::open(parent, Some(0o700)).map_err(|source| StoreError::CreateDir {
            path: parent.to_path_buf(),
            source,
        })?;
        if self.backup == Backup::Version && dir.contains(name) {
            let backup = next_version(path);
            let backup_name = backup.file_name().unwrap_or(name);
            dir.rename(name, backup_name)
                .map_err(|source| StoreError::Backup {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        let write_error = |source| StoreError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut file = dir.open_for_write(name, 0o600, true).map_err(write_error)?;
        write_body(&mut file).map_err(write_error)?;
        file.flush().map_err(write_error)
    }
}

/// `tools.store.path_format = "$chat"`: next to the chat file.
const CHAT_PRESET: &str = "{{ __dirname }}/.flemma/{{ flemma.path.basename(__filename) }}/{{ source }}_{{ name }}_{{ id }}.txt";
/// `tools.store.path_format = "$state"`: under `$XDG_STATE_HOME`, the chat path flattened.
const STATE_PRESET: &str = "${XDG_STATE_HOME:-$HOME/.flemma}/flemma/store/{{ flemma.path.flatten(__filename) }}/{{ source }}_{{ name }}_{{ id }}.txt";

/// What a store path template can name besides the per-result `source`, `name` and `id`.
struct TemplateVariables<'a> {
    /// The chat file (`__filename`; its directory is `__dirname`).
    filename: Option<&'a str>,
    /// The document number (`bufnr`).
    bufnr: u64,
}

/// Renders the `{{ … }}` expressions of a store path template: `__filename`, `__dirname`,
/// `bufnr`, `flemma.pid` and the path helpers `flemma.path.basename|dirname|stem|flatten(x)`
/// (x one of the variables). `{{ source }}`, `{{ name }}` and `{{ id }}` stay for
/// [`ResultStore::path_for`]; an expression it does not know stays as written (and is logged).
fn render_template(template: &str, variables: &TemplateVariables<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(length) = rest[start..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let whole = &rest[start..start + length + 2];
        let expression = whole[2..whole.len() - 2].trim();
        match evaluate(expression, variables) {
            Some(value) => out.push_str(&value),
            None => {
                if !matches!(expression, "source" | "name" | "id") {
                    tracing::warn!(expression, "unknown expression in a store path template");
                }
                out.push_str(&format!("{{{{ {expression} }}}}"));
            }
        }
        rest = &rest[start + length + 2..];
    }
    out.push_str(rest);
    out
}

fn evaluate(expression: &str, variables: &TemplateVariables<'_>) -> Option<String> {
    let variable = |name: &str| -> Option<String> {
        let file = variables.filename;
        match name {
            "__filename" => file.map(str::to_owned),
            "__dirname" => file.map(|f| {
                Path::new(f)
                    .parent()
                    .map_or_else(|| "/".to_owned(), |p| p.display().to_string())
            }),
            "bufnr" => Some(variables.bufnr.to_string()),
            "flemma.pid" => Some(std::process::id().to_string()),
            _ => None,
        }
    };
    if let Some(value) = variable(expression) {
        return Some(value);
    }
    let call = expression.strip_prefix("flemma.path.")?;
    let (function, argument) = call.strip_suffix(')')?.split_once('(')?;
    let argument = argument.trim();
    let argument = match argument.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
        Some(literal) => literal.to_owned(),
        None => variable(argument)?,
    };
    let path = Path::new(&argument);
    let part = |part: Option<&std::ffi::OsStr>| part.map(|p| p.to_string_lossy().into_owned());
    match function.trim() {
        "basename" => part(path.file_name()),
        "stem" => part(path.file_stem()),
        "dirname" => Some(
            path.parent()
                .map_or_else(String::new, |p| p.display().to_string()),
        ),
        "flatten" => Some(flatten(path)),
        _ => None,
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
        .find(|candidate| candidate.symlink_metadata().is_err())
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
    fn a_store_folder_that_is_a_symlink_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let chat = dir.path().join("a.chat");
        std::fs::create_dir(dir.path().join(".flemma")).expect("dir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".flemma/a.chat"))
            .expect("symlink");
        let store = ResultStore::new(&config(), Some(&chat), 0, &|_| None);
        let error = store.verified(Some(&chat)).expect_err("refused");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        // The same for the parent folder.
        std::fs::remove_file(dir.path().join(".flemma/a.chat")).expect("rm");
        std::fs::remove_dir(dir.path().join(".flemma")).expect("rmdir");
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".flemma")).expect("symlink");
        let store = ResultStore::new(&config(), Some(&chat), 0, &|_| None);
        assert!(store.verified(Some(&chat)).is_err());
        // A real (or missing) folder is named by its resolved path.
        std::fs::remove_file(dir.path().join(".flemma")).expect("rm");
        let store = ResultStore::new(&config(), Some(&chat), 0, &|_| None)
            .verified(Some(&chat))
            .expect("fine");
        let canonical = dir.path().canonicalize().expect("canonical");
        assert_eq!(store.dir(), canonical.join(".flemma/a.chat"));
    }

    #[test]
    fn custom_templates_expand_their_variables() {
        let mut custom = config();
        custom.path_format =
            "{{ __dirname }}/results/{{ flemma.path.stem(__filename) }}/{{ flemma.path.basename(__dirname) }}-{{ bufnr }}/{{ source }}_{{ name }}_{{ id }}.txt".into();
        let store = ResultStore::new(&custom, Some(Path::new("/n/work/example.chat")), 7, &|_| {
            None
        });
        assert_eq!(
            store.path_for("tool", "bash", "toolu_01"),
            PathBuf::from("/n/work/results/example/work-7/tool_bash_toolu_01.txt")
        );
        custom.path_format =
            "/s/{{ flemma.path.flatten(__filename) }}/{{ unknown }}/{{ id }}".into();
        let store = ResultStore::new(&custom, Some(Path::new("/n/x.chat")), 0, &|_| None);
        assert_eq!(
            store.path_for("tool", "bash", "1"),
            PathBuf::from("/s/n--x.chat/{{ unknown }}/1")
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
