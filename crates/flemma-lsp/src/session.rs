//! The session: every piece of state of one client connection.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use flemma_syntax::{Document, Encoding, LineIndex};
use lsp_server::{Message, Notification, ReqQueue, Request, RequestId, Response};

use crate::backend::{Backend, Outbox};
use crate::stream_edits::StreamWriter;

/// How long streamed text waits for more before it is sent (editors.md §5.3: ~10 edits/s).
pub(crate) const COALESCE: Duration = Duration::from_millis(40);

/// One open document: the mirror of the client's buffer.
#[derive(Debug)]
pub(crate) struct OpenDocument {
    pub uri: lsp_types::Uri,
    pub version: i32,
    pub doc: Document,
    pub index: LineIndex,
    pub stream: Option<StreamWriter>,
    /// When the coalescing window of the stream ends.
    pub flush_at: Option<Instant>,
}

impl OpenDocument {
    pub fn new(uri: lsp_types::Uri, version: i32, text: String) -> Self {
        let doc = Document::parse(text);
        let index = doc.line_index();
        Self {
            uri,
            version,
            doc,
            index,
            stream: None,
            flush_at: None,
        }
    }

    pub fn text(&self) -> &str {
        self.doc.text()
    }
}

/// What to do with the client's answer to a request the server sent.
#[derive(Debug)]
pub(crate) enum ResponseHandler {
    /// The answer to a streamed edit of this document.
    StreamEdit { uri: String },
    /// The answer to the edit of a command (approve, reject…): rebuilt on the latest text and
    /// sent again when the client refused it (the user typed meanwhile).
    CommandEdit {
        command: crate::commands::Command,
        attempts: u8,
    },
}

pub(crate) struct Session {
    pub sender: Sender<Message>,
    pub encoding: Encoding,
    pub capabilities: lsp_types::ClientCapabilities,
    pub root: Option<PathBuf>,
    pub documents: HashMap<String, OpenDocument>,
    pub requests: ReqQueue<(), ResponseHandler>,
    pub backend: Box<dyn Backend>,
    pub outbox: Outbox,
    pub shutdown_requested: bool,
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
