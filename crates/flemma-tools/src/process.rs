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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code (a signal `n` is reported as `128 + n`, as shells do).
    Exited(i32),
    /// It ran past its time limit and was killed with its process group.
    TimedOut(Duration),
    /// It was cancelled and killed with its process group.
    Cancelled,
    /// It used more than the sandbox's limits allow (said how) and was killed.
    OverLimit(String),
}

impl Ending {
    /// The line a result ends with for a command that did not exit by itself.
    pub fn stopped_line(&self) -> Option<String> {
        match self {
            Ending::Exited(_) => None,
            Ending::TimedOut(limit) => {
                Some(format!("[error: {}s timeout exceeded]", limit.as_secs()))
            }
            Ending::Cancelled => Some("[error: cancelled]".into()),
            Ending::OverLimit(why) => Some(format!("[error: stopped: {why}]")),
        }
    }
}

/// A tool's process (`bash`, a custom tool): started in its own process group, inside the
/// sandbox when the context has one (with the sandbox's limits), waited for with a time limit,
/// cancellation and the limits' watchdog.
#[derive(Debug)]
pub struct ToolProcess {
    child: std::process::Child,
    /// The sandboxed command's `.git` placeholders, removed once it ended.
    sandboxed: Option<crate::sandbox::SandboxedCommand>,
    watchdog: Option<Watchdog>,
}

impl ToolProcess {
    /// Starts `inner` (an argv) in `ctx.cwd` with the tool environment, `PAGER=cat`,
    /// `GIT_PAGER=cat` and `ctx.env`; `setup` sets its stdio and anything else.
    pub fn spawn(
        ctx: &RunContext,
        inner: Vec<String>,
        setup: impl FnOnce(&mut Command),
    ) -> Result<Self, SpawnError> {
        let (argv, sandboxed, limits) = match &ctx.sandbox {
            Some(sandbox) => {
                let limits = sandbox.limits();
                let command = sandbox.command(&limited(inner, limits), &ctx.cwd);
                (command.argv.clone(), Some(command), Some(limits))
            }
            None => (inner, None, None),
        };
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .current_dir(&ctx.cwd)
            .env_clear()
            .envs(tool_environment())
            .env("PAGER", "cat")
            .env("GIT_PAGER", "cat")
            .envs(ctx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .process_group(0);
        setup(&mut command);
        let child = command.spawn().map_err(|source| SpawnError::Spawn {
            program: argv[0].clone(),
            source,
        })?;
        let watchdog = limits
            .filter(|l| l.processes.is_some() || l.memory_bytes.is_some())
            .map(|limits| Watchdog::new(child.id(), limits));
        Ok(Self {
            child,
            sandboxed,
            watchdog,
        })
    }

    /// The process group (the leader's pid).
    pub fn pgid(&self) -> u32 {
        self.child.id()
    }

    /// Its stdin, when it was piped.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// Waits until it exits, runs past `timeout`, is cancelled or passes a limit (then its
    /// whole group is killed); what the group left behind is killed either way.
    pub fn wait(mut self, ctx: &RunContext, timeout: Duration) -> Result<Ending, SpawnError> {
        let pgid = self.pgid();
        let started = Instant::now();
        let ending = loop {
            match self.child.try_wait() {
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
                    let _ = self.child.wait();
                    return Err(SpawnError::Wait(error));
                }
            }
            let stop = if ctx.cancel.is_cancelled() {
                Some(Ending::Cancelled)
            } else if started.elapsed() >= timeout {
                Some(Ending::TimedOut(timeout))
            } else {
                self.watchdog
                    .as_mut()
                    .and_then(Watchdog::check)
                    .map(Ending::OverLimit)
            };
            if let Some(ending) = stop {
                kill_group(pgid);
                let _ = self.child.wait();
                break ending;
            }
            std::thread::sleep(POLL);
        };
        // The group may have left children behind after the shell exited: they are ours too.
        kill_group(pgid);
        drop(self.sandboxed.take());
        Ok(ending)
    }
}

