//! The analysis worker's state, the session's side of it ([`Analyses`]: what runs, what
//! waits, what the last analysis of each document said) and its thread. What the main loop
//! does with it is `analysis_worker`'s; this file names no `Session`, so that the session can
//! hold it without the two files reaching each other.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};
use flemma_ide::{Analysis, AnalysisJob};

/// An analysis the worker finished (or gave up on: `None` when it panicked).
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) uri: String,
    pub(crate) revision: u64,
    pub(crate) analysis: Option<Arc<Analysis>>,
}

/// A job handed to the worker.
pub(crate) struct Work {
    pub(crate) uri: String,
    pub(crate) job: AnalysisJob,
    pub(crate) cancel: Arc<AtomicBool>,
}

/// The job that runs now.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) uri: String,
    pub(crate) revision: u64,
    pub(crate) cancel: Arc<AtomicBool>,
}

/// The session's side of the worker: what runs, what waits, and what completion needs from the
/// last finished analysis of each document.
pub(crate) struct Analyses {
    pub(crate) work: Sender<Work>,
    pub(crate) running: Option<Running>,
    pub(crate) waiting: VecDeque<String>,
    /// What requests need from the last finished analysis of each document (answered from it
    /// while a newer analysis still runs; a whole `Analysis` is not kept, it shares the text).
    pub(crate) known: HashMap<String, Known>,
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
pub(crate) struct Known {
    /// The tools it enables and excludes (completion).
    tools: Option<KnownTools>,
    /// The chat is untrusted and something in it was ignored or held for that (the "Trust this
    /// folder" code action).
    untrusted: bool,
}

impl Known {
    pub(crate) fn of(analysis: &Analysis) -> Self {
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
