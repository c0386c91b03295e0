//! The session side of streaming: tasks from the engine, flushing edits, answers and changes
//! fed to each document's [`StreamWriter`].

use std::time::Instant;

use lsp_types::request::ApplyWorkspaceEdit;

use crate::backend::{StreamEnd, Task};
use crate::session::{COALESCE, ResponseHandler, Session};
use crate::stream_edits::{StreamState, StreamWriter};
use crate::to_proto;

pub(crate) fn on_task(session: &mut Session, task: Task) {
    match task {
        Task::StreamStart {
            uri,
            header,
            block_at,
            tail,
        } => {
            let Some(doc) = session.documents.get_mut(&uri) else {
                tracing::warn!(uri, "a stream started for a document no client has open");
                session.backend.stream_ended(
                    &uri,
                    StreamEnd::Closed {
                        unwritten: String::new(),
                    },
                );
                return;
            };
            let anchor = session.host.document(&doc.id).map_or(0, |d| d.text().len());
            doc.stream = Some(StreamWriter::start(anchor, &header, block_at, &tail));
            flush(session, &uri);
        }
        Task::StreamChunk { uri, text } => {
            let Some(doc) = session.documents.get_mut(&uri) else {
                return;
            };
            let Some(writer) = doc.stream.as_mut() else {
                tracing::warn!(uri, "a stream chunk arrived for a document with no stream");
                return;
            };
            writer.push(&text);
            if writer.flush_now() {
                flush(session, &uri);
            } else if doc.flush_at.is_none() {
                doc.flush_at = Some(Instant::now() + COALESCE);
            }
        }
        Task::StreamFinish { uri } => {
            if let Some(writer) = session
                .documents
                .get_mut(&uri)
                .and_then(|d| d.stream.as_mut())
            {
                writer.finish();
            }
            after_progress(session, &uri);
        }
    }
}

/// Flushes every stream whose coalescing window has ended.
pub(crate) fn flush_due(session: &mut Session, now: Instant) {
    let due: Vec<String> = session
        .documents
        .iter()
        .filter(|(_, d)| d.flush_at.is_some_and(|at| at <= now))
        .map(|(uri, _)| uri.clone())
        .collect();
    for uri in due {
        flush(session, &uri);
    }
}

/// Sends the next edit of the document's stream, if it has one to send.
pub(crate) fn flush(session: &mut Session, uri: &str) {
    let encoding = session.encoding;
    let Some(doc) = session.documents.get_mut(uri) else {
        return;
    };
    doc.flush_at = None;
    let Some(writer) = doc.stream.as_mut() else {
        return;
    };
    let Some(syntax) = session.host.document(&doc.id) else {
        return;
    };
    let Some(edit) = writer.next_edit(doc.version, syntax.text().len()) else {
        return;
    };
    let position = to_proto::position(&doc.index, syntax.text(), edit.offset, encoding);
    let params = lsp_types::ApplyWorkspaceEditParams {
        label: Some("flemma: streaming reply".into()),
        edit: lsp_types::WorkspaceEdit {
            document_changes: Some(lsp_types::DocumentChanges::Edits(vec![
                lsp_types::TextDocumentEdit {
                    text_document: lsp_types::OptionalVersionedTextDocumentIdentifier {
                        uri: doc.uri.clone(),
                        version: Some(edit.version),
                    },
                    edits: vec![lsp_types::OneOf::Left(lsp_types::TextEdit::new(
                        lsp_types::Range::new(position, position),
                        edit.text,
                    ))],
                },
            ])),
            ..Default::default()
        },
    };
    session.request::<ApplyWorkspaceEdit>(
        params,
        ResponseHandler::StreamEdit {
            uri: uri.to_owned(),
        },
    );
}

/// The client answered a streamed edit.
pub(crate) fn on_answer(session: &mut Session, uri: &str, applied: bool) {
    if let Some(writer) = session
        .documents
        .get_mut(uri)
        .and_then(|d| d.stream.as_mut())
    {
        writer.on_answer(applied);
        if !applied {
            tracing::debug!(uri, "a streamed edit was refused; rebasing");
        }
    }
    after_progress(session, uri);
}

/// After a change, an answer or the end of the stream: report an ended stream, else send
/// what can be sent now.
pub(crate) fn after_progress(session: &mut Session, uri: &str) {
    let Some(doc) = session.documents.get_mut(uri) else {
        return;
    };
    let Some(writer) = doc.stream.as_ref() else {
        return;
    };
    let end = match writer.state() {
        StreamState::Writing => {
            if writer.flush_now() || doc.flush_at.is_none() {
                flush(session, uri);
            }
            return;
        }
        StreamState::Done => StreamEnd::Written,
        StreamState::Cancelled { unwritten } => StreamEnd::Cancelled {
            unwritten: unwritten.clone(),
        },
    };
    doc.stream = None;
    doc.flush_at = None;
    if matches!(end, StreamEnd::Cancelled { .. }) {
        session.show_message(
            lsp_types::MessageType::WARNING,
            "flemma: the reply being written was deleted; the request is cancelled".into(),
        );
    }
    session.backend.stream_ended(uri, end);
}
