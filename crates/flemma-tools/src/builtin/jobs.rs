//! `flemma.jobs.status`: the state of a background job. Its answer needs the engine's job table,
//! so the runner takes a [`JobLookup`] the engine implements.

use serde_json::{Value, json};

use crate::context::Outcome;
use crate::spec::{Capability, ToolSpec, strict_object_schema};

pub const NAME: &str = flemma_config::JOBS_STATUS_TOOL;

/// A job's state as the engine knows it (cross-checked against the document text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Running,
    CompletedDeliveryPending,
    Completed,
    CompletedRemoved,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::CompletedDeliveryPending => "completed (delivery pending)",
            JobState::Completed => "completed",
            JobState::CompletedRemoved => "completed (removed from conversation)",
        }
    }
}

/// The engine's job table, as this tool sees it.
pub trait JobLookup {
    /// The state of `job_id`, or `None` when no such job exists.
    fn state(&self, job_id: &str) -> Option<JobState>;
}

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: NAME.into(),
        description: "The status of a background job started with `flemma.background`, as JSON: \
`status` is running, completed (delivery pending: the result arrives by itself, do not re-run or \
poll), completed, or completed (removed from conversation); `elapsed_seconds` is how long it ran."
            .into(),
        input_schema: strict_object_schema(vec![(
            "job_id",
            json!({"type": "string", "description": "The job id the background call returned."}),
        )]),
        strict: true,
        is_async: false,
        capabilities: vec![Capability::DisablesBackground, Capability::DisablesSaveTo],
    }
}

pub fn run(jobs: &dyn JobLookup, input: &Value) -> Outcome {
    let Some(job_id) = input.get("job_id").and_then(Value::as_str) else {
        return Outcome::error(format!("{NAME} needs a `job_id` string"));
    };
    match jobs.state(job_id) {
        Some(state) => Outcome::ok(json!({"job_id": job_id, "status": state.as_str()}).to_string()),
        None => Outcome::error(format!("No background job with id {job_id}")),
    }
}

/// The job table of a process that runs no background jobs (`flemmad tools run`): every id is
/// unknown. The engine intercepts `flemma.jobs.status` and answers from its own table.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJobs;

impl JobLookup for NoJobs {
    fn state(&self, _job_id: &str) -> Option<JobState> {
        None
    }
}

/// The registry runner: answers from [`NoJobs`].
pub fn run_without_jobs(_ctx: &crate::context::RunContext, input: &Value) -> Outcome {
    run(&NoJobs, input)
}
