//! Where the programs flemmad starts for a chat outside its tools' sandbox begin: MCP servers
//! and the `lsp` tool's language servers (`docs/security.md`, invariant III: opening or sending
//! a chat starts nothing from its folder).
//!
//! They start in [`NEUTRAL_DIR`] unless the user's configuration names a directory (an MCP
//! server's `cwd`), and their program is looked up only in the absolute entries of `PATH`: a
//! chat's folder is often a repository someone else wrote, and a working directory there lets
//! it choose the code that runs — `python3 -m x` imports `./x.py`, `npx` runs
//! `./node_modules/.bin`, version managers read `.python-version` or `.nvmrc` and `.npmrc`
//! configures npm — and so does a relative `PATH` entry (`.`, an empty one,
//! `node_modules/.bin`), which names a folder of whatever the working directory is.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The working directory of the programs flemmad starts outside the sandbox, unless the user's
/// configuration names one: `/`. It always exists, holds no project, and neither you nor a
/// sandboxed tool can write into it (a directory of flemmad's own would lie where you can
/// write, and so could a tool whose sandbox makes that place writable).
pub const NEUTRAL_DIR: &str = "/";

/// `path` (a `PATH` value) without its relative entries: `.`, empty entries (which mean the
/// working directory) and relative folders are dropped.
pub fn absolute_entries(path: &OsStr) -> OsString {
    std::env::join_paths(std::env::split_paths(path).filter(|dir| dir.is_absolute()))
        .unwrap_or_default()
}

/// The executable `program` names for a process that starts in `cwd`: a name with a `/` is
/// taken against `cwd` (an absolute one as it is), a bare name is looked up in the absolute
/// entries of `search_path` only. `None` when there is no such executable file.
pub fn find_program(program: &str, search_path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.contains('/') {
        let path = cwd.join(program);
        return is_executable(&path).then_some(path);
    }
    std::env::split_paths(search_path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Why [`find_program`] found nothing for `program` (to follow "cannot start `program`: ").
pub fn not_found(program: &str, cwd: &Path) -> String {
    if program.contains('/') {
        format!(
            "it is not an executable file (taken against {}); give its absolute path",
            cwd.display()
        )
    } else {
        "it is not on PATH (only its absolute entries are searched: `.`, empty and relative entries would name folders of the chat's project); install it or give its absolute path".to_owned()
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The full path of `program` on `PATH`, its relative entries (`.`, empty ones) ignored; a
/// name with a `/` is taken against [`NEUTRAL_DIR`] (see [`find_program`]).
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    find_program(
        program,
        std::env::var_os("PATH").as_deref(),
        Path::new(NEUTRAL_DIR),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_path_entries_are_dropped() {
        let path = OsStr::new("node_modules/.bin::.:/usr/bin:/bin:");
        assert_eq!(absolute_entries(path), OsString::from("/usr/bin:/bin"));
        assert_eq!(absolute_entries(OsStr::new(".:")), OsString::new());
    }

    #[test]
    fn a_program_is_found_in_absolute_entries_only() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let bin = dir.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).expect("a folder");
        let shim = bin.join("flemma-launch-test-shim");
        std::fs::write(&shim, "#!/bin/sh\n").expect("a shim");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("mode");
        // From the folder, a relative entry would find it; it is never searched.
        let relative = OsStr::new("node_modules/.bin:.:");
        assert_eq!(
            find_program("flemma-launch-test-shim", Some(relative), dir.path()),
            None
        );
        // The same folder given absolutely is searched.
        let absolute = bin.clone().into_os_string();
        assert_eq!(
            find_program("flemma-launch-test-shim", Some(&absolute), Path::new("/")),
            Some(shim.clone())
        );
        // A name with a slash is taken against the process's directory.
        assert_eq!(
            find_program(
                "./node_modules/.bin/flemma-launch-test-shim",
                None,
                Path::new(NEUTRAL_DIR)
            ),
            None
        );
        assert_eq!(
            find_program(&shim.display().to_string(), None, Path::new(NEUTRAL_DIR)),
            Some(shim)
        );
        assert_eq!(
            find_program("sh", Some(OsStr::new("/bin:/usr/bin")), Path::new("/"))
                .map(|p| p.is_absolute()),
            Some(true)
        );
    }
}
