//! The reply renderer: turns the [`StreamEvent`]s of one reply into `.chat` text, as
//! `chat-format.md` §2 and §4 say.
//!
//! Text is returned as it arrives (leading line breaks of the reply and trailing ones of each
//! delta are held back, so the reply never starts or ends with stray blank lines); each tool use
//! becomes a `**Tool Use:**` block with a blank line before it; thinking is collected and written
//! at the end by [`ReplyRenderer::finish`] (signed and unsigned blocks first, then redacted ones),
//! followed by the abort marker when the reply was interrupted. The caller writes the
//! `@Assistant:` line before and the closing `\n@You:\n\n` after. All block text comes from
//! [`flemma_syntax::write`]; this module never builds a fence itself.

use std::collections::BTreeMap;

use flemma_conversation::{StreamEvent, ThinkingSignature};
use flemma_syntax::write::{
    ABORT_MARKER, AssistantText, canonical_json, provider_error_marker, thinking_block,
    tool_use_block,
};

use crate::ProviderKind;

/// How a reply ended, for [`ReplyRenderer::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyOutcome {
    /// The stream ended normally.
    Completed,
    /// The user cancelled it: the abort marker "Response interrupted by the user." is written
    /// when there is content.
    Interrupted,
    /// The provider failed after content arrived: an abort marker saying so, with the error
    /// (see [`flemma_syntax::write::provider_error_marker`]), is written when there is content.
    Failed(String),
}

#[derive(Debug, Clone, Default)]
struct ThinkingBlock {
    text: String,
    signature: Option<ThinkingSignature>,
    redacted: bool,
}

#[derive(Debug, Clone, Default)]
struct PendingCall {
    id: String,
    name: String,
}

/// Renders one assistant reply. Pure: feed it events, append what it returns.
#[derive(Debug, Clone)]
pub struct ReplyRenderer {
    compact_headers: bool,
    verbatim_arguments: bool,
    /// Something was returned already.
    written: bool,
    /// The last text returned does not end with a line break.
    line_open: bool,
    /// Line breaks at the end of the text so far, held back.
    held_newlines: usize,
    calls: BTreeMap<usize, PendingCall>,
    thinking: Vec<ThinkingBlock>,
    /// The last thinking block is still receiving text (no signature yet).
    thinking_open: bool,
    /// Keeps the model's text text (escapes structure lines, closes fences left open).
    text_guard: AssistantText,
}

impl ReplyRenderer {
    /// A renderer writing compact headers (no blank line between a tool header and its fence)
    /// when `compact_headers` is true. Tool inputs are written as compact JSON with sorted keys.
    pub fn new(compact_headers: bool) -> Self {
        ReplyRenderer {
            compact_headers,
            verbatim_arguments: false,
            written: false,
            line_open: false,
            held_newlines: 0,
            calls: BTreeMap::new(),
            thinking: Vec::new(),
            thinking_open: false,
            text_guard: AssistantText::new(),
        }
    }

    /// A renderer for a provider: providers that send argument strings (OpenAI Responses, Chat
    /// Completions, Moonshot) get them written verbatim, for prompt-cache stability.
    pub fn for_provider(kind: ProviderKind, compact_headers: bool) -> Self {
        let mut renderer = ReplyRenderer::new(compact_headers);
        renderer.verbatim_arguments = matches!(
            kind,
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible | ProviderKind::Moonshot
        );
        renderer
    }

    /// Whether anything (text, a tool use, thinking) has arrived. When a cancelled reply has
    /// none, the caller removes the `@Assistant:` line.
    pub fn has_content(&self) -> bool {
        self.written || !self.thinking.is_empty()
    }

