//! Custom tools from config (`[[tools.custom]]`): a command line run with `bash -c` in the
//! call's directory (inside the sandbox when it has a backend), the input as JSON on stdin,
//! stdout as the result. A non-zero exit is an error result carrying stderr; the timeout and
//! cancellation kill the whole process group.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use flemma_config::CustomTool;
use serde_json::Value;

use crate::context::{FullOutput, Outcome, RunContext};
use crate::process::{Ending, read_both_ends};
use crate::spec::{Capability, ToolSpec};

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
    let spawned = crate::process::ToolProcess::spawn(ctx, inner, |cmd| {
        cmd.env("FLEMMA_TOOL_NAME", name)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(out_for_child))
            .stderr(Stdio::from(err_for_child));
    });
    let mut process = match spawned {
        Ok(process) => process,
        Err(e) => return Outcome::error(format!("{name}: {e}")),
    };
    if let Some(mut pipe) = process.take_stdin() {
        // On a thread: a tool that never reads its stdin must not block the call, and a pipe it
        // closed without reading (EPIPE) is not an error.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&stdin);
        });
    }
    let ending = match process.wait(ctx, timeout) {
        Ok(ending) => ending,
        Err(e) => return Outcome::error(format!("{name}: {e}")),
    };
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
        Ending::Exited(0) => {
            if stdout.trim().is_empty() {
                Outcome::ok(format!("[{name} printed nothing]"))
            } else {
                Outcome::ok(stdout)
            }
        }
        Ending::Exited(code) => {
            let mut text = with_stderr(stdout);
            if !text.is_empty() {
                text.push('\n');
            }
            if code > 128 {
                text.push_str(&format!("[{name} was killed by signal {}]", code - 128));
            } else {
                text.push_str(&format!("[exit code: {code}]"));
            }
            Outcome::error(text)
        }
        Ending::TimedOut(_) => {
            let mut text = with_stderr(stdout);
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("[error: {}s timeout exceeded]", timeout.as_secs()));
            Outcome::error(text)
        }
        Ending::OverLimit(why) => {
            let mut text = with_stderr(stdout);
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("[error: stopped: {why}]"));
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
