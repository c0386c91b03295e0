//! Running a search program and reading its output line by line, stopping it when enough
//! lines came, the time is up or the call is cancelled. Shared by `grep` and `find`.

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::context::RunContext;

/// How often a waiting runner looks at the cancel flag and the clock.
const POLL: Duration = Duration::from_millis(50);

/// The `PATH` programs are looked up in: the call's environment wins over the daemon's.
pub(crate) fn search_path(ctx: &RunContext) -> Option<OsString> {
    ctx.env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
}

/// The first executable called `name` on the call's `PATH`.
pub(crate) fn find_program(ctx: &RunContext, name: &str) -> Option<PathBuf> {
    let path = search_path(ctx)?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A command in the call's directory and environment, stdin closed.
pub(crate) fn command(ctx: &RunContext, program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(&ctx.cwd)
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// How reading ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// The program exited by itself with this code (`None`: killed by a signal).
    Exited {
        code: Option<i32>,
        stderr: String,
    },
    /// `keep` said stop: enough lines.
    Enough,
    TimedOut,
    Cancelled,
}

/// Runs `cmd`, handing every stdout line (lossily decoded) to `keep` until it returns `false`.
pub(crate) fn run_lines(
    ctx: &RunContext,
    mut cmd: Command,
    mut keep: impl FnMut(&str) -> bool,
) -> std::io::Result<End> {
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            // Keep at most 64 KiB of error text.
            let _ = s.take(64 * 1024).read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    });
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(1024);
    let reader = std::thread::spawn(move || {
        if let Some(out) = stdout {
            let mut out = BufReader::new(out);
            let mut line = Vec::new();
            loop {
                line.clear();
                match out.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line.clone()).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    });
    let deadline = Instant::now() + ctx.timeout;
    let end = loop {
        if ctx.cancel.is_cancelled() {
            break End::Cancelled;
        }
        if Instant::now() >= deadline {
            break End::TimedOut;
        }
        match rx.recv_timeout(POLL) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let text = text.strip_suffix('\n').unwrap_or(&text);
                if !keep(text) {
                    break End::Enough;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait()?;
                let stderr = stderr_reader.join().unwrap_or_default();
                let _ = reader.join();
                return Ok(End::Exited {
                    code: status.code(),
                    stderr,
                });
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    drop(rx);
    let _ = reader.join();
    let _ = stderr_reader.join();
    Ok(end)
}
