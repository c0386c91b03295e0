//! The reply streaming in (`Input::Stream`, `Input::StreamEnded`): rendered text written at the
//! reply's anchor, the end of the request (closing the reply, an error's message, the tool uses
//! it made), and the usage and cost of each request.

use super::*;

impl Engine {
    pub(super) fn stream_event(
        &mut self,
        request: RequestId,
        event: StreamEvent,
        out: &mut Vec<Effect>,
    ) {
        if let StreamEvent::RateLimits { limits } = &event {
            // The account's, not the reply's: kept even from a request that ends refused.
            if self.stream.as_ref().is_some_and(|s| s.request == request) {
                self.rate_limits = Some(limits.clone());
                emit(
                    out,
                    EngineEvent::RateLimitsUpdated(RateLimitsUpdated {
                        rate_limits: limits.clone(),
                    }),
                );
            }
            return;
        }
        let Some(stream) = self.stream.as_mut().filter(|s| s.request == request) else {
            return; // a late event of a cancelled request
        };
        let request_id = stream.request.0;
        match &event {
            StreamEvent::Usage { usage } => stream.usage.add(usage),
            StreamEvent::Error { message } => stream.error = Some(message.clone()),
            StreamEvent::ToolCallStart { index, id, name } => {
                stream.composing.insert(*index, (id.clone(), name.clone()));
                emit(
                    out,
                    EngineEvent::RequestComposing(ComposingCall {
                        request_id,
                        tool_id: id.clone(),
                        tool_name: name.clone(),
                        input: None,
                    }),
                );
            }
            StreamEvent::ToolCallEnd { index, arguments } => {
                stream.tool_uses += 1;
                if let Some((id, name)) = stream.composing.remove(index) {
                    // The input as the call's block will hold it (an object, else `{}`).
                    let input = serde_json::from_str::<Value>(arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
                    emit(
                        out,
                        EngineEvent::RequestComposed(ComposingCall {
                            request_id,
                            tool_id: id,
                            tool_name: name,
                            input: Some(input),
                        }),
                    );
                }
            }
            _ => {}
        }
        if let Some(text) = stream.renderer.push(&event) {
            self.write_at_anchor(&text, out);
        }
    }

    /// Inserts reply text at the anchor; the anchor moves past it.
    pub(super) fn write_at_anchor(&mut self, text: &str, out: &mut Vec<Effect>) {
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

    /// Writes the end of a reply (its tail and the closing `@You:`) at the anchor. Line breaks
    /// that are all that follows the anchor are replaced, not kept below it: an editor that
    /// ends every buffer with a line break (Neovim) adds one after streamed text that has none,
    /// and the chat must end as `flemmad send` ends it.
    pub(super) fn write_closing(&mut self, text: &str, out: &mut Vec<Effect>) {
        let Some(stream) = &self.stream else {
            return;
        };
        let after = self.doc.text().get(stream.anchor..).unwrap_or_default();
        if after.is_empty() || !after.chars().all(|c| c == '\n' || c == '\r') {
            return self.write_at_anchor(text, out);
        }
        let range = TextRange::new(stream.anchor, self.doc.text().len());
        let edit = self.localize(TextEdit::replace(range, text));
        self.apply_to_view(std::slice::from_ref(&edit), Assoc::After);
        out.push(Effect::Edit { edits: vec![edit] });
    }

    pub(super) fn stream_ended(
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
        let refused = matches!(outcome, StreamOutcome::Refused { .. });
        match outcome {
            StreamOutcome::Finished => {
                let tail = match self.stream.as_mut() {
                    Some(stream) => stream.renderer.finish(ReplyOutcome::Completed),
                    None => return,
                };
                self.write_closing(&format!("{tail}{}", write::closing_prompt()), out);
                let Some(stream) = self.stream.take() else {
                    return;
                };
                self.learn_reply_calls(stream.block_start, out);
                self.account(&stream, RequestStatus::Completed, out);
                if stream.tool_uses > 0 {
                    if self.config.autopilot {
                        self.advance(now, true, out);
                    } else {
                        self.stop(out, StopReason::StepDone);
                    }
                } else {
                    self.deliver_at_idle(now, out);
                    emit(out, EngineEvent::ConversationIdle(Empty {}));
                    self.stop(out, StopReason::Idle);
                }
            }
            StreamOutcome::Failed { message, .. } | StreamOutcome::Refused { message } => {
                self.end_interrupted(ReplyOutcome::Failed(message.clone()), out);
                if let Some(stream) = self.stream.take() {
                    self.account(&stream, RequestStatus::Errored, out);
                }
                let reason = if refused {
                    StopReason::Refused { message }
                } else {
                    StopReason::Error { message }
                };
                self.stop(out, reason);
            }
            StreamOutcome::Cancelled => {
                self.end_interrupted(ReplyOutcome::Interrupted, out);
                if let Some(stream) = self.stream.take() {
                    self.account(&stream, RequestStatus::Cancelled, out);
                }
                self.stop(out, StopReason::Cancelled);
            }
        }
    }

    /// Ends an interrupted reply: the abort marker and the closing prompt after content, or the
    /// `@Assistant:` line removed when nothing arrived.
    pub(super) fn end_interrupted(&mut self, outcome: ReplyOutcome, out: &mut Vec<Effect>) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        if stream.renderer.has_content() {
            let tail = stream.renderer.finish(outcome);
            self.write_closing(&format!("{tail}{}", write::closing_prompt()), out);
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
    pub(super) fn account(
        &mut self,
        stream: &ActiveStream,
        status: RequestStatus,
        out: &mut Vec<Effect>,
    ) {
        self.usage.add(&stream.usage);
        self.requests += 1;
        let cost = self.config.prices.map(|p| p.cost(&stream.usage));
        let saved = self
            .config
            .prices
            .map(|p| p.cache_effect(&stream.usage).saved);
        self.cost += cost.unwrap_or_default();
        self.cache_saved += saved.unwrap_or_default();
        emit(
            out,
            EngineEvent::RequestFinished(RequestFinished {
                request_id: stream.request.0,
                status,
                accounted: Some(Accounted {
                    usage: stream.usage.into(),
                    cost_usd: cost,
                    cache_saved_usd: saved,
                }),
                reason: None,
            }),
        );
        emit(
            out,
            EngineEvent::UsageUpdated(UsageUpdated {
                usage: self.usage.into(),
                requests: self.requests,
                cost_usd: self.cost(),
                cache_saved_usd: self.cache_saved(),
                rate_limits: self.rate_limits.clone(),
                // What the model had in context at the end of this request.
                context_tokens: stream.usage.input_tokens + stream.usage.output_tokens,
                context_window: self.config.context_window,
            }),
        );
    }
}
