//! The text: the engine's own edits applied to its document (in the file's line-ending
//! convention, anchors moved through them), the user's edits (`Input::TextChanged`) mapped
//! through, and the settled prefix the cycle scans from.

use super::*;

impl Engine {
    /// Applies the engine's own edits (in the current coordinates, written with `\n` breaks) to
    /// the view in the document's line-ending convention and moves the stream's anchors.
    pub(super) fn apply(&mut self, edits: Vec<TextEdit>, out: &mut Vec<Effect>) {
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
    pub(super) fn localize(&self, mut edit: TextEdit) -> TextEdit {
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

    pub(super) fn apply_to_view(&mut self, edits: &[TextEdit], anchor_assoc: Assoc) {
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

    pub(super) fn text_changed(&mut self, edits: Vec<TextEdit>, out: &mut Vec<Effect>) {
        if !edits_fit(self.doc.text(), &edits) {
            out.push(Effect::Refused {
                message: format!(
                    "the change does not fit the engine's text ({} bytes): edits overlap, fall outside the text or split a character; send the whole new text as one edit",
                    self.doc.text().len()
                ),
            });
            return;
        }
        let pending = self.pending_before_change();
        self.apply_to_view(&edits, Assoc::Before);
        let tool_may_have_written = self.tool_ran;
        self.learn_approved_in_change(pending, tool_may_have_written, out);
        if self.running.is_empty() && self.jobs.active_count() == 0 {
            self.tool_ran = false;
        }
        if let Some(timer) = self.resume_timer.take() {
            out.push(Effect::CancelTimer { id: timer });
            emit(out, EngineEvent::AutopilotResumeCancelled(Empty {}));
        }
        if let Some(stream) = &self.stream {
            if !self.block_intact(stream) {
                let request = stream.request;
                self.stream = None;
                out.push(Effect::CancelRequest { request });
                emit(
                    out,
                    EngineEvent::RequestFinished(RequestFinished {
                        request_id: request.0,
                        status: RequestStatus::Cancelled,
                        accounted: None,
                        reason: Some("the reply being written was deleted".into()),
                    }),
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
    pub(super) fn block_intact(&self, stream: &ActiveStream) -> bool {
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
    pub(super) fn unsettle(&mut self, start: usize) {
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
    pub(super) fn settle(&mut self) {
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
    pub(super) fn placeholders(
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
}
