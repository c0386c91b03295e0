//! Background jobs: a job finishing (`Input::JobFinished`), FIFO delivery of job results at
//! the next delivery point, and `Input::Load`'s recovery (a reply cut by a killed process is
//! closed with its marker; orphaned jobs are marked lost; calls that were running wait for
//! approval again).

use super::*;

/// The resolver named for a call that waits for approval again because it was running when
/// the process that started it ended (`(pending interrupted)`).
pub const INTERRUPTED_RESOLVER: &str = "urn:flemma:approval:interrupted";

impl Engine {
    pub(super) fn job_finished(
        &mut self,
        now: Millis,
        job_id: &str,
        text: String,
        is_error: bool,
        out: &mut Vec<Effect>,
    ) {
        if !self.jobs.complete(job_id, text, is_error, now) {
            out.push(Effect::Refused {
                message: format!(
                    "no running job `{job_id}` in this document; its result was not written"
                ),
            });
            return;
        }
        if self.stream.is_none() && self.running.is_empty() && self.waiting.is_empty() {
            self.deliver_at_idle(now, out);
        }
    }

    /// Delivers at idle and schedules the auto-continue.
    pub(super) fn deliver_at_idle(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.deliver_jobs(out) > 0 && self.config.autopilot {
            if let Some(timer) = self.resume_timer.take() {
                out.push(Effect::CancelTimer { id: timer });
            }
            let id = TimerId(self.next_timer);
            self.next_timer += 1;
            self.resume_timer = Some(id);
            out.push(Effect::SetTimer {
                id,
                at: now.saturating_add(self.config.resume_delay),
            });
            emit(
                out,
                EngineEvent::AutopilotResumeScheduled(ResumeScheduled {
                    delay_ms: self.config.resume_delay,
                }),
            );
        }
    }

    /// Writes every completed job's result (FIFO) with the placement rules of §3.2.
    pub(super) fn deliver_jobs(&mut self, out: &mut Vec<Effect>) -> usize {
        if !self.jobs.has_deliveries() {
            return 0;
        }
        let delivered = self.jobs.take_deliveries();
        let compact = self.config.compact_headers;
        let blocks: Vec<String> = delivered
            .iter()
            .map(|(job, text, is_error)| job_result_block(&job.job_id, *is_error, text, compact))
            .collect();
        let edit = self.job_results_insertion(&blocks.join("\n"));
        self.apply(vec![edit], out);
        for (job, _, is_error) in &delivered {
            emit(
                out,
                EngineEvent::JobCompleted(JobCompleted {
                    job_id: job.job_id.clone(),
                    tool_id: job.tool_id.clone(),
                    tool_name: job.tool_name.clone(),
                    success: !is_error,
                    active_count: self.jobs.active_count(),
                }),
            );
        }
        delivered.len()
    }

    /// Reuse a trailing `@You:` without user text; above one the user is typing in, a
    /// separate `@You:`; else a new `@You:` at the end.
    pub(super) fn job_results_insertion(&self, joined: &str) -> TextEdit {
        let text = self.doc.text();
        match self.doc.messages().last() {
            Some(last) if last.role == Role::You => {
                let user_text = last.segments.iter().any(|s| match s.kind {
                    SegmentKind::ToolResult(_) | SegmentKind::JobResult(_) => false,
                    SegmentKind::Text => !self.doc.slice(s.range).trim().is_empty(),
                    _ => true,
                });
                let last_result = last.segments.iter().rev().find(|s| {
                    matches!(
                        s.kind,
                        SegmentKind::ToolResult(_) | SegmentKind::JobResult(_)
                    )
                });
                if user_text {
                    TextEdit::insert(
                        last.range.start,
                        format!("{}{joined}\n", write::role_line(&Role::You)),
                    )
                } else if let Some(segment) = last_result {
                    TextEdit::insert(segment.range.end, format!("\n{joined}"))
                } else {
                    TextEdit::insert(last.body.start, joined.to_owned())
                }
            }
            _ => TextEdit::insert(
                text.len(),
                format!("{}@You:\n{joined}", separator_before(text, text.len())),
            ),
        }
    }

