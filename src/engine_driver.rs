//! The shell around one [`Engine`] for a chat file on disk: it performs the engine's effects —
//! edits written to the file with the compare-and-swap merging writer, requests streamed with
//! the provider client, tools run on their own threads, timers — and feeds the outcomes back as
//! inputs until the cycle stops. `flemmad send` is one user; the daemon can own several.
//!
//! The file is shared with the user: before every write the driver reads it, and a change it
//! did not make is turned into one edit, mapped through the engine's edits not yet written, and
//! fed to the engine as `TextChanged`, so text typed meanwhile is kept (and a user edit during
//! the resume delay cancels the resume, as in an editor).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_conversation::StreamEvent;
use flemma_engine::{
    Assoc, CancelScope, Effect, Engine, EngineConfig, Event, Input, JobState, Millis, RequestId,
    StopReason, StreamOutcome, TimerId, map_offset,
};
use flemma_ide::{AnalysisHost, DocumentId};
use flemma_provider::explain::ProviderError;
use flemma_provider::http::{ClientEvent, ProviderClient};
use flemma_syntax::{TextEdit, TextRange};
use flemma_tools::Cancel;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::fsutil;
use crate::provider_setup::ProviderSetup;
use crate::tool_setup::{SetupPolicy, ToolSetup};

/// How often a write re-reads and merges when the file changed under it.
const MERGE_ATTEMPTS: usize = 20;
/// How often the file is checked for changes made by someone else while nothing is written.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// What the driver tells its user as it goes.
#[derive(Debug, Clone)]
pub enum Report {
    /// A lifecycle event of the engine.
    Event(Event),
    /// Reply text as it streams in.
    Text(String),
    /// A notice for a human (retries, warnings, refused inputs).
    Notice(String),
}

/// Everything the driver needs besides the text.
pub struct DriverParts {
    /// The chat file.
    pub path: PathBuf,
    pub engine: EngineConfig,
    pub tools: Arc<ToolSetup>,
    pub provider: ProviderSetup,
    pub client: Arc<ProviderClient>,
    /// Evaluates the text for each request (templates, includes, frontmatter).
    pub host: AnalysisHost,
    pub id: DocumentId,
    /// Coalescing window of the writes.
    pub coalesce: Duration,
}

/// What arrives from the driver's tasks and threads.
enum Message {
    Input(Input),
    Notice(String),
}

/// One engine and the IO it performs on one file.
pub struct Driver {
    engine: Engine,
    path: PathBuf,
    tools: Arc<ToolSetup>,
    provider: ProviderSetup,
    client: Arc<ProviderClient>,
    host: AnalysisHost,
    id: DocumentId,
    coalesce: Duration,
    epoch: Instant,
    /// The text the file held after our last read or write.
    disk: String,
    /// The text as of the effect being performed (the engine's view is already past the
    /// effects of the input it handled; a request evaluates the text as it is when it starts).
    view: String,
    /// The engine's edits since `disk`, in order (each in the coordinates before it).
    unwritten: Vec<Vec<TextEdit>>,
    /// When the unwritten edits must be written.
    write_at: Option<Instant>,
    /// When the oldest unwritten edit was made.
    unwritten_since: Option<Instant>,
    /// The longest time an edit waited between being made and its write starting.
    max_write_delay: Duration,
    sender: mpsc::UnboundedSender<Message>,
    receiver: mpsc::UnboundedReceiver<Message>,
    request: Option<(RequestId, CancellationToken)>,
    tools_running: HashMap<String, Cancel>,
    timers: HashMap<TimerId, tokio::task::JoinHandle<()>>,
    stopped: Option<StopReason>,
    refusals: usize,
    report: Box<dyn FnMut(Report) + Send>,
}

