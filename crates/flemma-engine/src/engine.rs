//! The engine: one per document. See the crate docs and `docs/engine.md`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use flemma_conversation::{StreamEvent, Usage};
use flemma_syntax::write::{
    canonical_json, fenced, job_result_block, tool_result_block, tool_result_placeholder,
};
use flemma_syntax::{
    Document, LineEnding, Role, SegmentKind, Status, Suffix, SuffixValue, TextEdit, TextRange,
    write,
};
use serde_json::{Value, json};

use crate::anchor::{Assoc, edits_fit, map_offset};
use crate::config::EngineConfig;
use crate::events::{self, emit};
use crate::ids::IdSource;
use crate::jobs::{Job, JobState, JobTable};
use crate::loop_detect::{LoopDetector, LoopVerdict};
use crate::policy::{BACKGROUND_PARAMETER, JOBS_STATUS_TOOL, ToolPolicy, Verdict};
use crate::reply::{self, ReplyOutcome, ReplyRenderer};
use crate::texts;
use crate::types::*;

/// A call waiting for the user's approval.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub tool_id: String,
    pub tool_name: String,
    pub input: Value,
    /// The resolver whose decision asked for approval.
    pub resolver: String,
}

/// The reply being streamed.
#[derive(Debug, Clone)]
struct ActiveStream {
    request: RequestId,
    renderer: ReplyRenderer,
    /// Where the text this reply wrote starts (the blank line before `@Assistant:`).
    block_start: usize,
    /// The end of the reply so far: new text goes here.
    anchor: usize,
    /// The `@Assistant:` prefix written at the start.
    prefix: String,
    tool_uses: usize,
    usage: Usage,
    error: Option<String>,
}

#[derive(Debug, Clone)]
struct RunningTool {
    tool_id: String,
    name: String,
    /// Canonical JSON of the input, for the loop detector.
    input: String,
}

/// Where a finished tool's output went (`written` of `tool:completed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Into its result block.
    Result,
    /// Right below its result block, which holds text the user typed.
    BelowUserText,
    /// Into a new result block: the user removed the block while the tool ran.
    Restored,
    /// Nowhere: the user removed the turn that called the tool while it ran.
    Dropped,
}

impl Written {
    fn as_str(self) -> &'static str {
        match self {
            Written::Result => "result",
            Written::BelowUserText => "below-user-text",
            Written::Restored => "restored",
            Written::Dropped => "dropped",
        }
    }
}

/// How phase 2 ended.
enum Execution {
    /// Nothing unresolved is left: go on to send.
    Clear,
    /// Tools run; their completion continues the cycle.
    Running,
    /// The cycle stops here.
    Blocked(StopReason),
}

/// The state machine of one document.
#[derive(Clone)]
pub struct Engine {
    config: EngineConfig,
    policy: Arc<dyn ToolPolicy>,
    doc: Document,
    stream: Option<ActiveStream>,
    next_request: u64,
    next_timer: u64,
    running: Vec<RunningTool>,
    /// Approved tools waiting for a slot, in document order.
    waiting: VecDeque<String>,
    /// Tools killed by a cancel: a late `ToolFinished` for them is dropped.
    killed: HashSet<String>,
    /// Denial messages of the calls the policy denied.
    denials: HashMap<String, String>,
    jobs: JobTable,
    autopilot_turns: u64,
    resume_timer: Option<TimerId>,
    /// An error that ends the cycle once the foreground is clear (the loop detector).
    halt: Option<String>,
    usage: Usage,
    requests: u64,
    cost: f64,
    loops: LoopDetector,
    ids: IdSource,
    /// The messages before this index are settled: they hold no placeholder and every tool use
    /// in them has its result in them, so no edit after them can change what phases 1 and 2
    /// find there, and those phases scan only from here (a long chat stays cheap to advance).
    /// Lowered by every edit before its end ([`Engine::unsettle`]), raised by
    /// [`Engine::settle`].
    settled: usize,
    /// The document's line-ending convention, detected once from its first line break (`None`
    /// while the text has none). Every piece of text the engine writes follows it
    /// ([`Engine::localize`]).
    line_ending: Option<LineEnding>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("text_len", &self.doc.text().len())
            .field("stream", &self.stream.as_ref().map(|s| s.request))
            .field("running", &self.running)
            .field("waiting", &self.waiting)
            .field("jobs", &self.jobs)
            .finish_non_exhaustive()
    }
}

