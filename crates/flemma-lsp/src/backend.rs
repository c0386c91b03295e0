//! The seam between the language server and the engine.
//!
//! The session hands the engine every command it cannot answer itself ([`EngineCommand`]); the
//! engine answers at once (a request never waits on the LLM or a tool) and later drives the
//! session through its [`Outbox`]: streaming text into an open document, finishing the stream.
//! The session tells the engine how a stream ended through [`Backend::stream_ended`].

use std::time::Duration;

use crossbeam_channel::Sender;

/// A command for the engine, with its document resolved to an open document's URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineCommand {
    Send { uri: String },
    Cancel { uri: String },
    Background { uri: String, tool_id: String },
    Execute { uri: String, tool_id: String },
    Status { uri: String },
    Jobs { uri: String },
    Usage { uri: String },
    Switch { uri: String, model: String },
}

impl EngineCommand {
    pub fn uri(&self) -> &str {
        match self {
            EngineCommand::Send { uri }
            | EngineCommand::Cancel { uri }
            | EngineCommand::Background { uri, .. }
            | EngineCommand::Execute { uri, .. }
            | EngineCommand::Status { uri }
            | EngineCommand::Jobs { uri }
            | EngineCommand::Usage { uri }
            | EngineCommand::Switch { uri, .. } => uri,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BackendError {
    #[error(
        "`{command}` is not available yet: the engine is not part of this flemmad build. Edit the file, or use `flemmad send` from a terminal"
    )]
    NotAvailable { command: &'static str },
    #[error("{0}")]
    Refused(String),
}

/// How a stream into a document ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// Every streamed byte is in the client's buffer.
    Written,
    /// The user deleted the block being written; `unwritten` never reached the document.
    Cancelled { unwritten: String },
    /// The document was closed before the stream ended.
    Closed { unwritten: String },
}

/// Work the engine (or anything off the main loop) hands to the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// Open a new block at the end of the document: `header` (e.g. `"\n@Assistant:\n"`, whose
    /// role line starts at `block_at`), then the streamed text, with `tail` kept after it.
    StreamStart {
        uri: String,
        header: String,
        block_at: usize,
        tail: String,
    },
    StreamChunk {
        uri: String,
        text: String,
    },
    StreamFinish {
        uri: String,
    },
    /// The request failed (a provider error, a tool that could not run): the user is told with
    /// `window/showMessage`, and the stream into the document (if any) ends with what was written.
    Failed {
        uri: String,
        message: String,
    },
}

/// The engine's handle on the session: cloneable, usable from any thread.
#[derive(Debug, Clone)]
pub struct Outbox {
    sender: Sender<Task>,
}

impl Outbox {
    pub(crate) fn new(sender: Sender<Task>) -> Self {
        Self { sender }
    }

    /// Sends a task to the session; `false` when the session has ended.
    pub fn send(&self, task: Task) -> bool {
        self.sender.send(task).is_ok()
    }
}

/// The engine as the session sees it. Every method returns at once.
pub trait Backend: Send {
    /// Starts (or answers) a command. The `Ok` value is the command's result.
    fn command(
        &mut self,
        command: EngineCommand,
        outbox: &Outbox,
    ) -> Result<serde_json::Value, BackendError>;

    /// A stream the engine started has ended.
    fn stream_ended(&mut self, uri: &str, end: StreamEnd) {
        let _ = (uri, end);
    }
}

/// The backend until the engine is wired in: every engine command says it is not available.
#[derive(Debug, Default)]
pub struct NoEngine;

impl Backend for NoEngine {
    fn command(
        &mut self,
        command: EngineCommand,
        _outbox: &Outbox,
    ) -> Result<serde_json::Value, BackendError> {
        Err(BackendError::NotAvailable {
            command: match command {
                EngineCommand::Send { .. } => "flemma.send",
                EngineCommand::Cancel { .. } => "flemma.cancel",
                EngineCommand::Background { .. } => "flemma.background",
                EngineCommand::Execute { .. } => "flemma.execute",
                EngineCommand::Status { .. } => "flemma.status",
                EngineCommand::Jobs { .. } => "flemma.jobs",
                EngineCommand::Usage { .. } => "flemma.usage",
                EngineCommand::Switch { .. } => "flemma.switch",
            },
        })
    }
}

/// A stand-in engine for tests and demos: `flemma.send` streams a fixed reply into the document
/// as an `@Assistant:` block, in chunks of `chunk_chars` characters every `interval`, from a
/// thread of its own (as the engine would from provider events). Other commands behave like
/// [`NoEngine`].
#[derive(Debug)]
pub struct ScriptedReply {
    reply: String,
    chunk_chars: usize,
    interval: Duration,
    ended: Vec<(String, StreamEnd)>,
}

impl ScriptedReply {
    pub fn new(reply: String, chunk_chars: usize, interval: Duration) -> Self {
        Self {
            reply,
            chunk_chars: chunk_chars.max(1),
            interval,
            ended: Vec::new(),
        }
    }
}

impl Backend for ScriptedReply {
    fn command(
        &mut self,
        command: EngineCommand,
        outbox: &Outbox,
    ) -> Result<serde_json::Value, BackendError> {
        let EngineCommand::Send { uri } = command else {
            return NoEngine.command(command, outbox);
        };
        let chars: Vec<char> = self.reply.chars().collect();
        let chunks: Vec<String> = chars
            .chunks(self.chunk_chars)
            .map(|c| c.iter().collect())
            .collect();
        let outbox = outbox.clone();
        let interval = self.interval;
        std::thread::spawn(move || {
            outbox.send(Task::StreamStart {
                uri: uri.clone(),
                header: "\n@Assistant:\n".into(),
                block_at: 1,
                tail: "\n".into(),
            });
            for text in chunks {
                std::thread::sleep(interval);
                if !outbox.send(Task::StreamChunk {
                    uri: uri.clone(),
                    text,
                }) {
                    return;
                }
            }
            outbox.send(Task::StreamFinish { uri });
        });
        Ok(serde_json::json!({ "started": true }))
    }

    fn stream_ended(&mut self, uri: &str, end: StreamEnd) {
        tracing::info!(uri, ?end, "scripted stream ended");
        self.ended.push((uri.to_owned(), end));
    }
}
