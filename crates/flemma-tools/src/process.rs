//! Running a command line the way `bash` and custom tools do: `bash -c` in a new process group,
//! stdin from `/dev/null` (or given bytes), stdout and stderr merged into a temporary file (not a
//! pipe, so a command that leaves a background job running returns when the shell exits), a
//! time limit and cancellation that kill the whole group.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::{FullOutput, RunContext};

/// How much of each end of a very large output is read back.
pub const READBACK_END_BYTES: u64 = 1024 * 1024;
/// Put between the two ends when the middle of an output was not read back.
pub const READBACK_GAP: &str = "\n[... output too large to read back in full ...]\n";

const POLL: Duration = Duration::from_millis(20);

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code (a signal `n` is reported as `128 + n`, as shells do).
    Exited(i32),
    /// It ran past its time limit and was killed with its process group.
    TimedOut(Duration),
    /// It was cancelled and killed with its process group.
    Cancelled,
}

/// A finished command: how it ended, the output read back (both ends when huge) and the file
/// holding the full output.
#[derive(Debug)]
pub struct Finished {
    pub ending: Ending,
    pub output: String,
    pub full_output: FullOutput,
    pub output_bytes: u64,
}

/// Why a command could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("could not create the temporary output file: {0}")]
    TempFile(std::io::Error),
    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("could not wait for the command: {0}")]
    Wait(std::io::Error),
}

/// The argv that runs `command_line` with `bash -c`, wrapped by the sandbox when it has one.
fn argv(ctx: &RunContext, command_line: &str) -> Vec<String> {
    let inner = vec![
        "bash".to_string(),
        "-c".to_string(),
        command_line.to_string(),
    ];
    match &ctx.sandbox {
        Some(sandbox) => sandbox.wrap(&inner, &ctx.cwd),
        None => inner,
    }
}

/// Runs `command_line` with `bash -c` in `ctx.cwd`, with `ctx.env`, `PAGER=cat` and
/// `GIT_PAGER=cat`. `stdin` is fed to the process (then closed) when given, else it reads
/// `/dev/null`. Waits at most `timeout`, polling `ctx.cancel`.
pub fn run_shell(
    ctx: &RunContext,
    command_line: &str,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> Result<Finished, SpawnError> {
    let temp =
        tempfile::NamedTempFile::with_prefix("flemma-tool-").map_err(SpawnError::TempFile)?;
    let (file, path) = temp.into_parts();
    let err_file = file.try_clone().map_err(SpawnError::TempFile)?;
    let out_file = file.try_clone().map_err(SpawnError::TempFile)?;
    let args = argv(ctx, command_line);
    let mut command = Command::new(&args[0]);
    command
        .args(&args[1..])
        .current_dir(&ctx.cwd)
        .env_clear()
        .envs(tool_environment())
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .envs(ctx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::from(out_file))
        .stderr(Stdio::from(err_file))
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .process_group(0);
    let mut child = command.spawn().map_err(|source| SpawnError::Spawn {
        program: args[0].clone(),
        source,
    })?;
    let pgid = child.id();
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A writer thread so a process that never reads stdin cannot block us; a closed pipe
        // (the process exited without reading) is not an error.
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let started = Instant::now();
    let ending = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let code = status
                    .code()
                    .or_else(|| status.signal().map(|s| 128 + s))
                    .unwrap_or(1);
                break Ending::Exited(code);
            }
            Ok(None) => {}
            Err(error) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(SpawnError::Wait(error));
            }
        }
        if ctx.cancel.is_cancelled() {
            kill_group(pgid);
            let _ = child.wait();
            break Ending::Cancelled;
        }
        if started.elapsed() >= timeout {
            kill_group(pgid);
            let _ = child.wait();
            break Ending::TimedOut(timeout);
        }
        std::thread::sleep(POLL);
    };
    let mut file = file;
    let (output, output_bytes) = read_both_ends(&mut file).map_err(SpawnError::TempFile)?;
    Ok(Finished {
        ending,
        output,
        full_output: FullOutput(Arc::new(path)),
        output_bytes,
    })
}

