//! The seam between the language server and the engine.
//!
//! The session decodes every `flemma/*` request and `flemma.*` command into `flemma-protocol`'s
//! [`FlemmaRequest`], resolves its document, and hands it to the engine ([`Backend::call`]);
//! the engine answers at once (a request never waits on the LLM or a tool) and later drives
//! the session through its [`Outbox`].
//!
//! The engine writes into an open document through the session's mirror:
//! [`Task::ReadBuffer`] answers the text and version the session has, and
//! [`Task::ReplaceBuffer`] sends one versioned `workspace/applyEdit` and answers once the
//! text shows what became of it: applied (a change the client reported made the edit's text),
//! refused, dropped (`applied: true` without the text), or the mirror moved.
//! The backend learns which documents the session has open through [`Backend::opened`] and
//! [`Backend::closed`].

use crossbeam_channel::Sender;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

/// The client settings of a session as a configuration layer, or what is wrong with them.
pub type ClientConfig = Result<flemma_config::ConfigLayer, flemma_config::ConfigErrors>;

/// The document of a request, as the session resolved it.
#[derive(Debug, Clone, Copy)]
pub struct RequestDocument<'a> {
    /// The URI of a document open in this session, else the `file://` URI the request names.
    pub uri: &'a str,
    /// The session's mirror of the document, when it is open in this session.
    pub buffer: Option<&'a flemma_syntax::Document>,
}

/// A one-shot answer the session gives to a task (called at most once; dropping it unanswered
/// tells the asker the session is gone).
pub struct Reply<T>(Box<dyn FnOnce(T) + Send>);

impl<T> Reply<T> {
    pub fn new(answer: impl FnOnce(T) + Send + 'static) -> Self {
        Self(Box::new(answer))
    }

    pub fn send(self, value: T) {
        (self.0)(value);
    }
}

impl<T> std::fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}

/// The session's mirror of an open document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferSnapshot {
    pub text: String,
    pub version: i32,
}

/// What became of a [`Task::ReplaceBuffer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferAnswer {
    /// The client applied the edit and a change it reported made the edit's text (the mirror
    /// holds it).
    Applied,
    /// The mirror is no longer at the version the edit was built for (nothing was sent).
    Moved,
    /// The client refused the edit (a stale version, `failureHandling: abort`).
    Refused,
    /// The client answered `applied: true`, but the text it reported does not hold the edit
    /// (Neovim drops an edit naming an older version and still says `applied: true`): nothing
    /// was applied; build it again on the text as it is.
    Dropped,
    /// The document is not open (any more) in this session.
    Closed,
}

/// Work the engine (or anything off the main loop) hands to the session.
#[derive(Debug)]
pub enum Task {
    /// The request failed (a provider error, a tool that could not run): the user is told with
    /// `window/showMessage`.
    Failed { uri: String, message: String },
    /// Answer the mirror of `uri` (`None`: not open in this session).
    ReadBuffer {
        uri: String,
        reply: Reply<Option<BufferSnapshot>>,
    },
    /// Replace the bytes `range` of `uri` with `text`, built against `version`: one versioned
    /// `workspace/applyEdit`, one in flight per document (a second waits for the first).
    ReplaceBuffer {
        uri: String,
        version: i32,
        range: flemma_syntax::TextRange,
        text: String,
        reply: Reply<BufferAnswer>,
    },
    /// A lifecycle event of the document: sent as a `flemma/event` notification, and the
    /// session's `$/progress` follows it.
    Event {
        uri: String,
        event: flemma_protocol::event::EngineEvent,
    },
    /// A message for the user (`window/showMessage`) that is not an error.
    Notice { uri: String, message: String },
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

/// What [`Backend::context`] says of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextMeter {
    /// The meter in one line (`≈12,345 / 200,000 input tokens (6.2% of …) · next request $0.037`).
    pub line: String,
    /// Past `context.warn_at`: what to do (`error`: the next request cannot fit at all).
    pub advice: Option<(String, bool)>,
}

/// What [`Backend::call_later`] gives its answer to.
pub type Answer = Box<dyn FnOnce(Result<FlemmaResponse, RequestError>) + Send>;

/// The engine as the session sees it. Every method returns at once.
pub trait Backend: Send {
    /// Answers a `flemma/*` request (or the `flemma.*` command that is the same request) about
    /// `document`. The session decoded it and resolved its document; the backend answers
    /// exactly as every other front end's requests are answered.
    fn call(
        &mut self,
        document: RequestDocument<'_>,
        request: FlemmaRequest,
        outbox: &Outbox,
    ) -> Result<FlemmaResponse, RequestError>;