impl Engine {
    pub fn new(config: EngineConfig, text: String, policy: Arc<dyn ToolPolicy>) -> Self {
        let ids = IdSource::new(config.id_seed);
        let line_ending = text.contains('\n').then(|| LineEnding::of(&text));
        Self {
            config,
            policy,
            doc: Document::parse(text),
            stream: None,
            next_request: 1,
            next_timer: 1,
            running: Vec::new(),
            waiting: VecDeque::new(),
            killed: HashSet::new(),
            denials: HashMap::new(),
            jobs: JobTable::default(),
            autopilot_turns: 0,
            resume_timer: None,
            halt: None,
            usage: Usage::default(),
            requests: 0,
            cost: 0.0,
            loops: LoopDetector::default(),
            ids,
            settled: 0,
            line_ending,
        }
    }

    // ----- read-only status -----

    pub fn text(&self) -> &str {
        self.doc.text()
    }

    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// The request in flight.
    pub fn request(&self) -> Option<RequestId> {
        self.stream.as_ref().map(|s| s.request)
    }

    /// Foreground tools running now.
    pub fn running_tools(&self) -> Vec<&str> {
        self.running.iter().map(|t| t.tool_id.as_str()).collect()
    }

    /// The names of the running foreground tools, in the order of [`Self::running_tools`].
    pub fn running_tool_names(&self) -> Vec<&str> {
        self.running.iter().map(|t| t.name.as_str()).collect()
    }

    /// Every `pending` placeholder with its call and the resolver that asked.
    pub fn pending_calls(&self) -> Vec<PendingCall> {
        self.doc
            .placeholders(Some(Status::Pending))
            .into_iter()
            .map(|(_, _, result)| {
                let id = result.tool_use_id.clone();
                let (name, input) = self.call(&id).unwrap_or_default();
                let resolver = self.policy.decide(&name, &input).resolver;
                PendingCall {
                    tool_id: id,
                    tool_name: name,
                    input,
                    resolver,
                }
            })
            .collect()
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.iter()
    }

    /// Background jobs still running.
    pub fn active_jobs(&self) -> usize {
        self.jobs.active_count()
    }

    /// The usage of every finished request of this document, summed.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Dollars spent, when prices are configured.
    pub fn cost(&self) -> Option<f64> {
        self.config.prices.map(|_| self.cost)
    }

    /// Whether something runs or is scheduled (a request, tools, jobs, the resume timer): the
    /// shell keeps feeding inputs until this is false.
    pub fn is_busy(&self) -> bool {
        self.stream.is_some()
            || !self.running.is_empty()
            || !self.waiting.is_empty()
            || self.jobs.active_count() > 0
            || self.resume_timer.is_some()
    }