/// The environment of tool processes (`bash`, custom tools, language servers): this process's,
/// without what must not reach the model's commands (see [`is_withheld`]).
pub fn tool_environment() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| !is_withheld(name))
        .collect()
}

/// Whether the variable `name` is kept from tool processes: provider keys and settings,
/// anything named like a key, token, secret, password or credential, and the sockets of the
/// daemon, the session bus, the agents and the display (a sandboxed command must not reach
/// them even where their files are visible).
pub fn is_withheld(name: &std::ffi::OsStr) -> bool {
    const SOCKETS: [&str; 16] = [
        "XDG_RUNTIME_DIR",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "GNOME_KEYRING_CONTROL",
        "XAUTHORITY",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "NOTIFY_SOCKET",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "KRB5CCNAME",
        "SWAYSOCK",
    ];
    const PREFIXES: [&str; 8] = [
        "FLEMMA",
        "ANTHROPIC_",
        "OPENAI_",
        "GEMINI_",
        "MOONSHOT_",
        "VERTEX_",
        "CLAUDE_",
        "AWS_",
    ];
    const WORDS: [&str; 14] = [
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "COOKIE",
    ];
    const PARTS: [&str; 6] = [
        "API_KEY",
        "APIKEY",
        "SECRET",
        "TOKEN",
        "PASSWORD",
        "CREDENTIAL",
    ];
    let name = name.to_string_lossy().to_ascii_uppercase();
    SOCKETS.contains(&name.as_str())
        || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
        || name.split('_').any(|word| WORDS.contains(&word))
        || PARTS.iter().any(|part| name.contains(part))
}

/// Kills every process in the group `pgid` (the shell and whatever it started that did not
/// leave the group).
pub fn kill_group(pgid: u32) {
    let Ok(pid) = i32::try_from(pgid) else { return };
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Reads `file` whole when it is at most two `READBACK_END_BYTES`, else its first and last
/// `READBACK_END_BYTES` with [`READBACK_GAP`] between. Invalid UTF-8 is replaced (U+FFFD).
pub fn read_both_ends(file: &mut File) -> std::io::Result<(String, u64)> {
    let size = file.seek(SeekFrom::End(0))?;
    file.seek(SeekFrom::Start(0))?;
    if size <= 2 * READBACK_END_BYTES {
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        return Ok((String::from_utf8_lossy(&bytes).into_owned(), size));
    }
    let end = usize::try_from(READBACK_END_BYTES).unwrap_or(usize::MAX);
    let mut head = vec![0; end];
    file.read_exact(&mut head)?;
    file.seek(SeekFrom::Start(size - READBACK_END_BYTES))?;
    let mut tail = vec![0; end];
    file.read_exact(&mut tail)?;
    let mut text = String::from_utf8_lossy(&head).into_owned();
    text.push_str(READBACK_GAP);
    text.push_str(&String::from_utf8_lossy(&tail));
    Ok((text, size))
}

/// Whether `program` is an executable file in one of `PATH`'s absolute directories.
pub fn on_path(program: &str) -> bool {
    find_on_path(program).is_some()
}

/// The full path of `program` on `PATH`, its relative entries (`.`, empty ones) ignored; a
/// name with a `/` is taken against [`crate::launch::NEUTRAL_DIR`] (see
/// [`crate::launch::find_program`]).
pub fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
    crate::launch::find_program(
        program,
        std::env::var_os("PATH").as_deref(),
        Path::new(crate::launch::NEUTRAL_DIR),
    )
}

#[cfg(test)]
mod tests {
    use super::is_withheld;

    #[test]
    fn keys_tokens_and_sockets_are_withheld() {
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "VERTEX_ACCESS_TOKEN",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "NPM_CONFIG__AUTH",
            "DB_PASSWORD",
            "XDG_RUNTIME_DIR",
            "DBUS_SESSION_BUS_ADDRESS",
            "SSH_AUTH_SOCK",
            "FLEMMA_CONFIG",
            "my_api_key",
        ] {
            assert!(is_withheld(name.as_ref()), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "USER",
            "CARGO_HOME",
            "PWD",
            "SHELL",
        ] {
            assert!(!is_withheld(name.as_ref()), "{name}");
        }
    }
}
