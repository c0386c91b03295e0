//! A session's follower: the one reader of its chat's engine events. While this connection's
//! own prompt (or slash command) runs, it hands them to it; otherwise they are a turn another
//! front end started on the chat (an LSP editor's `flemma.send` through the same daemon), and
//! the follower streams it to the client live as `session/update`s — the question, then the
//! reply, thoughts and calls as the engine tells them — so the next prompt has nothing of it
//! to replay.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;

use super::state::{Session, State, lock};
use super::turn::Turn;
use crate::backend::TurnEvent;

/// Starts the follower of `session` (until the session is closed, loaded again, or the
/// client goes).
pub(super) fn follow(state: &State, session: &Arc<Session>, cx: &ConnectionTo<Client>) {
    let backend = state.backend.clone();
    let compaction = state.client_compaction.load(Ordering::Relaxed);
    let mut events = backend.events(&session.path);
    let (followed, task_cx) = (session.clone(), cx.clone());
    let spawned = cx.spawn(async move {
        let session = followed;
        // Never taken: another front end's turn is not cancelled from here.
        let (_keep, cancel) = tokio::sync::watch::channel(false);
        let mut other = Turn::new(&*backend, &session, &task_cx, cancel, compaction);
        loop {
            // `gone` is cancelled when the session is closed, deleted or loaded again, and
            // when the client's input ends.
            let event = tokio::select! {
                biased;
                () = session.gone.cancelled() => break,
                event = events.recv() => event,
            };
            let Some(event) = event else { break };
            let starts = {
                let own = lock(&session.own_events);
                if let Some(own) = own.as_ref() {
                    // The prompt may have just ended: what it no longer takes is its own still.
                    let _ = own.send(event);
                    session.other_runs.store(false, Ordering::SeqCst);
                    continue;
                }
                // Marked under the lock a prompt takes the events under (`Turn::run`).
                let starts = !session.other_runs.load(Ordering::SeqCst) && opens_a_turn(&event);
                if starts {
                    session.other_runs.store(true, Ordering::SeqCst);
                }
                starts
            };
            if let Err(error) = tell_other(&mut other, &session, event, starts) {
                // The client is gone or refused the update: nothing more to tell it.
                tracing::info!(chat = %session.id, %error, "stopped following the chat");
                break;
            }
        }
        session.other_runs.store(false, Ordering::SeqCst);
        Ok(())
    });
    if let Err(error) = spawned {
        tracing::warn!(chat = %session.id, %error, "cannot follow the chat's turns");
    }
}

/// Whether `event`, outside a turn, is the start of another front end's. A stop ends one;
/// the usage, a compaction and an agent's permission question outside a turn are a slash
/// command's or a compaction's of this connection, already told.
fn opens_a_turn(event: &TurnEvent) -> bool {
    !matches!(
        event,
        TurnEvent::Stopped { .. }
            | TurnEvent::Usage { .. }
            | TurnEvent::Compacted { .. }
            | TurnEvent::CompactionFailed(_)
            | TurnEvent::AgentPermission(_)
    )
}

/// An event of another front end's turn (`starts`: its first), told to the client. Its first
/// event tells the question that started it (read from the chat once: the engine sends what
/// the chat says, no event carries it), the rest what the events say; its stop makes the chat
/// as it is now the one the client knows (the next prompt replays nothing of it).
fn tell_other(
    turn: &mut Turn<'_>,
    session: &Session,
    event: TurnEvent,
    starts: bool,
) -> Result<(), agent_client_protocol::Error> {
    if !session.other_runs.load(Ordering::SeqCst) {
        // Outside a turn: nothing to tell (see `opens_a_turn`).
        return Ok(());
    }
    if let TurnEvent::Stopped { .. } = &event {
        *lock(&session.known) = turn.read().ok();
        session.other_runs.store(false, Ordering::SeqCst);
        return Ok(());
    }
    if starts {
        turn.tell_added_turns(true)?;
    }
    turn.tell(event)
}