    // ----- the transition function -----

    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        match input {
            Input::TextChanged { edits } => self.text_changed(edits, &mut out),
            Input::Load => {
                self.recover_cut_reply(&mut out);
                self.recover_orphans(&mut out);
            }
            Input::Advance => self.advance(now, false, &mut out),
            Input::Approve { tool_id } => {
                if self.set_pending_status(&tool_id, Status::Approved, None, &mut out) {
                    self.nudge(now, &mut out);
                }
            }
            Input::Reject { tool_id, reason } => {
                if self.set_pending_status(&tool_id, Status::Rejected, reason, &mut out) {
                    self.nudge(now, &mut out);
                }
            }
            Input::ApproveAll => {
                let ids: Vec<String> = self
                    .placeholders(Some(Status::Pending))
                    .into_iter()
                    .map(|(_, _, r)| r.tool_use_id.clone())
                    .collect();
                for id in &ids {
                    self.set_pending_status(id, Status::Approved, None, &mut out);
                }
                if !ids.is_empty() {
                    self.nudge(now, &mut out);
                }
            }
            Input::Background { tool_id } => self.move_to_background(now, &tool_id, &mut out),
            Input::Execute { tool_id } => self.execute_one(now, &tool_id, &mut out),
            Input::Cancel { scope } => self.cancel(scope, &mut out),
            Input::Stream { request, event } => self.stream_event(request, event, &mut out),
            Input::StreamEnded { request, outcome } => {
                self.stream_ended(now, request, outcome, &mut out)
            }
            Input::ToolFinished {
                tool_id,
                text,
                is_error,
            } => self.tool_finished(now, &tool_id, text, is_error, &mut out),
            Input::JobFinished {
                job_id,
                text,
                is_error,
            } => self.job_finished(now, &job_id, text, is_error, &mut out),
            Input::Timer { id } => {
                if self.resume_timer == Some(id) {
                    self.resume_timer = None;
                    emit(&mut out, events::AUTOPILOT_RESUMED, events::empty());
                    self.advance(now, true, &mut out);
                }
            }
        }
        out
    }

    // ----- text -----

    /// Applies the engine's own edits (in the current coordinates, written with `\n` breaks) to
    /// the view in the document's line-ending convention and moves the stream's anchors.
    fn apply(&mut self, edits: Vec<TextEdit>, out: &mut Vec<Effect>) {
        if edits.is_empty() {
            return;
        }
        let edits: Vec<TextEdit> = edits.into_iter().map(|e| self.localize(e)).collect();
        self.apply_to_view(&edits, Assoc::Before);
        out.push(Effect::Edit { edits });
    }

    /// The document's line-ending convention (`\n` while the text has no line break).
    pub fn line_ending(&self) -> LineEnding {
        self.line_ending.unwrap_or(LineEnding::Lf)
    }

    /// An edit of the engine's in the document's line-ending convention: every lone `\n` of its
    /// text becomes `\r\n` in a CRLF document. A `\n` right after a `\r` already in the text
    /// (a `\r\n` a stream split between two events) is left alone.
    fn localize(&self, mut edit: TextEdit) -> TextEdit {
        if self.line_ending() == LineEnding::Lf || !edit.new_text.contains('\n') {
            return edit;
        }
        let after_cr = edit.new_text.starts_with('\n')
            && self
                .doc
                .text()
                .as_bytes()
                .get(..edit.range.start)
                .and_then(|before| before.last())
                == Some(&b'\r');
        let converted = LineEnding::CrLf.convert(std::mem::take(&mut edit.new_text));
        edit.new_text = match (after_cr, converted.strip_prefix('\r')) {
            (true, Some(rest)) => rest.to_owned(),
            _ => converted,
        };
        edit
    }

    fn apply_to_view(&mut self, edits: &[TextEdit], anchor_assoc: Assoc) {
        if let Some(stream) = &mut self.stream {
            stream.block_start = map_offset(stream.block_start, edits, Assoc::After);
            stream.anchor = map_offset(stream.anchor, edits, anchor_assoc);
        }
        let mut sorted: Vec<&TextEdit> = edits.iter().collect();
        sorted.sort_by_key(|e| std::cmp::Reverse((e.range.start, e.range.end)));
        for edit in sorted {
            self.unsettle(edit.range.start);
            // The callers checked these edits against the text (`edits_fit`) before this.
            let applied = self.doc.edit(edit);
            debug_assert!(applied.is_ok(), "engine edit does not fit: {edit:?}");
        }
        if self.line_ending.is_none() && self.doc.text().contains('\n') {
            self.line_ending = Some(LineEnding::of(self.doc.text()));
        }
    }

    fn text_changed(&mut self, edits: Vec<TextEdit>, out: &mut Vec<Effect>) {
        if !edits_fit(self.doc.text(), &edits) {
            out.push(Effect::Refused {
                message: format!(
                    "the change does not fit the engine's text ({} bytes): edits overlap, fall outside the text or split a character; send the whole new text as one edit",
                    self.doc.text().len()
                ),
            });
            return;
        }
        self.apply_to_view(&edits, Assoc::Before);
        if let Some(timer) = self.resume_timer.take() {
            out.push(Effect::CancelTimer { id: timer });
            emit(out, events::AUTOPILOT_RESUME_CANCELLED, events::empty());
        }
        if let Some(stream) = &self.stream {
            if !self.block_intact(stream) {
                let request = stream.request;
                self.stream = None;
                out.push(Effect::CancelRequest { request });
                emit(
                    out,
                    events::REQUEST_FINISHED,
                    json!({"requestId": request.0, "status": "cancelled", "reason": "the reply being written was deleted"}),
                );
                self.stop(
                    out,
                    StopReason::Error {
                        message: "the reply being written was deleted from the document; the request was cancelled".into(),
                    },
                );
            }
        }
    }

    /// Whether the `@Assistant:` message being streamed is still there and ends at the anchor.
    fn block_intact(&self, stream: &ActiveStream) -> bool {
        let text = self.doc.text();
        if stream.anchor > text.len() || stream.block_start > stream.anchor {
            return false;
        }
        let probe = stream.anchor.saturating_sub(1);
        match self.doc.message_index_at(probe) {
            Some(index) => {
                let message = &self.doc.messages()[index];
                message.role == Role::Assistant && message.role_line.start >= stream.block_start
            }
            None => false,
        }
    }

    /// An edit starting at `start` is about to be applied: the messages the re-analysis may
    /// parse again (the one holding `start` and the one before it) and all after them are no
    /// longer known to be settled.
    fn unsettle(&mut self, start: usize) {
        let messages = self.doc.messages();
        // A first line opening a frontmatter that never closes: any edit may turn messages
        // into frontmatter (the document is parsed again from the start).
        let head_sensitive = self.doc.frontmatter().is_none()
            && self
                .doc
                .text()
                .trim_start_matches('\u{feff}')
                .starts_with("```");
        let keep = match messages.first() {
            Some(first) if !head_sensitive && start >= first.role_line.end => messages
                .partition_point(|m| m.range.start <= start)
                .saturating_sub(2),
            _ => 0,
        };
        self.settled = self.settled.min(keep);
    }

    /// Moves [`Engine::settled`] forward over the messages after it that complete a settled
    /// prefix: up to the first placeholder, and only to a point where every tool use before it
    /// has a result before it.
    fn settle(&mut self) {
        let messages = self.doc.messages();
        let mut open: HashSet<&str> = HashSet::new();
        let mut settled = self.settled.min(messages.len());
        for (index, message) in messages.iter().enumerate().skip(settled) {
            let mut placeholder = false;
            for (_, result) in message.tool_results() {
                if result
                    .suffix
                    .as_ref()
                    .and_then(|s| s.status())
                    .is_some_and(Status::is_lifecycle)
                {
                    placeholder = true;
                }
                open.remove(result.tool_use_id.as_str());
            }
            if placeholder {
                break;
            }
            for (_, tool_use) in message.tool_uses() {
                open.insert(tool_use.id.as_str());
            }
            if open.is_empty() {
                settled = index + 1;
            }
        }
        self.settled = settled;
    }

    /// `Document::placeholders` over the messages that are not settled (the settled ones hold
    /// none).
    fn placeholders(
        &self,
        status: Option<Status>,
    ) -> Vec<(
        &flemma_syntax::Message,
        &flemma_syntax::Segment,
        &flemma_syntax::ToolResult,
    )> {
        let messages = self.doc.messages().get(self.settled..).unwrap_or_default();
        let mut out = Vec::new();
        for message in messages {
            for (segment, result) in message.tool_results() {
                let Some(current) = result.suffix.as_ref().and_then(|s| s.status()) else {
                    continue;
                };
                let wanted = match status {
                    Some(s) => current == s,
                    None => current.is_lifecycle(),
                };
                if wanted {
                    out.push((message, segment, result));
                }
            }
        }
        out
    }

    // ----- the cycle -----

    /// `flemma/send`: does the next thing. `automatic` when autopilot (not the user) asks.
    fn advance(&mut self, now: Millis, automatic: bool, out: &mut Vec<Effect>) {
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
            Execution::Clear => self.send(automatic, out),
        }
    }

    /// A nudge after approve/reject: goes on when nothing is pending any more and autopilot is on.
    fn nudge(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.config.autopilot && self.placeholders(Some(Status::Pending)).is_empty() {
            self.advance(now, false, out);
        }
    }

    /// Phase 1: a placeholder for every tool use without a result.
    fn categorize(&mut self, out: &mut Vec<Effect>) {
        struct Call {
            message: usize,
            block: String,
        }
        let compact = self.config.compact_headers;
        let mut calls: Vec<Call> = Vec::new();
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
                let block = if message.is_aborted() {
                    tool_result_placeholder(&id, Status::Aborted, &[], compact)
                } else if self.policy.capabilities(&name).is_none() {
                    tool_result_block(&id, "error", &texts::unknown_tool(&name), "", compact)
                } else if let Some(input) = input {
                    let decision = self.policy.decide(&name, &input);
                    let status = match decision.verdict {
                        Verdict::Approve => Status::Approved,
                        Verdict::RequireApproval => Status::Pending,
                        Verdict::Deny { message } => {
                            self.denials.insert(id.clone(), message);
                            Status::Denied
                        }
                    };
                    tool_result_placeholder(&id, status, &[], compact)
                } else {
                    tool_result_block(&id, "error", &texts::invalid_input(&name), "", compact)
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
    }

    /// Where and how the placeholders of assistant turn `index` go: into the `@You:` right
    /// after it (created when missing), after the results already there, above the user's text.
    fn placeholder_insertion(&self, index: usize, blocks: &[String]) -> TextEdit {
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
    fn execute(&mut self, _now: Millis, out: &mut Vec<Effect>) -> Execution {
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
            let calls: Vec<Value> = self
                .pending_calls()
                .into_iter()
                .map(|c| {
                    json!({"toolId": c.tool_id, "toolName": c.tool_name, "input": c.input, "resolver": c.resolver})
                })
                .collect();
            emit(
                out,
                events::TOOL_APPROVAL_REQUIRED,
                json!({ "tools": calls }),
            );
            Execution::Blocked(StopReason::AwaitingApproval { tool_ids: pending })
        } else {
            Execution::Clear
        }
    }

    fn resolve_placeholder(
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
                self.write_result(id, &message, true, out);
                Resolution::Done
            }
            Status::Rejected => {
                let message = if has_content {
                    content.trim_end_matches(['\r', '\n']).to_owned()
                } else {
                    texts::REJECTED.to_owned()
                };
                self.write_result(id, &message, true, out);
                Resolution::Done
            }
            Status::Aborted => {
                let message = if has_content {
                    content.trim_end_matches(['\r', '\n']).to_owned()
                } else {
                    texts::ABORTED.to_owned()
                };
                self.write_result(id, &message, true, out);
                Resolution::Done
            }
            Status::Error => Resolution::Done,
        }
    }

    /// Replaces the placeholder of `id` with a final result (meta kept).
    fn write_result(&mut self, id: &str, text: &str, is_error: bool, out: &mut Vec<Effect>) {
        if let Some(edit) =
            self.doc
                .resolve_tool_result(id, text, is_error, "", self.config.compact_headers)
        {
            self.apply(vec![edit], out);
        }
    }

    /// The name and input of the tool use `id`.
    fn call(&self, id: &str) -> Option<(String, Value)> {
        let (_, _, tool_use) = self.doc.tool_use(id)?;
        let raw = tool_use
            .fence
            .as_ref()
            .map(|f| self.doc.slice(f.content))
            .unwrap_or("");
        let input = serde_json::from_str(raw).unwrap_or(Value::Null);
        Some((tool_use.name.clone(), input))
    }

    fn start_tool(&mut self, id: &str, out: &mut Vec<Effect>) {
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
        if wants_background && info.is_async && !info.disables_background {
            let job_id = self.job_id_for(id);
            self.write_job_placeholder(id, &job_id, out);
            self.jobs.submit(&job_id, id, &name);
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
            events::TOOL_EXECUTING,
            json!({"toolId": id, "toolName": name}),
        );
        out.push(Effect::StartTool {
            tool_id: id.to_owned(),
            name,
            input,
            background: false,
            job_id: None,
        });
    }

    fn emit_job_submitted(&self, job_id: &str, tool_id: &str, name: &str, out: &mut Vec<Effect>) {
        emit(
            out,
            events::JOB_SUBMITTED,
            json!({"jobId": job_id, "toolId": tool_id, "toolName": name, "activeCount": self.jobs.active_count()}),
        );
    }

    /// The job id for a tool going to the background: the one its result already names (a
    /// re-run), else a new one unique in the file.
    fn job_id_for(&mut self, tool_id: &str) -> String {
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
    fn write_job_placeholder(&mut self, tool_id: &str, job_id: &str, out: &mut Vec<Effect>) {
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
    fn jobs_status(&self, input: &Value) -> (String, bool) {
        let Some(job_id) = input.get("job_id").and_then(Value::as_str) else {
            return (
                "`job_id` is required: pass the id of a background job (job_…).".into(),
                true,
            );
        };
        let in_text = self.doc.job_result(job_id).is_some();
        let status = match self.jobs.get(job_id).map(|j| &j.state) {
            Some(JobState::Running) => "running",
            Some(JobState::Completed { .. }) => "completed (delivery pending)",
            Some(JobState::Delivered) if in_text => "completed",
            Some(JobState::Delivered) => "completed (removed from conversation)",
            None if in_text => "completed",
            None => {
                return (
                    format!("No background job `{job_id}` exists in this conversation."),
                    true,
                );
            }
        };
        (status.to_owned(), false)
    }

    /// Phase 3: deliver job results, then send.
    fn send(&mut self, automatic: bool, out: &mut Vec<Effect>) {
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
        let mut sending = json!({"requestId": request.0});
        for (key, value) in [
            ("provider", &self.config.provider),
            ("model", &self.config.model),
        ] {
            if let Some(value) = value {
                sending[key] = json!(value);
            }
        }
        emit(out, events::REQUEST_SENDING, sending);
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
        });
    }

    /// The cycle stops: results of jobs that finished meanwhile are delivered now (a stop is a
    /// delivery point, like idle), then the stop is reported.
    fn stop(&mut self, out: &mut Vec<Effect>, reason: StopReason) {
        self.deliver_jobs(out);
        out.push(Effect::Stopped { reason });
    }

    // ----- streaming -----

    fn stream_event(&mut self, request: RequestId, event: StreamEvent, out: &mut Vec<Effect>) {
        let Some(stream) = self.stream.as_mut().filter(|s| s.request == request) else {
            return; // a late event of a cancelled request
        };
        match &event {
            StreamEvent::Usage { usage } => stream.usage.add(usage),
            StreamEvent::Error { message } => stream.error = Some(message.clone()),
            StreamEvent::ToolCallEnd { .. } => stream.tool_uses += 1,
            _ => {}
        }
        if let Some(text) = stream.renderer.push(&event) {
            self.write_at_anchor(&text, out);
        }
    }

    /// Inserts reply text at the anchor; the anchor moves past it.
    fn write_at_anchor(&mut self, text: &str, out: &mut Vec<Effect>) {
        let Some(stream) = &self.stream else {
            return;
        };
        if text.is_empty() {
            return;
        }
        let edit = self.localize(TextEdit::insert(stream.anchor, text));
        self.apply_to_view(std::slice::from_ref(&edit), Assoc::After);
        out.push(Effect::Edit { edits: vec![edit] });
    }

    fn stream_ended(
        &mut self,
        now: Millis,
        request: RequestId,
        outcome: StreamOutcome,
        out: &mut Vec<Effect>,
    ) {
        if self.request() != Some(request) {
            return;
        }
        let error = self.stream.as_ref().and_then(|s| s.error.clone());
        let outcome = match (outcome, error) {
            (StreamOutcome::Finished, Some(message)) => StreamOutcome::Failed {
                message,
                retryable: false,
            },
            (outcome, _) => outcome,
        };
        match outcome {
            StreamOutcome::Finished => {
                let tail = match self.stream.as_mut() {
                    Some(stream) => stream.renderer.finish(ReplyOutcome::Completed),
                    None => return,
                };
                self.write_at_anchor(&format!("{tail}{}", write::closing_prompt()), out);
                let Some(stream) = self.stream.take() else {
                    return;
                };
                self.account(&stream, "completed", out);
                if stream.tool_uses > 0 {
                    if self.config.autopilot {
                        self.advance(now, true, out);
                    } else {
                        self.stop(out, StopReason::StepDone);
                    }
                } else {
                    self.deliver_at_idle(now, out);
                    emit(out, events::CONVERSATION_IDLE, events::empty());
                    self.stop(out, StopReason::Idle);
                }
            }
            StreamOutcome::Failed { message, .. } => {
                self.end_interrupted(ReplyOutcome::Failed(message.clone()), out);
                if let Some(stream) = self.stream.take() {
                    self.account(&stream, "errored", out);
                }
                self.stop(out, StopReason::Error { message });
            }
            StreamOutcome::Cancelled => {
                self.end_interrupted(ReplyOutcome::Interrupted, out);
                if let Some(stream) = self.stream.take() {
                    self.account(&stream, "cancelled", out);
                }
                self.stop(out, StopReason::Cancelled);
            }
        }
    }

    /// Ends an interrupted reply: the abort marker and the closing prompt after content, or the
    /// `@Assistant:` line removed when nothing arrived.
    fn end_interrupted(&mut self, outcome: ReplyOutcome, out: &mut Vec<Effect>) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        if stream.renderer.has_content() {
            let tail = stream.renderer.finish(outcome);
            self.write_at_anchor(&format!("{tail}{}", write::closing_prompt()), out);
        } else {
            let range = TextRange::new(stream.block_start, stream.anchor);
            if self.doc.slice(range) == stream.prefix {
                let edit = TextEdit::replace(range, "");
                self.apply_to_view(std::slice::from_ref(&edit), Assoc::Before);
                out.push(Effect::Edit { edits: vec![edit] });
            }
        }
    }

    /// Adds a finished request's usage to the totals and reports it.
    fn account(&mut self, stream: &ActiveStream, status: &str, out: &mut Vec<Effect>) {
        self.usage.add(&stream.usage);
        self.requests += 1;
        let cost = self.config.prices.map(|p| {
            let u = &stream.usage;
            (u.input_tokens as f64 * p.input
                + u.output_tokens as f64 * p.output
                + u.cache_read_tokens as f64 * p.cache_read
                + u.cache_write_tokens as f64 * p.cache_write)
                / 1_000_000.0
        });
        if let Some(cost) = cost {
            self.cost += cost;
        }
        emit(
            out,
            events::REQUEST_FINISHED,
            json!({"requestId": stream.request.0, "status": status, "usage": stream.usage, "costUsd": cost}),
        );
        emit(
            out,
            events::USAGE_UPDATED,
            json!({"usage": self.usage, "requests": self.requests, "costUsd": self.cost()}),
        );
    }

    // ----- tools -----

    fn tool_finished(
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
            } else if !self.killed.remove(tool_id) {
                out.push(Effect::Refused {
                    message: format!("no tool `{tool_id}` is running in this document; its output was not written"),
                });
            }
            return;
        };
        let tool = self.running.remove(position);
        let (text, is_error) = match self.loops.record(&tool.name, &tool.input, &text) {
            LoopVerdict::Fine => (text, is_error),
            LoopVerdict::Notice(notice) => (join_notice(&text, &notice), is_error),
            LoopVerdict::Stop(message) => {
                self.halt = Some(message.clone());
                (message, true)
            }
        };
        let written = self.write_tool_output(tool_id, &tool.name, &text, is_error, out);
        emit(
            out,
            events::TOOL_COMPLETED,
            json!({"toolId": tool_id, "toolName": tool.name, "status": if is_error { "error" } else { "success" }, "written": written.as_str()}),
        );
        self.start_waiting(out);
        if self.running.is_empty() && self.waiting.is_empty() {
            self.continue_cycle(now, out);
        }
    }

    /// Writes a tool's output into its placeholder, unless the user typed into it: then their
    /// text stays, the placeholder stays `approved` (the next advance pauses on it) and the
    /// output goes right below the block, so neither is lost. When the user removed the block
    /// while the tool ran, the output gets a new result block (the tool is not run again);
    /// when they removed the whole turn, the output is dropped and the cycle stops once the
    /// foreground is clear (nothing is sent that the user did not see).
    fn write_tool_output(
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

    fn write_output_without_block(
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

    fn start_waiting(&mut self, out: &mut Vec<Effect>) {
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
    fn continue_cycle(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if let Some(message) = self.halt.take() {
            self.stop(out, StopReason::Error { message });
        } else if self.config.autopilot {
            self.advance(now, true, out);
        } else {
            self.stop(out, StopReason::StepDone);
        }
    }

    fn set_pending_status(
        &mut self,
        tool_id: &str,
        status: Status,
        reason: Option<String>,
        out: &mut Vec<Effect>,
    ) -> bool {
        let found = self.doc.tool_result(tool_id).and_then(|(_, segment, r)| {
            let current = r.suffix.as_ref().and_then(|s| s.status())?;
            current
                .is_lifecycle()
                .then(|| (segment.range, r.suffix.clone()))
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
        true
    }

    fn execute_one(&mut self, now: Millis, tool_id: &str, out: &mut Vec<Effect>) {
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
        }
        self.resolve_placeholder(tool_id, status, &content, out);
        let _ = now;
    }

    fn move_to_background(&mut self, now: Millis, tool_id: &str, out: &mut Vec<Effect>) {
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
        self.jobs.submit(&job_id, tool_id, &tool.name);
        self.emit_job_submitted(&job_id, tool_id, &tool.name, out);
        self.start_waiting(out);
        if self.running.is_empty() && self.waiting.is_empty() {
            self.continue_cycle(now, out);
        }
    }

    // ----- jobs -----

    fn job_finished(
        &mut self,
        now: Millis,
        job_id: &str,
        text: String,
        is_error: bool,
        out: &mut Vec<Effect>,
    ) {
        if !self.jobs.complete(job_id, text, is_error) {
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
    fn deliver_at_idle(&mut self, now: Millis, out: &mut Vec<Effect>) {
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
                events::AUTOPILOT_RESUME_SCHEDULED,
                json!({"delayMs": self.config.resume_delay}),
            );
        }
    }

    /// Writes every completed job's result (FIFO) with the placement rules of §3.2.
    fn deliver_jobs(&mut self, out: &mut Vec<Effect>) -> usize {
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
                events::JOB_COMPLETED,
                json!({"jobId": job.job_id, "toolId": job.tool_id, "toolName": job.tool_name, "success": !is_error, "activeCount": self.jobs.active_count()}),
            );
        }
        delivered.len()
    }

    /// Reuse a trailing `@You:` without user text; above one the user is typing in, a
    /// separate `@You:`; else a new `@You:` at the end.
    fn job_results_insertion(&self, joined: &str) -> TextEdit {
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

    /// A reply cut off by the end of the process that wrote it (killed mid-stream): the chat
    /// ends with an `@Assistant:` message that is neither finished (a finished reply is always
    /// followed by `@You:`, written with its last text) nor aborted. With content it gets an
    /// open code fence closed, the abort marker saying what happened and the closing `@You:`,
    /// so the next advance continues it; without content its `@Assistant:` line is removed.
    fn recover_cut_reply(&mut self, out: &mut Vec<Effect>) {
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
            tail.push_str(&write::abort_marker(texts::CUT_OFF));
            tail.push('\n');
            tail.push_str(&write::closing_prompt());
            TextEdit::insert(text.len(), tail)
        };
        self.apply(vec![edit], out);
        emit(
            out,
            events::DOCUMENT_RECOVERED,
            json!({"orphans": [], "count": 0, "cutReply": true}),
        );
    }

    /// Orphan recovery: a `job=` result whose job is not live and has no job result.
    fn recover_orphans(&mut self, out: &mut Vec<Effect>) {
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
        let jobs: Vec<&str> = orphans.iter().map(|(_, j)| j.as_str()).collect();
        emit(
            out,
            events::DOCUMENT_RECOVERED,
            json!({"orphans": jobs, "count": jobs.len()}),
        );
    }

    // ----- cancellation -----

    fn cancel(&mut self, scope: CancelScope, out: &mut Vec<Effect>) {
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
                    emit(out, events::AUTOPILOT_RESUME_CANCELLED, events::empty());
                }
            }
        }
        self.stop(out, StopReason::Cancelled);
    }

    fn cancel_request(&mut self, out: &mut Vec<Effect>) -> bool {
        let Some(request) = self.request() else {
            return false;
        };
        out.push(Effect::CancelRequest { request });
        self.end_interrupted(ReplyOutcome::Interrupted, out);
        if let Some(stream) = self.stream.take() {
            self.account(&stream, "cancelled", out);
        }
        true
    }

    fn cancel_tool(&mut self, id: &str, out: &mut Vec<Effect>) -> bool {
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
                .complete(&job_id, texts::JOB_CANCELLED.to_owned(), true);
            return true;
        } else {
            return false;
        }
        if let Some(edit) = self.doc.set_tool_result_status(id, Some(Status::Aborted)) {
            self.apply(vec![edit], out);
        }
        true
    }
}

