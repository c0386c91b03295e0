//! The daemon's sockets in its runtime folder (`crate::runtime_dir`): the single-instance
//! lock (`daemon.pid`), binding `0600` sockets (replacing a dead daemon's, never stealing a
//! live one's), the peer-uid check, systemd socket activation and `sd_notify` readiness.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

use crate::runtime_dir::{RuntimeDirError, RuntimePaths, check_dir, current_uid};

/// What went wrong setting up or reaching the daemon's sockets.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("a daemon already runs (pid {pid}); use it, or stop it first (`kill {pid}`)")]
    AlreadyRunning { pid: String },
    #[error("{} exists and is not a socket; remove it", path.display())]
    NotASocket { path: PathBuf },
    #[error("{} is not a regular file; remove it", path.display())]
    NotAFile { path: PathBuf },
    #[error(
        "socket activation passed {count} file descriptors but none is the `{name}` socket (LISTEN_FDNAMES={names:?}); listen on `%t/flemma/{name}.sock` in flemmad.socket (`flemmad install-service --print` shows the unit)"
    )]
    MissingActivatedSocket {
        count: usize,
        name: &'static str,
        names: String,
    },
    #[error(transparent)]
    RuntimeDir(#[from] RuntimeDirError),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_error<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SocketError + 'a {
    move |source| SocketError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The single-instance lock: `daemon.pid`, locked (`flock`) for the daemon's lifetime and
/// holding its pid. The kernel releases the lock when the process dies, even by `kill -9`.
#[derive(Debug)]
pub struct PidLock {
    path: PathBuf,
    file: File,
}

impl PidLock {
    pub fn acquire(path: &Path) -> Result<Self, SocketError> {
        // Never through a link, and only a regular file (it is truncated and written).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(io_error("cannot open the pid file", path))?;
        if !file
            .metadata()
            .map_err(io_error("cannot inspect the pid file", path))?
            .is_file()
        {
            return Err(SocketError::NotAFile {
                path: path.to_owned(),
            });
        }
        let mut file = file;
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(SocketError::AlreadyRunning {
                pid: if pid.is_empty() {
                    "unknown".to_owned()
                } else {
                    pid.to_owned()
                },
            });
        }
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    /// Writes this process's pid (once its sockets are bound: until then a refusal must be
    /// able to read the pid of the daemon that holds them).
    pub fn write_pid(&mut self) -> Result<(), SocketError> {
        let file = &mut self.file;
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .and_then(|()| file.flush())
            .map_err(io_error("cannot write the pid file", &self.path))
    }

    /// Removes the pid file (at a clean shutdown); the lock goes with the file handle.
    pub fn remove(self) {
        if let Err(error) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove the pid file");
        }
    }
}

/// The pid a running daemon wrote in its pid file, if any.
pub fn read_pid(path: &Path) -> Option<String> {
    // Not through a link, a regular file only, a few bytes at most.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut pid = String::new();
    file.take(64).read_to_string(&mut pid).ok()?;
    let pid = pid.trim();
    (!pid.is_empty()).then(|| pid.to_owned())
}

/// Binds a fresh socket at `path`, mode `0600`. An existing socket that accepts a connection
/// belongs to a live daemon and is never replaced; one that refuses is a dead daemon's and is
/// removed first.
pub fn bind(path: &Path, pid_file: &Path) -> Result<UnixListener, SocketError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt as _;
            if !meta.file_type().is_socket() {
                return Err(SocketError::NotASocket {
                    path: path.to_owned(),
                });
            }
            if let Ok(live) = UnixStream::connect(path) {
                // The pid file names the daemon; when it is gone, the socket's credentials
                // (the process that listens) do.
                let pid = read_pid(pid_file)
                    .or_else(|| {
                        rustix::net::sockopt::socket_peercred(&live)
                            .ok()
                            .map(|cred| cred.pid.as_raw_nonzero().get().to_string())
                    })
                    .unwrap_or_else(|| "unknown".to_owned());
                return Err(SocketError::AlreadyRunning { pid });
            }
            tracing::info!(path = %path.display(), "replacing the stale socket of a daemon that is gone");
            fs::remove_file(path).map_err(io_error("cannot remove the stale socket", path))?;
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(io_error("cannot inspect", path)(error)),
    }
    let listener = UnixListener::bind(path).map_err(io_error("cannot listen on", path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(io_error("cannot set the mode of", path))?;
    Ok(listener)
}

/// The peer of a connection, when it is the daemon's own user: `Ok(pid)`; another uid:
/// `Err(uid)`.
pub fn check_peer(stream: &UnixStream) -> Result<i32, PeerRefused> {
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) if cred.uid.as_raw() == current_uid() => Ok(cred.pid.as_raw_nonzero().get()),
        Ok(cred) => Err(PeerRefused::OtherUser {
            uid: cred.uid.as_raw(),
            pid: cred.pid.as_raw_nonzero().get(),
        }),
        Err(error) => Err(PeerRefused::Unknown(error.into())),
    }
}

/// Why a connection was closed at once.
#[derive(Debug, thiserror::Error)]
pub enum PeerRefused {
    #[error(
        "connection from uid {uid} (pid {pid}) refused: only uid {} may connect",
        current_uid()
    )]
    OtherUser { uid: u32, pid: i32 },
    #[error("connection refused: cannot read the peer's credentials ({0})")]
    Unknown(io::Error),
}

