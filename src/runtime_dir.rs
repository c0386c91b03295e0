//! The daemon's runtime folder: where it is (`$XDG_RUNTIME_DIR/flemma`, else
//! `/tmp/flemma-$UID`), the paths of its sockets and pid file, and the checks that keep it
//! ours (`0700`, owned by this user). Its own module, not the daemon's: the tools' sandbox
//! hides it and the CLI finds a running daemon through it.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// Where the daemon's files live.
#[derive(Debug, Clone)]
pub struct RuntimePaths {
    pub dir: PathBuf,
    pub lsp_socket: PathBuf,
    pub rpc_socket: PathBuf,
    pub acp_socket: PathBuf,
    pub pid_file: PathBuf,
}

impl RuntimePaths {
    /// `$XDG_RUNTIME_DIR/flemma/`, or `/tmp/flemma-$UID/` when `XDG_RUNTIME_DIR` is unset,
    /// empty or relative (the process's are in `ProcessContext::runtime`).
    pub fn for_dirs(dirs: &crate::user_dirs::UserDirs) -> Self {
        Self::in_dir(Self::dir_for(dirs.runtime.as_deref(), current_uid()))
    }

    /// The one rule for the daemon's folder, given `$XDG_RUNTIME_DIR` and the user's uid.
    pub fn dir_for(xdg_runtime_dir: Option<&Path>, uid: u32) -> PathBuf {
        match xdg_runtime_dir.filter(|dir| dir.is_absolute()) {
            Some(runtime) => runtime.join("flemma"),
            None => PathBuf::from(format!("/tmp/flemma-{uid}")),
        }
    }

    pub fn in_dir(dir: PathBuf) -> Self {
        Self {
            lsp_socket: dir.join("lsp.sock"),
            rpc_socket: dir.join("rpc.sock"),
            acp_socket: dir.join("acp.sock"),
            pid_file: dir.join("daemon.pid"),
            dir,
        }
    }
}

/// What is wrong with the runtime folder.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeDirError {
    #[error(
        "{} is owned by uid {owner}, not by you (uid {me}); remove it or set XDG_RUNTIME_DIR to a directory of yours",
        path.display()
    )]
    ForeignDirectory { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{} has mode {mode:04o}, which lets other users in; run `chmod 700 {}`",
        path.display(),
        path.display()
    )]
    OpenDirectory { path: PathBuf, mode: u32 },
    #[error("{} is not a directory (a symlink or a file); remove it", path.display())]
    NotADirectory { path: PathBuf },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_error<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> RuntimeDirError + 'a {
    move |source| RuntimeDirError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

pub fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Creates the runtime directory `0700` when missing; refuses one that is not ours or that
/// other users can enter.
pub fn ensure_dir(dir: &Path) -> Result<(), RuntimeDirError> {
    match fs::symlink_metadata(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
            .recursive(false)
            .mode(0o700)
            .create(dir)
            .or_else(|error| {
                // Someone (a second daemon starting) created it meanwhile: check it below.
                if error.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(error)
                }
            })
            .map_err(io_error("cannot create the runtime directory", dir))?,
        Err(error) => return Err(io_error("cannot inspect the runtime directory", dir)(error)),
        Ok(_) => {}
    }
    check_dir(dir)
}

/// Checks that the runtime directory is a real directory, ours, with no group/other bits.
pub fn check_dir(dir: &Path) -> Result<(), RuntimeDirError> {
    let meta =
        fs::symlink_metadata(dir).map_err(io_error("cannot inspect the runtime directory", dir))?;
    if !meta.is_dir() {
        return Err(RuntimeDirError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let me = current_uid();
    if meta.uid() != me {
        return Err(RuntimeDirError::ForeignDirectory {
            path: dir.to_owned(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(RuntimeDirError::OpenDirectory {
            path: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn ensure_dir_creates_a_private_directory() {
        let root = tempfile::tempdir().expect("a temp dir");
        let dir = root.path().join("flemma");
        ensure_dir(&dir).expect("created");
        let mode = fs::metadata(&dir).expect("metadata").mode() & 0o777;
        assert_eq!(mode, 0o700);
        // A second check of the same directory passes.
        ensure_dir(&dir).expect("checked");
    }

    #[test]
    fn check_dir_refuses_group_or_other_bits_and_says_how_to_fix_it() {
        let root = tempfile::tempdir().expect("a temp dir");
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o750)).expect("chmod");
        let error = check_dir(root.path()).expect_err("refused");
        assert!(matches!(
            error,
            RuntimeDirError::OpenDirectory { mode: 0o750, .. }
        ));
        assert!(error.to_string().contains("chmod 700"), "{error}");
    }

    #[test]
    fn check_dir_refuses_a_symlink() {
        let root = tempfile::tempdir().expect("a temp dir");
        let real = root.path().join("real");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&real)
            .expect("mkdir");
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert!(matches!(
            check_dir(&link),
            Err(RuntimeDirError::NotADirectory { .. })
        ));
    }

    #[test]
    fn check_dir_refuses_a_directory_of_another_uid() {
        if current_uid() != 0 {
            eprintln!("skipped: only root can give a directory to another uid");
            return;
        }
        let root = tempfile::tempdir().expect("a temp dir");
        let dir = root.path().join("theirs");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .expect("mkdir");
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
        let error = check_dir(&dir).expect_err("refused");
        assert!(matches!(
            error,
            RuntimeDirError::ForeignDirectory { owner: 65534, .. }
        ));
    }

    #[test]
    fn runtime_paths_name_the_sockets_and_the_pid_file() {
        let paths = RuntimePaths::in_dir(PathBuf::from("/x/flemma"));
        assert_eq!(paths.rpc_socket, Path::new("/x/flemma/rpc.sock"));
        assert_eq!(paths.lsp_socket, Path::new("/x/flemma/lsp.sock"));
        assert_eq!(paths.acp_socket, Path::new("/x/flemma/acp.sock"));
        assert_eq!(paths.pid_file, Path::new("/x/flemma/daemon.pid"));
    }
}
