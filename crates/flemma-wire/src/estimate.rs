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

use serde_json::Value;

use crate::{BuildError, Conversation, ProviderKind, RequestOptions, build_request};

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
    }
}