    /// [`Backend::call`] for the main loop, which must not wait: `answer` is given the answer
    /// once, from any thread — at once, or when work that takes long (an evaluation of
    /// templates, git) is done off the main loop. By default, [`Backend::call`]'s answer, at
    /// once.
    fn call_later(
        &mut self,
        document: RequestDocument<'_>,
        request: FlemmaRequest,
        outbox: &Outbox,
        answer: Answer,
    ) {
        answer(self.call(document, request, outbox));
    }

    /// The client said who it is (`clientInfo.name` of `initialize`: `Helix`, `Visual Studio
    /// Code`), before any document opens: for messages that name the editor.
    fn client_name(&mut self, name: &str) {
        let _ = name;
    }

    /// The client settings of the session (its `initializationOptions`, then each
    /// `workspace/didChangeConfiguration`), as a [`flemma_config::LayerKind::Client`] layer or
    /// the problems reading it (`None`: the client sent none). Given before the first
    /// document opens, and again whenever they change; sends started from this session use
    /// them.
    fn client_config(&mut self, settings: Option<ClientConfig>) {
        let _ = settings;
    }

    /// The client opened `uri` with `text` (after the session mirrors it): tasks about it may
    /// use `outbox`. `text` is what the editor and the engine share from now on, the base
    /// of a merge when this editor becomes the document's writer later.
    fn opened(&mut self, uri: &str, text: &str, outbox: &Outbox) {
        let _ = (uri, text, outbox);
    }

    /// The client closed `uri` (or the session ended with it open).
    fn closed(&mut self, uri: &str) {
        let _ = uri;
    }

    /// What the chat's approval chain decides for a call of `tool` with `input` in the
    /// document `analysis` is of (shown by hover on a tool use); `None` when it cannot say.
    fn approval(
        &mut self,
        uri: &str,
        analysis: &flemma_ide::Analysis,
        tool: &str,
        input: &serde_json::Value,
    ) -> Option<flemma_ide::features::ApprovalDecision> {
        let _ = (uri, analysis, tool, input);
        None
    }

    /// What an unresolved call of `tool` with `input` would change in its file as the file is
    /// now, as a unified diff (`Err`: why it cannot be shown); `None` for a tool whose effect
    /// cannot be known before it runs, or when the backend cannot say. Shown by hover on a
    /// pending call (review before approval).
    fn proposed_change(
        &mut self,
        uri: &str,
        analysis: &flemma_ide::Analysis,
        tool: &str,
        input: &serde_json::Value,
    ) -> Option<Result<String, String>> {
        let _ = (uri, analysis, tool, input);
        None
    }

    /// `flemma.trustFolder`: trusts the folder of the chat `uri` (every chat below it, as
    /// `flemmad trust DIR`). Returns every folder trusted now, which the session's analyses
    /// use from then on.
    fn trust_folder(&mut self, uri: &str) -> Result<Vec<std::path::PathBuf>, RequestError> {
        let _ = uri;
        Err(RequestError::refused(
            "`flemma.trustFolder` is not available: the engine is not part of this language server; run `flemmad trust DIR` from a terminal",
        ))
    }

    /// The folders trusted now (`None`: not known here), asked when a document opens, so that
    /// a folder trusted elsewhere (`flemmad trust` in a terminal) counts in this session too.
    fn trusted_folders(&mut self) -> Option<Vec<std::path::PathBuf>> {
        None
    }

    /// The context meter of the document `analysis` is of (its next request's tokens against
    /// the model's window, docs/context.md), shown as an inlay hint on the last message's role
    /// line and, past `context.warn_at`, as a diagnostic there; `None` when it cannot say.
    fn context(&mut self, uri: &str, analysis: &flemma_ide::Analysis) -> Option<ContextMeter> {
        let _ = (uri, analysis);
        None
    }

    /// How many files each tool call of the document `uri` changed, by tool use id (calls that
    /// changed nothing left out), from its checkpoints: the code lenses on the answers that
    /// changed files. Asked on every `textDocument/codeLens`, so it must be cheap (the backend
    /// keeps it per chat until a checkpoint is recorded or rewound); `None` when it cannot say.
    fn changed_files(&mut self, uri: &str) -> Option<std::collections::HashMap<String, usize>> {
        let _ = uri;
        None
    }

    /// Tools this process discovered at run time (the tools of the MCP servers running in it)
    /// as `(name, description)`, for completion and hover. Never starts anything: opening or
    /// editing a document does not start a server.
    fn discovered_tools(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// The backend without an engine (benches, tests of the session alone): every request says
/// it is not available.
#[derive(Debug, Default)]
pub struct NoEngine;

impl Backend for NoEngine {
    fn call(
        &mut self,
        _document: RequestDocument<'_>,
        request: FlemmaRequest,
        _outbox: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        Err(RequestError::refused(format!(
            "`{}` is not available: the engine is not part of this language server. Edit the file, or use `flemmad send` from a terminal",
            request.method()
        )))
    }
}