    /// A reply cut off by the end of the process that wrote it (killed mid-stream, as the
    /// shell's [`crate::Recovery::reply_streaming`] says): the chat ends with an `@Assistant:`
    /// message that is neither finished (a finished reply is always followed by `@You:`,
    /// written with its last text) nor aborted. With content it gets an
    /// open code fence closed, the abort marker saying what happened and the closing `@You:`,
    /// so the next advance continues it; without content its `@Assistant:` line is removed.
    ///
    /// `write_failed` is why the last writer stopped writing, when it knew (the marker says
    /// so then).
    pub(super) fn recover_cut_reply(&mut self, write_failed: Option<&str>, out: &mut Vec<Effect>) {
        let Some(last) = self.doc.messages().last() else {
            return;
        };
        if last.role != Role::Assistant || last.is_aborted() || self.stream.is_some() {
            return;
        }
        let text = self.doc.text();
        let edit = if self.doc.slice(last.body).trim().is_empty() {
            let before = &text[..last.range.start];
            let start = before
                .strip_suffix("\r\n")
                .or_else(|| before.strip_suffix('\n'))
                .filter(|line| line.is_empty() || line.ends_with('\n'))
                .map_or(last.range.start, str::len);
            TextEdit::replace(TextRange::new(start, text.len()), "")
        } else {
            let mut tail = String::new();
            if !text.ends_with('\n') {
                tail.push('\n');
            }
            let open_fence = last
                .diagnostics
                .iter()
                .find(|d| d.code == flemma_syntax::DiagnosticCode::UnclosedFence)
                .map(|d| {
                    let line = self.doc.slice(d.range).trim_start();
                    let ticks = line.bytes().take_while(|&b| b == b'`' || b == b'~').count();
                    line[..ticks].to_owned()
                });
            if let Some(fence) = open_fence.filter(|f| !f.is_empty()) {
                tail.push_str(&fence);
                tail.push('\n');
            }
            tail.push('\n');
            let why = match write_failed {
                Some(reason) => texts::cut_off_by_write(reason),
                None => texts::CUT_OFF.to_owned(),
            };
            tail.push_str(&write::abort_marker(&why));
            tail.push('\n');
            tail.push_str(&write::closing_prompt());
            TextEdit::insert(text.len(), tail)
        };
        self.apply(vec![edit], out);
        emit(
            out,
            EngineEvent::DocumentRecovered(DocumentRecovered {
                cut_reply: true,
                ..DocumentRecovered::default()
            }),
        );
    }

    /// Interrupted calls: of `started` (the foreground calls the last process started), those
    /// whose result is still an empty `(approved)` placeholder were running when it ended. They
    /// may have run, fully or in part, so they are not run again on their own: each becomes
    /// `(pending interrupted)` and waits for the user, who approves it (it runs again) or
    /// rejects it (the model is told it did not run).
    pub(super) fn recover_interrupted_calls(&mut self, started: &[String], out: &mut Vec<Effect>) {
        let mut interrupted = Vec::new();
        let mut edits = Vec::new();
        for id in started {
            let Some((_, _, result)) = self.doc.tool_result(id) else {
                continue;
            };
            let approved =
                result.suffix.as_ref().and_then(|s| s.status()) == Some(Status::Approved);
            let empty = result
                .fence
                .as_ref()
                .is_none_or(|fence| self.doc.slice(fence.content).trim().is_empty());
            if !approved || !empty || self.running.iter().any(|t| &t.tool_id == id) {
                continue;
            }
            if let Some(edit) =
                self.doc
                    .mark_tool_result(id, Status::Pending, write::INTERRUPTED_META)
            {
                edits.push(edit);
                interrupted.push(id.clone());
            }
        }
        if interrupted.is_empty() {
            return;
        }
        self.apply(edits, out);
        emit(
            out,
            EngineEvent::DocumentRecovered(DocumentRecovered {
                interrupted,
                ..DocumentRecovered::default()
            }),
        );
    }

    /// Orphan recovery: a `job=` result whose job is not live and has no job result.
    pub(super) fn recover_orphans(&mut self, out: &mut Vec<Effect>) {
        let mut orphans: Vec<(String, String)> = Vec::new();
        for message in self.doc.messages() {
            for (_, result) in message.tool_results() {
                let Some(SuffixValue::String(job)) =
                    result.suffix.as_ref().and_then(|s| s.get("job"))
                else {
                    continue;
                };
                if !self.jobs.contains(job) && self.doc.job_result(job).is_none() {
                    orphans.push((result.tool_use_id.clone(), job.clone()));
                }
            }
        }
        if orphans.is_empty() {
            return;
        }
        let mut edits = Vec::new();
        for (tool_id, _) in &orphans {
            if let Some(edit) = self
                .doc
                .set_tool_result_status(tool_id, Some(Status::Error))
            {
                edits.push(edit);
            }
        }
        self.apply(edits, out);
        let compact = self.config.compact_headers;
        let blocks: Vec<String> = orphans
            .iter()
            .map(|(_, job)| job_result_block(job, true, texts::JOB_LOST, compact))
            .collect();
        let edit = self.job_results_insertion(&blocks.join("\n"));
        self.apply(vec![edit], out);
        let jobs: Vec<String> = orphans.into_iter().map(|(_, j)| j).collect();
        emit(
            out,
            EngineEvent::DocumentRecovered(DocumentRecovered {
                count: jobs.len(),
                orphans: jobs,
                ..DocumentRecovered::default()
            }),
        );
    }
}