    /// Takes one event; returns the text to append now, if any.
    pub fn push(&mut self, event: &StreamEvent) -> Option<String> {
        match event {
            StreamEvent::TextDelta { text } => self.text(text),
            StreamEvent::ThinkingDelta { text } => {
                if !self.thinking_open {
                    self.thinking.push(ThinkingBlock::default());
                    self.thinking_open = true;
                }
                if let Some(block) = self.thinking.last_mut() {
                    block.text.push_str(text);
                }
                None
            }
            StreamEvent::ThinkingSignature { signature } => {
                if !self.thinking_open {
                    self.thinking.push(ThinkingBlock::default());
                }
                if let Some(block) = self.thinking.last_mut() {
                    block.signature = Some(signature.clone());
                }
                self.thinking_open = false;
                None
            }
            StreamEvent::RedactedThinking { data } => {
                self.thinking.push(ThinkingBlock {
                    text: data.clone(),
                    signature: None,
                    redacted: true,
                });
                self.thinking_open = false;
                None
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.calls.insert(
                    *index,
                    PendingCall {
                        id: id.clone(),
                        name: name.clone(),
                    },
                );
                None
            }
            StreamEvent::ToolCallEnd { index, arguments } => {
                let call = self.calls.remove(index).unwrap_or_default();
                self.tool_use(&call, arguments)
            }
            StreamEvent::ToolCallArgsDelta { .. }
            | StreamEvent::Usage { .. }
            | StreamEvent::RateLimits { .. }
            | StreamEvent::Stop { .. }
            | StreamEvent::Error { .. } => None,
        }
    }

    /// The trailing text of the reply: collected thinking, the abort marker when interrupted
    /// with content, and the line break that ends the last line. Empty when nothing arrived.
    pub fn finish(&mut self, outcome: ReplyOutcome) -> String {
        let mut out = self.text_guard.close();
        let thinking = std::mem::take(&mut self.thinking);
        let mut blocks: Vec<&ThinkingBlock> = thinking.iter().filter(|b| !b.redacted).collect();
        blocks.extend(thinking.iter().filter(|b| b.redacted));
        let has_thinking = !blocks.is_empty();
        for (position, block) in blocks.into_iter().enumerate() {
            if position == 0 {
                let separator = self.block_separator();
                out.push_str(&separator);
            } else {
                out.push('\n');
            }
            let signature = block
                .signature
                .as_ref()
                .map(|s| (s.provider.as_str(), s.value.as_str()));
            out.push_str(&thinking_block(&block.text, signature, block.redacted));
        }
        if has_thinking {
            self.written = true;
            self.line_open = false;
        }
        let marker = match &outcome {
            ReplyOutcome::Completed => None,
            ReplyOutcome::Interrupted => Some(ABORT_MARKER.to_string()),
            ReplyOutcome::Failed(error) => Some(provider_error_marker(error)),
        };
        if let (Some(marker), true) = (marker, self.written) {
            let separator = self.block_separator();
            out.push_str(&separator);
            out.push_str(&marker);
            out.push('\n');
            self.line_open = false;
        }
        if self.line_open {
            out.push('\n');
            self.line_open = false;
        }
        self.held_newlines = 0;
        self.calls.clear();
        self.thinking.clear();
        self.thinking_open = false;
        out
    }

    fn text(&mut self, text: &str) -> Option<String> {
        let text = if self.written {
            text
        } else {
            text.trim_start_matches(['\n', '\r'])
        };
        let body = text.trim_end_matches('\n');
        let trailing = text.len() - body.len();
        if body.is_empty() {
            if self.written {
                self.held_newlines += trailing;
            }
            return None;
        }
        let mut out = String::new();
        if self.written && !self.line_open {
            // After a block: a blank line before the text.
            out.push('\n');
        } else {
            out.push_str(&"\n".repeat(self.held_newlines));
        }
        out.push_str(body);
        self.held_newlines = trailing;
        self.written = true;
        self.line_open = true;
        Some(self.text_guard.push(&out))
    }

    /// What goes before a block so that a blank line precedes it: the end of the text run (a
    /// held line start, the closing line of a fence the model left open), then line breaks.
    fn block_separator(&mut self) -> String {
        self.held_newlines = 0;
        let mut out = self.text_guard.close();
        out.push_str(match (self.written, self.line_open) {
            (false, _) => "",
            (true, true) => "\n\n",
            (true, false) => "\n",
        });
        out
    }

