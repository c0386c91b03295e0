//! The session: every piece of state of one client connection.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::Sender;
use flemma_ide::{AnalysisHost, DocumentId};
use flemma_syntax::{Document, Encoding};
use lsp_server::{Message, Notification, ReqQueue, Request, RequestId, Response};

use crate::backend::{Backend, Outbox};
pub(crate) use crate::open_document::{BufferEdit, OpenDocument};

/// How long diagnostics wait after a change for the next one. None: the main loop handles
/// the client's messages already queued before a due analysis (a burst of changes, a paste
/// sent as many edits, is analysed once), and the goal is diagnostics within 30 ms of a
/// keystroke, even on a 10 MB chat.
pub(crate) const DIAGNOSTICS_DEBOUNCE: Duration = Duration::ZERO;

/// The debounce while the engine works on the document (a reply streams in): its edits come
/// ~10 times a second and need not each be analysed.
pub(crate) const DIAGNOSTICS_DEBOUNCE_STREAMING: Duration = Duration::from_millis(250);

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
    pub analyses: crate::analysis_pool::Analyses,
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
        self.send(shown(typ, message));
    }
}

/// `window/showMessage` of `message`, for [`Session::show_message`] and for whoever answers from
/// another thread through the session's sender.
pub(crate) fn shown(typ: lsp_types::MessageType, message: String) -> Message {
    Message::Notification(Notification::new(
        <lsp_types::notification::ShowMessage as lsp_types::notification::Notification>::METHOD
            .to_owned(),
        lsp_types::ShowMessageParams { typ, message },
    ))
}

/// What [`Session::syntax`] answers for a document the host lost (never expected).
fn empty_document() -> &'static Document {
    static EMPTY: std::sync::OnceLock<Document> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Document::parse(String::new()))
}