impl Driver {
    /// A driver for the file whose text is `text` (as just read).
    pub fn new(parts: DriverParts, text: String, report: Box<dyn FnMut(Report) + Send>) -> Self {
        let policy = Arc::new(SetupPolicy(parts.tools.clone()));
        let (sender, receiver) = mpsc::unbounded_channel();
        Self {
            engine: Engine::new(parts.engine, text.clone(), policy),
            path: parts.path,
            tools: parts.tools,
            provider: parts.provider,
            client: parts.client,
            host: parts.host,
            id: parts.id,
            coalesce: parts.coalesce,
            epoch: Instant::now(),
            view: text.clone(),
            disk: text,
            unwritten: Vec::new(),
            write_at: None,
            unwritten_since: None,
            max_write_delay: Duration::ZERO,
            sender,
            receiver,
            request: None,
            tools_running: HashMap::new(),
            timers: HashMap::new(),
            stopped: None,
            refusals: 0,
            report,
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The longest time an edit waited between being made and its write starting.
    pub fn max_write_delay(&self) -> Duration {
        self.max_write_delay
    }

    /// Feeds `inputs`, then performs effects and feeds outcomes until the cycle has stopped
    /// and nothing runs any more (background jobs are waited for and delivered). `interrupt`
    /// (Ctrl-C) cancels everything, jobs included, and the result is `Cancelled`.
    ///
    /// An error (the file cannot be read or written, or changed in a way that cannot be
    /// merged) stops at once; everything written before stays in the file.
    ///
    /// Must run inside a [`tokio::task::LocalSet`] (requests stream on local tasks).
    pub async fn run(
        &mut self,
        inputs: Vec<Input>,
        interrupt: CancellationToken,
    ) -> anyhow::Result<StopReason> {
        for input in inputs {
            self.handle(input);
        }
        let mut interrupted = false;
        let mut watch = tokio::time::interval(WATCH_INTERVAL);
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.is_done() {
                self.write()?;
                if self.is_done() {
                    break;
                }
            }
            let write_at = self.write_at;
            tokio::select! {
                message = self.receiver.recv() => match message {
                    Some(Message::Input(input)) => self.handle(input),
                    Some(Message::Notice(notice)) => (self.report)(Report::Notice(notice)),
                    // The driver holds a sender: never closed.
                    None => break,
                },
                () = sleep_until(write_at) => self.write()?,
                _ = watch.tick() => {
                    if self.write_at.is_none() {
                        self.write()?;
                    }
                }
                () = interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    self.cancel_everything();
                }
            }
            if self.write_at.is_some_and(|at| Instant::now() >= at) {
                self.write()?;
            }
        }
        let reason = self.stopped.take().unwrap_or(StopReason::Idle);
        Ok(if interrupted {
            StopReason::Cancelled
        } else {
            reason
        })
    }

    /// The cycle stopped and nothing the driver started still runs.
    fn is_done(&self) -> bool {
        self.stopped.is_some()
            && !self.engine.is_busy()
            && self.request.is_none()
            && self.tools_running.is_empty()
    }