    /// The tool use block of a finished call; `None` (nothing written) when its name or id is
    /// not one the writer accepts. The stream decoder refuses such a reply before it gets here
    /// (`crate::check`); this is the writer's own defence.
    fn tool_use(&mut self, call: &PendingCall, arguments: &str) -> Option<String> {
        let input = if arguments.trim().is_empty() {
            "{}".to_string()
        } else if self.verbatim_arguments {
            arguments.to_string()
        } else {
            match serde_json::from_str::<serde_json::Value>(arguments) {
                Ok(value) => canonical_json(&value),
                // Kept as received: the parser flags it, and nothing the model sent is lost.
                Err(_) => arguments.to_string(),
            }
        };
        let name = if call.name.is_empty() {
            "unknown".to_string()
        } else {
            // Decoded by the stream decoder already (`ToolNames`), exactly.
            call.name.clone()
        };
        let block = tool_use_block(&name, &call.id, &input, self.compact_headers)?;
        let mut out = self.block_separator();
        out.push_str(&block);
        self.written = true;
        self.line_open = false;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn render(
        renderer: &mut ReplyRenderer,
        events: &[StreamEvent],
        outcome: ReplyOutcome,
    ) -> String {
        let mut out = String::new();
        for event in events {
            if let Some(text) = renderer.push(event) {
                out.push_str(&text);
            }
        }
        out.push_str(&renderer.finish(outcome));
        out
    }

    fn text(t: &str) -> StreamEvent {
        StreamEvent::TextDelta {
            text: t.to_string(),
        }
    }

    fn call(index: usize, id: &str, name: &str, arguments: &str) -> Vec<StreamEvent> {
        vec![
            StreamEvent::ToolCallStart {
                index,
                id: id.to_string(),
                name: name.to_string(),
            },
            StreamEvent::ToolCallArgsDelta {
                index,
                json: arguments.to_string(),
            },
            StreamEvent::ToolCallEnd {
                index,
                arguments: arguments.to_string(),
            },
        ]
    }

    fn signature(provider: &str, value: &str) -> StreamEvent {
        StreamEvent::ThinkingSignature {
            signature: ThinkingSignature {
                provider: provider.to_string(),
                value: value.to_string(),
            },
        }
    }

    #[test]
    fn plain_text_ends_its_line() {
        let mut renderer = ReplyRenderer::new(true);
        let out = render(
            &mut renderer,
            &[text("\n\nOl"), text("á!\n"), text("\n")],
            ReplyOutcome::Completed,
        );
        assert_eq!(out, "Olá!\n");
    }

    #[test]
    fn paragraphs_keep_their_blank_lines() {
        let mut renderer = ReplyRenderer::new(true);
        let out = render(
            &mut renderer,
            &[text("One.\n\n"), text("Two.")],
            ReplyOutcome::Completed,
        );
        assert_eq!(out, "One.\n\nTwo.\n");
    }

    #[test]
    fn text_then_parallel_tool_uses_with_sorted_keys() {
        let mut renderer = ReplyRenderer::for_provider(ProviderKind::Anthropic, true);
        let mut events = vec![text("I'll add and multiply 2 and 3.")];
        events.extend(call(1, "toolu_A", "add", r#"{"b": 3, "a": 2}"#));
        events.extend(call(
            2,
            "toolu_B",
            "flemma.jobs.status",
            r#"{"job_id":"job_x"}"#,
        ));
        let out = render(&mut renderer, &events, ReplyOutcome::Completed);
        assert_eq!(
            out,
            "I'll add and multiply 2 and 3.\n\n\
             **Tool Use:** `add` (`toolu_A`)\n```json\n{\"a\":2,\"b\":3}\n```\n\n\
             **Tool Use:** `flemma.jobs.status` (`toolu_B`)\n```json\n{\"job_id\":\"job_x\"}\n```\n"
        );
    }

    #[test]
    fn openai_arguments_are_verbatim_and_loose_headers_have_a_gap() {
        let mut renderer = ReplyRenderer::for_provider(ProviderKind::OpenAi, false);
        let out = render(
            &mut renderer,
            &call(0, "call_1", "add", r#"{"b": 3, "a": 2}"#),
            ReplyOutcome::Completed,
        );
        assert_eq!(
            out,
            "**Tool Use:** `add` (`call_1`)\n\n```json\n{\"b\": 3, \"a\": 2}\n```\n"
        );
    }

    #[test]
    fn thinking_goes_at_the_end_signed_first_then_redacted() {
        let mut renderer = ReplyRenderer::new(true);
        let events = vec![
            StreamEvent::RedactedThinking {
                data: "EmwKAhgB".to_string(),
            },
            StreamEvent::ThinkingDelta {
                text: "The user is asking".to_string(),
            },
            StreamEvent::ThinkingDelta {
                text: " for weather.".to_string(),
            },
            signature("anthropic", "EtYD"),
            text("It is 40 °C."),
        ];
        let out = render(&mut renderer, &events, ReplyOutcome::Completed);
        assert_eq!(
            out,
            "It is 40 °C.\n\n\
             <thinking anthropic:signature=\"EtYD\">\nThe user is asking for weather.\n</thinking>\n\n\
             <thinking redacted>\nEmwKAhgB\n</thinking>\n"
        );
    }

    #[test]
    fn signature_without_text_is_self_closing_and_unsigned_is_plain() {
        let mut renderer = ReplyRenderer::for_provider(ProviderKind::OpenAi, true);
        let out = render(
            &mut renderer,
            &[signature("openai", "eyJ0"), text("Oi!")],
            ReplyOutcome::Completed,
        );
        assert_eq!(out, "Oi!\n\n<thinking openai:signature=\"eyJ0\"/>\n");

        let mut renderer = ReplyRenderer::for_provider(ProviderKind::OpenAiCompatible, true);
        let mut events = vec![StreamEvent::ThinkingDelta {
            text: "We need to call weather.".to_string(),
        }];
        events.extend(call(
            0,
            "g2KO",
            "weather",
            r#"{"location":"Florence, Italy"}"#,
        ));
        let out = render(&mut renderer, &events, ReplyOutcome::Completed);
        assert_eq!(
            out,
            "**Tool Use:** `weather` (`g2KO`)\n```json\n{\"location\":\"Florence, Italy\"}\n```\n\n\
             <thinking>\nWe need to call weather.\n</thinking>\n"
        );
    }

    #[test]
    fn interrupted_replies_get_the_abort_marker_only_with_content() {
        let mut renderer = ReplyRenderer::new(true);
        let out = render(
            &mut renderer,
            &[text("Разбира се, 15 по 7\n")],
            ReplyOutcome::Interrupted,
        );
        assert_eq!(out, format!("Разбира се, 15 по 7\n\n{ABORT_MARKER}\n"));

        let mut renderer = ReplyRenderer::new(true);
        let out = render(&mut renderer, &[text("\n")], ReplyOutcome::Interrupted);
        assert_eq!(out, "");
        assert!(!renderer.has_content());

        // A tool call that never completed is dropped.
        let mut renderer = ReplyRenderer::new(true);
        let events = vec![
            text("Running"),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "toolu_1".to_string(),
                name: "bash".to_string(),
            },
            StreamEvent::ToolCallArgsDelta {
                index: 0,
                json: "{\"comm".to_string(),
            },
        ];
        let out = render(&mut renderer, &events, ReplyOutcome::Interrupted);
        assert_eq!(out, format!("Running\n\n{ABORT_MARKER}\n"));
    }

    #[test]
    fn a_provider_error_is_recorded_as_such_not_as_the_users_interruption() {
        let mut renderer = ReplyRenderer::new(true);
        let out = render(
            &mut renderer,
            &[text("Half an answer")],
            ReplyOutcome::Failed("HTTP 529: overloaded".to_string()),
        );
        assert_eq!(
            out,
            "Half an answer\n\n<!-- flemma:aborted: Response cut off by a provider error: HTTP 529: overloaded -->\n"
        );
        assert!(!out.contains("interrupted by the user"));
        let doc = flemma_syntax::parse(format!("@You:\nq\n@Assistant:\n{out}@You:\n"));
        let aborted = doc
            .messages()
            .iter()
            .flat_map(|m| m.segments.iter())
            .find_map(|s| match &s.kind {
                flemma_syntax::SegmentKind::Aborted(aborted) => Some(aborted.message.clone()),
                _ => None,
            });
        assert!(
            aborted
                .as_deref()
                .is_some_and(flemma_syntax::write::is_provider_error_abort),
            "{aborted:?}"
        );
    }

    #[test]
    fn fences_grow_around_backticks_in_inputs() {
        let mut renderer = ReplyRenderer::new(true);
        let out = render(
            &mut renderer,
            &call(0, "toolu_1", "write", r#"{"content":"```python\nx\n```"}"#),
            ReplyOutcome::Completed,
        );
        assert!(out.contains("````json\n"), "{out}");
    }

    #[test]
    fn text_after_a_tool_use_is_separated_by_a_blank_line() {
        let mut renderer = ReplyRenderer::new(true);
        let mut events = call(0, "toolu_1", "ls", "");
        events.push(text("Done."));
        let out = render(&mut renderer, &events, ReplyOutcome::Completed);
        assert_eq!(
            out,
            "**Tool Use:** `ls` (`toolu_1`)\n```json\n{}\n```\n\nDone.\n"
        );
    }

    proptest! {
        #[test]
        fn any_split_of_the_text_renders_the_same(
            full in "[a-z \\n`é]{0,80}",
            cuts in proptest::collection::vec(0usize..80, 0..8),
        ) {
            let mut whole = ReplyRenderer::new(true);
            let expected = render(&mut whole, &[text(&full)], ReplyOutcome::Completed);

            let chars: Vec<char> = full.chars().collect();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(chars.len())).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for point in points.into_iter().chain(std::iter::once(chars.len())) {
                pieces.push(text(&chars[start..point].iter().collect::<String>()));
                start = point;
            }
            let mut split = ReplyRenderer::new(true);
            let actual = render(&mut split, &pieces, ReplyOutcome::Completed);
            prop_assert_eq!(actual, expected);
        }

        /// Whatever the model writes, its text stays text in the file: no role line, tool
        /// header, thinking tag or abort marker appears, no fence is left open, and removing
        /// the escapes gives the model's text back.
        #[test]
        fn model_text_never_becomes_structure(
            pieces in proptest::collection::vec(proptest::prop_oneof![
                Just("@You:\n".to_owned()), Just("@Assistant:\r\n".to_owned()), Just("@".to_owned()),
                Just("You:".to_owned()), Just("**Tool Use:** `a` (`b`)\n".to_owned()),
                Just("**Tool".to_owned()), Just(" Use:**".to_owned()),
                Just("<thinking>\n".to_owned()), Just("</thinking>\n".to_owned()),
                Just("<!-- flemma:aborted: x -->\n".to_owned()),
                Just("```\n".to_owned()), Just("````rust\n".to_owned()), Just("{}\n".to_owned()),
                "[a-z \n]{0,10}",
            ], 0..30),
            thinking in "[a-z@:<>/\n]{0,20}",
        ) {
            let mut renderer = ReplyRenderer::new(true);
            let mut events: Vec<StreamEvent> = pieces.iter().map(|p| text(p)).collect();
            events.push(StreamEvent::ThinkingDelta { text: thinking.clone() });
            let out = render(&mut renderer, &events, ReplyOutcome::Completed);
            let file = format!("@You:\nhi\n\n@Assistant:\n{out}\n@You:\n\n");
            let doc = flemma_syntax::parse(file.as_str());
            prop_assert_eq!(doc.messages().len(), 3, "{}", file);
            let assistant = &doc.messages()[1];
            let thinking_blocks = assistant
                .segments
                .iter()
                .filter(|s| matches!(s.kind, flemma_syntax::SegmentKind::Thinking(_)))
                .count();
            prop_assert!(
                assistant.segments.iter().all(|s| matches!(
                    s.kind,
                    flemma_syntax::SegmentKind::Text | flemma_syntax::SegmentKind::Thinking(_)
                )),
                "{}",
                file
            );
            prop_assert!(thinking_blocks <= 1, "{}", file);
            prop_assert!(
                !doc.diagnostics().iter().any(|d| d.code == flemma_syntax::DiagnosticCode::UnclosedFence),
                "{}",
                file
            );
            let unescaped = flemma_syntax::write::unescape_model_text(&out).into_owned();
            let model_text: String = pieces.concat();
            let model_text = model_text.trim_start_matches(['\n', '\r']).trim_end_matches('\n');
            prop_assert!(
                unescaped.starts_with(model_text.trim_end_matches('\n')),
                "{:?} does not start with {:?}",
                unescaped,
                model_text
            );
        }
    }
}
