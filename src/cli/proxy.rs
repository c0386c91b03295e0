//! `flemmad lsp` and `flemmad acp` with a daemon running: a byte pipe between stdio and the
//! daemon's `lsp.sock` or `acp.sock`, so the editor talks to the daemon's session without
//! knowing.

use std::io;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::runtime_dir::RuntimePaths;

/// What the pipe says when the daemon closed the connection before the editor ended its
/// session: the editor should start the server again.
pub const DAEMON_WENT_AWAY: &str = "the daemon (`flemmad serve`) closed the connection before the editor ended its session: it stopped or was killed; start the server again (a new `flemmad lsp`/`flemmad acp` uses a daemon that runs, else works in-process)";

/// When a daemon answers on the socket `socket` names, pipes stdio to it until the daemon
/// closes the connection (`Some`, how that went); `None` when no daemon answers. `what` names
/// the protocol in the log. `ended` sees every chunk the editor sends and says whether the
/// editor has ended its session (LSP's `exit`); the end of stdin does too. A daemon that
/// closes the connection before is an error ([`DAEMON_WENT_AWAY`]): the editor, seeing the
/// server fail, starts it again.
pub fn through_daemon(
    paths: &RuntimePaths,
    socket: fn(&RuntimePaths) -> &std::path::Path,
    what: &str,
    ended: impl FnMut(&[u8]) -> bool + Send + 'static,
) -> Option<io::Result<()>> {
    let stream = crate::daemon::socket::connect_running(paths, socket(paths))?;
    tracing::info!("{what}: proxying stdio to the daemon");
    let outcome = pump(stream, ended);
    match &outcome {
        Ok(()) => tracing::info!("{what}: the daemon closed the connection"),
        Err(error) => tracing::error!("{what}: {error}"),
    }
    Some(outcome)
}

/// Pumps stdin to the daemon and the daemon to stdout until the daemon closes the
/// connection. The end of stdin is passed on as a half-close, so the daemon's session ends
/// as it would over stdio.
fn pump(
    stream: UnixStream,
    mut ended: impl FnMut(&[u8]) -> bool + Send + 'static,
) -> io::Result<()> {
    let editor_done = Arc::new(AtomicBool::new(false));
    let mut to_daemon = stream.try_clone()?;
    let done = Arc::clone(&editor_done);
    std::thread::Builder::new()
        .name("proxy-stdin".into())
        .spawn(move || {
            // Known before the daemon can answer it by closing the connection.
            let mut inspect = |chunk: &[u8]| {
                if ended(chunk) {
                    done.store(true, Ordering::SeqCst);
                }
            };
            let copied = copy_flushing(&mut io::stdin().lock(), &mut to_daemon, &mut inspect);
            done.store(true, Ordering::SeqCst);
            if let Err(error) = copied {
                tracing::debug!(%error, "proxy: stdin to the daemon ended");
            }
            let _ = to_daemon.shutdown(Shutdown::Write);
        })?;
    let mut from_daemon = stream;
    let copied = copy_flushing(&mut from_daemon, &mut io::stdout().lock(), &mut |_| {});
    let _ = from_daemon.shutdown(Shutdown::Both);
    let editor_done = editor_done.load(Ordering::SeqCst);
    match copied {
        // The editor went away: nobody to tell.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        // A killed daemon's connection may end in a reset rather than a close.
        Err(error)
            if !editor_done
                && matches!(
                    error.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
        {
            Err(io::Error::other(format!("{DAEMON_WENT_AWAY} ({error})")))
        }
        Err(error) => Err(error),
        Ok(()) if editor_done => Ok(()),
        Ok(()) => Err(io::Error::other(DAEMON_WENT_AWAY)),
    }
}

/// `io::copy`, flushing after every read (messages must not wait in a buffer); `inspect` sees
/// each chunk before it is written.
fn copy_flushing(
    from: &mut impl io::Read,
    to: &mut impl io::Write,
    inspect: &mut dyn FnMut(&[u8]),
) -> io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        inspect(&buffer[..read]);
        to.write_all(&buffer[..read])?;
        to.flush()?;
    }
}
