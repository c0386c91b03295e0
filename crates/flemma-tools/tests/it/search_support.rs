//! What the `grep` and `find` tests share: a guard that refuses every write (searching never
//! writes) and the system's own copy of a program.

use std::path::{Path, PathBuf};

use flemma_tools::context::PathGuard;

#[derive(Debug)]
pub struct NoWrites;

impl PathGuard for NoWrites {
    fn check_write(&self, path: &Path) -> Result<PathBuf, String> {
        Err(format!("{} — a search never writes", path.display()))
    }
}

/// The program `name` from the system directories (not from a test's restricted `PATH`).
pub fn system(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}