/// `inner` run under the per-process part of `limits` (each process's data segment; and the
/// user's process count, which the kernel does not enforce for root: the [`Watchdog`] counts
/// the sandbox's own processes for everyone).
fn limited(inner: Vec<String>, limits: crate::sandbox::CallLimits) -> Vec<String> {
    let mut settings = Vec::new();
    if let Some(bytes) = limits.memory_bytes {
        settings.push(format!("-d {}", (bytes / 1024).max(1)));
    }
    if let Some(processes) = limits.processes {
        let (count, root) = user_processes();
        if !root {
            // RLIMIT_NPROC counts all of the user's processes, not only this call's.
            settings.push(format!("-u {}", count + processes as usize + 64));
        }
    }
    if settings.is_empty() {
        return inner;
    }
    let script = format!(
        "ulimit -S -H {} 2>/dev/null; exec \"$@\"",
        settings.join(" ")
    );
    let mut argv = vec![
        "bash".to_string(),
        "-c".to_string(),
        script,
        "flemma-limits".into(),
    ];
    argv.extend(inner);
    argv
}

/// How many processes this user runs, and whether this user is root.
fn user_processes() -> (usize, bool) {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid();
    let count = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid.as_raw()))
                .count()
        })
        .unwrap_or(0);
    (count, uid.is_root())
}

/// Counts the processes of a sandbox (its pid namespace) and their resident memory, and says
/// when they pass the limits. Looks at `/proc` every [`WATCHDOG_EVERY`].
#[derive(Debug)]
pub struct Watchdog {
    bwrap: u32,
    namespace: Option<std::ffi::OsString>,
    limits: crate::sandbox::CallLimits,
    last: Option<Instant>,
}

/// How often the watchdog looks.
pub const WATCHDOG_EVERY: Duration = Duration::from_millis(100);

impl Watchdog {
    /// The watchdog of the sandbox whose `bwrap` process is `bwrap`.
    pub fn new(bwrap: u32, limits: crate::sandbox::CallLimits) -> Self {
        Self {
            bwrap,
            namespace: None,
            limits,
            last: None,
        }
    }

    /// Why the sandbox must stop, when it passed a limit.
    pub fn check(&mut self) -> Option<String> {
        if self
            .last
            .is_some_and(|last| last.elapsed() < WATCHDOG_EVERY)
        {
            return None;
        }
        self.last = Some(Instant::now());
        if self.namespace.is_none() {
            self.namespace = sandbox_namespace(self.bwrap);
        }
        let namespace = self.namespace.as_ref()?;
        let (processes, resident) = namespace_usage(namespace);
        if let Some(limit) = self.limits.processes {
            if processes > limit as usize {
                return Some(format!(
                    "it ran more than {limit} processes at once (sandbox.limits.processes in your config.toml)"
                ));
            }
        }
        if let Some(limit) = self.limits.memory_bytes {
            if resident > limit {
                return Some(format!(
                    "its processes used more than {} MiB of memory together (sandbox.limits.memory in your config.toml)",
                    limit / (1024 * 1024)
                ));
            }
        }
        None
    }
}

/// The pid namespace of the sandbox bwrap `bwrap` runs (its child's), once it exists.
fn sandbox_namespace(bwrap: u32) -> Option<std::ffi::OsString> {
    let children = std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children")).ok()?;
    let child = children.split_whitespace().next()?;
    let own = std::fs::read_link(format!("/proc/{bwrap}/ns/pid")).ok()?;
    let theirs = std::fs::read_link(format!("/proc/{child}/ns/pid")).ok()?;
    (own != theirs).then(|| theirs.into_os_string())
}

/// The processes in the pid namespace `namespace`, and their resident memory in bytes.
fn namespace_usage(namespace: &std::ffi::OsStr) -> (usize, u64) {
    let page = rustix::param::page_size() as u64;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    let mut processes = 0usize;
    let mut resident = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        if std::fs::read_link(dir.join("ns/pid"))
            .ok()
            .as_deref()
            .map(Path::as_os_str)
            != Some(namespace)
        {
            continue;
        }
        processes += 1;
        let pages = std::fs::read_to_string(dir.join("statm"))
            .ok()
            .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0);
        resident += pages * page;
    }
    (processes, resident)
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
    let inner = vec![
        "bash".to_string(),
        "-c".to_string(),
        command_line.to_string(),
    ];
    let mut process = ToolProcess::spawn(ctx, inner, |command| {
        command
            .stdout(Stdio::from(out_file))
            .stderr(Stdio::from(err_file))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
    })?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, process.take_stdin()) {
        // A writer thread so a process that never reads stdin cannot block us; a closed pipe
        // (the process exited without reading) is not an error.
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let ending = process.wait(ctx, timeout)?;
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

pub use crate::launch::find_on_path;

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
