//! Cancellation (`Input::Cancel`): the request (the reply so far keeps its text and gets the
//! abort marker), the foreground tools (their placeholders become `aborted`) and the resume
//! timer; background jobs keep running.

use super::*;

impl Engine {
    pub(super) fn cancel(&mut self, scope: CancelScope, out: &mut Vec<Effect>) {
        match scope {
            CancelScope::Request => {
                if !self.cancel_request(out) {
                    out.push(Effect::Refused {
                        message: "no request is in flight for this document".into(),
                    });
                    return;
                }
            }
            CancelScope::Tool(id) => {
                if !self.cancel_tool(&id, out) {
                    out.push(Effect::Refused {
                        message: format!("`{id}` is not running or waiting in this document"),
                    });
                    return;
                }
                if !self.running.is_empty() || !self.waiting.is_empty() || self.stream.is_some() {
                    return;
                }
            }
            CancelScope::All => {
                self.cancel_request(out);
                let ids: Vec<String> = self
                    .running
                    .iter()
                    .map(|t| t.tool_id.clone())
                    .chain(self.waiting.iter().cloned())
                    .collect();
                for id in ids {
                    self.cancel_tool(&id, out);
                }
                if let Some(timer) = self.resume_timer.take() {
                    out.push(Effect::CancelTimer { id: timer });
                    emit(out, EngineEvent::AutopilotResumeCancelled(Empty {}));
                }
            }
        }
        self.stop(out, StopReason::Cancelled);
    }

    pub(super) fn cancel_request(&mut self, out: &mut Vec<Effect>) -> bool {
        let Some(request) = self.request() else {
            return false;
        };
        out.push(Effect::CancelRequest { request });
        self.end_interrupted(ReplyOutcome::Interrupted, out);
        if let Some(stream) = self.stream.take() {
            self.account(&stream, RequestStatus::Cancelled, out);
        }
        true
    }

    pub(super) fn cancel_tool(&mut self, id: &str, out: &mut Vec<Effect>) -> bool {
        if let Some(position) = self.running.iter().position(|t| t.tool_id == id) {
            self.running.remove(position);
            self.killed.insert(id.to_owned());
            out.push(Effect::KillTool {
                tool_id: id.to_owned(),
            });
        } else if let Some(position) = self.waiting.iter().position(|t| t == id) {
            self.waiting.remove(position);
        } else if let Some(job_id) = self.jobs.by_tool(id).map(|j| j.job_id.clone()) {
            self.killed.insert(id.to_owned());
            out.push(Effect::KillTool {
                tool_id: id.to_owned(),
            });
            self.jobs
                .complete(&job_id, texts::JOB_CANCELLED.to_owned(), true, self.now);
            return true;
        } else {
            return false;
        }
        if let Some(edit) = self.doc.set_tool_result_status(id, Some(Status::Aborted)) {
            self.apply(vec![edit], out);
            self.emit_declined(id, Declined::Aborted, "", out);
        }
        true
    }
}
