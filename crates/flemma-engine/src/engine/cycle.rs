//! The advance cycle of `harness.md` §1 (`Input::Advance`, autopilot's resume): categorize the
//! tool uses without results (phase 1: placeholders, approval), execute what is approved
//! (phase 2: start tools, background jobs, `flemma.jobs.status` answered from the job table),
//! send the conversation (phase 3: `@Assistant:` and the request), and stop with a reason.

use super::*;

impl Engine {
    /// `flemma/send`: does the next thing. `automatic` when autopilot (not the user) asks.
    pub(super) fn advance(&mut self, now: Millis, automatic: bool, out: &mut Vec<Effect>) {
        if self.stream.is_some() || !self.running.is_empty() || !self.waiting.is_empty() {
            // Mid-cycle: the running work continues the cycle when it ends.
            return;
        }
        if let Some(timer) = self.resume_timer.take() {
            out.push(Effect::CancelTimer { id: timer });
        }
        if !automatic {
            self.autopilot_turns = 0;
            self.halt = None;
        }
        self.settle();
        self.categorize(out);
        match self.execute(now, out) {
            Execution::Blocked(reason) => self.stop(out, reason),
            Execution::Running => {}
            // The loop detector stopped calls that never ran (unknown, invalid, denied).
            Execution::Clear => match self.halt.take() {
                Some(message) => self.stop(out, StopReason::Error { message }),
                None => self.send(automatic, out),
            },
        }
    }

    /// A nudge after approve/reject: goes on when nothing is pending any more and autopilot is on.
    pub(super) fn nudge(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.config.autopilot && self.placeholders(Some(Status::Pending)).is_empty() {
            self.advance(now, false, out);
        }
    }

    /// Phase 1: a placeholder for every tool use without a result.
    pub(super) fn categorize(&mut self, out: &mut Vec<Effect>) {
        struct Call {
            message: usize,
            block: String,
        }
        let compact = self.config.compact_headers;
        let mut calls: Vec<Call> = Vec::new();
        // Untrusted chats: calls the policy approved, and calls held for approval because
        // flemmad did not see them come from the model.
        let mut approved: Vec<String> = Vec::new();
        let mut held: Vec<String> = Vec::new();
        {
            let messages = self.doc.messages();
            let unresolved = unresolved_tool_uses(&self.doc, self.settled);
            for (index, tool_use) in unresolved {
                let message = &messages[index];
                let raw = tool_use
                    .fence
                    .as_ref()
                    .map(|f| self.doc.slice(f.content))
                    .unwrap_or("");
                let input: Option<Value> = serde_json::from_str::<Value>(raw)
                    .ok()
                    .filter(|v| v.is_object());
                let id = tool_use.id.clone();
                let name = tool_use.name.clone();
                // A call that cannot run (unknown tool, input that is no JSON object) still
                // counts for the loop detector, like any result the model gets back.
                let failed = |loops: &mut LoopDetector, halt: &mut Option<String>, text: String| {
                    let input = input
                        .as_ref()
                        .map_or_else(|| raw.to_owned(), canonical_json);
                    let (text, _) = loop_checked(loops, halt, &name, &input, text);
                    tool_result_block(&id, "error", &text, "", compact)
                };
                let block = if message.is_aborted() {
                    tool_result_placeholder(&id, Status::Aborted, &[], compact)
                } else if self.policy.capabilities(&name).is_none() {
                    failed(&mut self.loops, &mut self.halt, texts::unknown_tool(&name))
                } else if let Some(Err(problem)) =
                    input.as_ref().map(|input| self.policy.check(&name, input))
                {
                    // Validated before approval: an input that does not fit never waits.
                    failed(
                        &mut self.loops,
                        &mut self.halt,
                        texts::input_does_not_fit(&problem),
                    )
                } else if let Some(input) = input.as_ref() {
                    let decision = self.policy.decide(&name, input);
                    let status = match decision.verdict {
                        Verdict::Approve if !self.came_from_model(&id, &name, input) => {
                            held.push(id.clone());
                            Status::Pending
                        }
                        Verdict::Approve => {
                            approved.push(id.clone());
                            Status::Approved
                        }
                        Verdict::RequireApproval => Status::Pending,
                        Verdict::Deny { message } => {
                            self.denials.insert(id.clone(), message);
                            Status::Denied
                        }
                    };
                    tool_result_placeholder(&id, status, &[], compact)
                } else {
                    failed(&mut self.loops, &mut self.halt, texts::invalid_input(&name))
                };
                calls.push(Call {
                    message: index,
                    block,
                });
            }
        }
        // One insertion per assistant turn, last turn first so offsets stay valid.
        let mut groups: Vec<(usize, Vec<String>)> = Vec::new();
        for call in calls {
            match groups.last_mut() {
                Some((message, blocks)) if *message == call.message => blocks.push(call.block),
                _ => groups.push((call.message, vec![call.block])),
            }
        }
        let mut edits = Vec::new();
        for (message, blocks) in groups {
            edits.push(self.placeholder_insertion(message, &blocks));
        }
        self.apply(edits, out);
        for id in approved {
            self.learn(Seen::Approved, &id, out);
        }
        for id in held {
            self.hold(&id, Held::NotFromModel, out);
        }
    }

