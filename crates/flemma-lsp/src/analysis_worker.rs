//! Evaluation off the main loop. A document's analysis (its templates, file references and
//! configuration) can take seconds; the main loop must keep answering hover, completion and
//! code actions meanwhile. So when a document's diagnostics are due, its analysis runs on one
//! worker thread as an [`AnalysisJob`] (a snapshot of the document at one revision); the next
//! change of that document cancels it; the result comes back to the main loop as an event
//! tagged with the revision it analysed, and is kept (and published) only when the document is
//! still at that revision. One job runs at a time; documents due meanwhile wait their turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::analysis_pool::{Finished, Known, Running, Work};
use crate::session::Session;

/// The diagnostics of `uri` are due: its analysis is (re)started — a running one of the same
/// document is cancelled, since its text is out of date — or, when the analysis of the current
/// text is known already, published at once.
pub(crate) fn schedule(session: &mut Session, uri: &str) {
    let current = session
        .documents
        .get(uri)
        .and_then(|doc| session.host.revision(&doc.id));
    let analyses = &mut session.analyses;
    if let Some(running) = &analyses.running
        && running.uri == uri
    {
        if Some(running.revision) == current {
            // It analyses the current text already.
            return;
        }
        running.cancel.store(true, Ordering::Relaxed);
    }
    if !analyses.waiting.iter().any(|waiting| waiting == uri) {
        analyses.waiting.push_back(uri.to_owned());
    }
    start_next(session);
}

/// A document closed: it is analysed no more.
pub(crate) fn closed(session: &mut Session, uri: &str) {
    let analyses = &mut session.analyses;
    analyses.waiting.retain(|waiting| waiting != uri);
    analyses.known.remove(uri);
    if let Some(running) = &analyses.running
        && running.uri == uri
    {
        running.cancel.store(true, Ordering::Relaxed);
    }
}

/// The worker finished a job: its analysis is kept and published when the document is still at
/// the revision it analysed; then the next waiting document's analysis starts.
pub(crate) fn finished(session: &mut Session, finished: Finished) {
    session.analyses.running = None;
    let Finished {
        uri,
        revision,
        analysis,
    } = finished;
    if let Some(analysis) = analysis
        && session.documents.contains_key(&uri)
    {
        let known = Known::of(&analysis);
        if session.host.store_analysis(revision, analysis) {
            session.analyses.known.insert(uri.clone(), known);
            crate::publish::publish_diagnostics(session, &uri);
        }
    }
    start_next(session);
}

/// Starts the first waiting document's analysis when nothing runs; documents whose analysis is
/// known already are published on the way.
fn start_next(session: &mut Session) {
    while session.analyses.running.is_none() {
        let Some(uri) = session.analyses.waiting.pop_front() else {
            return;
        };
        let Some(doc) = session.documents.get(&uri) else {
            continue;
        };
        let Some(job) = session.host.analysis_job(&doc.id) else {
            crate::publish::publish_diagnostics(session, &uri);
            continue;
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let revision = job.revision();
        let work = Work {
            uri: uri.clone(),
            job,
            cancel: cancel.clone(),
        };
        if session.analyses.work.send(work).is_err() {
            tracing::error!("the analysis thread is gone; diagnostics are not published");
            return;
        }
        session.analyses.running = Some(Running {
            uri,
            revision,
            cancel,
        });
    }
}

/// Publishes the diagnostics whose debounce window has ended.
pub(crate) fn diagnostics_due(session: &mut Session, now: std::time::Instant) {
    let due: Vec<String> = session
        .documents
        .iter()
        .filter(|(_, d)| d.diagnostics_at.is_some_and(|at| at <= now))
        .map(|(uri, _)| uri.clone())
        .collect();
    for uri in due {
        if let Some(doc) = session.documents.get_mut(&uri) {
            doc.diagnostics_at = None;
        }
        schedule(session, &uri);
    }
}
