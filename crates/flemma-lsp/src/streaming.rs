//! The session side of streaming: tasks from the engine, flushing edits, answers and changes
//! fed to each document's [`StreamWriter`].

use std::time::Instant;

use lsp_types::request::ApplyWorkspaceEdit;

use crate::backend::{BufferAnswer, BufferSnapshot, Progress, StreamEnd, Task};
use crate::session::{BufferEdit, COALESCE, ResponseHandler, Session};
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
            begin_progress(session, &uri);
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
        Task::Failed { uri, message } => {
            session.show_message(lsp_types::MessageType::ERROR, format!("flemma: {message}"));
            if let Some(writer) = session
                .documents
                .get_mut(&uri)
                .and_then(|d| d.stream.as_mut())
            {
                writer.finish();
            }
            after_progress(session, &uri);
        }
        Task::ReadBuffer { uri, reply } => {
            let snapshot = session.documents.get(&uri).and_then(|doc| {
                let syntax = session.host.document(&doc.id)?;
                Some(BufferSnapshot {
                    text: syntax.text().to_owned(),
                    version: doc.version,
                })
            });
            reply.send(snapshot);
        }
        Task::ReplaceBuffer {
            uri,
            version,
            range,
            text,
            reply,
        } => replace_buffer(session, uri, version, range, text, reply),
        Task::Event { uri, name, data } => {
            if session.documents.contains_key(&uri) {
                session.send(lsp_server::Message::Notification(
                    lsp_server::Notification::new(
                        flemma_protocol::methods::EVENT_NOTIFICATION.to_owned(),
                        flemma_protocol::event::LifecycleEvent { name, uri, data },
                    ),
                ));
            }
        }
        Task::Progress { uri, progress } => engine_progress(session, &uri, progress),
        Task::Notice { uri, message } => {
            if session.documents.contains_key(&uri) {
                session.show_message(lsp_types::MessageType::INFO, format!("flemma: {message}"));
            }
        }
    }
}

/// Sends an engine edit as one versioned `workspace/applyEdit`, if the mirror is still at
/// `version` and no other engine edit is in flight.
fn replace_buffer(
    session: &mut Session,
    uri: String,
    version: i32,
    range: flemma_syntax::TextRange,
    text: String,
    reply: crate::backend::Reply<BufferAnswer>,
) {
    let encoding = session.encoding;
    let Some(doc) = session.documents.get_mut(&uri) else {
        return reply.send(BufferAnswer::Closed);
    };
    if doc.version != version || doc.buffer_edit.is_some() {
        return reply.send(BufferAnswer::Moved);
    }
    let Some(syntax) = session.host.document(&doc.id) else {
        return reply.send(BufferAnswer::Closed);
    };
    let mirror = syntax.text();
    if range.end > mirror.len()
        || !mirror.is_char_boundary(range.start)
        || !mirror.is_char_boundary(range.end)
        || range.start > range.end
    {
        return reply.send(BufferAnswer::Moved);
    }
    let edit = flemma_syntax::TextEdit::replace(range, text.as_str());
    let workspace_edit =
        to_proto::workspace_edit(doc, mirror, std::slice::from_ref(&edit), encoding);
    doc.buffer_edit = Some(BufferEdit {
        version,
        applied: None,
        echoed: false,
        reply: Some(reply),
    });
    session.request::<ApplyWorkspaceEdit>(
        lsp_types::ApplyWorkspaceEditParams {
            label: Some("flemma".into()),
            edit: workspace_edit,
        },
        ResponseHandler::BufferEdit { uri },
    );
}

/// The client answered an engine edit.
pub(crate) fn on_buffer_answer(session: &mut Session, uri: &str, applied: bool) {
    if let Some(edit) = session
        .documents
        .get_mut(uri)
        .and_then(|d| d.buffer_edit.as_mut())
    {
        edit.applied = Some(applied);
    }
    settle_buffer_edit(session, uri);
}

/// Answers the engine edit in flight once its fate is known: refused, or applied and echoed.
pub(crate) fn settle_buffer_edit(session: &mut Session, uri: &str) {
    let Some(doc) = session.documents.get_mut(uri) else {
        return;
    };
    let answer = match doc.buffer_edit.as_ref() {
        Some(BufferEdit {
            applied: Some(false),
            ..
        }) => BufferAnswer::Refused,
        Some(BufferEdit {
            applied: Some(true),
            echoed: true,
            ..
        }) => BufferAnswer::Applied,
        _ => return,
    };
    if let Some(mut edit) = doc.buffer_edit.take()
        && let Some(reply) = edit.reply.take()
    {
        reply.send(answer);
    }
}

