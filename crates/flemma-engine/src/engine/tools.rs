//! Tools: a tool finishing (`Input::ToolFinished`: its output written into its result block,
//! below text the user typed there, or into a new block), queued calls started as slots free
//! up, the user's decisions (approve, reject, execute) on placeholders, and moving a running
//! call to the background.

use super::*;

impl Engine {
    pub(super) fn tool_finished(
        &mut self,
        now: Millis,
        tool_id: &str,
        text: String,
        is_error: bool,
        out: &mut Vec<Effect>,
    ) {
        let Some(position) = self.running.iter().position(|t| t.tool_id == tool_id) else {
            if let Some(job_id) = self.jobs.by_tool(tool_id).map(|j| j.job_id.clone()) {
                self.job_finished(now, &job_id, text, is_error, out);
            } else if self.killed.remove(tool_id) {
                self.late_result(tool_id, &text, out);
            } else {
                out.push(Effect::Refused {
                    message: format!("no tool `{tool_id}` is running in this document; its output was not written"),
                });
            }
            return;
        };
        let tool = self.running.remove(position);
        let (text, stopped) = loop_checked(
            &mut self.loops,
            &mut self.halt,
            &tool.name,
            &tool.input,
            text,
        );
        let is_error = is_error || stopped;
        let written = self.write_tool_output(tool_id, &tool.name, &text, is_error, out);
        emit(
            out,
            EngineEvent::ToolCompleted(ToolCompleted {
                tool_id: tool_id.to_owned(),
                tool_name: tool.name,
                status: if is_error {
                    ToolStatus::Error
                } else {
                    ToolStatus::Success
                },
                written,
                output: Some(text),
            }),
        );
        self.start_waiting(out);
        if self.running.is_empty() && self.waiting.is_empty() {
            self.continue_cycle(now, out);
        }
    }

    /// Whether the output a cancelled call `tool_id` returns on its way out is kept
    /// ([`EngineConfig::kept_when_cancelled`]).
    pub(crate) fn keeps_late_result(&self, tool_id: &str) -> bool {
        self.call(tool_id)
            .is_some_and(|(name, _)| self.config.kept_when_cancelled.contains(&name))
    }

    /// The output of a call killed by a cancel, arriving after it: written into its result
    /// block, which stays `aborted`, when the tool's output is kept after a cancel and the
    /// block is still the empty `aborted` one the cancel left (else dropped).
    fn late_result(&mut self, tool_id: &str, text: &str, out: &mut Vec<Effect>) {
        if !self.keeps_late_result(tool_id) {
            return;
        }
        let Some((_, segment, result)) = self.doc.tool_result(tool_id) else {
            return;
        };
        let aborted = result.suffix.as_ref().and_then(|s| s.status()) == Some(Status::Aborted);
        let empty = result
            .fence
            .as_ref()
            .is_none_or(|f| self.doc.slice(f.content).trim().is_empty());
        if !aborted || !empty {
            return;
        }
        let suffix = result.suffix.as_ref().map_or_else(
            || Suffix::render(Some(Status::Aborted), &[]),
            |s| s.render_with_status(Some(Status::Aborted)),
        );
        let block = tool_result_block(tool_id, &suffix, text, "", self.config.compact_headers);
        let edit = TextEdit::replace(segment.range, self.doc.in_line_ending(block));
        self.apply(vec![edit], out);
    }

    /// Writes a tool's output into its placeholder, unless the user typed into it: then their
    /// text stays, the placeholder stays `approved` (the next advance pauses on it) and the
    /// output goes right below the block, so neither is lost. When the user removed the block
    /// while the tool ran, the output gets a new result block (the tool is not run again);
    /// when they removed the whole turn, the output is dropped and the cycle stops once the
    /// foreground is clear (nothing is sent that the user did not see).
    pub(super) fn write_tool_output(
        &mut self,
        tool_id: &str,
        name: &str,
        text: &str,
        is_error: bool,
        out: &mut Vec<Effect>,
    ) -> Written {
        let Some((_, segment, result)) = self.doc.tool_result(tool_id) else {
            return self.write_output_without_block(tool_id, name, text, is_error, out);
        };
        let typed = result
            .fence
            .as_ref()
            .is_some_and(|f| !self.doc.slice(f.content).trim().is_empty());
        if typed {
            let note = format!(
                "\nOutput of `{tool_id}`{} (kept here because the result block holds your text):\n{}",
                if is_error { " (error)" } else { "" },
                fenced("", text)
            );
            let edit = TextEdit::insert(segment.range.end, note);
            self.apply(vec![edit], out);
            Written::BelowUserText
        } else {
            self.write_result(tool_id, text, is_error, out);
            Written::Result
        }
    }

    pub(super) fn write_output_without_block(
        &mut self,
        tool_id: &str,
        name: &str,
        text: &str,
        is_error: bool,
        out: &mut Vec<Effect>,
    ) -> Written {
        let turn = self
            .doc
            .tool_use(tool_id)
            .and_then(|(message, _, _)| self.doc.message_index_at(message.range.start));
        let Some(turn) = turn else {
            self.halt.get_or_insert_with(|| {
                format!(
                    "the turn that called `{name}` (`{tool_id}`) was removed from the file while the tool ran, so its output was dropped and nothing more was sent; send again to continue from the file as it is"
                )
            });
            return Written::Dropped;
        };
        let suffix = Suffix::render(is_error.then_some(Status::Error), &[]);
        let block = tool_result_block(tool_id, &suffix, text, "", self.config.compact_headers);
        let edit = self.placeholder_insertion(turn, &[block]);
        self.apply(vec![edit], out);
        Written::Restored
    }

