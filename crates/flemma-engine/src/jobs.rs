//! The job table: background jobs of one document and their delivery queue.

use std::collections::{BTreeMap, VecDeque};

pub use flemma_protocol::engine::JobState;

/// A finished job's result while it waits for a delivery point.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Waiting {
    text: String,
    is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub job_id: String,
    pub tool_id: String,
    pub tool_name: String,
    pub state: JobState,
    /// When the job started (the shell's clock).
    pub started_at: crate::Millis,
    /// When it finished, once it has.
    pub finished_at: Option<crate::Millis>,
    /// Its result while it is [`JobState::Completed`].
    waiting: Option<Waiting>,
}

/// Jobs by id, and the FIFO of completed ones.
#[derive(Debug, Clone, Default)]
pub struct JobTable {
    jobs: BTreeMap<String, Job>,
    queue: VecDeque<String>,
}

impl JobTable {
    pub fn submit(&mut self, job_id: &str, tool_id: &str, tool_name: &str, now: crate::Millis) {
        self.jobs.insert(
            job_id.to_owned(),
            Job {
                job_id: job_id.to_owned(),
                tool_id: tool_id.to_owned(),
                tool_name: tool_name.to_owned(),
                state: JobState::Running,
                started_at: now,
                finished_at: None,
                waiting: None,
            },
        );
    }

    pub fn get(&self, job_id: &str) -> Option<&Job> {
        self.jobs.get(job_id)
    }

    pub fn by_tool(&self, tool_id: &str) -> Option<&Job> {
        self.jobs
            .values()
            .find(|j| j.tool_id == tool_id && j.state == JobState::Running)
    }

    pub fn contains(&self, job_id: &str) -> bool {
        self.jobs.contains_key(job_id)
    }

    /// Marks a running job finished and queues it; false when it is not running.
    pub fn complete(
        &mut self,
        job_id: &str,
        text: String,
        is_error: bool,
        now: crate::Millis,
    ) -> bool {
        match self.jobs.get_mut(job_id) {
            Some(job) if job.state == JobState::Running => {
                job.state = JobState::Completed;
                job.waiting = Some(Waiting { text, is_error });
                job.finished_at = Some(now);
                self.queue.push_back(job_id.to_owned());
                true
            }
            _ => false,
        }
    }

    /// Takes the completed jobs in completion order, marking them delivered.
    pub fn take_deliveries(&mut self) -> Vec<(Job, String, bool)> {
        let mut out = Vec::with_capacity(self.queue.len());
        while let Some(id) = self.queue.pop_front() {
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            if let Some(Waiting { text, is_error }) = job.waiting.take() {
                job.state = JobState::Delivered;
                out.push((job.clone(), text, is_error));
            }
        }
        out
    }

    pub fn has_deliveries(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Jobs still running.
    pub fn active_count(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .count()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }
}