/// `$/progress` of the engine's work on a document the session has open.
fn engine_progress(session: &mut Session, uri: &str, progress: Progress) {
    if !shows_progress(session) || !session.documents.contains_key(uri) {
        return;
    }
    let existing = session
        .documents
        .get(uri)
        .and_then(|d| d.engine_progress.clone());
    match progress {
        Progress::Begin { title } => {
            if let Some(token) = existing {
                end_progress(session, token, "");
            }
            session.progress_tokens += 1;
            let token = lsp_types::ProgressToken::String(format!(
                "flemma/engine/{}",
                session.progress_tokens
            ));
            session.request::<lsp_types::request::WorkDoneProgressCreate>(
                lsp_types::WorkDoneProgressCreateParams {
                    token: token.clone(),
                },
                ResponseHandler::Ignore,
            );
            send_progress(
                session,
                token.clone(),
                lsp_types::WorkDoneProgress::Begin(lsp_types::WorkDoneProgressBegin {
                    title,
                    cancellable: Some(false),
                    message: None,
                    percentage: None,
                }),
            );
            if let Some(doc) = session.documents.get_mut(uri) {
                doc.engine_progress = Some(token);
            }
        }
        Progress::Report { message } => {
            if let Some(token) = existing {
                send_progress(
                    session,
                    token,
                    lsp_types::WorkDoneProgress::Report(lsp_types::WorkDoneProgressReport {
                        message: Some(message),
                        cancellable: Some(false),
                        percentage: None,
                    }),
                );
            }
        }
        Progress::End { message } => {
            if let Some(token) = existing {
                end_progress(session, token, &message);
            }
            if let Some(doc) = session.documents.get_mut(uri) {
                doc.engine_progress = None;
            }
        }
    }
}

/// Whether the client shows work-done progress the server starts.
fn shows_progress(session: &Session) -> bool {
    session
        .capabilities
        .window
        .as_ref()
        .and_then(|w| w.work_done_progress)
        .unwrap_or(false)
}

/// Creates a progress token for the stream into `uri` and begins it.
fn begin_progress(session: &mut Session, uri: &str) {
    if !shows_progress(session) {
        return;
    }
    session.progress_tokens += 1;
    let token =
        lsp_types::ProgressToken::String(format!("flemma/stream/{}", session.progress_tokens));
    session.request::<lsp_types::request::WorkDoneProgressCreate>(
        lsp_types::WorkDoneProgressCreateParams {
            token: token.clone(),
        },
        ResponseHandler::Ignore,
    );
    let name = uri.rsplit('/').next().unwrap_or(uri).to_owned();
    send_progress(
        session,
        token.clone(),
        lsp_types::WorkDoneProgress::Begin(lsp_types::WorkDoneProgressBegin {
            title: format!("flemma: writing the reply into {name}"),
            cancellable: Some(false),
            message: None,
            percentage: None,
        }),
    );
    if let Some(doc) = session.documents.get_mut(uri) {
        doc.progress = Some(token);
    }
}

fn send_progress(
    session: &Session,
    token: lsp_types::ProgressToken,
    value: lsp_types::WorkDoneProgress,
) {
    session.notify::<lsp_types::notification::Progress>(lsp_types::ProgressParams {
        token,
        value: lsp_types::ProgressParamsValue::WorkDone(value),
    });
}

/// Ends a stream's progress with what happened.
pub(crate) fn end_progress(session: &Session, token: lsp_types::ProgressToken, message: &str) {
    send_progress(
        session,
        token,
        lsp_types::WorkDoneProgress::End(lsp_types::WorkDoneProgressEnd {
            message: Some(message.to_owned()),
        }),
    );
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
    let report = doc
        .progress
        .clone()
        .map(|token| (token, writer.written_bytes()));
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
    if let Some((token, written)) = report {
        send_progress(
            session,
            token,
            lsp_types::WorkDoneProgress::Report(lsp_types::WorkDoneProgressReport {
                message: Some(format!("{written} bytes written")),
                cancellable: Some(false),
                percentage: None,
            }),
        );
    }
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
    let progress = doc.progress.take();
    if let Some(token) = progress {
        let message = match &end {
            StreamEnd::Written => "the reply is written",
            StreamEnd::Cancelled { .. } => "cancelled: the block being written was deleted",
            StreamEnd::Closed { .. } => "the document was closed",
        };
        end_progress(session, token, message);
    }
    if matches!(end, StreamEnd::Cancelled { .. }) {
        session.show_message(
            lsp_types::MessageType::WARNING,
            "flemma: the reply being written was deleted; the request is cancelled".into(),
        );
    }
    session.backend.stream_ended(uri, end);
}
