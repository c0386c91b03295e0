//! The session: every piece of state of one client connection.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use flemma_ide::{AnalysisHost, DocumentId};
use flemma_syntax::{Document, Encoding, LineIndex};
use lsp_server::{Message, Notification, ReqQueue, Request, RequestId, Response};

use crate::backend::{Backend, Outbox};

/// How long diagnostics wait after a change for the next one. None: the main loop handles
/// the client's messages already queued before a due analysis (a burst of changes, a paste
/// sent as many edits, is analysed once), and the goal is diagnostics within 30 ms of a
/// keystroke, even on a 10 MB chat.
pub(crate) const DIAGNOSTICS_DEBOUNCE: Duration = Duration::ZERO;

/// The debounce while the engine works on the document (a reply streams in): its edits come
/// ~10 times a second and need not each be analysed.
pub(crate) const DIAGNOSTICS_DEBOUNCE_STREAMING: Duration = Duration::from_millis(250);

/// One open document: the client's side of a document the [`AnalysisHost`] holds (the text
/// and syntax tree live there, under [`Self::id`]).
#[derive(Debug)]
pub(crate) struct OpenDocument {
    pub uri: lsp_types::Uri,
    pub id: DocumentId,
    pub version: i32,
    /// The line index of the host's current text.
    pub index: LineIndex,
    /// When the diagnostics of the latest change are due.
    pub diagnostics_at: Option<Instant>,
    /// What the engine does for the document, as its events tell it (and its `$/progress`).
    pub engine: crate::progress::EngineActivity,
    /// The engine's edit in flight (`Task::ReplaceBuffer`).
    pub buffer_edit: Option<BufferEdit>,
    /// The diagnostics the client was last sent for this document (`None` before the first
    /// publish, which goes out even when empty: the document was analysed). A list equal to
    /// it, ranges included, is not sent again: Neovim reads every line of the buffer for each
    /// publish (tens of milliseconds on a 10 MB chat, while keys wait).
    pub published: Option<Vec<lsp_types::Diagnostic>>,
}

/// An engine edit sent to the client: answered once its fate shows in the text (the client's
/// word alone is not enough: Neovim answers `applied: true` for an edit it dropped).
#[derive(Debug)]
pub(crate) struct BufferEdit {
    /// Whether it landed, told by the changes the client reports (`flemma_syntax::RemoteEdit`).
    pub check: flemma_syntax::RemoteEdit,
    /// When the wait for the changes after `applied: true` runs out ([`ECHO_WAIT`]).
    pub echo_deadline: Option<Instant>,
    pub reply: Option<crate::backend::Reply<crate::backend::BufferAnswer>>,
}

/// How long the changes that show an edit answered `applied: true` may take to arrive (Neovim
/// sends them after its answer, debounced by 150 ms); when none came by then, the mirror as it
/// is tells (the edit was dropped when it does not hold it). Generous: an edit Neovim dropped
/// is almost always followed at once by the keystroke that made it stale (its change decides
/// then), and an echo that came after the wait would be taken for text the user typed.
pub(crate) const ECHO_WAIT: Duration = Duration::from_secs(3);

/// The document id of a URI: the path of a `file://` URI (so templates and `@./` references
/// resolve next to the chat); for other schemes (`untitled:`) a name in the workspace root.
pub(crate) fn document_id(uri: &str, root: Option<&Path>) -> DocumentId {
    if let Some(path) = flemma_protocol::document::uri_to_path(uri) {
        return DocumentId::new(path);
    }
    let name: String = uri
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    DocumentId::new(root.unwrap_or(Path::new("/")).join(name))
}

/// What to do with the client's answer to a request the server sent.
#[derive(Debug)]
pub(crate) enum ResponseHandler {
    /// The answer to an engine edit of this document (`Task::ReplaceBuffer`).
    BufferEdit { uri: String },
    /// Nothing to do with the answer (`window/workDoneProgress/create`).
    Ignore,
    /// The user's choice on an asked agent's question (`window/showMessageRequest`).
    AgentPermission { uri: String, id: String },
}

pub(crate) struct Session {
    pub sender: Sender<Message>,
    pub encoding: Encoding,
    pub capabilities: lsp_types::ClientCapabilities,
    pub root: Option<PathBuf>,
    pub documents: HashMap<String, OpenDocument>,
    /// The configuration the session was started with (below the client settings).
    pub base_config: flemma_ide::ConfigInput,
    /// The analysis of every open document: text, syntax tree, evaluation, diagnostics.
    pub host: AnalysisHost,
    /// The analyses running off the main loop (see [`crate::analysis_worker`]).
    pub analyses: crate::analysis_worker::Analyses,
    pub requests: ReqQueue<(), ResponseHandler>,
    pub backend: Box<dyn Backend>,
    pub outbox: Outbox,
    pub shutdown_requested: bool,
    /// How many progress tokens this session has made (each stream gets a new one).
    pub progress_tokens: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("encoding", &self.encoding)
            .field("root", &self.root)
            .field("documents", &self.documents.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The syntax tree of an open document. Every open document is in the host.
    pub fn syntax(&self, doc: &OpenDocument) -> &Document {
        self.host
            .document(&doc.id)
            .map(|d| &**d)
            .unwrap_or_else(|| empty_document())
    }

    pub fn send(&self, message: Message) {
        if self.sender.send(message).is_err() {
            tracing::warn!("the client connection is closed; dropping a message");
        }
    }

    pub fn respond(&self, response: Response) {
        self.send(Message::Response(response));
    }

    pub fn notify<N: lsp_types::notification::Notification>(&self, params: N::Params) {
        self.send(Message::Notification(Notification::new(
            N::METHOD.to_owned(),
            params,
        )));
    }

    /// Sends a request to the client; its answer goes to `handler` on the main loop.
    pub fn request<R: lsp_types::request::Request>(
        &mut self,
        params: R::Params,
        handler: ResponseHandler,
    ) -> RequestId {
        let request: Request =
            self.requests
                .outgoing
                .register(R::METHOD.to_owned(), params, handler);
        let id = request.id.clone();
        self.send(Message::Request(request));
        id
    }

    pub fn show_message(&self, typ: lsp_types::MessageType, message: String) {
        self.notify::<lsp_types::notification::ShowMessage>(lsp_types::ShowMessageParams {
            typ,
            message,
        });
    }
}

/// What [`Session::syntax`] answers for a document the host lost (never expected).
fn empty_document() -> &'static Document {
    static EMPTY: std::sync::OnceLock<Document> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Document::parse(String::new()))
}