    /// Where and how the placeholders of assistant turn `index` go: into the `@You:` right
    /// after it (created when missing), after the results already there, above the user's text.
    pub(super) fn placeholder_insertion(&self, index: usize, blocks: &[String]) -> TextEdit {
        let text = self.doc.text();
        let messages = self.doc.messages();
        let joined = blocks.join("\n");
        match messages.get(index + 1) {
            Some(next) if next.role == Role::You => {
                let last_result = next
                    .segments
                    .iter()
                    .take_while(|s| {
                        matches!(
                            s.kind,
                            SegmentKind::ToolResult(_) | SegmentKind::JobResult(_)
                        ) || (matches!(s.kind, SegmentKind::Text)
                            && self.doc.slice(s.range).trim().is_empty())
                    })
                    .filter(|s| {
                        matches!(
                            s.kind,
                            SegmentKind::ToolResult(_) | SegmentKind::JobResult(_)
                        )
                    })
                    .last();
                match last_result {
                    Some(segment) => TextEdit::insert(segment.range.end, format!("\n{joined}")),
                    None => {
                        let at = next.body.start;
                        let rest_has_text = !text[at..next.range.end].trim().is_empty();
                        let tail = if rest_has_text { "\n" } else { "" };
                        TextEdit::insert(at, format!("{joined}{tail}"))
                    }
                }
            }
            Some(next) => TextEdit::insert(
                next.range.start,
                format!(
                    "{}@You:\n{joined}\n",
                    separator_before(text, next.range.start)
                ),
            ),
            None => TextEdit::insert(
                text.len(),
                format!("{}@You:\n{joined}", separator_before(text, text.len())),
            ),
        }
    }

    /// Phase 2: resolve what can be resolved, start approved tools.
    pub(super) fn execute(&mut self, _now: Millis, out: &mut Vec<Effect>) -> Execution {
        let placeholders: Vec<(String, Status, String)> = self
            .placeholders(None)
            .into_iter()
            .filter_map(|(_, _, r)| {
                let status = r.suffix.as_ref()?.status()?;
                let content = r
                    .fence
                    .as_ref()
                    .map(|f| self.doc.slice(f.content).to_owned())
                    .unwrap_or_default();
                Some((r.tool_use_id.clone(), status, content))
            })
            .collect();
        let mut pending = Vec::new();
        let mut paused = None;
        for (id, status, content) in placeholders {
            match self.resolve_placeholder(&id, status, &content, out) {
                Resolution::Pending => pending.push(id),
                Resolution::UserContent => {
                    paused.get_or_insert(id);
                }
                Resolution::Done => {}
            }
        }
        if !self.running.is_empty() || !self.waiting.is_empty() {
            Execution::Running
        } else if let Some(tool_id) = paused {
            Execution::Blocked(StopReason::UserContentInApproved { tool_id })
        } else if !pending.is_empty() {
            let tools: Vec<PendingTool> = self
                .pending_calls()
                .into_iter()
                .map(|c| PendingTool {
                    tool_id: c.tool_id,
                    tool_name: c.tool_name,
                    input: c.input,
                    resolver: c.resolver,
                })
                .collect();
            emit(
                out,
                EngineEvent::ToolApprovalRequired(ApprovalRequired { tools }),
            );
            Execution::Blocked(StopReason::AwaitingApproval { tool_ids: pending })
        } else {
            Execution::Clear
        }
    }

