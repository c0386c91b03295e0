//! What arrives at the driver (its messages, the watcher's news), fed to the session.

use std::rc::Rc;

use flemma_conversation::StreamEvent;
use flemma_engine::Input as EngineInput;
use flemma_engine::session::{Input, ReadOutcome, ReplaceOutcome, StoreId, StoreKind};

use crate::chat_store::ChatStore;
use crate::engine_driver::decisions::FileIdentity;
use crate::engine_driver::{Driver, FILE, Message, Report};

impl Driver {
    /// The watcher told of a change. It also tells of the driver's own writes: only a file
    /// other than the one last read or written is news (and what it tells during a write of
    /// the file waits for its end).
    pub(super) fn changed_on_disk(&mut self) {
        let file_writes = self.session.writer() == FILE;
        if self
            .disk
            .changed(file_writes, || FileIdentity::of(&self.path))
        {
            tracing::debug!(path = %self.path.display(), "changed on disk by someone else");
            self.feed(Input::StoreChanged);
        }
    }

    pub(super) fn receive(&mut self, message: Message) {
        match message {
            Message::Session(input) => self.feed(input),
            Message::Event(event) => (self.report)(Report::Event(event)),
            Message::Notice(notice) => (self.report)(Report::Notice(notice)),
            Message::Writer(store) => {
                let kind = match store.shared_base() {
                    Some(base) => StoreKind::Editor { base },
                    None => StoreKind::File,
                };
                let id = self.number(store);
                tracing::info!(
                    to = self.stores[&id].describe(),
                    "the document's writer changes"
                );
                self.feed(Input::Writer { store: id, kind });
            }
            // What the user typed until now must be in the engine's text before the summary
            // replaces the turns it read (typing inside them refuses the compaction).
            Message::Compacted(summary) => {
                self.summary_waiting = Some(summary);
                self.feed(Input::Sync);
            }
            Message::Synced => {
                if let Some(summary) = self.summary_waiting.take() {
                    self.compacted(*summary);
                }
            }
            Message::Revise(tool_id, input) => self.revise(&tool_id, &input),
            Message::Restore(line) => self.restore(line),
            Message::CutChat(tool_id) => self.cut_chat(&tool_id),
            Message::Warning(warning) => {
                if self.warned.first(&warning) {
                    (self.report)(Report::Notice(format!("warning: {warning}")));
                }
            }
        }
    }

    /// The number of `store`: the one it already has when it is a store the driver knows.
    pub(super) fn number(&mut self, store: Box<dyn ChatStore>) -> StoreId {
        let key = store.key();
        if let Some((&id, _)) = self.stores.iter().find(|(_, s)| s.key() == key) {
            self.stores.insert(id, Rc::from(store));
            return id;
        }
        let id = self.stores.keys().max().map_or(1, |max| max + 1);
        self.stores.insert(id, Rc::from(store));
        id
    }

    /// Hands `input` to the session and performs what it asks.
    pub(super) fn feed(&mut self, input: Input) {
        let file_written = matches!(input, Input::Replaced { store: FILE, .. });
        match &input {
            Input::Engine(EngineInput::Stream {
                request,
                event: StreamEvent::TextDelta { text },
            }) if self.session.request() == Some(*request) => {
                (self.report)(Report::Text(text.clone()));
            }
            Input::Engine(EngineInput::Stream {
                request,
                event: StreamEvent::ThinkingDelta { text },
            }) if self.session.request() == Some(*request) => {
                (self.report)(Report::Thinking(text.clone()));
            }
            Input::Engine(EngineInput::StreamEnded { request, .. })
                if self.request.as_ref().is_some_and(|(r, _)| r == request) =>
            {
                self.request = None;
            }
            Input::Engine(EngineInput::ToolFinished { tool_id, .. }) => {
                self.tools_running.remove(tool_id);
            }
            // The file as the driver read or wrote it: the watcher's news of it is not news.
            Input::Read {
                store: FILE,
                outcome: ReadOutcome::Text(_),
            }
            | Input::Replaced {
                store: FILE,
                outcome: ReplaceOutcome::Written,
            } => self.disk.seen(FileIdentity::of(&self.path)),
            Input::Engine(EngineInput::JobFinished { job_id, .. }) => {
                let tool = self.session.engine().jobs().find(|j| &j.job_id == job_id);
                if let Some(tool_id) = tool.map(|job| job.tool_id.clone()) {
                    self.tools_running.remove(&tool_id);
                }
            }
            _ => {}
        }
        let now = self.now();
        for effect in self.session.handle(now, input) {
            self.perform(effect);
        }
        self.report_state();
        // Someone else's change made while the write was under way is already in the file's
        // identity as the write left it: not a sign to go by. The file is read again (a read
        // that finds the engine's text changes nothing).
        if file_written && self.disk.written(self.session.writer() == FILE) {
            self.feed(Input::StoreChanged);
        }
    }
}

/// The watcher's next news of the chat (never, without a watcher).
pub(super) async fn changed_on_disk(watch: Option<&crate::watcher::FileWatch>) {
    match watch {
        Some(watch) => watch.changed().await,
        None => std::future::pending().await,
    }
}

/// `deadline` (never, without one).
pub(super) async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
