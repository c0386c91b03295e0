//! Test fixtures: raw multi-line chat text with a `$0` cursor marker, and an in-memory file
//! system.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{FileKind, FileSystem};

/// Removes the `$0` marker from `fixture`: the text and the cursor's byte offset.
pub(crate) fn cursor(fixture: &str) -> (String, usize) {
    let offset = fixture
        .find("$0")
        .unwrap_or_else(|| panic!("no $0 in {fixture:?}"));
    (fixture.replacen("$0", "", 1), offset)
}

/// A file system of listed paths (directories end with `/`).
#[derive(Debug, Default)]
pub(crate) struct MemoryFs {
    entries: BTreeMap<PathBuf, bool>,
}

impl MemoryFs {
    pub(crate) fn new(paths: &[&str]) -> Self {
        let mut entries = BTreeMap::new();
        for path in paths {
            let is_dir = path.ends_with('/');
            entries.insert(PathBuf::from(path.trim_end_matches('/')), is_dir);
        }
        Self { entries }
    }
}

impl FileSystem for MemoryFs {
    fn kind(&self, path: &Path) -> FileKind {
        match self.entries.get(path) {
            Some(true) => FileKind::Directory,
            Some(false) => FileKind::File,
            None => FileKind::Missing,
        }
    }

    fn list(&self, dir: &Path) -> Vec<(String, bool)> {
        self.entries
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .filter_map(|(p, d)| Some((p.file_name()?.to_string_lossy().into_owned(), *d)))
            .collect()
    }

    fn home(&self) -> Option<PathBuf> {
        Some(PathBuf::from("/home/me"))
    }
}
