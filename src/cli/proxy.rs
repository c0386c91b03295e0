//! `flemmad lsp` and `flemmad acp` with a daemon running: a byte pipe between stdio and the
//! daemon's `lsp.sock` or `acp.sock`, so the editor talks to the daemon's session without
//! knowing.

use std::io;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

use crate::daemon::RuntimePaths;

/// When a daemon answers on the socket `socket` names, pipes stdio to it until the daemon
/// closes the connection (`Some`, how that went); `None` when no daemon answers. `what` names
/// the protocol in the log.
pub fn through_daemon(
    socket: fn(&RuntimePaths) -> &std::path::Path,
    what: &str,
) -> Option<io::Result<()>> {
    let paths = RuntimePaths::from_env();
    let stream = crate::daemon::socket::connect_running(&paths, socket(&paths))?;
    tracing::info!("{what}: proxying stdio to the daemon");
    let outcome = pump(stream);
    tracing::info!("{what}: the daemon closed the connection");
    Some(outcome)
}

/// Pumps stdin to the daemon and the daemon to stdout until the daemon closes the
/// connection. The end of stdin is passed on as a half-close, so the daemon's session ends
/// as it would over stdio.
fn pump(stream: UnixStream) -> io::Result<()> {
    let mut to_daemon = stream.try_clone()?;
    std::thread::Builder::new()
        .name("proxy-stdin".into())
        .spawn(move || {
            let copied = copy_flushing(&mut io::stdin().lock(), &mut to_daemon);
            if let Err(error) = copied {
                tracing::debug!(%error, "proxy: stdin to the daemon ended");
            }
            let _ = to_daemon.shutdown(Shutdown::Write);
        })?;
    let mut from_daemon = stream;
    let copied = copy_flushing(&mut from_daemon, &mut io::stdout().lock());
    let _ = from_daemon.shutdown(Shutdown::Both);
    match copied {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => Err(error),
        _ => Ok(()),
    }
}

/// `io::copy`, flushing after every read (messages must not wait in a buffer).
fn copy_flushing(from: &mut impl io::Read, to: &mut impl io::Write) -> io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        to.write_all(&buffer[..read])?;
        to.flush()?;
    }
}
