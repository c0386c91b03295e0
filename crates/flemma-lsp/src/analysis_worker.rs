//! Evaluation off the main loop. A document's analysis (its templates, file references and
//! configuration) can take seconds; the main loop must keep answering hover, completion and
//! code actions meanwhile. So when a document's diagnostics are due, its analysis runs on one
//! worker thread as an [`AnalysisJob`] (a snapshot of the document at one revision); the next
//! change of that document cancels it; the result comes back to the main loop as an event
//! tagged with the revision it analysed, and is kept (and published) only when the document is
//! still at that revision. One job runs at a time; documents due meanwhile wait their turn.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};
use flemma_ide::{Analysis, AnalysisJob};

use crate::session::Session;

/// An analysis the worker finished (or gave up on: `None` when it panicked).
#[derive(Debug)]
pub(crate) struct Finished {
    uri: String,
    revision: u64,
    analysis: Option<Arc<Analysis>>,
}

/// A job handed to the worker.
struct Work {
    uri: String,
    job: AnalysisJob,
    cancel: Arc<AtomicBool>,
}

/// The job that runs now.
#[derive(Debug)]
struct Running {
    uri: String,
    revision: u64,
    cancel: Arc<AtomicBool>,
}

/// The session's side of the worker: what runs, what waits, and what completion needs from the
/// last finished analysis of each document.
pub(crate) struct Analyses {
    work: Sender<Work>,
    running: Option<Running>,
    waiting: VecDeque<String>,
    /// What requests need from the last finished analysis of each document (answered from it
    /// while a newer analysis still runs; a whole `Analysis` is not kept, it shares the text).
    known: HashMap<String, Known>,
}

/// The tool names a document's configuration gives completion: the tools it enables, and the
/// `tools.mcp.exclude` globs that keep discovered MCP tools out.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownTools {
    pub(crate) enabled: Vec<String>,
    pub(crate) mcp_exclude: Vec<String>,
    /// The agents `ask_agent` may ask (name, description), sorted by name.
    pub(crate) agents: Vec<(String, Option<String>)>,
}

impl KnownTools {
    pub(crate) fn of(resolved: &flemma_config::ResolvedConfig) -> Self {
        let agents: Vec<(String, Option<String>)> = resolved
            .agents()
            .0
            .into_iter()
            .map(|(name, agent)| (name.to_owned(), agent.description.clone()))
            .collect();
        let mut enabled = resolved.enabled_tools();
        if !agents.is_empty() && !enabled.iter().any(|t| t == flemma_config::ASK_AGENT_TOOL) {
            enabled.push(flemma_config::ASK_AGENT_TOOL.to_owned());
        }
        Self {
            enabled,
            mcp_exclude: resolved.config.tools.mcp.exclude.clone(),
            agents,
        }
    }
}

/// What the last finished analysis of a document said that requests answer from.
#[derive(Debug, Clone, Default)]
struct Known {
    /// The tools it enables and excludes (completion).
    tools: Option<KnownTools>,
    /// The chat is untrusted and something in it was ignored or held for that (the "Trust this
    /// folder" code action).
    untrusted: bool,
}

impl Known {
    fn of(analysis: &Analysis) -> Self {
        use flemma_ide::untrusted::{
            DEFERRED_PARSER, UNSEEN_APPROVAL, UNSEEN_TOOL_CALL, UNTRUSTED_OPTION,
        };
        Self {
            tools: analysis.config.as_ref().map(KnownTools::of),
            untrusted: !analysis.trust.trusted
                && analysis.diagnostics.iter().any(|d| {
                    [
                        UNTRUSTED_OPTION,
                        UNSEEN_APPROVAL,
                        UNSEEN_TOOL_CALL,
                        DEFERRED_PARSER,
                    ]
                    .contains(&d.code.as_str())
                }),
        }
    }
}

impl std::fmt::Debug for Analyses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyses")
            .field("running", &self.running)
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl Analyses {
    /// Starts the worker thread; finished analyses arrive on the returned receiver.
    pub(crate) fn start() -> (Self, Receiver<Finished>) {
        let (work_tx, work_rx) = crossbeam_channel::unbounded::<Work>();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let spawned = std::thread::Builder::new()
            .name("flemma-analysis".into())
            .spawn(move || worker(&work_rx, &done_tx));
        if let Err(error) = spawned {
            tracing::error!(%error, "the analysis thread cannot start; diagnostics will not be published");
        }
        let analyses = Self {
            work: work_tx,
            running: None,
            waiting: VecDeque::new(),
            known: HashMap::new(),
        };
        (analyses, done_rx)
    }

    /// The tools the last finished analysis of `uri` enables and excludes (`None` before the
    /// first one).
    pub(crate) fn tools(&self, uri: &str) -> Option<KnownTools> {
        self.known.get(uri).and_then(|known| known.tools.clone())
    }

    /// Whether the last finished analysis of `uri` found it untrusted with something ignored or
    /// held for that (`false` before the first one).
    pub(crate) fn untrusted(&self, uri: &str) -> bool {
        self.known.get(uri).is_some_and(|known| known.untrusted)
    }

    /// Stops whatever runs (the session ends).
    pub(crate) fn cancel_all(&mut self) {
        self.waiting.clear();
        if let Some(running) = &self.running {
            running.cancel.store(true, Ordering::Relaxed);
        }
    }
}

fn worker(work: &Receiver<Work>, done: &Sender<Finished>) {
    while let Ok(Work { uri, job, cancel }) = work.recv() {
        let revision = job.revision();
        let analysis =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(Some(cancel))));
        let analysis = match analysis {
            Ok(analysis) => Some(Arc::new(analysis)),
            Err(_) => {
                tracing::error!(uri, "the analysis of a document panicked");
                None
            }
        };
        // Let go of the snapshot before the result is seen: the next change then edits the
        // document in place instead of copying it.
        drop(job);
        if done
            .send(Finished {
                uri,
                revision,
                analysis,
            })
            .is_err()
        {
            return;
        }
    }
}

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