    fn now(&self) -> Millis {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Ctrl-C: the request, the foreground tools and every job.
    fn cancel_everything(&mut self) {
        self.handle(Input::Cancel {
            scope: CancelScope::All,
        });
        let jobs: Vec<String> = self
            .engine
            .jobs()
            .filter(|job| job.state == JobState::Running)
            .map(|job| job.tool_id.clone())
            .collect();
        for tool_id in jobs {
            self.handle(Input::Cancel {
                scope: CancelScope::Tool(tool_id),
            });
        }
        for cancel in self.tools_running.values() {
            cancel.cancel();
        }
        // Their threads end on their own; nothing waits for a killed tool's result.
        self.tools_running.clear();
        if let Some((_, token)) = self.request.take() {
            token.cancel();
        }
        self.stopped = Some(StopReason::Cancelled);
    }

    fn handle(&mut self, input: Input) {
        match &input {
            Input::Stream {
                request,
                event: StreamEvent::TextDelta { text },
            } if self.request.as_ref().is_some_and(|(r, _)| r == request) => {
                (self.report)(Report::Text(text.clone()));
            }
            Input::StreamEnded { request, .. }
                if self.request.as_ref().is_some_and(|(r, _)| r == request) =>
            {
                self.request = None;
            }
            Input::ToolFinished { tool_id, .. } => {
                self.tools_running.remove(tool_id);
            }
            Input::JobFinished { job_id, .. } => {
                if let Some(job) = self.engine.jobs().find(|job| &job.job_id == job_id) {
                    let tool_id = job.tool_id.clone();
                    self.tools_running.remove(&tool_id);
                }
            }
            _ => {}
        }
        let changed = match &input {
            Input::TextChanged { edits } => flemma_syntax::apply_edits(&self.view, edits).ok(),
            _ => None,
        };
        let now = self.now();
        let effects = self.engine.handle(now, input);
        let refused = effects
            .iter()
            .any(|effect| matches!(effect, Effect::Refused { .. }));
        if let Some(changed) = changed
            && !refused
        {
            self.view = changed;
        }
        for effect in effects {
            self.perform(effect);
        }
    }

    fn perform(&mut self, effect: Effect) {
        match effect {
            Effect::Edit { edits } => {
                match flemma_syntax::apply_edits(&self.view, &edits) {
                    Ok(next) => self.view = next,
                    // The engine only emits edits that fit its own view, which this follows.
                    Err(error) => tracing::error!("an engine edit does not fit: {error}"),
                }
                self.unwritten.push(edits);
                self.unwritten_since.get_or_insert_with(Instant::now);
                if self.write_at.is_none() {
                    self.write_at = Some(Instant::now() + self.coalesce);
                }
            }
            Effect::StartRequest { request } => self.start_request(request),
            Effect::CancelRequest { request } => {
                if let Some((current, token)) = &self.request
                    && *current == request
                {
                    token.cancel();
                }
            }
            Effect::StartTool {
                tool_id,
                name,
                input,
                background,
                job_id,
            } => self.start_tool(tool_id, name, input, background.then_some(job_id).flatten()),
            Effect::KillTool { tool_id } => {
                if let Some(cancel) = self.tools_running.remove(&tool_id) {
                    cancel.cancel();
                }
            }
            Effect::SetTimer { id, at } => {
                let sender = self.sender.clone();
                let when = self.epoch + Duration::from_millis(at);
                let task = tokio::spawn(async move {
                    tokio::time::sleep_until(when.into()).await;
                    let _ = sender.send(Message::Input(Input::Timer { id }));
                });
                if let Some(old) = self.timers.insert(id, task) {
                    old.abort();
                }
            }
            Effect::CancelTimer { id } => {
                if let Some(task) = self.timers.remove(&id) {
                    task.abort();
                }
            }
            Effect::Emit(event) => (self.report)(Report::Event(event)),
            Effect::Stopped { reason } => {
                self.stopped = Some(reason);
                // Every stop is written at once.
                self.write_at = Some(Instant::now());
            }
            Effect::Refused { message } => {
                self.refusals += 1;
                (self.report)(Report::Notice(message));
            }
        }
    }

    /// Evaluates the text as it is now and streams the reply.
    fn start_request(&mut self, request: RequestId) {
        self.stopped = None;
        let sender = self.sender.clone();
        let fail = |message: String| {
            let _ = sender.send(Message::Input(Input::StreamEnded {
                request,
                outcome: StreamOutcome::Failed {
                    message,
                    retryable: false,
                },
            }));
        };
        self.host.set_text(self.id.clone(), self.view.clone());
        let analysis = match self.host.analysis(&self.id) {
            Ok(analysis) => analysis,
            Err(error) => return fail(error.to_string()),
        };
        let blockers = analysis.send_blockers();
        if !blockers.is_empty() {
            let messages: Vec<String> = blockers.iter().map(|d| d.message.clone()).collect();
            return fail(format!(
                "the chat cannot be sent: {}; fix it and send again",
                messages.join("; ")
            ));
        }
        let conversation = analysis.evaluation.conversation.clone();
        let token = CancellationToken::new();
        self.request = Some((request, token.clone()));
        let client = self.client.clone();
        let provider = self.provider.clone();
        // The provider's observer is not `Send`: the stream runs on the driver's `LocalSet`.
        tokio::task::spawn_local(async move {
            let events = sender.clone();
            let result = client
                .stream(
                    provider.kind,
                    &conversation,
                    &provider.options,
                    &provider.endpoint,
                    token,
                    &mut |event| match event {
                        ClientEvent::Event(event) => {
                            let _ = events.send(Message::Input(Input::Stream { request, event }));
                        }
                        ClientEvent::Retrying {
                            attempt,
                            delay,
                            reason,
                        } => {
                            let _ = events.send(Message::Notice(format!(
                                "{reason}; retrying in {:.1}s (attempt {attempt})",
                                delay.as_secs_f64()
                            )));
                        }
                        ClientEvent::FirstByte => {}
                    },
                )
                .await;
            let outcome = match result {
                Ok(summary) => {
                    for warning in &summary.warnings {
                        let _ = sender.send(Message::Notice(format!("warning: {warning}")));
                    }
                    match summary.stop_error() {
                        Some(error) => StreamOutcome::Failed {
                            message: error.to_string(),
                            retryable: false,
                        },
                        None => StreamOutcome::Finished,
                    }
                }
                Err(ProviderError::Cancelled) => StreamOutcome::Cancelled,
                Err(error) => StreamOutcome::Failed {
                    message: error.to_string(),
                    retryable: false,
                },
            };
            let _ = sender.send(Message::Input(Input::StreamEnded { request, outcome }));
        });
    }

    /// Runs a tool on its own thread (a killed tool's thread is never waited for).
    fn start_tool(
        &mut self,
        tool_id: String,
        name: String,
        input: serde_json::Value,
        job_id: Option<String>,
    ) {
        let cancel = Cancel::new();
        let mut ctx = self.tools.ctx.clone();
        ctx.cancel = cancel.clone();
        self.tools_running.insert(tool_id.clone(), cancel);
        let tools = self.tools.clone();
        let sender = self.sender.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tool {name}"))
            .spawn(move || {
                let (text, is_error) =
                    match tools
                        .registry
                        .execute(&name, input, &ctx, &tools.store, &tool_id)
                    {
                        Ok(outcome) => (outcome.text, outcome.is_error),
                        Err(error) => (error.to_string(), true),
                    };
                let input = match job_id {
                    Some(job_id) => Input::JobFinished {
                        job_id,
                        text,
                        is_error,
                    },
                    None => Input::ToolFinished {
                        tool_id,
                        text,
                        is_error,
                    },
                };
                let _ = sender.send(Message::Input(input));
            });
        if let Err(error) = spawned {
            let _ = self.sender.send(Message::Notice(format!(
                "cannot start a thread for a tool: {error}"
            )));
        }
    }

    /// Writes the engine's text to the file, merging what someone else wrote meanwhile.
    fn write(&mut self) -> anyhow::Result<()> {
        self.write_at = None;
        if let Some(since) = self.unwritten_since.take() {
            self.max_write_delay = self.max_write_delay.max(since.elapsed());
        }
        for _ in 0..MERGE_ATTEMPTS {
            let current = fsutil::read_chat(&self.path)?;
            if current != self.disk {
                self.absorb(&current)?;
            }
            if self.engine.text() == current {
                self.unwritten.clear();
                return Ok(());
            }
            let next = self.engine.text().to_owned();
            if fsutil::replace_if_unchanged(&self.path, &current, &next)? {
                self.disk = next;
                self.unwritten.clear();
                self.write_at = None;
                return Ok(());
            }
        }
        anyhow::bail!(
            "{} keeps changing while flemmad writes it; stopped after {MERGE_ATTEMPTS} attempts (everything written before is in the file)",
            self.path.display()
        )
    }

    /// Feeds a change someone else made to the file (`current` instead of `disk`) to the
    /// engine, in the engine's coordinates.
    fn absorb(&mut self, current: &str) -> anyhow::Result<()> {
        let theirs = single_edit(&self.disk, current);
        let mut start = theirs.range.start;
        let mut end = theirs.range.end;
        for batch in &self.unwritten {
            // Text inserted where the engine also inserted goes after the engine's text.
            start = map_offset(start, batch, Assoc::After);
            end = map_offset(end, batch, Assoc::Before);
        }
        let edit = TextEdit {
            range: TextRange::new(start, end.max(start)),
            new_text: theirs.new_text,
        };
        let refusals = self.refusals;
        self.handle(Input::TextChanged { edits: vec![edit] });
        if self.refusals > refusals {
            anyhow::bail!(
                "{} was changed by another program in a way flemmad cannot merge with what it was writing; stopped without writing, so that change is kept. Look at the file and send again",
                self.path.display()
            );
        }
        self.disk = current.to_owned();
        self.unwritten = vec![vec![single_edit(&self.disk, self.engine.text())]];
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        for task in self.timers.values() {
            task.abort();
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// The one edit turning `before` into `after`: everything between their common prefix and
/// common suffix (on character boundaries).
pub fn single_edit(before: &str, after: &str) -> TextEdit {
    let (a, b) = (before.as_bytes(), after.as_bytes());
    let mut prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    while !before.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = a.len().min(b.len()) - prefix;
    let mut suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    while !before.is_char_boundary(a.len() - suffix) {
        suffix -= 1;
    }
    TextEdit {
        range: TextRange::new(prefix, a.len() - suffix),
        new_text: after[prefix..b.len() - suffix].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, edit: &TextEdit) -> String {
        let mut out = text[..edit.range.start].to_owned();
        out.push_str(&edit.new_text);
        out.push_str(&text[edit.range.end..]);
        out
    }

    #[test]
    fn one_edit_turns_before_into_after() {
        for (before, after) in [
            ("abc", "abXc"),
            ("abc", "abc"),
            ("", "x"),
            ("x", ""),
            ("aaa", "aaaa"),
            ("héllo", "hèllo"),
            ("@You:\nhi\n", "@You:\nhi\n\nTYPED"),
        ] {
            let edit = single_edit(before, after);
            assert_eq!(apply(before, &edit), after, "{before:?} -> {after:?}");
        }
        let edit = single_edit("aaa", "aaaa");
        assert_eq!(edit.new_text, "a");
    }
}
