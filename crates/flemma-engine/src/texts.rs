//! The texts the engine writes into results (`chat-format.md` §3). The same strings are used by
//! `flemma-template` when it sends an unresolved placeholder; they belong in
//! `flemma_syntax::write` (integrator: move them there).

pub const DENIED: &str = "The tool was denied by a policy.";
pub const REJECTED: &str = "This tool has been rejected by the user.";
pub const ABORTED: &str = "Response interrupted by the user.";
pub const JOB_LOST: &str = "Job lost: session ended before completion.";
pub const JOB_CANCELLED: &str = "Job cancelled by the user.";

pub fn user_feedback(reason: &str) -> String {
    format!("User feedback: {reason}")
}

pub fn unknown_tool(name: &str) -> String {
    format!(
        "Unknown tool `{name}`: no tool of that name is enabled for this chat. Use one of the tools you were given."
    )
}

pub fn invalid_input(name: &str) -> String {
    format!(
        "The input of `{name}` is not a JSON object; call the tool again with a JSON object that fits its schema."
    )
}

pub fn background_notice(job_id: &str) -> String {
    format!(
        "Running as a background job `{job_id}`. Use `flemma.jobs.status` with this job ID to check progress. Do not retry — the result will be delivered to you automatically when the job completes."
    )
}

pub fn max_turns(n: u64) -> String {
    format!("Autopilot stopped – exceeded {n} consecutive turns.")
}
