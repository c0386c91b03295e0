//! `$/progress` of the engine's work on an open document, derived from the document's
//! lifecycle events (the engine knows no LSP; it tells what happens, `flemma/event`) by the
//! one fold of them, `flemma_protocol::activity::Activity`: a reply streams, or foreground tools run. While either is
//! true the document is busy: a progress begins (`talk.chat: streaming the
//! reply`: without the server's name, which Helix puts before it), reports what changes (`running bash`), and ends `done` when nothing runs; the
//! engine's `engine:stopped` ends it with its reason, a failure with `failed`.

use flemma_protocol::event::EngineEvent;

use crate::session::{ResponseHandler, Session};

/// A lifecycle event of `uri`: the document's activity, and its progress, move on.
pub(crate) fn on_event(session: &mut Session, uri: &str, event: &EngineEvent) {
    let Some(doc) = session.documents.get_mut(uri) else {
        return;
    };
    if let EngineEvent::EngineStopped(stopped) = event {
        return stop(session, uri, stopped.reason.as_str());
    }
    let activity = &mut doc.engine;
    let was_busy = activity.busy();
    if !activity.activity.apply(event) {
        return;
    }
    let (busy, message) = (activity.busy(), activity.message());
    // Reported only when it changes (an asked agent tells every piece of its answer).
    let changed = activity.shown != message;
    activity.shown.clone_from(&message);
    let file = doc
        .id
        .path()
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    match (was_busy, busy) {
        (false, true) => begin(session, uri, format!("{file}: {message}")),
        (true, true) if changed => report(session, uri, message),
        (true, true) => {}
        (true, false) => end(session, uri, "done"),
        (false, false) => {}
    }
}

/// The engine's work on `uri` stopped (`reason`: `idle`, `failed`, …): nothing runs any more.
pub(crate) fn stop(session: &mut Session, uri: &str, reason: &str) {
    if let Some(doc) = session.documents.get_mut(uri) {
        doc.engine.activity.stop();
    }
    end(session, uri, reason);
}

fn begin(session: &mut Session, uri: &str, title: String) {
    end(session, uri, "");
    if !shows_progress(session) {
        return;
    }
    session.progress_tokens += 1;
    let token =
        lsp_types::ProgressToken::String(format!("flemma/engine/{}", session.progress_tokens));
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
        doc.engine.progress = Some(token);
    }
}

fn report(session: &Session, uri: &str, message: String) {
    let Some(token) = session
        .documents
        .get(uri)
        .and_then(|doc| doc.engine.progress.clone())
    else {
        return;
    };
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

/// Ends the document's progress, if one is shown.
fn end(session: &mut Session, uri: &str, message: &str) {
    let Some(token) = session
        .documents
        .get_mut(uri)
        .and_then(|doc| doc.engine.progress.take())
    else {
        return;
    };
    end_progress(session, token, message);
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

/// Ends a progress with what happened.
pub(crate) fn end_progress(session: &Session, token: lsp_types::ProgressToken, message: &str) {
    send_progress(
        session,
        token,
        lsp_types::WorkDoneProgress::End(lsp_types::WorkDoneProgressEnd {
            message: Some(message.to_owned()),
        }),
    );
}
