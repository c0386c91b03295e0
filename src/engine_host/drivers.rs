//! The drivers' thread: it owns the drivers (on a `LocalSet`) and runs the effects the host's
//! state returns ([`HostState::handle`], on the state's own thread: `state_thread.rs`), in the
//! order they were decided. It decides nothing itself.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use flemma_engine::{EngineEvent, Input, StopReason};
use flemma_ide::{Analysis, Diagnostic};
use flemma_protocol::event::{EngineSetup, StreamedText};
use tokio::sync::mpsc;

use crate::engine_driver::{Driver, DriverHandle, DriverState, Report};
use crate::engine_host::state::{Command, Effect, First};
use crate::engine_host::{CallOptions, Followed, Shared};
use crate::engine_setup::{self, SetupError, SetupOptions};

/// How long shutdown waits for the drivers to write their abort markers.
pub(super) const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The drivers' thread's own resources: the handles of the drivers it runs and their tasks.
pub(super) struct Inner {
    pub shared: Arc<Shared>,
    handles: RefCell<HashMap<PathBuf, DriverHandle>>,
    tasks: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    /// What was fed to a driver that had already ended (its end not yet told to the state):
    /// handed back to the state once it is (`drive`).
    late: RefCell<HashMap<PathBuf, Vec<Command>>>,
}

impl Inner {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            handles: RefCell::default(),
            tasks: RefCell::default(),
            late: RefCell::default(),
        }
    }

    /// `command` reached no driver: the one it was decided for had ended. When that end is
    /// decided (no handle any more: the handle goes in the same step as the state hears of
    /// the end), the state decides the command again (a driver starts for it); otherwise it
    /// waits for the end.
    fn missed(&self, path: &Path, command: Option<Command>) {
        let Some(command) = command else {
            return;
        };
        if self.handles.borrow().contains_key(path) {
            self.late
                .borrow_mut()
                .entry(path.to_owned())
                .or_default()
                .push(command);
        } else {
            self.shared.state.tell(move |owned| {
                let _ = owned.command(command);
            });
        }
    }
}

/// Runs the effects the host's state decides until it stops.
pub(super) async fn run_host(inner: Rc<Inner>, mut receiver: mpsc::UnboundedReceiver<Effect>) {
    while let Some(effect) = receiver.recv().await {
        if effect == Effect::Stop {
            stop(&inner).await;
            return;
        }
        run(&inner, effect);
    }
}

/// Runs one effect (all but [`Effect::Stop`]).
fn run(inner: &Rc<Inner>, effect: Effect) {
    let handle = |path: &Path| inner.handles.borrow().get(path).cloned();
    match effect {
        Effect::Feed(path, input, again) => {
            let fed = handle(&path).is_some_and(|handle| handle.input(input.clone()));
            if !fed {
                let again = again.map(|start| start.command(path.clone(), input));
                inner.missed(&path, again);
            }
        }
        Effect::Revise(path, tool_id, input) => {
            let revised =
                handle(&path).is_some_and(|handle| handle.revise(tool_id.clone(), input.clone()));
            if !revised {
                let again = Command::Revise {
                    path: path.clone(),
                    tool_id,
                    input,
                };
                inner.missed(&path, Some(again));
            }
        }
        Effect::SetWriter(path) => {
            if let Some(handle) = handle(&path) {
                handle.set_store(inner.shared.writer(&path));
            }
        }
        Effect::Leave(path) => {
            if let Some(handle) = handle(&path) {
                handle.leave();
            }
        }
        Effect::Start {
            path,
            first,
            send,
            options,
        } => {
            let task = tokio::task::spawn_local(drive(inner.clone(), path, first, send, options));
            let mut tasks = inner.tasks.borrow_mut();
            // A finished driver's handle holds its task's memory: forget it.
            tasks.retain(|task| !task.is_finished());
            tasks.push(task);
        }
        Effect::Notice(path, message) => inner.shared.notice(&path, message),
        Effect::Failed(path, message) => {
            inner
                .shared
                .tell_editors(&path, |editor| editor.failed(&message));
        }
        Effect::Publish(path, event) => inner.shared.publish(&path, event),
        Effect::Stop => {}
    }
}

/// Waits for the drivers' writes (at most [`SHUTDOWN_WAIT`]) and closes the shared services.
async fn stop(inner: &Rc<Inner>) {
    let tasks: Vec<_> = inner.tasks.borrow_mut().drain(..).collect();
    let all = async {
        for task in tasks {
            let _ = task.await;
        }
    };
    if tokio::time::timeout(SHUTDOWN_WAIT, all).await.is_err() {
        tracing::warn!("drivers still writing after shutdown began; stopping anyway");
    }
    // The MCP servers live on this thread's runtime: close them before it ends.
    inner.shared.mcp.shutdown().await;
    inner.shared.services.agents.shutdown().await;
}