enum Resolution {
    Done,
    Pending,
    UserContent,
}

/// Tool uses without a result in a later message, with their message index, in document order,
/// among the messages from `from` on (the ones before are settled): one pass from the end
/// (`Document::unresolved_tool_uses` rescans the later messages for every use, which is
/// quadratic on a long chat).
fn unresolved_tool_uses(doc: &Document, from: usize) -> Vec<(usize, &flemma_syntax::ToolUse)> {
    let mut answered_later: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    let messages = doc.messages().get(from..).unwrap_or_default();
    for (index, message) in messages.iter().enumerate().rev() {
        let index = from + index;
        let first = out.len();
        for (_, tool_use) in message.tool_uses() {
            if !answered_later.contains(tool_use.id.as_str()) {
                out.push((index, tool_use));
            }
        }
        out[first..].reverse();
        for (_, result) in message.tool_results() {
            answered_later.insert(result.tool_use_id.as_str());
        }
    }
    out.reverse();
    out
}

/// What must precede a new role line inserted at `at` so it stands after a blank line (with
/// `\n` breaks: [`Engine::localize`] converts; `\r\n` in the text counts as a line break).
fn separator_before(text: &str, at: usize) -> &'static str {
    let before = &text[..at];
    if before.is_empty() {
        return "";
    }
    match before
        .strip_suffix("\r\n")
        .or_else(|| before.strip_suffix('\n'))
    {
        Some(line) if line.is_empty() || line.ends_with('\n') => "",
        Some(_) => "\n",
        None => "\n\n",
    }
}

fn join_notice(text: &str, notice: &str) -> String {
    if text.is_empty() {
        notice.to_owned()
    } else {
        format!("{}\n\n{notice}", text.trim_end_matches(['\r', '\n']))
    }
}
