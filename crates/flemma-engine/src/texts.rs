//! The texts the engine writes into results (`chat-format.md` §3). The ones `flemma-template`
//! also needs (when it sends an unresolved placeholder) live in `flemma_syntax::write`.

pub use flemma_syntax::write::{
    ABORTED_RESULT as ABORTED, DENIED_RESULT as DENIED, JOB_LOST_RESULT as JOB_LOST,
    REJECTED_RESULT as REJECTED,
};
pub const JOB_CANCELLED: &str = "Job cancelled by the user.";
/// The abort marker's message of a reply cut off by the end of the process writing it.
pub const CUT_OFF: &str = "Response cut off: the process writing it ended before it finished.";

/// The abort marker's message of a reply cut off because writing the chat failed (`reason`:
/// what the write said, e.g. a read-only or full disk).
pub fn cut_off_by_write(reason: &str) -> String {
    format!("Response cut off: writing the chat failed ({reason}); the reply stopped there.")
}

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

/// The result of a call whose input does not fit its tool's schema (`problem` says where).
pub fn input_does_not_fit(problem: &str) -> String {
    format!("{problem}. Call the tool again with an input that fits its schema.")
}

pub fn background_notice(job_id: &str) -> String {
    format!(
        "Running as a background job `{job_id}`. Use `{}` with this job ID to check progress. Do not retry — the result will be delivered to you automatically when the job completes.",
        flemma_config::JOBS_STATUS_TOOL
    )
}

pub fn max_turns(n: u64) -> String {
    format!("Autopilot stopped – exceeded {n} consecutive turns.")
}

/// The refusal of a second decision on a call: what the first one was.
pub fn already_resolved(tool_id: &str, status: flemma_syntax::Status, running: bool) -> String {
    let what = match status {
        flemma_syntax::Status::Approved if running => "approved and is running".to_owned(),
        flemma_syntax::Status::Approved => "approved".to_owned(),
        flemma_syntax::Status::Rejected => "rejected".to_owned(),
        flemma_syntax::Status::Denied => "denied by the approval policy".to_owned(),
        flemma_syntax::Status::Aborted => "aborted".to_owned(),
        other => format!("`{other}`"),
    };
    format!(
        "`{tool_id}` was already {what}: the first decision on a call (approve, reject or cancel) is the one that counts; edit the chat yourself to change it"
    )
}
