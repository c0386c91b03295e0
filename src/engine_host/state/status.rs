//! What the host state answers about a document: `flemma/status` (and its label), `flemma/jobs`
//! and `flemma/usage`, from the last driver's state and how it stopped.

use std::path::Path;

use flemma_protocol::engine::{EngineStatus, JobState};
use flemma_protocol::event::StopLabel;

use super::{DocumentState, HostState};
use crate::engine_driver::DriverState;

impl HostState {
    /// `flemma/status` of `path`; `questions` are the ids of the questions asked agents wait
    /// for (answered as pending calls are).
    pub fn status(&self, path: &Path, questions: Vec<String>) -> EngineStatus {
        let unknown = DocumentState::default();
        let state = self.docs.get(path).unwrap_or(&unknown);
        let driver = state.driver.as_ref();
        let mut pending = driver.map(|d| d.pending.clone()).unwrap_or_default();
        pending.extend(questions);
        EngineStatus {
            path: path.display().to_string(),
            state: status_label(state).to_owned(),
            running_tools: driver.map(|d| d.running_tools.clone()).unwrap_or_default(),
            pending,
            jobs: driver.map(|d| d.jobs.clone()).unwrap_or_default(),
            usage: usage_of(driver),
            last_stop: state.last_stop.as_ref().map(|stop| match &stop.message {
                Some(message) => format!("{}: {message}", stop.reason),
                None => stop.reason.to_string(),
            }),
            switched: self
                .switches
                .get(path)
                .map(|(_, switched)| switched.clone()),
            mode: self
                .modes
                .get(path)
                .map(|(_, mode)| mode.as_str().to_owned()),
            context: driver.and_then(|d| d.context.clone()).map(Box::new),
        }
    }

    /// `flemma/jobs` of `path`.
    pub fn jobs(&self, path: &Path) -> Vec<flemma_protocol::engine::EngineJob> {
        self.driver(path)
            .map(|d| d.jobs.clone())
            .unwrap_or_default()
    }

    /// `flemma/usage` of `path`.
    pub fn usage(&self, path: &Path) -> flemma_protocol::engine::UsageTotals {
        usage_of(self.driver(path))
    }

    fn driver(&self, path: &Path) -> Option<&DriverState> {
        self.docs.get(path).and_then(|d| d.driver.as_ref())
    }
}

/// The `state` of `flemma/status`: `idle` or `awaiting-approval` when no driver runs (as the
/// last one stopped), else `streaming`, `tools` (foreground tools or running jobs) or
/// `working`.
pub(crate) fn status_label(state: &DocumentState) -> &'static str {
    let driver = state.driver.as_ref();
    match driver {
        _ if !state.running() => {
            if state
                .last_stop
                .as_ref()
                .is_some_and(|stop| stop.reason == StopLabel::AwaitingApproval)
            {
                StopLabel::AwaitingApproval.as_str()
            } else {
                "idle"
            }
        }
        Some(d) if d.streaming => "streaming",
        Some(d)
            if !d.running_tools.is_empty()
                || d.jobs.iter().any(|j| j.state == JobState::Running) =>
        {
            "tools"
        }
        _ => "working",
    }
}

fn usage_of(driver: Option<&DriverState>) -> flemma_protocol::engine::UsageTotals {
    driver
        .map(|d| {
            crate::usage_report::totals(&d.usage, d.cost, d.cache_saved, d.rate_limits.as_ref())
        })
        .unwrap_or_default()
}
