//! The turn of one `session/prompt`: write the prompt, run the engine, tell what it does from its typed events, ask for permissions, answer with the stop reason.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CompactionStatus, CompactionSummaryChunk, CompactionUpdate, Diff, SessionInfoUpdate,
    ToolCallContent,
};
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, SessionUpdate, StopReason, TextContent,
    ToolCallUpdate, ToolCallUpdateFields, UsageUpdate,
};
use agent_client_protocol::{Client, Error};
use flemma_protocol::event::StopLabel;
use flemma_protocol::methods::{DocumentParams, FlemmaRequest};
use serde_json::Value;
use tokio::sync::watch;

use crate::{
    backend::{Backend, TurnEvent},
    prompt, replay,
};

use super::state::{
    CANCEL_RETRY, CANCEL_TRIES, Session, another_turn_runs, cancel, decide, engine, internal, lock,
    refused,
};

/// One `session/prompt`.
pub(super) struct Turn<'a> {
    pub(super) backend: &'a dyn Backend,
    pub(super) session: &'a Session,
    pub(super) cx: &'a ConnectionTo<Client>,
    pub(super) cancel: watch::Receiver<bool>,
    pub(super) cancelled: bool,
    /// Tool calls announced (`tool_call`) and finished (their final update sent).
    pub(super) announced: HashSet<String>,
    pub(super) finished: HashSet<String>,
    /// Pending calls the user decided on.
    pub(super) decided: HashSet<String>,
    /// The tool and input of each call the engine told of (for its result's diff).
    pub(super) calls: HashMap<String, (String, serde_json::Value)>,
    /// The calls that waited for approval when the engine last said so.
    pub(super) pending: Vec<crate::backend::PendingCall>,
    /// What the agents `ask_agent` calls asked have done so far.
    pub(super) delegations: crate::delegation::Delegations,
    /// The client takes `compaction_update`s.
    pub(super) compaction: bool,
    /// Events that came while the client was asked for a permission, told once it answered.
    pub(super) backlog: VecDeque<TurnEvent>,
}

