//! A request: the text evaluated, what blocks it, the context window, an automatic compaction
//! first when the chat is past `context.compact_at`, then the reply streamed.

use flemma_conversation::StreamEvent;
use flemma_engine::session::Input;
use flemma_engine::{Input as EngineInput, RequestId, StreamOutcome};
use flemma_provider::explain::ProviderError;
use flemma_provider::http::ClientEvent;
use tokio_util::sync::CancellationToken;

use crate::engine_driver::decisions::{self};
use crate::engine_driver::{Driver, Message, Report};

impl Driver {
    /// Evaluates `text` (the chat when the request starts) and streams the reply.
    pub(super) fn start_request(&mut self, request: RequestId, text: String) {
        // Before the reply's first byte reaches the file: a process killed from now on leaves
        // a cut reply that the next driver marks as such.
        self.services.interruptions.reply_started(self.id.path());
        let sender = self.sender.clone();
        let fail = |message: String| {
            let _ = sender.send(Message::Session(Input::Engine(EngineInput::StreamEnded {
                request,
                outcome: StreamOutcome::Failed {
                    message,
                    retryable: false,
                },
            })));
        };
        // The document's analysis moves to this text by its changes (the template cache
        // evaluates only the messages they touch).
        let analysis = crate::analyses::analysis(&self.host, &self.id, true, |host| {
            host.change_text(&self.id, &text)
        });
        let analysis = match analysis {
            Ok(analysis) => analysis,
            Err(error) => return fail(error.to_string()),
        };
        let blockers = analysis.send_blockers();
        let messages: Vec<&str> = blockers.iter().map(|d| d.message.as_str()).collect();
        if let Some(why) = decisions::blocked(&messages) {
            return fail(why);
        }
        let conversation = crate::context::request_conversation(&analysis).into_owned();
        // A request that cannot fit the model's window is not sent (docs/context.md): the
        // estimate says when to ask, the provider's count (where it has one) decides.
        let estimate = self
            .meter
            .estimate(&conversation, &self.provider.options.tools);
        let window = self
            .provider
            .model
            .as_ref()
            .map_or(0, |model| model.context_window);
        let over_window = window > 0 && estimate > window;
        if let Some(resolved) = &analysis.config {
            self.context = Some(crate::context::status(
                estimate,
                crate::context::Counted::Estimate,
                &self.provider,
                &resolved.config.context,
            ));
        }
        if let Some(event) = self.auto.compacted_event(estimate) {
            (self.report)(Report::Event(event));
        }
        // Past `context.compact_at`, the older turns are compacted first (docs/context.md).
        let token = CancellationToken::new();
        match self.auto.start(
            request,
            &text,
            &analysis,
            estimate,
            (&self.provider, &self.client),
            self.id.path(),
            &self.services.context,
            token.clone(),
        ) {
            crate::compaction::AutoStart::Summarising(task) => {
                self.request = Some((request, token));
                let sender = self.sender.clone();
                tokio::task::spawn_local(async move {
                    let summary = task.await;
                    let _ = sender.send(Message::Compacted(Box::new(summary)));
                });
                return;
            }
            // Said once per driver, however many requests it concerns.
            crate::compaction::AutoStart::Cannot(why) => {
                if self.warned.first(&why) {
                    (self.report)(Report::Notice(why));
                }
            }
            crate::compaction::AutoStart::No => {}
        }
        let cannot = self.auto.cannot(request);
        self.request = Some((request, token.clone()));
        let client = self.client.clone();
        let provider = self.provider.clone();
        // The provider's observer is not `Send`: the stream runs on the driver's `LocalSet`.
        let dirs = self.services.context.dirs.clone();
        tokio::task::spawn_local(async move {
            let events = sender.clone();
            let send = |input: EngineInput| {
                let _ = events.send(Message::Session(Input::Engine(input)));
            };
            if over_window {
                let (used, counted) = if provider.kind.counts_tokens() {
                    match client
                        .count_tokens(
                            provider.kind,
                            &conversation,
                            &provider.options,
                            &provider.endpoint,
                            token.clone(),
                        )
                        .await
                    {
                        Ok(exact) => (exact, "exact"),
                        // The provider will say itself whether it fits.
                        Err(_) => (0, "exact"),
                    }
                } else {
                    (estimate, "estimate")
                };
                if used > window {
                    let mut message =
                        crate::context::too_long(used, window, &provider.options.model, counted);
                    if let Some(why) = cannot {
                        message.push_str(&format!(" (automatic compaction: {why})"));
                    }
                    send(EngineInput::StreamEnded {
                        request,
                        outcome: StreamOutcome::Failed {
                            message,
                            retryable: false,
                        },
                    });
                    return;
                }
            }
            let result = client
                .stream(
                    provider.kind,
                    &conversation,
                    &provider.options,
                    &provider.endpoint,
                    token,
                    &mut |event| match event {
                        ClientEvent::Event(event) => {
                            if let StreamEvent::RateLimits { limits } = &event {
                                crate::usage_report::remember(&dirs, provider.kind.name(), limits);
                            }
                            send(EngineInput::Stream { request, event })
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
                        let _ = sender.send(Message::Warning(warning.clone()));
                    }
                    summary.stop_error().map_or(StreamOutcome::Finished, failed)
                }
                Err(ProviderError::Cancelled) => StreamOutcome::Cancelled,
                Err(error) => failed(error),
            };
            let _ = sender.send(Message::Session(Input::Engine(EngineInput::StreamEnded {
                request,
                outcome,
            })));
        });
    }

    /// The summary of an automatic compaction is back: the compaction goes into the engine's
    /// text through the session (written like the engine's own edits, merged with what others
    /// change meanwhile), and the request starts on the compacted text; a failure, a cancel or
    /// a chat changed meanwhile leaves the text as it was.
    pub(super) fn compacted(&mut self, summary: crate::compaction::AutoSummary) {
        let Some(request) = summary.request else {
            return self.compacted_by_hand(summary);
        };
        let ours = match &self.request {
            Some((current, token)) if *current == request => !token.is_cancelled(),
            _ => return,
        };
        if !ours {
            self.feed(Input::Engine(EngineInput::StreamEnded {
                request,
                outcome: StreamOutcome::Cancelled,
            }));
            return;
        }
        self.request = None;
        let text = summary.text.clone();
        match self.auto.finish(
            summary,
            &self.services.context.dirs,
            self.id.path(),
            self.session.engine().text(),
        ) {
            Ok((edit, next)) => {
                self.feed(Input::Rewrite { edits: vec![edit] });
                if self.auto.applied(self.session.engine().text()) {
                    return self.start_request(request, next);
                }
                (self.report)(Report::Notice(
                    "automatic compaction: the chat changed while its summary was written; the chat is unchanged".into(),
                ));
            }
            Err(why) => (self.report)(Report::Notice(why)),
        }
        self.start_request(request, text);
    }
}

/// How a provider's error ends a stream: a refusal as such, anything else as a failure.
fn failed(error: ProviderError) -> StreamOutcome {
    let message = error.to_string();
    match error {
        ProviderError::Refusal { .. } => StreamOutcome::Refused { message },
        _ => StreamOutcome::Failed {
            message,
            retryable: false,
        },
    }
}