/// Sets up and runs one driver for `path` until nothing runs any more.
async fn drive(inner: Rc<Inner>, path: PathBuf, first: First, send: bool, options: CallOptions) {
    // One driver per chat across processes: held while this one runs.
    let dirs = &inner.shared.services.context.dirs;
    let role = &inner.shared.services.context.role;
    let outcome = match crate::driver_lock::DriverLock::acquire(dirs, &path, role) {
        Ok(_lock) => {
            // A panic ends the driver as an error, told as any other (`engine:stopped`): a
            // caller waiting for the driver to stop is not left waiting.
            let (driving, chat) = (inner.clone(), path.clone());
            let run = tokio::task::spawn_local(async move {
                run_driver(&driving, &chat, first, send, options).await
            });
            match run.await {
                Ok(outcome) => outcome,
                Err(_) => Err(
                    "flemmad failed while running this chat (a bug: see the log); what was written stays"
                        .to_owned(),
                ),
            }
        }
        Err(busy) => Err(busy.to_string()),
    };
    inner.handles.borrow_mut().remove(&path);
    let late = inner.late.borrow_mut().remove(&path).unwrap_or_default();
    let ended = path.clone();
    let effects = inner.shared.state.ask(move |owned| {
        let effects = owned.state.driver_ended(&ended, &outcome);
        if owned.state.stopping() {
            // Run here: after shutdown's `Stop` the loop runs no more, and a driver's end is
            // told even then.
            return effects;
        }
        // Sent to the loop, behind the effects decided before: an input fed meanwhile to the
        // driver that ended is handed back (and decided again) before its end is told.
        let _ = owned.send(effects);
        // What reached the driver once it had ended is decided again: a driver starts for it.
        for command in late {
            let _ = owned.command(command);
        }
        Vec::new()
    });
    for effect in effects {
        run(&inner, effect);
    }
}

async fn run_driver(
    inner: &Rc<Inner>,
    path: &Path,
    first: First,
    send: bool,
    options: CallOptions,
) -> Result<StopReason, String> {
    let shared = inner.shared.clone();
    let writer = shared.writer_session(path);
    let store = shared.writer(path);
    let failed = |message: &str| shared.tell_followers(path, Followed::SetupFailed(message.into()));
    let snapshot = store.read().await.map_err(|e| {
        let message = format!("{e:#}");
        failed(&message);
        message
    })?;
    let setup = engine_setup::prepare(
        path,
        &snapshot.text,
        shared.config_input(path),
        SetupOptions {
            no_autopilot: options.no_autopilot,
        },
        &shared.analyses,
        &shared.mcp,
        &shared.services,
    );
    // The process's Ctrl-C (`EngineHost::interrupt`) does not wait for the setup (MCP servers
    // starting, templates evaluated): nothing ran yet, the driver stops cancelled.
    let interruption = shared.interruption();
    let setup = tokio::select! {
        biased;
        () = interruption.cancelled() => return Ok(StopReason::Cancelled),
        setup = setup => setup,
    };
    let prepared = match setup {
        Ok(prepared) => prepared,
        Err(error) => {
            let message = error.to_string();
            match error {
                SetupError::Blocked { analysis } => {
                    // Every front end is told the errors, before the stop that says why.
                    let setup = setup_blocked(&analysis, send);
                    shared.publish(path, EngineEvent::EngineSetup(setup));
                }
                SetupError::Failed(message) => failed(&message),
            }
            return Err(message);
        }
    };
    let nothing_to_send = if send {
        prepared.nothing_to_send.clone()
    } else {
        Vec::new()
    };
    let warnings: Vec<String> = prepared
        .model_warnings
        .iter()
        .chain(&prepared.tool_warnings)
        .cloned()
        .collect();
    shared.publish(
        path,
        EngineEvent::EngineSetup(setup_ready(
            &prepared.analysis,
            &warnings,
            prepared.provider_name,
            &prepared.model,
            &nothing_to_send,
        )),
    );
    if !nothing_to_send.is_empty() {
        let reasons: Vec<String> = nothing_to_send.iter().map(|d| d.message.clone()).collect();
        return Err(format!("nothing was sent: {}", reasons.join("; ")));
    }
    for warning in &warnings {
        let message = format!("warning: {warning}");
        shared.tell_editors(path, |editor| editor.notice(&message));
    }
    // Said once per send: what the untrusted chat's frontmatter set that was ignored.
    if let Some(event) = engine_setup::trust_notice(&prepared.analysis) {
        shared.publish(path, event);
    }
    let report = reporter(shared.clone(), path.to_owned());
    let coalesce_ms = prepared.parts.coalesce.as_millis() as u64;
    let mut driver = Driver::with_store(prepared.parts, store, snapshot, report);
    let state_shared = shared.clone();
    let state_path = path.to_owned();
    driver.on_state(Box::new(move |state: DriverState| {
        let path = state_path.clone();
        state_shared
            .state
            .tell(move |owned| owned.state.driver_state(&path, state));
    }));
    let handle = driver.commands();
    inner
        .handles
        .borrow_mut()
        .insert(path.to_owned(), handle.clone());
    let backlog = {
        let path = path.to_owned();
        shared
            .state
            .ask(move |owned| owned.state.driver_running(&path))
    };
    // The writer may have changed while the driver was set up.
    if shared.writer_session(path) != writer {
        handle.set_store(shared.writer(path));
    }
    let mut inputs = vec![Input::Load];
    match first {
        First::Input(input) => inputs.push(input),
        First::Compact(order) => driver.by_hand(order),
        // After `Load` (the revision is a message the driver reads once it runs).
        First::Revise(tool_id, input) => {
            handle.revise(tool_id, input);
        }
    }
    for (tool_id, input) in backlog.revisions {
        handle.revise(tool_id, input);
    }
    inputs.extend(backlog.inputs);
    if backlog.leave {
        handle.leave();
    }
    // Stopped through `leave` (shutdown), or interrupted like a Ctrl-C when the host lives in
    // the command's process (`EngineHost::interrupt`).
    let stopped = driver
        .run(inputs, shared.interruption())
        .await
        .map_err(|e| format!("{e:#}"));
    tracing::info!(
        max_delay_ms = driver.max_write_delay().as_millis() as u64,
        coalesce_ms,
        "longest wait between an edit and its write"
    );
    stopped
}

