//! The one way the CLI writes to the user (jj's `Ui`): results on stdout (text or JSON lines),
//! and on stderr the notes, warnings and reports of a command, each line prefixed with the
//! command (`flemmad tools: warning: …`). A command gets one `Ui` from `cli::run`; the send
//! display (`progress`) writes its live line through it too.
//!
//! Writing to stdout fails when the reader went away (`flemmad parse big.chat | head`): the
//! error goes back to the command, whose `CliError` exits quietly with 141. Writing to stderr
//! never fails a command (there is no one left to tell).

use std::io::Write as _;

/// Where a command's output goes.
#[derive(Debug, Clone)]
pub struct Ui {
    /// `flemmad COMMAND` (the prefix of the stderr lines).
    prefix: String,
}

impl Ui {
    /// The output of `flemmad COMMAND`.
    pub fn new(command: &str) -> Self {
        Self {
            prefix: format!("flemmad {command}"),
        }
    }

    /// The output of `flemmad` itself (`send`'s progress: `flemmad: done in …`).
    pub fn root() -> Self {
        Self {
            prefix: "flemmad".to_owned(),
        }
    }

    /// The same output for a subcommand (`tools run`).
    pub fn sub(&self, command: &str) -> Self {
        Self {
            prefix: format!("{} {command}", self.prefix),
        }
    }

    /// Whether stderr is a terminal (the send's live line).
    pub fn stderr_is_terminal(&self) -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stderr())
    }

    /// Stdout, locked, for a command that writes its result in many pieces.
    pub fn stdout(&self) -> std::io::StdoutLock<'static> {
        std::io::stdout().lock()
    }

    /// `text` on stdout as it is.
    pub fn write(&self, text: &str) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    }

    /// `line` and a line break on stdout.
    pub fn line(&self, line: &str) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()
    }

    /// `value` as one JSON line on stdout.
    pub fn json(&self, value: &impl serde::Serialize) -> std::io::Result<()> {
        let text = serde_json::to_string(value).map_err(std::io::Error::other)?;
        self.line(&text)
    }

    /// `value` as indented JSON on stdout.
    pub fn json_pretty(&self, value: &impl serde::Serialize) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        self.line(&text)
    }

    /// `flemmad COMMAND: MESSAGE` on stderr.
    pub fn note(&self, message: impl std::fmt::Display) {
        self.stderr(&format!("{}: {message}\n", self.prefix));
    }

    /// `flemmad COMMAND: warning: MESSAGE` on stderr.
    pub fn warn(&self, message: impl std::fmt::Display) {
        self.stderr(&format!("{}: warning: {message}\n", self.prefix));
    }

    /// `text` on stderr as it is (rendered diagnostics, a report of complete lines, the
    /// streamed reply of a send).
    pub fn stderr(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
}
