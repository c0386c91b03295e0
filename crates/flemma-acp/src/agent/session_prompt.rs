//! `session/prompt`: a slash command answered here, or the prompt written and its turn run.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_client_protocol::v1::schema::{CompactionStatus, CompactionUpdate};
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, PromptRequest, PromptResponse, SessionNotification, SessionUpdate,
    StopReason, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error};
use tokio::sync::watch;

use crate::prompt;

use super::set_config::setting_command;
use super::state::{Session, State, another_turn_runs, invalid, lock, retell_settings};
use super::turn::{Turn, compaction_id};

/// `/compact [focus]` for a client that takes `compaction_update`s: one `in_progress`, then
/// `completed` with the line saying what was compacted (or `failed` with why); the text to
/// show as the command's answer, as for any client.
pub(super) fn compact_command(
    state: &State,
    session: &Session,
    focus: &str,
    cx: &ConnectionTo<Client>,
) -> Result<String, Error> {
    let id = compaction_id();
    let tell = |update: CompactionUpdate| {
        cx.send_notification(SessionNotification::new(
            session.id.clone(),
            SessionUpdate::CompactionUpdate(update),
        ))
    };
    tell(CompactionUpdate::new(
        id.clone(),
        CompactionStatus::InProgress,
    ))?;
    match state.backend.slash_command(&session.path, "compact", focus) {
        Ok(text) => {
            tell(
                CompactionUpdate::new(id, CompactionStatus::Completed)
                    .summary(vec![ContentBlock::Text(TextContent::new(text.clone()))]),
            )?;
            Ok(text)
        }
        Err(error) => {
            tell(CompactionUpdate::new(id, CompactionStatus::Failed).error(error.message.clone()))?;
            Ok(format!("/compact: {error}"))
        }
    }
}

pub(super) fn start_prompt(
    state: &Arc<State>,
    request: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let session = match state.session(&request.session_id) {
        Ok(session) => session,
        Err(error) => return responder.respond_with_error(error),
    };
    // A slash command is answered here: the model is not asked and the chat not written. Only
    // a user's: a delegated session's prompt is another model's text, which must not rewind
    // files (or do anything else) without the approval its tool calls need.
    if !session.delegated
        && let Some((command, argument)) = crate::commands::parse(&request.prompt)
    {
        let running = lock(&session.running).is_some();
        // What the command makes the engine do (a compaction) is this connection's own: the
        // follower does not tell it as another front end's.
        let own = (!running).then(|| {
            let (sender, _) = tokio::sync::mpsc::unbounded_channel();
            lock(&session.own_events).replace(sender)
        });
        let answer = (|| -> Result<String, Error> {
            Ok(if running && command != "status" {
                format!(
                    "/{command}: a prompt runs in this session; run it once that prompt has ended"
                )
            } else if matches!(command, "model" | "mode") {
                setting_command(state, &session, command, &argument, &cx)?
            } else if command == "compact" && state.client_compaction.load(Ordering::Relaxed) {
                compact_command(state, &session, &argument, &cx)?
            } else {
                match state
                    .backend
                    .slash_command(&session.path, command, &argument)
                {
                    Ok(text) => text,
                    Err(error) => format!("/{command}: {error}"),
                }
            })
        })();
        if let Some(earlier) = own {
            *lock(&session.own_events) = earlier;
        }
        let answer = answer?;
        cx.send_notification(SessionNotification::new(
            session.id.clone(),
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                TextContent::new(answer),
            ))),
        ))?;
        return responder.respond(PromptResponse::new(StopReason::EndTurn));
    }
    let text = match prompt::to_chat_text(&request.prompt, &session.path) {
        Ok(text) if session.delegated => flemma_syntax::write::literal_user_text(&text),
        Ok(text) => text,
        Err(error) => return responder.respond_with_error(invalid(error.to_string())),
    };
    // Checked again, atomically with taking the chat's events, when the turn starts.
    if session.other_runs.load(Ordering::SeqCst) {
        return responder.respond_with_error(another_turn_runs());
    }
    let cancel = {
        let mut running = lock(&session.running);
        if running.is_some() {
            return responder.respond_with_error(invalid(
                "a prompt is already running in this session: wait for its answer, or send session/cancel; this prompt was not written",
            ));
        }
        let (sender, receiver) = watch::channel(false);
        *running = Some(sender);
        receiver
    };
    // The chat's frontmatter may have changed its settings since the client was told.
    retell_settings(&*state.backend, &session, &cx)?;
    let backend = state.backend.clone();
    let compaction = state.client_compaction.load(Ordering::Relaxed);
    let task_cx = cx.clone();
    // `$/cancel_request` for this prompt cancels it as `session/cancel` does; the answer is
    // still the prompt's own (`stopReason: cancelled`).
    let request_cancel = responder.cancellation();
    cx.spawn(async move {
        let turn = Turn::new(&*backend, &session, &task_cx, cancel, compaction);
        let run = turn.run(&text);
        tokio::pin!(run);
        let mut cancel_asked = false;
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                () = request_cancel.cancelled(), if !cancel_asked => {
                    cancel_asked = true;
                    if let Some(signal) = lock(&session.running).as_ref() {
                        let _ = signal.send(true);
                    }
                }
            }
        };
        // The chat as this prompt left it is known before its events stop coming here: what
        // follows is another front end's, told from there.
        *lock(&session.known) = backend.read_chat(&session.path).ok();
        *lock(&session.own_events) = None;
        *lock(&session.running) = None;
        session.announced.prompt_runs(false);
        retell_settings(&*backend, &session, &task_cx)?;
        let sent = match result {
            Ok(stop) => responder.respond(PromptResponse::new(stop)),
            Err(error) => responder.respond_with_error(error),
        };
        if let Err(error) = sent {
            tracing::warn!(%error, "could not answer session/prompt");
        }
        Ok(())
    })
}
