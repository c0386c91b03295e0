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
