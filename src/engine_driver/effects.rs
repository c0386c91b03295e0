//! The session's effects, performed: requests and tools started and cancelled, timers, store
//! reads and replacements on local tasks, events and notices reported.

use std::time::Duration;

use flemma_engine::session::{Effect, Input, ReadOutcome, ReplaceOutcome, StoreId};
use flemma_engine::{EngineEvent, Input as EngineInput, StopReason};

use crate::chat_store::{EditorGone, Snapshot};
use crate::engine_driver::{Driver, DriverState, FILE, Message, Report};

impl Driver {
    pub(super) fn perform(&mut self, effect: Effect) {
        match effect {
            Effect::StartRequest { request, text } => self.start_request(request, text),
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
                job_id,
            } => self.start_tool(tool_id, name, input, job_id),
            Effect::KillTool { tool_id } => {
                if let Some(cancel) = self.tools_running.remove(&tool_id) {
                    cancel.cancel();
                }
            }
            Effect::SetTimer { id, at } => {
                let sender = self.sender.clone();
                let when = self.epoch + Duration::from_millis(at);
                let task = tokio::task::spawn_local(async move {
                    tokio::time::sleep_until(when.into()).await;
                    let _ = sender.send(Message::Session(Input::Engine(EngineInput::Timer { id })));
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
            Effect::Emit(event) => {
                if let EngineEvent::RequestComposing(call) = &event {
                    self.prepare_checkpoints(&call.tool_name);
                }
                (self.report)(Report::Event(event))
            }
            Effect::Notice(message) => (self.report)(Report::Notice(message)),
            Effect::Conflict {
                incoming,
                writer,
                line,
            } => {
                let message = format!(
                    "{} and the text flemmad is writing were both changed at line {line}; flemmad goes on writing {} instead. Copy your change over, or close one of the editors",
                    self.describe(incoming),
                    self.describe(writer),
                );
                tracing::warn!(%message, "not switching the writer");
                (self.report)(Report::Notice(message));
            }
            Effect::Read { store } => {
                tracing::trace!(store, "read");
                self.read(store)
            }
            Effect::Replace {
                store,
                current,
                next,
            } => {
                tracing::trace!(store, len = next.len(), "replace");
                self.replace(store, current, next)
            }
            Effect::Left { store, text } => {
                if let Some(store) = self.stores.get(&store) {
                    store.left(&text);
                }
            }
            Effect::WakeAt(at) => self.wake = Some(self.epoch + Duration::from_millis(at)),
            // Handled after the effects of this input (a `Done` among them must not end the
            // driver after the summary's rewrite was fed).
            Effect::Synced => {
                let _ = self.sender.send(Message::Synced);
            }
            Effect::Done(reason) => {
                if let StopReason::AwaitingApproval { .. } = &reason {
                    // What each pending `write` and `edit` is reviewed against until approved.
                    let calls = self.session.engine().pending_calls();
                    crate::reviewed::pending(
                        &self.services.context.dirs,
                        self.id.path(),
                        &calls,
                        &self.tools.ctx,
                    );
                }
                self.outcome = Some(Ok(reason))
            }
            Effect::Failed(message) => {
                tracing::warn!(%message, "the document session stopped");
                // Nothing more is written: a compaction waiting for the session ends too.
                self.compacting = false;
                self.outcome = Some(Err(message));
            }
            Effect::Saw {
                seen,
                tool_id,
                name,
                input,
            } => {
                let Some(records) = &self.records else {
                    return;
                };
                if let Err(error) = records.record(self.id.path(), seen, &tool_id, &name, &input) {
                    (self.report)(Report::Notice(format!(
                        "cannot record that `{tool_id}` was {} ({error:#}); a later send will ask for its approval again",
                        match seen {
                            flemma_config::Seen::Approved => "approved",
                            flemma_config::Seen::FromModel => "asked for by the model",
                        }
                    )));
                }
            }
        }
    }

    pub(super) fn describe(&self, store: StoreId) -> String {
        self.stores
            .get(&store)
            .map_or_else(|| format!("store {store}"), |s| s.describe())
    }

    /// Reads `store` on a local task; the answer comes back as [`Input::Read`].
    pub(super) fn read(&mut self, id: StoreId) {
        let sender = self.sender.clone();
        let Some(store) = self.stores.get(&id).cloned() else {
            let outcome = ReadOutcome::Gone(format!("store {id} is unknown"));
            let _ = sender.send(Message::Session(Input::Read { store: id, outcome }));
            return;
        };
        tokio::task::spawn_local(async move {
            let outcome = match store.read().await {
                Ok(snapshot) => ReadOutcome::Text(snapshot),
                Err(error) if error.downcast_ref::<EditorGone>().is_some() => {
                    ReadOutcome::Gone(error.to_string())
                }
                Err(error) => ReadOutcome::Failed(format!("{error:#}")),
            };
            let _ = sender.send(Message::Session(Input::Read { store: id, outcome }));
        });
    }

    /// Replaces `current` with `next` in `store` on a local task; the answer comes back as
    /// [`Input::Replaced`].
    pub(super) fn replace(&mut self, id: StoreId, current: Snapshot, next: String) {
        let sender = self.sender.clone();
        let Some(store) = self.stores.get(&id).cloned() else {
            let outcome = ReplaceOutcome::Gone(format!("store {id} is unknown"));
            let _ = sender.send(Message::Session(Input::Replaced { store: id, outcome }));
            return;
        };
        let chat = (id == FILE).then(|| self.id.path().to_owned());
        let interruptions = self.services.interruptions.clone();
        if id == FILE {
            self.disk.writing();
        }
        tokio::task::spawn_local(async move {
            let outcome = match store.replace_if_unchanged(&current, &next).await {
                Ok(true) => ReplaceOutcome::Written,
                Ok(false) => ReplaceOutcome::Moved,
                Err(error) if error.downcast_ref::<EditorGone>().is_some() => {
                    tracing::info!(%error, "the editor is gone; writing the file");
                    ReplaceOutcome::Gone(error.to_string())
                }
                Err(error) => {
                    let message = format!("{error:#}");
                    // The driver stops writing here: the next one says why on what is left.
                    if let Some(chat) = &chat {
                        interruptions.write_failed(chat, &message);
                    }
                    ReplaceOutcome::Failed(message)
                }
            };
            let _ = sender.send(Message::Session(Input::Replaced { store: id, outcome }));
        });
    }

    /// Reports the engine's state when it changed.
    pub(super) fn report_state(&mut self) {
        if self.on_state.is_none() {
            return;
        }
        let mut state = DriverState::of(self.session.engine(), self.session.request().is_some());
        state.context = self.context.clone();
        if self.state.as_ref() != Some(&state) {
            self.state = Some(state.clone());
            if let Some(observe) = self.on_state.as_mut() {
                observe(state);
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The document leaves the engine's host (its messages' results stay in the template
        // cache, for the editor that has it open).
        crate::analyses::lock(&self.host).forget(&self.id);
        // The writer's text is what it shares with the engine (the next driver's merge base).
        if let Some((store, text)) = self.session.shared_text()
            && let Some(store) = self.stores.get(&store)
        {
            store.left(text);
        }
        for task in self.timers.values() {
            task.abort();
        }
        // A driver that ends with work running (it stopped on an error: the file is gone,
        // or cannot be merged) stops that work: nothing could write its results.
        if let Some((_, token)) = self.request.take() {
            token.cancel();
        }
        for cancel in self.tools_running.values() {
            cancel.cancel();
        }
    }
}
