//! What the engine runs, as the session follows it: the engine's inputs fed and its effects
//! turned into the session's (the request with the text it evaluates, tools started and killed,
//! the edits left to write, a stop written at once), and the cancels of Ctrl-C and shutdown.

use flemma_syntax::apply_edits;

use crate::{
    CancelScope, Effect as EngineEffect, Input as EngineInput, JobState, Millis, StopReason,
};

use super::{Effect, LATE_RESULT_WAIT, Session};

impl Session {
    pub(super) fn feed(&mut self, now: Millis, input: EngineInput, out: &mut Vec<Effect>) {
        match &input {
            EngineInput::StreamEnded { request, .. } if self.request == Some(*request) => {
                self.request = None;
            }
            EngineInput::ToolFinished { tool_id, .. } => {
                self.tools_running.remove(tool_id);
                self.lingering.remove(tool_id);
            }
            EngineInput::JobFinished { job_id, .. } => {
                if let Some(job) = self.engine.jobs().find(|job| &job.job_id == job_id) {
                    self.tools_running.remove(&job.tool_id);
                }
            }
            _ => {}
        }
        let changed = match &input {
            EngineInput::TextChanged { edits } => apply_edits(&self.view, edits).ok(),
            _ => None,
        };
        let effects = self.engine.handle(now, input);
        let refused = effects
            .iter()
            .any(|effect| matches!(effect, EngineEffect::Refused { .. }));
        if let Some(changed) = changed
            && !refused
        {
            self.view = changed;
            self.op.unsettle();
        }
        for effect in effects {
            self.perform(now, effect, out);
        }
    }

    fn perform(&mut self, now: Millis, effect: EngineEffect, out: &mut Vec<Effect>) {
        match effect {
            EngineEffect::Edit { edits } => {
                if let Ok(next) = apply_edits(&self.view, &edits) {
                    self.view = next;
                }
                self.unwritten.push(edits);
                self.op.unsettle();
                self.unwritten_since.get_or_insert(now);
                if self.write_at.is_none() {
                    self.write_at = Some(now + self.config.coalesce);
                }
            }
            EngineEffect::StartRequest { request } => {
                self.stopped = None;
                self.request = Some(request);
                out.push(Effect::StartRequest {
                    request,
                    text: self.view.clone(),
                });
            }
            EngineEffect::CancelRequest { request } => out.push(Effect::CancelRequest { request }),
            EngineEffect::StartTool {
                tool_id,
                name,
                input,
                background,
                job_id,
            } => {
                self.tools_running.insert(tool_id.clone());
                out.push(Effect::StartTool {
                    tool_id,
                    name,
                    input,
                    job_id: background.then_some(job_id).flatten(),
                });
            }
            EngineEffect::KillTool { tool_id } => {
                if self.tools_running.remove(&tool_id) {
                    if self.engine.keeps_late_result(&tool_id) {
                        self.lingering
                            .insert(tool_id.clone(), now + LATE_RESULT_WAIT);
                    }
                    out.push(Effect::KillTool { tool_id });
                }
            }
            EngineEffect::SetTimer { id, at } => out.push(Effect::SetTimer { id, at }),
            EngineEffect::CancelTimer { id } => out.push(Effect::CancelTimer { id }),
            EngineEffect::Emit(event) => out.push(Effect::Emit(event)),
            EngineEffect::Stopped { reason } => {
                self.stopped = Some(reason);
                // Every stop is written at once.
                self.write_at = Some(now);
                self.op.unsettle();
            }
            EngineEffect::Refused { message } => {
                self.refusals += 1;
                out.push(Effect::Notice(message));
            }
            EngineEffect::Saw {
                seen,
                tool_id,
                name,
                input,
            } => out.push(Effect::Saw {
                seen,
                tool_id,
                name,
                input,
            }),
        }
    }

    /// Kills the foreground tools and the request (shutdown, Ctrl-C).
    pub(super) fn kill_everything(&mut self, out: &mut Vec<Effect>) {
        let mut tools: Vec<String> = self.tools_running.drain().collect();
        tools.sort();
        for tool_id in tools {
            out.push(Effect::KillTool { tool_id });
        }
        if let Some(request) = self.request.take()
            && !out.contains(&Effect::CancelRequest { request })
        {
            out.push(Effect::CancelRequest { request });
        }
    }

    /// Ctrl-C: the request, the foreground tools and every job.
    pub(super) fn cancel_everything(&mut self, now: Millis, out: &mut Vec<Effect>) {
        self.feed(
            now,
            EngineInput::Cancel {
                scope: CancelScope::All,
            },
            out,
        );
        let jobs: Vec<String> = self
            .engine
            .jobs()
            .filter(|job| job.state == JobState::Running)
            .map(|job| job.tool_id.clone())
            .collect();
        for tool_id in jobs {
            self.feed(
                now,
                EngineInput::Cancel {
                    scope: CancelScope::Tool(tool_id),
                },
                out,
            );
        }
        // Their threads end on their own; nothing waits for a killed tool's result.
        self.kill_everything(out);
        self.stopped = Some(StopReason::Cancelled);
        self.end = self.end.interrupt();
    }
}