    pub(super) fn resolve_placeholder(
        &mut self,
        id: &str,
        status: Status,
        content: &str,
        out: &mut Vec<Effect>,
    ) -> Resolution {
        let has_content = !content.trim().is_empty();
        match status {
            Status::Pending if has_content => {
                // The user wrote the result: it is sent as is.
                if let Some(edit) = self.doc.set_tool_result_status(id, None) {
                    self.apply(vec![edit], out);
                }
                Resolution::Done
            }
            Status::Pending => Resolution::Pending,
            Status::Approved if has_content => Resolution::UserContent,
            Status::Approved if !self.approval_counts(id) => {
                // An untrusted chat's approval flemmad did not see given: back to pending.
                if let Some(edit) = self.doc.set_tool_result_status(id, Some(Status::Pending)) {
                    self.apply(vec![edit], out);
                }
                self.hold(id, Held::ApprovedOnArrival, out);
                Resolution::Pending
            }
            Status::Approved => {
                if !self.running.iter().any(|t| t.tool_id == id)
                    && !self.waiting.iter().any(|t| t == id)
                {
                    self.start_tool(id, out);
                }
                Resolution::Done
            }
            Status::Denied => {
                let message = self
                    .denials
                    .remove(id)
                    .unwrap_or_else(|| texts::DENIED.to_owned());
                // A denied call counts for the loop detector too.
                let (name, input) = self.call(id).unwrap_or_default();
                let (message, _) = loop_checked(
                    &mut self.loops,
                    &mut self.halt,
                    &name,
                    &canonical_json(&input),
                    message,
                );
                self.decline(id, Declined::Denied, &message, out);
                Resolution::Done
            }
            Status::Rejected => {
                let message = if has_content {
                    content.trim_end_matches(['\r', '\n']).to_owned()
                } else {
                    texts::REJECTED.to_owned()
                };
                self.decline(id, Declined::Rejected, &message, out);
                Resolution::Done
            }
            Status::Aborted => {
                let message = if has_content {
                    content.trim_end_matches(['\r', '\n']).to_owned()
                } else {
                    texts::ABORTED.to_owned()
                };
                self.decline(id, Declined::Aborted, &message, out);
                Resolution::Done
            }
            Status::Error => Resolution::Done,
        }
    }

    /// Replaces the placeholder of `id` with a final result (meta kept).
    pub(super) fn write_result(
        &mut self,
        id: &str,
        text: &str,
        is_error: bool,
        out: &mut Vec<Effect>,
    ) {
        if let Some(edit) =
            self.doc
                .resolve_tool_result(id, text, is_error, "", self.config.compact_headers)
        {
            self.apply(vec![edit], out);
        }
    }

    /// Writes the final result of a call that did not run (`tool:declined`).
    fn decline(&mut self, id: &str, status: Declined, message: &str, out: &mut Vec<Effect>) {
        self.write_result(id, message, true, out);
        self.emit_declined(id, status, message, out);
    }

    /// `tool:declined` for the call `id`, whose result says `output`.
    pub(super) fn emit_declined(
        &self,
        id: &str,
        status: Declined,
        output: &str,
        out: &mut Vec<Effect>,
    ) {
        let tool_name = self.call(id).map(|(name, _)| name).unwrap_or_default();
        emit(
            out,
            EngineEvent::ToolDeclined(ToolDeclined {
                tool_id: id.to_owned(),
                tool_name,
                status,
                output: output.to_owned(),
            }),
        );
    }