    pub(super) fn start_waiting(&mut self, out: &mut Vec<Effect>) {
        while self.config.max_concurrent == 0 || self.running.len() < self.config.max_concurrent {
            let Some(id) = self.waiting.pop_front() else {
                break;
            };
            let still_approved = self.doc.tool_result(&id).is_some_and(|(_, _, r)| {
                r.suffix.as_ref().and_then(|s| s.status()) == Some(Status::Approved)
            });
            if still_approved {
                self.start_tool(&id, out);
            }
        }
    }

    /// The foreground is clear: go on (autopilot) or stop.
    pub(super) fn continue_cycle(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if let Some(message) = self.halt.take() {
            self.stop(out, StopReason::Error { message });
        } else if self.config.autopilot {
            self.advance(now, true, out);
        } else {
            self.stop(out, StopReason::StepDone);
        }
    }

    pub(super) fn set_pending_status(
        &mut self,
        tool_id: &str,
        status: Status,
        reason: Option<String>,
        out: &mut Vec<Effect>,
    ) -> bool {
        let current = self.doc.tool_result(tool_id).map(|(_, segment, r)| {
            (
                segment.range,
                r.suffix.clone(),
                r.suffix.as_ref().and_then(|s| s.status()),
            )
        });
        // One resolution per call: the first approve, reject or cancel wins; a later one is
        // refused, saying what happened (docs/engine.md).
        if let Some((_, _, Some(done))) = &current {
            if *done != Status::Pending {
                let running = self.running.iter().any(|t| t.tool_id == tool_id)
                    || self.waiting.iter().any(|t| t == tool_id);
                out.push(Effect::Refused {
                    message: texts::already_resolved(tool_id, *done, running),
                });
                return false;
            }
        }
        let found = current.and_then(|(range, suffix, status)| {
            (status == Some(Status::Pending)).then_some((range, suffix))
        });
        let Some((range, suffix)) = found else {
            let pending: Vec<String> = self
                .placeholders(Some(Status::Pending))
                .into_iter()
                .map(|(_, _, r)| r.tool_use_id.clone())
                .collect();
            out.push(Effect::Refused {
                message: format!(
                    "no unresolved tool call `{tool_id}` in this document; pending: {}",
                    if pending.is_empty() {
                        "none".to_owned()
                    } else {
                        pending.join(", ")
                    }
                ),
            });
            return false;
        };
        let edit = match reason {
            Some(reason) => {
                let suffix = suffix
                    .map(|s| s.render_with_status(Some(status)))
                    .unwrap_or_else(|| status.to_string());
                TextEdit::replace(
                    range,
                    tool_result_block(
                        tool_id,
                        &suffix,
                        &texts::user_feedback(&reason),
                        "",
                        self.config.compact_headers,
                    ),
                )
            }
            None => match self.doc.set_tool_result_status(tool_id, Some(status)) {
                Some(edit) => edit,
                None => return false,
            },
        };
        self.apply(vec![edit], out);
        if status == Status::Approved {
            self.learn(Seen::Approved, tool_id, out);
        }
        true
    }

    pub(super) fn execute_one(&mut self, now: Millis, tool_id: &str, out: &mut Vec<Effect>) {
        let found = self.doc.tool_result(tool_id).and_then(|(_, _, r)| {
            let status = r.suffix.as_ref().and_then(|s| s.status())?;
            let content = r
                .fence
                .as_ref()
                .map(|f| self.doc.slice(f.content).to_owned())
                .unwrap_or_default();
            status.is_lifecycle().then_some((status, content))
        });
        let Some((mut status, content)) = found else {
            out.push(Effect::Refused {
                message: format!("`{tool_id}` is not an unresolved tool call; nothing to execute"),
            });
            return;
        };
        if status == Status::Pending && content.trim().is_empty() {
            self.set_pending_status(tool_id, Status::Approved, None, out);
            status = Status::Approved;
        } else if status == Status::Approved {
            // The user asks to run this very call now: that approves it.
            self.learn(Seen::Approved, tool_id, out);
        }
        self.resolve_placeholder(tool_id, status, &content, out);
        let _ = now;
    }

    pub(super) fn move_to_background(&mut self, now: Millis, tool_id: &str, out: &mut Vec<Effect>) {
        let Some(position) = self.running.iter().position(|t| t.tool_id == tool_id) else {
            out.push(Effect::Refused {
                message: format!("`{tool_id}` is not a running foreground tool; only a running tool can move to the background"),
            });
            return;
        };
        let disabled = self
            .policy
            .capabilities(&self.running[position].name)
            .is_some_and(|i| i.disables_background);
        if disabled {
            out.push(Effect::Refused {
                message: format!(
                    "`{}` cannot run in the background",
                    self.running[position].name
                ),
            });
            return;
        }
        let tool = self.running.remove(position);
        let job_id = self.job_id_for(tool_id);
        self.write_job_placeholder(tool_id, &job_id, out);
        self.jobs.submit(&job_id, tool_id, &tool.name, now);
        self.emit_job_submitted(&job_id, tool_id, &tool.name, out);
        self.start_waiting(out);
        if self.running.is_empty() && self.waiting.is_empty() {
            self.continue_cycle(now, out);
        }
    }
}