/// What the driver of `path` reports, told to the editors and the subscribers (its notices too,
/// as `engine:notice`: [`Shared::notice`]). A compaction, its undo or a cut is told to the
/// editors as a notice too (it rewrote their chat).
fn reporter(report_shared: Arc<Shared>, report_path: PathBuf) -> Box<dyn FnMut(Report) + Send> {
    Box::new(move |report: Report| match report {
        Report::Event(event) => {
            // A compaction is told to the editors too (it rewrote their chat).
            match &event {
                EngineEvent::ContextCompacted(data) => {
                    let notice = crate::compaction::notice(data);
                    report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
                }
                EngineEvent::ContextCompactionFailed(failed) => {
                    report_shared
                        .tell_editors(&report_path, |editor| editor.notice(&failed.message));
                }
                EngineEvent::ContextRestored(data) => {
                    let notice = crate::compaction::restored_notice(data);
                    report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
                }
                EngineEvent::ChatRewound(data) => {
                    let notice = crate::rewind_chat::notice(data);
                    report_shared.tell_editors(&report_path, |editor| editor.notice(&notice));
                }
                EngineEvent::ChatRewindFailed(failed) => {
                    report_shared
                        .tell_editors(&report_path, |editor| editor.notice(&failed.message));
                }
                _ => {}
            }
            report_shared.publish(&report_path, event)
        }
        Report::Notice(notice) => report_shared.notice(&report_path, notice),
        Report::Text(text) => report_shared.publish_to_subscribers(
            &report_path,
            EngineEvent::RequestText(StreamedText { text }),
        ),
        Report::Thinking(text) => report_shared.publish_to_subscribers(
            &report_path,
            EngineEvent::RequestThinking(StreamedText { text }),
        ),
    })
}

/// `engine:setup` of a driver set up: where it sends, its warnings, the chat's warnings and
/// errors, and why a send has nothing to send.
fn setup_ready(
    analysis: &Analysis,
    warnings: &[String],
    provider: &str,
    model: &str,
    nothing_to_send: &[Diagnostic],
) -> EngineSetup {
    let doc = &*analysis.document;
    let index = doc.line_index();
    let data = |d: &Diagnostic| crate::chat::diagnostic_data((doc, &index), d);
    let (shown, _) = crate::chat::reported(analysis, false);
    EngineSetup {
        provider: Some(provider.to_owned()),
        model: Some(model.to_owned()),
        warnings: warnings.to_vec(),
        diagnostics: shown.iter().map(data).collect(),
        blocking: nothing_to_send.iter().map(data).collect(),
    }
}

/// `engine:setup` of a driver the chat's errors block: what `flemmad send` reports of it
/// (its errors and warnings, then the send's blockers when it is a send).
fn setup_blocked(analysis: &Analysis, send: bool) -> EngineSetup {
    let doc = &*analysis.document;
    let index = doc.line_index();
    let data = |d: &Diagnostic| crate::chat::diagnostic_data((doc, &index), d);
    let (shown, blockers) = crate::chat::reported(analysis, send);
    EngineSetup {
        diagnostics: shown.iter().map(data).collect(),
        blocking: blockers.iter().map(data).collect(),
        ..EngineSetup::default()
    }
}
