//! `bash`: runs a command line with `bash -c` (see `crate::process` for how).

use std::time::Duration;

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::process::{self, Ending};
use crate::spec::{Capability, ToolSpec, strict_object_schema};

pub const NAME: &str = "bash";

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "Run a shell command with `bash -c` in the chat's directory. stdout and \
stderr are merged; stdin is empty. Each call is a new shell. Long output keeps its last 2000 lines \
/ 50 KB, with the full output saved to a file. A non-zero exit is reported as `[exit code: N]`."
            .into(),
        input_schema: strict_object_schema(vec![
            (
                "command",
                json!({"type": "string", "description": "The command line."}),
            ),
            (
                "timeout",
                json!({"type": ["integer", "null"], "minimum": 1,
                       "description": "Seconds before the command is killed (default 30)."}),
            ),
        ]),
        strict: true,
        is_async: true,
        capabilities: vec![Capability::AutoApprovesIfSandboxed],
    }
}

pub fn run(ctx: &RunContext, input: &Value) -> Outcome {
    let Some(command) = input.get("command").and_then(Value::as_str) else {
        return Outcome::error("bash needs a `command` string");
    };
    let timeout = input
        .get("timeout")
        .and_then(Value::as_u64)
        .map(Duration::from_secs)
        .unwrap_or(ctx.timeout);
    let finished = match process::run_shell(ctx, command, None, timeout) {
        Ok(finished) => finished,
        Err(error) => return Outcome::error(format!("[error: {error}]")),
    };
    let mut text = finished.output;
    let mut append = |line: String| {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
    };
    let is_error = match &finished.ending {
        Ending::Exited(0) => false,
        Ending::Exited(code) => {
            append(format!("[exit code: {code}]"));
            true
        }
        stopped => {
            append(stopped.stopped_line().unwrap_or_default());
            true
        }
    };
    // Whenever the output goes to the store (past the readback window, or too long for the
    // result), the store gets the runner's own file, byte for byte: the text above has invalid
    // UTF-8 replaced, and past the readback window only its two ends.
    let readback_partial = finished.output_bytes > 2 * process::READBACK_END_BYTES;
    let stored = readback_partial || crate::truncate::overflows(&text);
    Outcome {
        full_output: stored.then_some(finished.full_output),
        text,
        is_error,
    }
}
