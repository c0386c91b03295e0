//! What the engine hands over to the session ([`Task`]): reading the mirror, editing it
//! through one versioned `workspace/applyEdit` at a time (answered once the text shows what
//! became of it: `flemma_syntax::RemoteEdit`), `flemma/event` notifications (and the
//! `$/progress` derived from them, [`crate::progress`]), and messages.

use lsp_types::request::ApplyWorkspaceEdit;

use crate::backend::{BufferAnswer, BufferSnapshot, Task};
use crate::session::{BufferEdit, ECHO_WAIT, ResponseHandler, Session};
use crate::to_proto;
use flemma_protocol::event::{EngineEvent, LifecycleEvent};
use flemma_syntax::EditFate;

pub(crate) fn on_task(session: &mut Session, task: Task) {
    match task {
        Task::Failed { uri, message } => {
            session.show_message(lsp_types::MessageType::ERROR, format!("flemma: {message}"));
            crate::progress::stop(session, &uri, "failed");
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
        Task::Event { uri, event } => {
            crate::progress::on_event(session, &uri, &event);
            if let EngineEvent::AgentPermissionRequired(asked) = &event {
                crate::agent_permission::ask(session, &uri, &asked.data);
            }
            if session.documents.contains_key(&uri) {
                session.send(lsp_server::Message::Notification(
                    lsp_server::Notification::new(
                        flemma_protocol::methods::EVENT_NOTIFICATION.to_owned(),
                        LifecycleEvent::new(uri, &event),
                    ),
                ));
            }
        }
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
        check: flemma_syntax::RemoteEdit::new(edit),
        echo_deadline: None,
        reply: Some(reply),
    });
    session.request::<ApplyWorkspaceEdit>(
        lsp_types::ApplyWorkspaceEditParams {
            // No label: Neovim prints `Workspace edit <label>` for every labelled edit (a
            // streamed reply is dozens), Helix and VS Code do not show it at all.
            label: None,
            edit: workspace_edit,
        },
        ResponseHandler::BufferEdit { uri },
    );
}

/// The client answered an engine edit. `applied: true` is not believed until the text shows
/// the edit: the changes the client reports decide (see [`settle_buffer_edit`]).
pub(crate) fn on_buffer_answer(session: &mut Session, uri: &str, applied: bool) {
    if let Some(edit) = session
        .documents
        .get_mut(uri)
        .and_then(|d| d.buffer_edit.as_mut())
    {
        edit.check.answered(applied);
        if edit.check.awaits_echo() {
            edit.echo_deadline = Some(std::time::Instant::now() + ECHO_WAIT);
        }
    }
    settle_buffer_edit(session, uri);
}

/// The wait for the changes that show an edit answered `applied: true` ran out: the mirror as
/// it is decides (the edit was dropped unless a change already showed it).
pub(crate) fn expire_buffer_edits(session: &mut Session, now: std::time::Instant) {
    let expired: Vec<String> = session
        .documents
        .iter_mut()
        .filter_map(|(uri, doc)| {
            let edit = doc.buffer_edit.as_mut()?;
            if edit.echo_deadline.is_some_and(|at| at <= now) {
                edit.echo_deadline = None;
                edit.check.expire();
                Some(uri.clone())
            } else {
                None
            }
        })
        .collect();
    for uri in expired {
        settle_buffer_edit(session, &uri);
    }
}

/// Answers the engine edit in flight once its fate is known: refused, landed (the client
/// applied it and a reported change shows it), or dropped (`applied: true`, and the text does
/// not hold it).
pub(crate) fn settle_buffer_edit(session: &mut Session, uri: &str) {
    let Some(doc) = session.documents.get_mut(uri) else {
        return;
    };
    let answer = match doc.buffer_edit.as_ref().map(|e| e.check.fate()) {
        Some(EditFate::Refused) => BufferAnswer::Refused,
        Some(EditFate::Landed) => BufferAnswer::Applied,
        Some(EditFate::Dropped) => {
            tracing::info!(
                uri,
                "the client answered `applied: true` for an edit its text does not hold; sending it again"
            );
            BufferAnswer::Dropped
        }
        Some(EditFate::Waiting) | None => return,
    };
    if let Some(mut edit) = doc.buffer_edit.take()
        && let Some(reply) = edit.reply.take()
    {
        reply.send(answer);
    }
}