/// The listeners systemd passed by socket activation.
#[derive(Debug)]
pub struct Activated {
    pub lsp: UnixListener,
    pub rpc: UnixListener,
    /// `None` with a unit written before `acp.sock` existed: the daemon binds it itself.
    pub acp: Option<UnixListener>,
}

/// The listeners systemd passed by socket activation (`LISTEN_FDS`, `LISTEN_PID`), or `None`
/// when not socket-activated. Each is recognised by its `LISTEN_FDNAMES` name (`lsp`, `rpc`,
/// `acp`: socket units with `FileDescriptorName=`) or else by the file name of the path it
/// listens on (`lsp.sock`, `rpc.sock`, `acp.sock`: one unit with a `ListenStream=` each, as
/// `flemmad install-service` writes). Call before any thread starts: it clears the
/// activation variables from the environment.
pub fn activated_listeners() -> Result<Option<Activated>, SocketError> {
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    let mut fds = listenfd::ListenFd::from_env();
    let count = fds.len();
    if count == 0 {
        return Ok(None);
    }
    let name_list: Vec<&str> = names.split(':').collect();
    let mut lsp = None;
    let mut rpc = None;
    let mut acp = None;
    for index in 0..count {
        let fd_name = format!("file descriptor {}", index + 3);
        let Some(listener) = fds.take_unix_listener(index).map_err(io_error(
            "socket activation: not a Unix stream listener:",
            Path::new(&fd_name),
        ))?
        else {
            continue;
        };
        let path_name = listener.local_addr().ok().and_then(|address| {
            address
                .as_pathname()
                .and_then(Path::file_name)
                .map(ToOwned::to_owned)
        });
        let role = match (
            name_list.get(index).copied(),
            path_name.as_ref().and_then(|n| n.to_str()),
        ) {
            (Some("lsp"), _) | (_, Some("lsp.sock")) => &mut lsp,
            (Some("rpc"), _) | (_, Some("rpc.sock")) => &mut rpc,
            (Some("acp"), _) | (_, Some("acp.sock")) => &mut acp,
            _ => {
                tracing::warn!(
                    index,
                    ?path_name,
                    "socket activation: ignoring a socket that is neither lsp, rpc nor acp"
                );
                continue;
            }
        };
        *role = Some(listener);
    }
    let missing = |name| SocketError::MissingActivatedSocket {
        count,
        name,
        names: names.clone(),
    };
    match (lsp, rpc) {
        (Some(lsp), Some(rpc)) => Ok(Some(Activated { lsp, rpc, acp })),
        (None, _) => Err(missing("lsp")),
        (_, None) => Err(missing("rpc")),
    }
}

/// Tells systemd the daemon is ready (`READY=1` to `$NOTIFY_SOCKET`, a datagram); nothing
/// when not started by systemd.
pub fn notify_ready() {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET").filter(|v| !v.is_empty()) else {
        return;
    };
    let outcome = UnixDatagram::unbound().and_then(|socket| {
        let bytes = target.as_encoded_bytes();
        let message = format!("READY=1\nMAINPID={}\n", std::process::id());
        if let Some(name) = bytes.strip_prefix(b"@") {
            use std::os::linux::net::SocketAddrExt as _;
            let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(message.as_bytes(), &address)
        } else {
            socket.send_to(message.as_bytes(), Path::new(&target))
        }
    });
    match outcome {
        Ok(_) => tracing::info!("told systemd the daemon is ready"),
        Err(error) => tracing::warn!(%error, "cannot notify systemd (NOTIFY_SOCKET)"),
    }
}

/// A connection to a running daemon's socket, when the runtime directory is a safe one of
/// ours and the socket answers. `None` means no daemon runs (or it cannot be trusted: the
/// reason is logged).
pub fn connect_running(paths: &RuntimePaths, socket: &Path) -> Option<UnixStream> {
    if !socket.exists() {
        return None;
    }
    if let Err(error) = check_dir(&paths.dir) {
        tracing::warn!("not using the daemon: {error}");
        return None;
    }
    UnixStream::connect(socket).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_pid_file_is_refused_with_the_holders_pid() {
        let root = tempfile::tempdir().expect("a temp dir");
        let path = root.path().join("daemon.pid");
        let mut first = PidLock::acquire(&path).expect("locked");
        first.write_pid().expect("written");
        match PidLock::acquire(&path) {
            Err(SocketError::AlreadyRunning { pid }) => {
                assert_eq!(pid, std::process::id().to_string());
            }
            other => panic!("expected AlreadyRunning, got {other:?}"),
        }
        first.remove();
        assert!(!path.exists());
    }

    #[test]
    fn bind_refuses_to_replace_a_file_that_is_not_a_socket() {
        let root = tempfile::tempdir().expect("a temp dir");
        let path = root.path().join("lsp.sock");
        fs::write(&path, "precious").expect("write");
        assert!(matches!(
            bind(&path, &root.path().join("daemon.pid")),
            Err(SocketError::NotASocket { .. })
        ));
        assert_eq!(fs::read_to_string(&path).expect("kept"), "precious");
    }
}
