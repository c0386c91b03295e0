//! The provider-neutral conversation: what a `.chat` document means once its templates are
//! evaluated, and what a provider turns into a request body.
//!
//! `flemma-template` produces a [`Conversation`] from a parsed document; `flemma-provider`
//! consumes it. Nothing here does IO. Every type serialises to the stable JSON printed by
//! `flemmad parse --eval --json` (documented in `protocol/eval.md`).

use serde::{Deserialize, Serialize};

mod bytes_b64;
mod parts;

pub use parts::Parts;

/// The error result sent for a tool use that has no result at send time (`chat-format.md` §3.1).
pub const MISSING_TOOL_RESULT: &str = "No result provided";

/// A byte range in the `.chat` file a part came from (for diagnostics and go-to-definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceSpan {
    pub start: usize,
    pub end: usize,
}

/// The whole conversation, ready for a provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conversation {
    /// The system prompt: the evaluated text of the last `@System:` message (empty parts when none).
    pub system: Vec<Part>,
    /// User and assistant turns in file order. Consecutive messages of the same role are kept
    /// separate here; providers merge them when their API requires alternation.
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Message {
    pub role: Role,
    /// Shared between evaluations: cloning a message (a cached one, reused after an edit
    /// elsewhere) copies a pointer, not its text.
    #[schemars(with = "Vec<Part>")]
    pub parts: Parts,
    /// Where the message stands in the `.chat` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<SourceSpan>,
}

/// The provider a thinking signature belongs to, as written in `<thinking PROVIDER:signature="…">`.
/// `vertex` covers both the Gemini API and Vertex AI (one model family).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThinkingSignature {
    /// `anthropic`, `openai` or `vertex` (any other word is kept and treated as foreign).
    pub provider: String,
    /// The opaque payload, exactly as written in the file.
    pub value: String,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    /// An image attachment (from `@./file.png` or `include(…, #{binary: true})`).
    Image {
        mime: String,
        #[serde(with = "bytes_b64")]
        #[schemars(with = "String")]
        data: Vec<u8>,
        /// The path as written in the file (for diagnostics and fallbacks).
        path: String,
    },
    /// A PDF attachment.
    Pdf {
        #[serde(with = "bytes_b64")]
        #[schemars(with = "String")]
        data: Vec<u8>,
        path: String,
    },
    /// A text file attachment, embedded as text.
    TextFile {
        mime: String,
        text: String,
        path: String,
    },
    /// Model reasoning. Providers put native signed blocks back first; foreign ones are sent as
    /// text or dropped (see `chat-format.md` §2.2).
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<ThinkingSignature>,
        /// Anthropic `redacted_thinking`: `text` is the opaque data.
        #[serde(default)]
        redacted: bool,
    },
    /// A tool call the model made.
    ToolUse {
        id: String,
        /// Namespaced with `.` (`flemma.jobs.status`), never with `:` or `__`.
        name: String,
        /// The parsed input (an object; `{}` when the file held invalid JSON).
        input: serde_json::Value,
        /// The input exactly as written in the file, replayed verbatim where a provider sends
        /// argument strings (OpenAI) for prompt-cache stability.
        raw_input: String,
    },
    /// The result of a tool call, sent back to the model.
    ToolResult {
        tool_use_id: String,
        /// Text and attachments (attachments only for tools that emit templates, like `read`).
        content: Vec<Part>,
        #[serde(default)]
        is_error: bool,
    },
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// The concatenated text of a list of parts (attachments are skipped).
    pub fn joined_text(parts: &[Part]) -> String {
        let mut out = String::new();
        for part in parts {
            match part {
                Part::Text { text } | Part::TextFile { text, .. } => out.push_str(text),
                _ => {}
            }
        }
        out
    }
}

impl Conversation {
    /// Every tool use in the conversation, in order, as `(message index, part)`.
    pub fn tool_uses(&self) -> impl Iterator<Item = (usize, &Part)> {
        self.messages.iter().enumerate().flat_map(|(i, m)| {
            m.parts
                .iter()
                .filter(|p| matches!(p, Part::ToolUse { .. }))
                .map(move |p| (i, p))
        })
    }
}

/// The reason a model stopped, normalised across providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Refusal { reason: String },
    ContextWindowExceeded,
    Other { reason: String },
}

/// Token usage of one request, normalised across providers.
///
/// `input` counts every prompt token (uncached + cache read + cache write), `output` every
/// generated token including thinking, `thinking` the reasoning part of `output` when known.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub thinking_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl From<Usage> for flemma_protocol::event::TokenUsage {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            thinking_tokens: usage.thinking_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
        }
    }
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.thinking_tokens += other.thinking_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// A subscription's rate limits as the provider last reported them (the Codex backend: a
/// 5-hour and a weekly window): the stable form of `flemma/usage` and `status --json`, one type
/// from the provider's decoder to the editor.
pub use flemma_protocol::engine::{RateLimitWindow, RateLimits};

/// One event of a streamed reply, the same for every provider. Decoders in `flemma-provider`
/// produce these; the reply renderer turns them into `.chat` text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        text: String,
    },
    /// The signature of the thinking block streamed so far (Anthropic `signature_delta`, OpenAI
    /// reasoning item, Gemini `thoughtSignature`).
    ThinkingSignature {
        signature: ThinkingSignature,
    },
    /// A whole redacted thinking block (Anthropic `redacted_thinking`).
    RedactedThinking {
        data: String,
    },
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArgsDelta {
        index: usize,
        json: String,
    },
    /// The call is complete; `arguments` is the full argument string as the provider sent it.
    ToolCallEnd {
        index: usize,
        arguments: String,
    },
    Usage {
        usage: Usage,
    },
    /// The subscription's rate limits, as the response reported them (the Codex backend's
    /// `x-codex-*` headers). Not part of the reply's text.
    RateLimits {
        limits: RateLimits,
    },
    Stop {
        reason: StopReason,
    },
    /// A provider error after the stream started (the stream ends after it).
    Error {
        message: String,
    },
}
