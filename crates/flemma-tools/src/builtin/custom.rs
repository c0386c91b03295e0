//! Custom tools from config (`[[tools.custom]]`): a command line run with `bash -c` in the
//! call's directory (inside the sandbox when it has a backend), the input as JSON on stdin,
//! stdout as the result. A non-zero exit is an error result carrying stderr; the timeout and
//! cancellation kill the whole process group.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_config::CustomTool;
use serde_json::Value;

use crate::context::{FullOutput, Outcome, RunContext};
use crate::process::{kill_group, read_both_ends};
use crate::spec::{Capability, ToolSpec};

/// How often the runner looks at the process, the clock and the cancel flag.
const POLL: Duration = Duration::from_millis(20);
/// Most stderr text put into an error result.
const MAX_STDERR_BYTES: u64 = 16 * 1024;

/// The definition offered to the model. A custom schema is sent as written (not strict) unless
/// it is already a strict object schema.
pub fn spec(tool: &CustomTool) -> ToolSpec {
    let strict = tool.input_schema.get("additionalProperties") == Some(&Value::Bool(false));
    ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.clone(),
        strict,
        is_async: true,
        capabilities: Capability::parse_all(&tool.capabilities),
    }
}

/// Runs `tool` with `input` (already validated, harness parameters stripped).
pub fn run(ctx: &RunContext, tool: &CustomTool, input: &Value) -> Outcome {
    let timeout = tool.timeout.map(Duration::from_secs).unwrap_or(ctx.timeout);
    let name = tool.name.as_str();
    let stdin = match serde_json::to_vec(input) {
        Ok(mut b) => {
            b.push(b'\n');
            b
        }
        Err(e) => return Outcome::error(format!("{name}: the input cannot be encoded: {e}")),
    };
    let files = tempfile::NamedTempFile::with_prefix("flemma-custom-out-")
        .and_then(|out| Ok((out, tempfile::tempfile()?)));
    let (out_temp, mut err_file) = match files {
        Ok(f) => f,
        Err(e) => {
            return Outcome::error(format!(
                "{name}: could not create its output file ({e}) — check that the temporary directory is writable"
            ));
        }
    };
    let (out_file, out_path) = out_temp.into_parts();
    let (Ok(out_for_child), Ok(err_for_child)) = (out_file.try_clone(), err_file.try_clone())
    else {
        return Outcome::error(format!("{name}: could not share its output file"));
    };
    let inner = vec!["bash".to_string(), "-c".to_string(), tool.command.clone()];
    let argv = match &ctx.sandbox {
        Some(sandbox) => sandbox.wrap(&inner, &ctx.cwd),
        None => inner,
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&ctx.cwd)
        .env_clear()
        .envs(crate::process::tool_environment())
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("FLEMMA_TOOL_NAME", name)
        .envs(ctx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::from(out_for_child))
        .stderr(Stdio::from(err_for_child))
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Outcome::error(format!("{name}: could not start `{}`: {e}", argv[0]));
        }
    };
    let pgid = child.id();
    if let Some(mut pipe) = child.stdin.take() {
        // On a thread: a tool that never reads its stdin must not block the call, and a pipe it
        // closed without reading (EPIPE) is not an error.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&stdin);
        });
    }
    let started = Instant::now();
    let ending = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ending::Exited(status),
            Ok(None) => {}
            Err(e) => {
                kill_group(pgid);
                let _ = child.wait();
                return Outcome::error(format!("{name}: could not wait for the command: {e}"));
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
            break Ending::TimedOut;
        }
        std::thread::sleep(POLL);
    };
    // The group may have left children behind after the shell exited: they are ours too.
    kill_group(pgid);
    let mut out_file = out_file;
    let (stdout, stdout_bytes) = match read_both_ends(&mut out_file) {
        Ok(read) => read,
        Err(e) => return Outcome::error(format!("{name}: its output cannot be read back: {e}")),
    };
    let stderr = read_head(&mut err_file, MAX_STDERR_BYTES);
    // The file backs the result only when the text does not hold all of it (the middle of a
    // huge output was not read back) or the text is over the truncation limits: a small
    // output is not "truncated".
    let partial = stdout_bytes > 2 * crate::process::READBACK_END_BYTES;
    let overflowing = crate::truncate::overflows(&stdout);
    let mut outcome = finish(name, ending, stdout, stderr, timeout);
    if partial || overflowing {
        outcome.full_output = Some(FullOutput(Arc::new(out_path)));
    }
    outcome
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

fn finish(
    name: &str,
    ending: Ending,
    stdout: String,
    stderr: String,
    timeout: Duration,
) -> Outcome {
    let stdout = stdout.trim_end_matches('\n').to_string();
    let with_stderr = |mut text: String| {
        let stderr = stderr.trim_end();
        if !stderr.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str("[stderr]\n");
            text.push_str(stderr);
        }
        text
    };
    match ending {
        Ending::Exited(status) if status.success() => {
            if stdout.trim().is_empty() {
                Outcome::ok(format!("[{name} printed nothing]"))
            } else {
                Outcome::ok(stdout)
            }
        }
        Ending::Exited(status) => {
            let mut text = with_stderr(stdout);
            if !text.is_empty() {
                text.push('\n');
            }
            match (status.code(), status.signal()) {
                (Some(code), _) => text.push_str(&format!("[exit code: {code}]")),
                (None, Some(sig)) => text.push_str(&format!("[{name} was killed by signal {sig}]")),
                (None, None) => text.push_str(&format!("[{name} ended abnormally]")),
            }
            Outcome::error(text)
        }
        Ending::TimedOut => {
            let mut text = with_stderr(stdout);
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("[error: {}s timeout exceeded]", timeout.as_secs()));
            Outcome::error(text)
        }
        Ending::Cancelled => {
            let mut text = stdout;
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str("[error: cancelled]");
            Outcome::error(text)
        }
    }
}

fn read_head(file: &mut File, max: u64) -> String {
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(0)).is_ok() {
        let _ = file.take(max).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
