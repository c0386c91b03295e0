//! What the engine is doing for one document, folded from its lifecycle events: the one fold
//! every front end that follows the events shares (the CLI's live line in `flemmad send`, the
//! language server's `$/progress`). A type, not a JSON form.

use crate::event::EngineEvent;

/// The engine's activity on a document as its events tell it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// A request is in flight: the reply streams (between `request:sending` and
    /// `request:finished`).
    pub requesting: bool,
    /// The model composes a tool call (its arguments stream).
    pub composing: bool,
    /// The foreground tool calls running: (tool use id, tool name), in start order (from
    /// `tool:executing` to `tool:completed`, or `job:submitted` when one moves to the
    /// background).
    pub tools: Vec<(String, String)>,
    /// What an agent `ask_agent` asked does (`<agent> · <title>`), while its call runs.
    pub agent: Option<String>,
    /// Background jobs running.
    pub jobs: usize,
    /// A resume is scheduled in this many milliseconds.
    pub resume_in_ms: Option<u64>,
}

impl Activity {
    /// Moves on with `event`; `false` when the event tells nothing of the activity.
    pub fn apply(&mut self, event: &EngineEvent) -> bool {
        match event {
            EngineEvent::RequestSending(_) => {
                self.requesting = true;
                self.resume_in_ms = None;
            }
            EngineEvent::RequestFinished(_) => {
                self.requesting = false;
                self.composing = false;
            }
            EngineEvent::RequestComposing(_) => self.composing = true,
            EngineEvent::RequestComposed(_) => self.composing = false,
            EngineEvent::ToolProgress(progress) => {
                self.agent = Some(progress.data.message.clone());
            }
            EngineEvent::ToolExecuting(tool) => self
                .tools
                .push((tool.tool_id.clone(), tool.tool_name.clone())),
            EngineEvent::ToolCompleted(done) => {
                self.tools.retain(|(id, _)| *id != done.tool_id);
                self.agent = None;
            }
            EngineEvent::JobSubmitted(job) => {
                self.tools.retain(|(id, _)| *id != job.tool_id);
                self.agent = None;
                self.jobs = job.active_count;
            }
            EngineEvent::JobCompleted(job) => self.jobs = job.active_count,
            EngineEvent::AutopilotResumeScheduled(resume) => {
                self.resume_in_ms = Some(resume.delay_ms);
            }
            EngineEvent::AutopilotResumeCancelled(_) | EngineEvent::AutopilotResumed(_) => {
                self.resume_in_ms = None;
            }
            EngineEvent::EngineStopped(_) => self.stop(),
            _ => return false,
        }
        true
    }

    /// The engine's work stopped: no request, no foreground call (jobs and a scheduled
    /// resume outlive a stop).
    pub fn stop(&mut self) {
        self.requesting = false;
        self.composing = false;
        self.agent = None;
        self.tools.clear();
    }

    /// A reply streams or foreground tools run.
    pub fn busy(&self) -> bool {
        self.requesting || !self.tools.is_empty()
    }

    /// Something runs or is scheduled: busy, background jobs, or a resume to come.
    pub fn active(&self) -> bool {
        self.busy() || self.jobs > 0 || self.resume_in_ms.is_some()
    }

    /// The names of the foreground tools running, in start order.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|(_, name)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn event(name: &str, data: serde_json::Value) -> EngineEvent {
        EngineEvent::from_parts(name, data).unwrap()
    }

    #[test]
    fn a_cycle_with_a_tool_that_moves_to_the_background() {
        let mut activity = Activity::default();
        let steps: Vec<(EngineEvent, bool, bool)> = vec![
            // (event, busy after, active after)
            (
                event("request:sending", serde_json::json!({"requestId": 1})),
                true,
                true,
            ),
            (
                event(
                    "request:finished",
                    serde_json::json!({"requestId": 1, "status": "completed"}),
                ),
                false,
                false,
            ),
            (
                event(
                    "tool:executing",
                    serde_json::json!({"toolId": "t1", "toolName": "bash"}),
                ),
                true,
                true,
            ),
            (
                event(
                    "job:submitted",
                    serde_json::json!({"jobId": "job_1", "toolId": "t1", "toolName": "bash", "activeCount": 1}),
                ),
                false,
                true,
            ),
            (
                event(
                    "job:completed",
                    serde_json::json!({"jobId": "job_1", "toolId": "t1", "toolName": "bash", "success": true, "activeCount": 0}),
                ),
                false,
                false,
            ),
        ];
        for (event, busy, active) in steps {
            assert!(activity.apply(&event), "{event:?}");
            assert_eq!(
                (activity.busy(), activity.active()),
                (busy, active),
                "{event:?}"
            );
        }
        assert!(activity.tools.is_empty());
    }

    #[test]
    fn a_stop_ends_the_foreground_work_and_unrelated_events_change_nothing() {
        let mut activity = Activity::default();
        activity.apply(&event(
            "tool:executing",
            serde_json::json!({"toolId": "t1", "toolName": "ask_agent"}),
        ));
        activity.jobs = 1;
        assert_eq!(activity.tool_names().collect::<Vec<_>>(), ["ask_agent"]);
        let before = activity.clone();
        assert!(!activity.apply(&event(
            "request:text",
            serde_json::json!({"requestId": 1, "text": "hi"})
        )));
        assert_eq!(activity, before);
        assert!(!activity.apply(&event(
            "engine:setup",
            serde_json::json!({"provider": "anthropic", "model": "m", "warnings": [], "diagnostics": []})
        )));
        assert_eq!(activity, before);
        activity.apply(&event(
            "engine:stopped",
            serde_json::json!({"reason": "idle"}),
        ));
        assert!(!activity.busy());
        assert!(activity.active(), "the background job still runs");
    }
}
