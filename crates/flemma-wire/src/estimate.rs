//! A local estimate of a request's input tokens, for providers without a counting endpoint
//! (the Codex backend, Chat Completions servers).
//!
//! It is an estimate, and every front end says so: no tokenizer is bundled (each model family
//! has its own). The request is built as it would be sent and its text is measured the way
//! byte-pair tokenizers tend to split English and code:
//!
//! * a run of ASCII letters or digits costs one token per 4 characters (rounded up);
//! * every other visible ASCII character (punctuation, operators) one token;
//! * every non-ASCII character (accents, CJK, emoji) one token;
//! * white space nothing (it joins the following token);
//! * every input item, message or tool four tokens of framing;
//! * an image or a PDF [`ATTACHMENT_TOKENS`] (its pixels and pages are not measured), and
//!   encrypted reasoning a quarter of its length (the reasoning it carries goes back in).
//!
//! On English prose this lands within about 10 % of the OpenAI tokenizers; on code and JSON it
//! tends to count a little high, which is the safe side for a context window.

use std::collections::HashMap;

use flemma_conversation::{Part, Parts};
use serde_json::Value;

use crate::{
    BuildError, Conversation, ProviderKind, RequestOptions, ToolDefinition, build_request,
};

/// Tokens counted for one attached image or PDF.
pub const ATTACHMENT_TOKENS: u64 = 765;

/// Framing tokens counted for every input item, message and tool.
const ITEM_TOKENS: u64 = 4;

/// The estimated input tokens of the request `conversation` makes with `options` (tools
/// included): the body `build_request` gives, measured as the module says.
pub fn estimate_input_tokens(
    kind: ProviderKind,
    conversation: &Conversation,
    options: &RequestOptions,
) -> Result<u64, BuildError> {
    let built = build_request(kind, conversation, options)?;
    let body: Value = serde_json::from_slice(&built.request.body).map_err(|error| {
        BuildError::InvalidRequest(format!(
            "the request body is not JSON ({error}); this is a bug in flemmad, please report it"
        ))
    })?;
    let mut tokens = 0;
    for key in ["instructions", "system", "systemInstruction"] {
        if let Some(value) = body.get(key) {
            tokens += measure(value);
        }
    }
    for key in ["input", "messages", "contents", "tools"] {
        if let Some(Value::Array(items)) = body.get(key) {
            tokens += items
                .iter()
                .map(|item| ITEM_TOKENS + measure(item))
                .sum::<u64>();
        }
    }
    Ok(tokens)
}

/// The tokens of the text inside a JSON value (keys that carry only structure are free).
fn measure(value: &Value) -> u64 {
    match value {
        Value::String(text) if is_attachment(text) => ATTACHMENT_TOKENS,
        Value::String(text) => text_tokens(text),
        Value::Array(items) => items.iter().map(measure).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match (key.as_str(), value) {
                // Structure, not text the model reads.
                ("type" | "role" | "id" | "call_id" | "status" | "strict", _) => 0,
                ("encrypted_content" | "signature" | "thoughtSignature", Value::String(blob)) => {
                    (blob.len() as u64).div_ceil(4)
                }
                ("data", Value::String(_)) if map.contains_key("mime_type") => ATTACHMENT_TOKENS,
                (_, value) => measure(value),
            })
            .sum(),
        Value::Number(number) => text_tokens(&number.to_string()),
        Value::Bool(_) | Value::Null => 0,
    }
}

/// A data URL (an image or a PDF sent inline).
fn is_attachment(text: &str) -> bool {
    text.starts_with("data:") && text.contains(";base64,")
}

/// The tokens of a text, by the rule of the module documentation.
pub fn text_tokens(text: &str) -> u64 {
    let mut tokens = 0;
    let mut run = 0u64;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            run += 1;
            continue;
        }
        tokens += run.div_ceil(4);
        run = 0;
        if !c.is_whitespace() {
            tokens += 1;
        }
    }
    tokens + run.div_ceil(4)
}

/// The context meter's estimate: the same rule as [`estimate_input_tokens`], measured on the
/// conversation's parts instead of a built request (no body is built or parsed), with each
/// message's count kept while the message is the same shared [`Parts`] — the template cache
/// reuses a message's parts after an edit elsewhere, so typing in the last message measures
/// that message again and nothing else.
///
/// It counts what a request holds: the system prompt, every message, the tools' definitions
/// (name, description and schema) and attachments ([`ATTACHMENT_TOKENS`] each). It differs from
/// [`estimate_input_tokens`] only in the framing of each provider's body (a few tokens per
/// message).
#[derive(Debug, Default)]
pub struct Meter {
    /// Keyed by the address of a message's shared parts, which the entry keeps alive (so the
    /// address cannot be reused by another message while it is here).
    messages: HashMap<usize, (Parts, u64)>,
    /// How many messages the last estimate measured (the others' counts were kept).
    measured: usize,
}

impl Meter {
    pub fn new() -> Self {
        Self::default()
    }

