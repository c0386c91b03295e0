//! The one error type of every command, and the one place exit codes are decided.

use std::process::ExitCode;

/// What kind of failure ended a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The chat file cannot be read.
    Unreadable,
    /// The input has problems that stop the command (diagnostics say which).
    Blocked,
    /// The command ran and failed (the provider refused, the file could not be written).
    Failed,
    /// Ctrl-C.
    Interrupted,
    /// The reader of our output went away (`flemmad parse big.chat | head`): exit quietly.
    BrokenPipe,
}

/// Exit status when the reader of our output went away: what a shell reports for a program
/// ended by SIGPIPE (128 + 13).
pub const BROKEN_PIPE_EXIT: u8 = 141;

/// Exit status while a tool call waits for `flemmad approve` / `flemmad reject`.
pub const AWAITING_APPROVAL_EXIT: u8 = 3;

impl ErrorKind {
    /// The exit status: 2 for unreadable input (clap exits 2 for usage errors before a
    /// command runs), 130 for an interruption, 1 for everything else.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Unreadable => 2,
            ErrorKind::Blocked | ErrorKind::Failed => 1,
            ErrorKind::Interrupted => 130,
            ErrorKind::BrokenPipe => BROKEN_PIPE_EXIT,
        }
    }
}

/// How a followed engine cycle ended for the command line, when it did not fail: decided once,
/// by [`cycle_end`], for the in-process `send` and for the commands that follow the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleEnd {
    /// Nothing left to do, or one step done without autopilot: exit 0.
    Done,
    /// A tool call (or an asked agent's question) waits for `flemmad approve`/`reject`: exit 3.
    AwaitingApproval,
}

impl CycleEnd {
    /// The exit status.
    pub fn exit_code(self) -> ExitCode {
        match self {
            CycleEnd::Done => ExitCode::SUCCESS,
            CycleEnd::AwaitingApproval => ExitCode::from(AWAITING_APPROVAL_EXIT),
        }
    }
}

/// The one decision from the engine's typed stop (`engine:stopped`, [`EngineStopped`]) to what
/// the command line says and exits with: 0 done, 3 awaiting approval, 130 cancelled, 1 for
/// every failure (its message, and for a failure after something ran, that what ran is in the
/// file).
///
/// [`EngineStopped`]: flemma_protocol::event::EngineStopped
pub fn cycle_end(
    command: &str,
    stopped: &flemma_protocol::event::EngineStopped,
) -> Result<CycleEnd, CliError> {
    use flemma_protocol::event::StopLabel;
    let message = stopped.message.as_deref().unwrap_or_default();
    match stopped.reason {
        StopLabel::Idle | StopLabel::StepDone => Ok(CycleEnd::Done),
        StopLabel::AwaitingApproval => Ok(CycleEnd::AwaitingApproval),
        StopLabel::Cancelled => Err(CliError::interrupted(
            command,
            "cancelled; what ran was stopped and marked `aborted` in the file",
        )),
        // Refused before anything was sent (the daemon's setup): the message says why.
        StopLabel::Error if message.starts_with(NOTHING_SENT) => {
            Err(CliError::failed(command, message))
        }
        StopLabel::Error | StopLabel::Refused => Err(CliError::failed(
            command,
            format!("{message} (everything before is in the file)"),
        )),
        StopLabel::MaxTurns | StopLabel::UserContentInApproved => {
            Err(CliError::failed(command, message))
        }
    }
}

/// How the message of a stop that sent nothing begins (the host's refusal before a request).
const NOTHING_SENT: &str = "nothing was sent";

/// A failed command: its kind and what to print on stderr (complete lines).
#[derive(Debug)]
pub struct CliError {
    pub kind: ErrorKind,
    pub report: String,
}

impl CliError {
    fn new(kind: ErrorKind, report: String) -> Self {
        Self { kind, report }
    }

    /// `flemmad COMMAND: ERROR` (with the error's causes), exit 2.
    pub fn unreadable(command: &str, error: &anyhow::Error) -> Self {
        Self::new(
            ErrorKind::Unreadable,
            format!("flemmad {command}: {error:#}\n"),
        )
    }