/// A compaction's id, distinct within the process (and so within every session).
pub(super) fn compaction_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("compaction-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

pub(super) enum AfterAsking {
    Continue,
    Cancelled,
}

impl<'a> Turn<'a> {
    fn notify(&self, update: SessionUpdate) -> Result<(), Error> {
        let call = match &update {
            SessionUpdate::ToolCall(call) => Some(call.tool_call_id.0.clone()),
            _ => None,
        };
        self.cx
            .send_notification(SessionNotification::new(self.session.id.clone(), update))?;
        // Queued to the client: the call's own file requests may follow it.
        if let Some(id) = call {
            self.session.announced.add(&id);
        }
        Ok(())
    }

    pub(super) fn read(&self) -> Result<String, Error> {
        self.backend.read_chat(&self.session.path).map_err(refused)
    }

    /// `session_info_update` with the chat's title (the first line of its first question) when
    /// it is not the one the client was last told: after a session's first prompt, and when
    /// the first question was edited since.
    fn tell_title(&self, chat: &str) -> Result<(), Error> {
        let Some(title) = crate::list::title(chat) else {
            return Ok(());
        };
        let mut told = lock(&self.session.title);
        if told.as_deref() == Some(title.as_str()) {
            return Ok(());
        }
        self.notify(SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new().title(title.clone()),
        ))?;
        *told = Some(title);
        Ok(())
    }

    /// Replaces the chat with what `change` makes of it, reading it again when someone wrote
    /// meanwhile (five times at most): the text written, `None` when `change` had nothing to
    /// do, or `failure` when the chat kept changing.
    fn rewrite(
        &self,
        change: impl Fn(&str) -> Option<String>,
        failure: &str,
    ) -> Result<Option<String>, Error> {
        for _ in 0..5 {
            let text = self.read()?;
            let Some(next) = change(&text) else {
                return Ok(None);
            };
            if self
                .backend
                .replace_chat(&self.session.path, &text, &next)
                .map_err(refused)?
            {
                return Ok(Some(next));
            }
        }
        Err(internal(failure))
    }

    /// A turn of `session` told to the client through `cx`; `cancel` stops it.
    pub(super) fn new(
        backend: &'a dyn Backend,
        session: &'a Session,
        cx: &'a ConnectionTo<Client>,
        cancel: watch::Receiver<bool>,
        compaction: bool,
    ) -> Self {
        Turn {
            backend,
            session,
            cx,
            cancel,
            cancelled: false,
            announced: HashSet::new(),
            finished: HashSet::new(),
            decided: HashSet::new(),
            calls: HashMap::new(),
            pending: Vec::new(),
            delegations: crate::delegation::Delegations::default(),
            compaction,
            backlog: VecDeque::new(),
        }
    }

    /// The turns another front end added to the chat since the client last saw it, told as
    /// a replay (`user_message_chunk`, `agent_message_chunk`, `tool_call`…). With
    /// `up_to_last_question`, what follows the last question is left out: the turn that runs
    /// now, whose reply and calls its events tell (the chat may hold their start already when
    /// it is read). A chat changed otherwise (an earlier turn edited) is not told again. The
    /// calls of the chat as it was known, and those told here, are not announced again.
    pub(super) fn tell_added_turns(&mut self, up_to_last_question: bool) -> Result<(), Error> {
        let known = lock(&self.session.known).clone();
        let (Some(known), Ok(now)) = (known, self.read()) else {
            return Ok(());
        };
        self.note_calls(&known);
        if known == now {
            return Ok(());
        }
        let cwd = &self.session.cwd;
        let before = replay::history(&known, cwd);
        let mut after = replay::history(&now, cwd);
        if after.len() <= before.len() || after[..before.len()] != before[..] {
            return Ok(());
        }
        if up_to_last_question {
            let question = after
                .iter()
                .rposition(|update| matches!(update, SessionUpdate::UserMessageChunk(_)));
            after.truncate(question.map_or(0, |at| at + 1).max(before.len()));
        }
        for update in after.into_iter().skip(before.len()) {
            if let SessionUpdate::ToolCall(call) = &update {
                let id = call.tool_call_id.0.to_string();
                self.announced.insert(id.clone());
                if call.status != agent_client_protocol::v1::schema::ToolCallStatus::Pending {
                    self.finished.insert(id);
                }
            }
            self.notify(update)?;
        }
        Ok(())
    }

    /// The calls in `chat` are known to the client (announced; finished when they have a
    /// result).
    fn note_calls(&mut self, chat: &str) {
        let doc = flemma_syntax::parse(chat);
        for message in doc.messages() {
            for (_, tool) in message.tool_uses() {
                self.announced.insert(tool.id.clone());
                self.session.announced.add(&tool.id);
                if replay::result_fields(&doc, &tool.id, &self.session.cwd).is_some() {
                    self.finished.insert(tool.id.clone());
                }
            }
        }
    }

    pub(super) async fn run(mut self, prompt: &str) -> Result<StopReason, Error> {
        let path = self.session.path.clone();
        // The chat's events come here while this prompt runs (the session's follower hands
        // them on), until `start_prompt` takes the sender back. Taken under the same lock
        // under which the follower marks another front end's turn as running: either that
        // turn was seen first and this prompt is refused before anything is written, or the
        // events are this prompt's from here on.
        let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
        {
            let mut own = lock(&self.session.own_events);
            if self.session.other_runs.load(Ordering::SeqCst) {
                return Err(another_turn_runs());
            }
            *own = Some(sender);
        }
        self.tell_added_turns(false)?;
        // Write the prompt under the trailing `@You:`.
        let written = self
            .rewrite(
                |text| Some(prompt::with_prompt(text, prompt)),
                "the chat kept changing while the prompt was written; try again",
            )?
            .unwrap_or_default();
        self.tell_title(&written)?;
        // Calls already in the file are history, not this prompt's.
        self.session.announced.prompt_runs(true);
        self.note_calls(&written);
        engine(self.backend, &path, |uri| {
            FlemmaRequest::Send(DocumentParams { uri })
        })
        .map_err(refused)?;
        // A cancel that finds nothing running is tried again for a moment: the engine may be
        // about to start (a send or an approval was just handed to it).
        let mut retry = tokio::time::interval(CANCEL_RETRY);
        let mut cancel_tries: Option<u32> = None;
        loop {
            let event = if let Some(event) = self.backlog.pop_front() {
                Some(event)
            } else {
                tokio::select! {
                event = events.recv() => event,
                _ = self.cancel.changed(), if !self.cancelled => {
                    self.cancelled = true;
                    if !cancel(self.backend, &path) {
                        cancel_tries = Some(0);
                        retry.reset();
                    }
                    continue;
                }
                _ = retry.tick(), if cancel_tries.is_some() => {
                    let tries = cancel_tries.unwrap_or_default() + 1;
                    cancel_tries = Some(tries);
                    if cancel(self.backend, &path) {
                        cancel_tries = None;
                    } else if tries >= CANCEL_TRIES {
                        return Ok(StopReason::Cancelled);
                    }
                    continue;
                }
                }
            };
            let Some(event) = event else {
                return Err(internal(
                    "the engine went away; the chat keeps what was written",
                ));
            };
            match event {
                TurnEvent::AgentPermission(permission) => {
                    let asked = tokio::select! {
                        asked = crate::delegation::ask(self.cx, &self.session.id, &permission) => asked?,
                        _ = self.cancel.changed(), if !self.cancelled => {
                            self.cancelled = true;
                            cancel(self.backend, &path);
                            None
                        }
                    };
                    let id = &permission.permission_id;
                    let outcome = decide(self.backend, &path, id, asked == Some(true));
                    if let Err(error) = outcome {
                        tracing::info!(%error, "the asked agent's permission was not answered");
                    }
                }
                TurnEvent::Stopped { reason, message } => {
                    if self.cancelled || reason == StopLabel::Cancelled {
                        return Ok(StopReason::Cancelled);
                    }
                    match reason {
                        StopLabel::Idle | StopLabel::StepDone => return Ok(StopReason::EndTurn),
                        StopLabel::MaxTurns => return Ok(StopReason::MaxTurnRequests),
                        StopLabel::Refused => return Ok(StopReason::Refusal),
                        StopLabel::AwaitingApproval => {
                            match self.ask_permissions(&mut events).await? {
                                AfterAsking::Continue => {}
                                AfterAsking::Cancelled => return Ok(StopReason::Cancelled),
                            }
                        }
                        StopLabel::Error
                        | StopLabel::Cancelled
                        | StopLabel::UserContentInApproved => {
                            return Err(internal(
                                message.unwrap_or_else(|| reason.as_str().to_owned()),
                            ));
                        }
                    }
                }
                other => self.tell(other)?,
            }
        }
    }

    /// Tells the client what `event` says of the reply and its calls, as the engine knows it
    /// (the same for this connection's prompt and for another front end's turn). A stop and
    /// an asked agent's permission are the prompt's to handle: nothing to tell here.
    pub(super) fn tell(&mut self, event: TurnEvent) -> Result<(), Error> {
        match event {
            TurnEvent::Text(text) => self.notify(SessionUpdate::AgentMessageChunk(
                ContentChunk::new(ContentBlock::Text(TextContent::new(text))),
            ))?,
            TurnEvent::Thinking(text) => self.notify(SessionUpdate::AgentThoughtChunk(
                ContentChunk::new(ContentBlock::Text(TextContent::new(text))),
            ))?,
            TurnEvent::ToolComposed {
                tool_id,
                name,
                input,
            } => self.announce(&tool_id, &name, Some(input))?,
            TurnEvent::ToolStarted {
                tool_id,
                name,
                input,
            } => {
                // Announced, then in progress, then (a fast tool) its result.
                self.announce(&tool_id, &name, input)?;
                if !self.finished.contains(&tool_id) {
                    self.notify(SessionUpdate::ToolCallUpdate(replay::in_progress(&tool_id)))?;
                }
            }
            TurnEvent::ToolFinished {
                tool_id,
                name,
                output,
                failed,
            } => {
                self.announce(&tool_id, &name, None)?;
                let input = self
                    .calls
                    .get(&tool_id)
                    .map(|(_, input)| input.clone())
                    .unwrap_or_default();
                let fields = replay::finished(&name, &input, &output, failed, &self.session.cwd);
                self.finish(tool_id, fields)?;
            }
            TurnEvent::ToolInBackground {
                tool_id,
                name,
                job_id,
            } => {
                self.announce(&tool_id, &name, None)?;
                let text = format!(
                    "running in the background as the job `{job_id}`; its result comes in a later turn"
                );
                self.finish(
                    tool_id,
                    replay::finished("", &Value::Null, &text, false, &self.session.cwd),
                )?;
            }
            TurnEvent::ApprovalRequired(calls) => {
                for call in &calls {
                    self.announce(&call.tool_id, &call.name, Some(call.input.clone()))?;
                }
                self.pending = calls;
            }
            // A client that advertised `session.compaction` gets a `compaction_update`
            // (whole: the engine has it only once it is written) whose summary is the
            // line saying what was compacted, then the model's summary appended as a
            // `compaction_summary_chunk`; another one, a line of the reply's text.
            TurnEvent::Compacted {
                notice,
                summary,
                meta,
            } => {
                if self.compaction {
                    let id = compaction_id();
                    self.notify(SessionUpdate::CompactionUpdate(
                        CompactionUpdate::new(id.clone(), CompactionStatus::Completed)
                            .summary(vec![ContentBlock::Text(TextContent::new(notice))])
                            .meta(meta),
                    ))?;
                    if let Some(summary) = summary {
                        self.notify(SessionUpdate::CompactionSummaryChunk(
                            CompactionSummaryChunk::new(
                                id,
                                ContentBlock::Text(TextContent::new(format!("\n\n{summary}"))),
                            ),
                        ))?;
                    }
                } else {
                    self.notify(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        ContentBlock::Text(TextContent::new(format!("\n\n_flemmad {notice}_\n\n"))),
                    )))?
                }
            }
            TurnEvent::CompactionFailed(message) => {
                if self.compaction {
                    self.notify(SessionUpdate::CompactionUpdate(
                        CompactionUpdate::new(compaction_id(), CompactionStatus::Failed)
                            .error(message),
                    ))?
                }
            }
            TurnEvent::AgentProgress(progress) => {
                if self.announced.contains(&progress.tool_id)
                    && let Some(update) = self.delegations.update(&progress)
                {
                    self.notify(update)?;
                }
            }
            TurnEvent::Usage {
                used,
                size,
                cost_usd,
                meta,
            } => {
                let cost = cost_usd
                    .map(|amount| agent_client_protocol::v1::schema::Cost::new(amount, "USD"));
                self.notify(SessionUpdate::UsageUpdate(
                    UsageUpdate::new(used, size).cost(cost).meta(meta),
                ))?;
            }
            TurnEvent::AgentPermission(_) | TurnEvent::Stopped { .. } => {}
        }
        Ok(())
    }

    /// The final update of the call `id`, unless it had one.
    fn finish(&mut self, id: String, fields: ToolCallUpdateFields) -> Result<(), Error> {
        if !self.finished.insert(id.clone()) {
            return Ok(());
        }
        self.notify(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id, fields,
        )))
    }

    /// Announces the call `id` (`tool_call`) unless it was: with `input` as the engine told it
    /// (`{}` when it did not).
    fn announce(
        &mut self,
        id: &str,
        name: &str,
        input: Option<serde_json::Value>,
    ) -> Result<(), Error> {
        if let Some(input) = input {
            self.calls
                .entry(id.to_owned())
                .or_insert_with(|| (name.to_owned(), input));
        }
        if !self.announced.insert(id.to_owned()) {
            return Ok(());
        }
        let input = self
            .calls
            .get(id)
            .map(|(_, input)| input.clone())
            .unwrap_or_default();
        self.notify(SessionUpdate::ToolCall(replay::call(
            id,
            name,
            input,
            &self.session.cwd,
        )))
    }

    /// The engine started or declined the call `id` (its events wait in the backlog): someone
    /// else decided it.
    fn decided_elsewhere(&self, id: &str) -> bool {
        self.backlog.iter().any(|event| match event {
            TurnEvent::ToolStarted { tool_id, .. }
            | TurnEvent::ToolFinished { tool_id, .. }
            | TurnEvent::ToolInBackground { tool_id, .. } => tool_id == id,
            _ => false,
        })
    }

    /// Marks the pending calls `ids` aborted in the chat (a cancelled permission request:
    /// they did not run, and the next prompt tells the model so instead of asking again).
    fn abort_calls(&self, ids: &[String]) -> Result<(), Error> {
        self.rewrite(
            |text| prompt::with_calls_aborted(text, ids),
            "the chat kept changing while the cancelled calls were marked aborted; they stay pending",
        )
        .map(drop)
    }

    /// Asks the client about every pending call not decided yet, then approves or rejects
    /// them (the engine goes on once none is pending). A call decided elsewhere meanwhile (an
    /// LSP editor's `flemma.approve` or `flemma.reject`: the engine starts or declines it)
    /// is not asked about any more: its open request is withdrawn (`$/cancel_request`, sent
    /// when the SDK drops it) and the engine's events go on.
    async fn ask_permissions(
        &mut self,
        events: &mut tokio::sync::mpsc::UnboundedReceiver<TurnEvent>,
    ) -> Result<AfterAsking, Error> {
        let pending: Vec<crate::backend::PendingCall> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter(|call| !self.decided.contains(&call.tool_id))
            .collect();
        // Cancelled, none of them runs: all are aborted in the file.
        let asked: Vec<String> = pending.iter().map(|call| call.tool_id.clone()).collect();
        let mut decisions = Vec::new();
        for crate::backend::PendingCall {
            tool_id: id,
            name,
            input,
        } in pending
        {
            if self.session.allowed.contains(&self.session.id, &name) {
                decisions.push((id, true));
                continue;
            }
            let call = replay::call(&id, &name, input, &self.session.cwd);
            let mut fields = ToolCallUpdateFields::new()
                .title(call.title.clone())
                .kind(call.kind)
                .status(call.status)
                .locations(call.locations.clone())
                .raw_input(call.raw_input.clone());
            // Review before approval: the whole file before and after, for the client's diff.
            if let Some(change) = self.backend.proposed_change(&self.session.path, &id) {
                fields = fields.content(vec![ToolCallContent::Diff(
                    Diff::new(change.path, change.after).old_text(change.before),
                )]);
            }
            let request = RequestPermissionRequest::new(
                self.session.id.clone(),
                ToolCallUpdate::new(id.clone(), fields),
                vec![
                    PermissionOption::new("allow_once", "Allow", PermissionOptionKind::AllowOnce),
                    PermissionOption::new(
                        "allow_always",
                        format!("Always allow `{name}` in this session"),
                        PermissionOptionKind::AllowAlways,
                    ),
                    PermissionOption::new(
                        "reject_once",
                        "Reject",
                        PermissionOptionKind::RejectOnce,
                    ),
                ],
            );
            if self.decided_elsewhere(&id) {
                self.decided.insert(id);
                continue;
            }
            let sent = self.cx.send_request(request).block_task();
            tokio::pin!(sent);
            let mut listening = true;
            let answer = loop {
                tokio::select! {
                    answer = &mut sent => break Some(answer?),
                    _ = self.cancel.changed(), if !self.cancelled => {
                        self.cancelled = true;
                        self.abort_calls(&asked)?;
                        return Ok(AfterAsking::Cancelled);
                    }
                    event = events.recv(), if listening => match event {
                        Some(event) => {
                            self.backlog.push_back(event);
                            if self.decided_elsewhere(&id) {
                                break None;
                            }
                        }
                        None => listening = false,
                    },
                }
            };
            let Some(answer) = answer else {
                self.decided.insert(id);
                continue;
            };
            match answer.outcome {
                RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    "allow_once" => decisions.push((id, true)),
                    "allow_always" => {
                        self.session.allowed.allow(&self.session.id, name);
                        decisions.push((id, true));
                    }
                    _ => decisions.push((id, false)),
                },
                _ => {
                    self.abort_calls(&asked)?;
                    return Ok(AfterAsking::Cancelled);
                }
            }
        }
        let path = &self.session.path;
        for (id, allowed) in decisions {
            self.decided.insert(id.clone());
            decide(self.backend, path, &id, allowed).map_err(refused)?;
        }
        Ok(AfterAsking::Continue)
    }
}
