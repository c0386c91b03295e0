//! The engine: one per document. See the crate docs and `docs/engine.md`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use flemma_config::Seen;
use flemma_conversation::{StreamEvent, Usage};
use flemma_syntax::write::{
    canonical_json, fenced, job_result_block, tool_result_block, tool_result_placeholder,
};
use flemma_syntax::{
    Assoc, Document, LineEnding, Role, SegmentKind, Status, Suffix, SuffixValue, TextEdit,
    TextRange, edits_fit, map_offset, write,
};
use serde_json::{Value, json};

use crate::config::EngineConfig;
use flemma_protocol::event::{
    Accounted, ApprovalRequired, ComposingCall, Declined, DocumentRecovered, Empty, JobCompleted,
    JobSubmitted, PendingTool, RateLimitsUpdated, RequestFinished, RequestSending, RequestStatus,
    ResumeScheduled, ToolCompleted, ToolDeclined, ToolRef, ToolStatus, ToolUnconfirmed,
    Unconfirmed, UsageUpdated, Written,
};

use crate::events::emit;
use crate::ids::IdSource;
use crate::jobs::{Job, JobState, JobTable};
use crate::loop_detect::{LoopDetector, LoopVerdict};
use crate::policy::{BACKGROUND_PARAMETER, JOBS_STATUS_TOOL, ToolPolicy, Verdict};
use crate::reply::{self, ReplyOutcome, ReplyRenderer};
use crate::texts;
use crate::types::*;

pub use jobs::INTERRUPTED_RESOLVER;
pub use provenance::PROVENANCE_RESOLVER;
use provenance::{Held, Provenance};

mod cancellation;
mod cycle;
mod jobs;
mod provenance;
mod streaming;
mod text;
mod tools;

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
    /// The tool calls being composed (started, not ended), by their index in the reply.
    composing: HashMap<usize, (String, String)>,
}

#[derive(Debug, Clone)]
struct RunningTool {
    tool_id: String,
    name: String,
    /// Canonical JSON of the input, for the loop detector.
    input: String,
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
    /// Dollars the prompt cache saved, summed over the requests.
    cache_saved: f64,
    /// The subscription's rate limits as the last response reported them.
    rate_limits: Option<flemma_conversation::RateLimits>,
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
    /// Set for an untrusted chat ([`Engine::untrusted`]): where its calls come from.
    provenance: Option<Provenance>,
    /// A tool of this chat ran since the last change someone else made: a change now may be
    /// the tool's (`docs/security.md`, invariant I).
    tool_ran: bool,
    /// The time of the input being handled (for what is timed deep inside a transition, such
    /// as a job's start).
    now: Millis,
    /// What `Load` recovers with ([`Engine::recovering`]); used once.
    recovery: Recovery,
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
            cache_saved: 0.0,
            rate_limits: None,
            loops: LoopDetector::default(),
            ids,
            settled: 0,
            line_ending,
            provenance: None,
            tool_ran: false,
            now: 0,
            recovery: Recovery::default(),
        }
    }

    /// The engine of a document whose last process ended as `recovery` says: `Load` marks
    /// what it left accordingly (docs/engine.md, "Recovery").
    pub fn recovering(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self
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
                let interrupted = result
                    .suffix
                    .as_ref()
                    .is_some_and(|suffix| suffix.has_word(write::INTERRUPTED_META));
                let resolver = match self.held_resolver(&id) {
                    Some(resolver) => resolver.to_owned(),
                    None if interrupted => INTERRUPTED_RESOLVER.to_owned(),
                    None => self.policy.decide(&name, &input).resolver,
                };
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

    /// Dollars the prompt cache saved over the requests, when prices are configured
    /// ([`flemma_wire::Prices::cache_effect`]).
    pub fn cache_saved(&self) -> Option<f64> {
        self.config.prices.map(|_| self.cache_saved)
    }

    /// The subscription's rate limits as the last response reported them.
    pub fn rate_limits(&self) -> Option<&flemma_conversation::RateLimits> {
        self.rate_limits.as_ref()
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
        self.now = now;
        let mut out = Vec::new();
        match input {
            Input::TextChanged { edits } => self.text_changed(edits, &mut out),
            Input::Load => {
                let recovery = std::mem::take(&mut self.recovery);
                if recovery.reply_streaming {
                    self.recover_cut_reply(recovery.write_failed.as_deref(), &mut out);
                }
                self.recover_orphans(&mut out);
                self.recover_interrupted_calls(&recovery.started_calls, &mut out);
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
                    emit(&mut out, EngineEvent::AutopilotResumed(Empty {}));
                    self.advance(now, true, &mut out);
                }
            }
        }
        out
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

/// Feeds a call's result to the loop detector: the text to write (with the loop notice from the
/// 3rd identical call on), and at the 6th the stop message, which also halts the cycle.
fn loop_checked(
    loops: &mut LoopDetector,
    halt: &mut Option<String>,
    tool: &str,
    input: &str,
    text: String,
) -> (String, bool) {
    match loops.record(tool, input, &text) {
        LoopVerdict::Fine => (text, false),
        LoopVerdict::Notice(notice) => (join_notice(&text, &notice), false),
        LoopVerdict::Stop(message) => {
            *halt = Some(message.clone());
            (message, true)
        }
    }
}

fn join_notice(text: &str, notice: &str) -> String {
    if text.is_empty() {
        notice.to_owned()
    } else {
        format!("{}\n\n{notice}", text.trim_end_matches(['\r', '\n']))
    }
}