    /// The name and input of the tool use `id`.
    pub(super) fn call(&self, id: &str) -> Option<(String, Value)> {
        let (_, _, tool_use) = self.doc.tool_use(id)?;
        let raw = tool_use
            .fence
            .as_ref()
            .map(|f| self.doc.slice(f.content))
            .unwrap_or("");
        let input = serde_json::from_str(raw).unwrap_or(Value::Null);
        Some((tool_use.name.clone(), input))
    }

    pub(super) fn start_tool(&mut self, id: &str, out: &mut Vec<Effect>) {
        let Some((name, mut input)) = self.call(id) else {
            self.write_result(
                id,
                "No tool use with this id is in the conversation.",
                true,
                out,
            );
            return;
        };
        if name == JOBS_STATUS_TOOL {
            let (answer, is_error) = self.jobs_status(&input);
            self.write_result(id, &answer, is_error, out);
            return;
        }
        let info = self.policy.capabilities(&name).unwrap_or_default();
        let wants_background = match &mut input {
            Value::Object(map) => map
                .remove(BACKGROUND_PARAMETER)
                .is_some_and(|v| v == Value::Bool(true)),
            _ => false,
        };
        self.tool_ran = true;
        if wants_background && info.is_async && !info.disables_background {
            let job_id = self.job_id_for(id);
            self.write_job_placeholder(id, &job_id, out);
            self.jobs.submit(&job_id, id, &name, self.now);
            out.push(Effect::StartTool {
                tool_id: id.to_owned(),
                name: name.clone(),
                input,
                background: true,
                job_id: Some(job_id.clone()),
            });
            self.emit_job_submitted(&job_id, id, &name, out);
            return;
        }
        if self.config.max_concurrent != 0 && self.running.len() >= self.config.max_concurrent {
            self.waiting.push_back(id.to_owned());
            return;
        }
        self.running.push(RunningTool {
            tool_id: id.to_owned(),
            name: name.clone(),
            input: canonical_json(&input),
        });
        emit(
            out,
            EngineEvent::ToolExecuting(ToolRef {
                tool_id: id.to_owned(),
                tool_name: name.clone(),
                input: Some(input.clone()),
            }),
        );
        out.push(Effect::StartTool {
            tool_id: id.to_owned(),
            name,
            input,
            background: false,
            job_id: None,
        });
    }

    pub(super) fn emit_job_submitted(
        &self,
        job_id: &str,
        tool_id: &str,
        name: &str,
        out: &mut Vec<Effect>,
    ) {
        emit(
            out,
            EngineEvent::JobSubmitted(JobSubmitted {
                job_id: job_id.to_owned(),
                tool_id: tool_id.to_owned(),
                tool_name: name.to_owned(),
                active_count: self.jobs.active_count(),
            }),
        );
    }

    /// The job id for a tool going to the background: the one its result already names (a
    /// re-run), else a new one unique in the file.
    pub(super) fn job_id_for(&mut self, tool_id: &str) -> String {
        if let Some((_, _, result)) = self.doc.tool_result(tool_id) {
            if let Some(SuffixValue::String(job)) =
                result.suffix.as_ref().and_then(|s| s.get("job"))
            {
                if crate::ids::is_job_id(job) {
                    return job.clone();
                }
            }
        }
        loop {
            let candidate = self.ids.job_id();
            if !self.jobs.contains(&candidate) && !self.doc.text().contains(&candidate) {
                return candidate;
            }
        }
    }

    /// The placeholder of a backgrounded tool: resolved, with `job=` meta and the notice.
    pub(super) fn write_job_placeholder(
        &mut self,
        tool_id: &str,
        job_id: &str,
        out: &mut Vec<Effect>,
    ) {
        let Some((_, segment, result)) = self.doc.tool_result(tool_id) else {
            return;
        };
        let suffix = match &result.suffix {
            Some(suffix) if suffix.get("job").is_some() => suffix.render_with_status(None),
            Some(suffix) => {
                let rest = suffix.render_with_status(None);
                let job = Suffix::render(None, &[("job", job_id)]);
                if rest.is_empty() {
                    job
                } else {
                    format!("{rest} {job}")
                }
            }
            None => Suffix::render(None, &[("job", job_id)]),
        };
        let block = tool_result_block(
            tool_id,
            &suffix,
            &texts::background_notice(job_id),
            "",
            self.config.compact_headers,
        );
        let edit = TextEdit::replace(segment.range, block);
        self.apply(vec![edit], out);
    }

