//! What is asked of the chat by hand through its session: a call's input revised, a compaction,
//! its undo, a cut back (`flemma/reviseProposal`, `flemma/compact`, `flemma/compactUndo`,
//! `flemma/rewind`).

use flemma_engine::EngineEvent;
use flemma_engine::session::Input;

use crate::engine_driver::{Driver, Message, Report};

impl Driver {
    /// Rewrites the input of the call `tool_id`, still pending in the engine's text, as
    /// `input` (`flemma/reviseProposal`): written through the session as the engine's own edits
    /// are (what someone types meanwhile is merged around it). A call no longer pending is left
    /// as it is, and the editors are told.
    pub(super) fn revise(&mut self, tool_id: &str, input: &serde_json::Value) {
        let doc = flemma_syntax::Document::parse(self.session.engine().text().to_owned());
        let pending = flemma_ide::actions::awaits_approval(&doc, tool_id);
        let fence = doc
            .tool_use(tool_id)
            .and_then(|(_, _, tool_use)| tool_use.fence.clone())
            .filter(|fence| pending && fence.close.is_some());
        // The session is done again once the revision is written (as after a compaction).
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        let (Some(fence), Ok(json)) = (fence, serde_json::to_string_pretty(input)) else {
            (self.report)(Report::Notice(format!(
                "the proposal of `{tool_id}` was not written back: the call is no longer waiting for approval"
            )));
            // Nothing to write: any input but a tick makes the session say it is done again
            // (this one only has it check the file), so the driver does not wait for nothing.
            return self.feed(Input::StoreChanged);
        };
        let edit = flemma_syntax::TextEdit {
            range: fence.content,
            // Pretty JSON: no line of it is a fence's closer.
            new_text: format!("{json}\n"),
        };
        self.feed(Input::Rewrite { edits: vec![edit] });
    }

    /// A compaction or its undo asked for by hand (`flemma/compact`, `flemma/compactUndo`),
    /// before the driver runs.
    pub fn by_hand(&mut self, order: crate::compaction::ByHand) {
        match order {
            crate::compaction::ByHand::Compact(order) => self.compact(order),
            // Once the driver runs (after its text is loaded).
            crate::compaction::ByHand::Undo { line } => {
                let _ = self.sender.send(Message::Restore(line));
            }
            crate::compaction::ByHand::Rewind { tool_id } => {
                let _ = self.sender.send(Message::CutChat(tool_id));
            }
        }
    }

    /// Cuts the chat back to before the answer that made the call `tool_id` (`flemma/rewind`
    /// with `chat`) through the session, as the engine's own edits are written: an editor with
    /// the chat open gets an edit, and what it types after the cut meanwhile stays. The whole
    /// chat as it was is kept first (`crate::rewind_chat`).
    pub(super) fn cut_chat(&mut self, tool_id: &str) {
        let failed = |message: String| {
            EngineEvent::ChatRewindFailed(flemma_protocol::event::CompactionFailed { message })
        };
        let text = self.session.engine().text().to_owned();
        let prepared = match crate::rewind_chat::prepare(
            &self.services.context.dirs,
            self.id.path(),
            &text,
            tool_id,
        ) {
            Ok(prepared) => prepared,
            Err(why) => return (self.report)(Report::Event(failed(format!("not cut: {why}")))),
        };
        // The session is done again once the cut is written.
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        self.feed(Input::Rewrite {
            edits: vec![prepared.edit()],
        });
        let event = if prepared.applied(self.session.engine().text()) {
            EngineEvent::ChatRewound(prepared.event(tool_id))
        } else {
            failed("not cut: the chat changed meanwhile; nothing was changed".into())
        };
        (self.report)(Report::Event(event));
    }

    /// Undoes a compaction (`flemma/compactUndo`) through the session: the summary is replaced
    /// by the turns its archive holds (written like the engine's own edits, merged with what an
    /// editor types meanwhile); the archive goes once the file is written (an editor's buffer
    /// may be thrown away unsaved: its archive is kept).
    pub(super) fn restore(&mut self, line: Option<usize>) {
        let text = self.session.engine().text().to_owned();
        let restore = match crate::compaction::plan_undo(
            &self.services.context.dirs,
            self.id.path(),
            &text,
            line,
        ) {
            Ok(restore) => restore,
            Err(refused) => return self.compaction_failed(format!("not restored: {refused}")),
        };
        // The session is done again once the undo is written.
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        self.feed(Input::Rewrite {
            edits: vec![restore.edit()],
        });
        if !restore.applied(self.session.engine().text()) {
            return self.compaction_failed(
                "not restored: the chat changed meanwhile; nothing was changed".into(),
            );
        }
        let event = EngineEvent::ContextRestored(restore.event_data());
        self.restored.push(restore);
        (self.report)(Report::Event(event));
    }

    /// Compacts the chat by hand (`flemma/compact`): the summary is asked for now, and the
    /// driver does not end before it is back and written.
    pub fn compact(&mut self, order: crate::compaction::Order) {
        let text = self.session.engine().text().to_owned();
        let analysis = crate::analyses::analysis(&self.host, &self.id, true, |host| {
            host.change_text(&self.id, &text)
        });
        let analysis = match analysis {
            Ok(analysis) => analysis,
            Err(error) => return self.compaction_failed(format!("not compacted: {error}")),
        };
        let conversation = crate::context::request_conversation(&analysis).into_owned();
        let estimate = self
            .meter
            .estimate(&conversation, &self.provider.options.tools);
        match self.auto.manual(
            &text,
            &analysis,
            order,
            estimate,
            (&self.provider, &self.client),
            self.id.path(),
            &self.services.context,
        ) {
            Ok(task) => {
                self.compacting = true;
                let sender = self.sender.clone();
                tokio::task::spawn_local(async move {
                    let summary = task.await;
                    let _ = sender.send(Message::Compacted(Box::new(summary)));
                });
            }
            Err(why) => self.compaction_failed(format!("not compacted: {why}")),
        }
    }

    /// A compaction asked for by hand did not happen: its event (the editors' notice).
    pub(super) fn compaction_failed(&mut self, message: String) {
        (self.report)(Report::Event(EngineEvent::ContextCompactionFailed(
            flemma_protocol::event::CompactionFailed { message },
        )));
    }

    pub(super) fn compacted_by_hand(&mut self, summary: crate::compaction::AutoSummary) {
        self.compacting = false;
        let outcome = self.auto.finish(
            summary,
            &self.services.context.dirs,
            self.id.path(),
            self.session.engine().text(),
        );
        let (edit, next) = match outcome {
            Ok(done) => done,
            Err(why) => return self.compaction_failed(why),
        };
        // The session is done again once the compaction is written.
        if matches!(self.outcome, Some(Ok(_))) {
            self.outcome = None;
        }
        self.feed(Input::Rewrite { edits: vec![edit] });
        if !self.auto.applied(self.session.engine().text()) {
            return self.compaction_failed(
                "compaction: the chat changed while its summary was written; the chat is unchanged"
                    .into(),
            );
        }
        let after = crate::analyses::analysis(&self.host, &self.id, true, |host| {
            host.change_text(&self.id, &next)
        })
        .map(|analysis| {
            let conversation = crate::context::request_conversation(&analysis).into_owned();
            self.meter
                .estimate(&conversation, &self.provider.options.tools)
        })
        .unwrap_or(0);
        if let Some(event) = self.auto.compacted_event(after) {
            (self.report)(Report::Event(event));
        }
    }
}