    /// The rendered diagnostics, then `flemmad COMMAND: SUMMARY`, exit 1.
    pub fn blocked(command: &str, diagnostics: String, summary: &str) -> Self {
        Self::new(
            ErrorKind::Blocked,
            format!("{diagnostics}flemmad {command}: {summary}\n"),
        )
    }

    /// `flemmad COMMAND: MESSAGE`, exit 1.
    pub fn failed(command: &str, message: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Failed, format!("flemmad {command}: {message}\n"))
    }

    /// `flemmad COMMAND: MESSAGE`, exit 130.
    pub fn interrupted(command: &str, message: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorKind::Interrupted,
            format!("flemmad {command}: {message}\n"),
        )
    }

    /// Prints the report and returns the exit status.
    pub fn exit(self) -> ExitCode {
        super::Ui::root().stderr(&self.report);
        ExitCode::from(self.kind.exit_code())
    }
}

impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        let broken_pipe = error.chain().any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            return Self::new(ErrorKind::BrokenPipe, String::new());
        }
        Self::new(ErrorKind::Failed, format!("flemmad: {error:#}\n"))
    }
}

impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            return Self::new(ErrorKind::BrokenPipe, String::new());
        }
        Self::new(ErrorKind::Failed, format!("flemmad: {error}\n"))
    }
}

impl From<serde_json::Error> for CliError {
    fn from(error: serde_json::Error) -> Self {
        Self::new(ErrorKind::Failed, format!("flemmad: {error}\n"))
    }
}

impl From<crate::chat::LoadError> for CliError {
    fn from(error: crate::chat::LoadError) -> Self {
        match error {
            crate::chat::LoadError::Unreadable { command, error } => {
                Self::unreadable(&command, &error)
            }
            crate::chat::LoadError::Failed { command, message } => Self::failed(&command, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_protocol::event::{EngineStopped, StopLabel};

    /// Every stop, as a table: (label, message) → exit status and the report's last line.
    #[test]
    fn every_stop_has_one_exit_code() {
        let table: &[(StopLabel, Option<&str>, u8, &str)] = &[
            (StopLabel::Idle, None, 0, ""),
            (StopLabel::StepDone, None, 0, ""),
            (
                StopLabel::AwaitingApproval,
                None,
                AWAITING_APPROVAL_EXIT,
                "",
            ),
            (
                StopLabel::Cancelled,
                None,
                130,
                "flemmad send: cancelled; what ran was stopped and marked `aborted` in the file\n",
            ),
            (
                StopLabel::Error,
                Some("HTTP 500"),
                1,
                "flemmad send: HTTP 500 (everything before is in the file)\n",
            ),
            (
                StopLabel::Error,
                Some("nothing was sent: the chat is empty"),
                1,
                "flemmad send: nothing was sent: the chat is empty\n",
            ),
            (
                StopLabel::Refused,
                Some("the model refused"),
                1,
                "flemmad send: the model refused (everything before is in the file)\n",
            ),
            (
                StopLabel::MaxTurns,
                Some("autopilot ran 2 turns"),
                1,
                "flemmad send: autopilot ran 2 turns\n",
            ),
            (
                StopLabel::UserContentInApproved,
                Some("review `t1`"),
                1,
                "flemmad send: review `t1`\n",
            ),
        ];
        for &(reason, message, code, report) in table {
            let stopped = EngineStopped {
                reason,
                message: message.map(str::to_owned),
            };
            let (got_code, got_report) = match cycle_end("send", &stopped) {
                Ok(CycleEnd::Done) => (0, String::new()),
                Ok(CycleEnd::AwaitingApproval) => (AWAITING_APPROVAL_EXIT, String::new()),
                Err(error) => (error.kind.exit_code(), error.report),
            };
            assert_eq!(
                (got_code, got_report.as_str()),
                (code, report),
                "{reason:?}"
            );
        }
        assert_eq!(CycleEnd::Done.exit_code(), ExitCode::SUCCESS);
        assert_eq!(
            CycleEnd::AwaitingApproval.exit_code(),
            ExitCode::from(AWAITING_APPROVAL_EXIT)
        );
    }
}