    /// `flemma.jobs.status`: the job table cross-checked with the text.
    pub(super) fn jobs_status(&self, input: &Value) -> (String, bool) {
        let Some(job_id) = input.get("job_id").and_then(Value::as_str) else {
            return (
                "`job_id` is required: pass the id of a background job (job_…).".into(),
                true,
            );
        };
        let in_text = self.doc.job_result(job_id).is_some();
        let job = self.jobs.get(job_id);
        let status = match job.map(|j| &j.state) {
            Some(JobState::Running) => "running",
            Some(JobState::Completed) => "completed (delivery pending)",
            Some(JobState::Delivered) if in_text => "completed",
            // `Orphaned` and `Lost` are what others tell of a job: the engine never holds one.
            Some(JobState::Delivered | JobState::Orphaned | JobState::Lost) => {
                "completed (removed from conversation)"
            }
            None if in_text => "completed",
            None => {
                return (
                    format!("No background job `{job_id}` exists in this conversation."),
                    true,
                );
            }
        };
        // Flemma 0.13's answer: JSON with the status and how long the job has run (or ran).
        let mut answer = json!({"job_id": job_id, "status": status});
        if let Some(job) = job {
            let end = job.finished_at.unwrap_or(self.now);
            answer["tool"] = json!(job.tool_name);
            answer["elapsed_seconds"] = json!(end.saturating_sub(job.started_at) / 1000);
        }
        (answer.to_string(), false)
    }

    /// Phase 3: deliver job results, then send.
    pub(super) fn send(&mut self, automatic: bool, out: &mut Vec<Effect>) {
        self.deliver_jobs(out);
        let with_text = |m: &flemma_syntax::Message| {
            m.role == Role::You && !self.doc.slice(m.content).trim().is_empty()
        };
        // A user advance also continues a reply that was cut off (only an empty `@You:`, or
        // nothing, after the aborted turn), as `flemma_ide`'s "nothing to send" check allows.
        let continues_aborted = !automatic
            && match self.doc.messages() {
                [.., last] if last.role == Role::Assistant => last.is_aborted(),
                [.., before, last] if last.role == Role::You && !with_text(last) => {
                    before.role == Role::Assistant && before.is_aborted()
                }
                _ => false,
            };
        let ready = self.doc.messages().last().is_some_and(with_text) || continues_aborted;
        if !ready {
            self.stop(out, StopReason::Idle);
            return;
        }
        if automatic {
            self.autopilot_turns += 1;
            if self.autopilot_turns > self.config.max_turns {
                let message = texts::max_turns(self.config.max_turns);
                self.stop(out, StopReason::MaxTurns { message });
                return;
            }
        } else {
            self.loops.reset();
        }
        let request = RequestId(self.next_request);
        self.next_request += 1;
        emit(
            out,
            EngineEvent::RequestSending(RequestSending {
                request_id: request.0,
                provider: self.config.provider.clone(),
                model: self.config.model.clone(),
            }),
        );
        out.push(Effect::StartRequest { request });
        let start = self.localize(self.doc.append_assistant_start());
        let block_start = start.range.start;
        let prefix = start.new_text.clone();
        self.apply(vec![start], out);
        self.stream = Some(ActiveStream {
            request,
            renderer: reply::renderer(
                self.config.compact_headers,
                self.config.verbatim_tool_arguments,
            ),
            block_start,
            anchor: block_start + prefix.len(),
            prefix,
            tool_uses: 0,
            usage: Usage::default(),
            error: None,
            composing: HashMap::new(),
        });
    }

    /// The cycle stops: results of jobs that finished meanwhile are delivered now (a stop is a
    /// delivery point, like idle), then the stop is reported.
    pub(super) fn stop(&mut self, out: &mut Vec<Effect>, reason: StopReason) {
        self.deliver_jobs(out);
        out.push(Effect::Stopped { reason });
    }
}