    /// The estimated input tokens of a request with `conversation` and `tools`. Messages
    /// measured by an earlier call and still shared are not measured again; those no longer in
    /// the conversation are forgotten.
    pub fn estimate(&mut self, conversation: &Conversation, tools: &[ToolDefinition]) -> u64 {
        let mut tokens: u64 = conversation.system.iter().map(part_tokens).sum();
        let mut seen = HashMap::with_capacity(conversation.messages.len());
        self.measured = 0;
        for message in &conversation.messages {
            let key = std::ptr::from_ref::<Vec<Part>>(&message.parts) as usize;
            let count = match self.messages.remove(&key) {
                Some(entry) => entry,
                None => {
                    self.measured += 1;
                    let count = ITEM_TOKENS + message.parts.iter().map(part_tokens).sum::<u64>();
                    (message.parts.clone(), count)
                }
            };
            tokens += count.1;
            seen.insert(key, count);
        }
        self.messages = seen;
        tokens
            + tools
                .iter()
                .map(|tool| {
                    ITEM_TOKENS
                        + text_tokens(&tool.name)
                        + text_tokens(&tool.description)
                        + measure(&tool.input_schema)
                })
                .sum::<u64>()
    }

    /// How many messages the last [`Meter::estimate`] measured (the others were kept).
    pub fn measured(&self) -> usize {
        self.measured
    }

    /// How many messages' counts are kept.
    pub fn cached(&self) -> usize {
        self.messages.len()
    }
}

/// The tokens of one part of a message.
fn part_tokens(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::TextFile { text, .. } => text_tokens(text),
        Part::Image { .. } | Part::Pdf { .. } => ATTACHMENT_TOKENS,
        Part::Thinking {
            text,
            signature,
            redacted,
        } => {
            let signed = signature.as_ref().map_or(0, |signature| {
                serde_json::to_string(signature).map_or(0, |s| s.len() as u64)
            });
            if *redacted {
                (text.len() as u64).div_ceil(4)
            } else {
                text_tokens(text) + signed.div_ceil(4)
            }
        }
        Part::ToolUse {
            name, raw_input, ..
        } => ITEM_TOKENS + text_tokens(name) + text_tokens(raw_input),
        Part::ToolResult { content, .. } => {
            ITEM_TOKENS + content.iter().map(part_tokens).sum::<u64>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_conversation::{Message, Part, Role};

    #[test]
    fn text_is_measured_by_runs() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("Hello, world!"), 2 + 1 + 2 + 1);
        assert_eq!(text_tokens("fn main() {}"), 1 + 1 + 4);
        assert_eq!(text_tokens("café"), 1 + 1);
    }

    #[test]
    fn a_request_is_measured_with_its_framing_and_attachments() {
        let conversation = Conversation {
            system: vec![Part::Text {
                text: "Be brief.".into(),
            }],
            messages: vec![Message {
                role: Role::User,
                parts: vec![
                    Part::Text {
                        text: "What is this?".into(),
                    },
                    Part::Image {
                        mime: "image/png".into(),
                        data: vec![0x89, b'P', b'N', b'G'],
                        path: "cat.png".into(),
                    },
                ]
                .into(),
                span: None,
            }],
        };
        let options = RequestOptions {
            model: "gpt-5.5".into(),
            max_tokens: 1000,
            ..RequestOptions::default()
        };
        let tokens = estimate_input_tokens(ProviderKind::Codex, &conversation, &options).unwrap();
        // "Be brief." (1 + 2 + 1 = 4) + one item (4) + "What is this?" (1 + 1 + 1 + 1 = 4)
        // + the image.
        assert_eq!(tokens, 4 + ITEM_TOKENS + 4 + ATTACHMENT_TOKENS);
        // The meter counts the same parts the same way (no body framing differs here).
        let mut meter = Meter::new();
        assert_eq!(
            meter.estimate(&conversation, &[]),
            4 + ITEM_TOKENS + 4 + ATTACHMENT_TOKENS
        );
    }

    fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::Text { text: text.into() }].into(),
            span: None,
        }
    }

    #[test]
    fn the_meter_measures_only_messages_it_has_not_seen() {
        let mut conversation = Conversation {
            system: Vec::new(),
            messages: vec![user("one two three"), user("four")],
        };
        let mut meter = Meter::new();
        let first = meter.estimate(&conversation, &[]);
        // "three" is a run of five characters: two tokens.
        assert_eq!(first, 2 * ITEM_TOKENS + 4 + 1);
        assert_eq!(meter.cached(), 2);
        assert_eq!(meter.measured(), 2);
        // An edit of the last message makes new parts there; the first message's parts are
        // the same shared ones, and its count is reused.
        let kept = conversation.messages[0].parts.clone();
        conversation.messages[1] = user("four five");
        assert_eq!(meter.estimate(&conversation, &[]), first + 1);
        assert_eq!(meter.measured(), 1, "only the edited message is measured");
        assert!(conversation.messages[0].parts.ptr_eq(&kept));
        assert_eq!(meter.cached(), 2, "the replaced message is forgotten");
        // Tools' definitions count.
        let tool = ToolDefinition {
            name: "bash".into(),
            description: "Run a command".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            strict: false,
            capabilities: Vec::new(),
            is_async: false,
        };
        let with_tool = meter.estimate(&conversation, std::slice::from_ref(&tool));
        assert!(with_tool > first + 1 + ITEM_TOKENS, "{with_tool}");
    }
}
