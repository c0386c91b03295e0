//! `flemma.jobs.status`: the state of a background job. Its answer needs the engine's job table
//! (the engine answers it); the runner here is for a process without one.

use serde_json::{Value, json};

use crate::context::Outcome;
use crate::spec::{Capability, ToolSpec, strict_object_schema};

pub const NAME: &str = flemma_config::JOBS_STATUS_TOOL;

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

/// The registry runner, for a process that runs no background jobs (`flemmad tools run`):
/// every id is unknown. The engine intercepts `flemma.jobs.status` and answers from its own
/// job table (`flemma_engine`'s `jobs_status`).
pub fn run_without_jobs(_ctx: &crate::context::RunContext, input: &Value) -> Outcome {
    let Some(job_id) = input.get("job_id").and_then(Value::as_str) else {
        return Outcome::error(format!("{NAME} needs a `job_id` string"));
    };
    Outcome::error(format!("No background job with id {job_id}"))
}
