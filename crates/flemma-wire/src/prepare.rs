//! Provider-independent preparation of a conversation before it is turned into a body:
//! merging same-role messages, pairing tool uses with results (synthetic `No result provided`
//! errors for missing ones), and classifying thinking blocks as native or foreign.

use std::collections::{HashMap, HashSet};

use base64::Engine as _;
use flemma_conversation::{Conversation, Part, Role};

use crate::ProviderKind;

pub use flemma_conversation::MISSING_TOOL_RESULT as MISSING_RESULT_TEXT;

/// A merged turn.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub role: Role,
    pub parts: Vec<Part>,
}

/// The conversation ready for a body builder.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub system: String,
    pub turns: Vec<Turn>,
    /// Tool name of every tool use id (for providers whose results carry the name).
    pub tool_names: HashMap<String, String>,
}

fn is_empty_part(part: &Part) -> bool {
    match part {
        Part::Text { text } => text.is_empty(),
        Part::ToolResult { .. } | Part::ToolUse { .. } => false,
        Part::Thinking {
            text, signature, ..
        } => text.is_empty() && signature.is_none(),
        _ => false,
    }
}

fn orphan_result_text(tool_use_id: &str, content: &[Part], is_error: bool) -> Part {
    let label = if is_error { "error result" } else { "result" };
    Part::text(format!(
        "Tool {label} for `{tool_use_id}`:\n{}",
        Part::joined_text(content)
    ))
}

/// Merges, pairs and cleans the conversation.
pub(crate) fn prepare(conversation: &Conversation, warnings: &mut Vec<String>) -> Prepared {
    let mut system = String::new();
    for part in &conversation.system {
        match part {
            Part::Text { text } | Part::TextFile { text, .. } => system.push_str(text),
            Part::Image { path, .. } | Part::Pdf { path, .. } => warnings.push(format!(
                "attachments in the system prompt are not supported; {path} was left out (move it to a @You: message)"
            )),
            _ => {}
        }
    }

    let mut turns: Vec<Turn> = Vec::new();
    for message in &conversation.messages {
        let parts: Vec<Part> = message
            .parts
            .iter()
            .filter(|p| !is_empty_part(p))
            .cloned()
            .collect();
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == message.role => last.parts.extend(parts),
            _ => turns.push(Turn {
                role: message.role,
                parts,
            }),
        }
    }

    let mut tool_names = HashMap::new();
    for turn in &mut turns {
        if turn.role != Role::Assistant {
            continue;
        }
        for part in &turn.parts {
            if let Part::ToolUse { id, name, .. } = part {
                tool_names.insert(id.clone(), name.clone());
            }
        }
        turn.parts.retain(|p| !is_empty_part(p));
    }

    // Pair tool uses with results: the turn after an assistant turn with tool uses is a user
    // turn that starts with one result per use, in call order.
    let mut index = 0;
    while index < turns.len() {
        let expected: Vec<String> = if turns[index].role == Role::Assistant {
            turns[index]
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolUse { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        if turns[index].role == Role::User {
            // A user turn not answering tool uses: results in it are orphans.
            if index == 0 || turns[index - 1].role != Role::Assistant {
                orphan_results(&mut turns[index].parts, &HashSet::new());
            }
            index += 1;
            continue;
        }
        if expected.is_empty() {
            index += 1;
            continue;
        }
        if turns.get(index + 1).is_none_or(|t| t.role != Role::User) {
            turns.insert(
                index + 1,
                Turn {
                    role: Role::User,
                    parts: Vec::new(),
                },
            );
        }
        let next = &mut turns[index + 1];
        let mut results: Vec<Part> = Vec::new();
        for id in &expected {
            let found = next.parts.iter().position(
                |p| matches!(p, Part::ToolResult { tool_use_id, .. } if tool_use_id == id),
            );
            match found {
                Some(position) => results.push(next.parts.remove(position)),
                None => {
                    warnings.push(format!(
                        "tool use {id} has no result; sent \"{MISSING_RESULT_TEXT}\" as an error result"
                    ));
                    results.push(Part::ToolResult {
                        tool_use_id: id.clone(),
                        content: vec![Part::text(MISSING_RESULT_TEXT)],
                        is_error: true,
                    });
                }
            }
        }
        let known: HashSet<String> = expected.iter().cloned().collect();
        orphan_results(&mut next.parts, &known);
        results.append(&mut next.parts);
        next.parts = results;
        index += 2;
    }

    Prepared {
        system,
        turns,
        tool_names,
    }
}

/// Turns tool results whose id is not in `known` into text (a provider would reject them).
fn orphan_results(parts: &mut [Part], known: &HashSet<String>) {
    for part in parts.iter_mut() {
        if let Part::ToolResult {
            tool_use_id,
            content,
            is_error,
        } = part
        {
            if !known.contains(tool_use_id.as_str()) {
                *part = orphan_result_text(tool_use_id, content, *is_error);
            }
        }
    }
}

/// What to do with a thinking part for a given provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ThinkingUse {
    /// Signed by this provider: replay natively.
    Native { text: String, signature: String },
    /// Anthropic `redacted_thinking` replayed to Anthropic.
    NativeRedacted { data: String },
    /// Foreign or unsigned thinking with text: sent as plain context.
    ForeignText(String),
    /// Redacted or empty foreign thinking: dropped.
    Drop,
}

/// Classifies a thinking part for `kind`.
pub(crate) fn classify_thinking(
    kind: ProviderKind,
    text: &str,
    signature: Option<&flemma_conversation::ThinkingSignature>,
    redacted: bool,
) -> ThinkingUse {
    let native_provider = kind.signature_provider();
    if redacted {
        return if kind == ProviderKind::Anthropic {
            ThinkingUse::NativeRedacted {
                data: text.to_string(),
            }
        } else {
            ThinkingUse::Drop
        };
    }
    if let Some(signature) = signature {
        if !native_provider.is_empty()
            && signature.provider == native_provider
            && !signature.value.is_empty()
        {
            return ThinkingUse::Native {
                text: text.to_string(),
                signature: signature.value.clone(),
            };
        }
    }
    if text.trim().is_empty() {
        ThinkingUse::Drop
    } else {
        ThinkingUse::ForeignText(foreign_thinking_text(text))
    }
}

/// Thinking another provider produced, as the plain context it is sent as (Flemma 0.14): the
/// prose, then a `---` line before the reply. Not in `<thinking>` tags: models copy tags they
/// see into their own replies.
pub(crate) fn foreign_thinking_text(text: &str) -> String {
    format!("{}\n\n---", text.trim_end())
}

/// Standard base64 of `data`.
pub(crate) fn base64_encode(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A `data:` URL of `data`.
pub(crate) fn data_url(mime: &str, data: &[u8]) -> String {
    format!("data:{mime};base64,{}", base64_encode(data))
}

/// The file name of an attachment path.
pub(crate) fn file_name(path: &str) -> String {
    path.rsplit(['/', '\\'])
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or(path)
        .to_string()
}

/// The text sent in place of an attachment a provider cannot take.
pub(crate) fn unsupported_attachment_text(path: &str, what: &str, provider: &str) -> String {
    format!("[attachment {path}: {what} not supported by {provider}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_conversation::{Message, ThinkingSignature};
    use serde_json::json;

    fn message(role: Role, parts: Vec<Part>) -> Message {
        Message {
            role,
            parts: parts.into(),
            span: None,
        }
    }

    fn tool_use(id: &str) -> Part {
        Part::ToolUse {
            id: id.into(),
            name: "bash".into(),
            input: json!({}),
            raw_input: "{}".into(),
        }
    }

    fn result(id: &str) -> Part {
        Part::ToolResult {
            tool_use_id: id.into(),
            content: vec![Part::text("ok")],
            is_error: false,
        }
    }

    #[test]
    fn merges_roles_and_orders_results_first_in_call_order() {
        let conversation = Conversation {
            system: vec![Part::text("sys")],
            messages: vec![
                message(Role::User, vec![Part::text("a")]),
                message(Role::User, vec![Part::text("b")]),
                message(Role::Assistant, vec![tool_use("t1"), tool_use("t2")]),
                message(
                    Role::User,
                    vec![Part::text("note"), result("t2"), result("t1")],
                ),
            ],
        };
        let mut warnings = Vec::new();
        let prepared = prepare(&conversation, &mut warnings);
        assert!(warnings.is_empty());
        assert_eq!(prepared.turns.len(), 3);
        assert_eq!(prepared.turns[0].parts.len(), 2);
        assert_eq!(
            prepared.turns[2].parts,
            vec![result("t1"), result("t2"), Part::text("note")]
        );
    }

    #[test]
    fn missing_results_become_synthetic_errors() {
        let conversation = Conversation {
            system: vec![],
            messages: vec![
                message(Role::User, vec![Part::text("go")]),
                message(Role::Assistant, vec![tool_use("t1")]),
            ],
        };
        let mut warnings = Vec::new();
        let prepared = prepare(&conversation, &mut warnings);
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            prepared.turns[2].parts,
            vec![Part::ToolResult {
                tool_use_id: "t1".into(),
                content: vec![Part::text(MISSING_RESULT_TEXT)],
                is_error: true
            }]
        );
    }

    #[test]
    fn orphan_results_become_text() {
        let conversation = Conversation {
            system: vec![],
            messages: vec![message(Role::User, vec![result("ghost")])],
        };
        let prepared = prepare(&conversation, &mut Vec::new());
        assert_eq!(
            prepared.turns[0].parts,
            vec![Part::text("Tool result for `ghost`:\nok")]
        );
    }

    #[test]
    fn thinking_classification() {
        let anthropic = ThinkingSignature {
            provider: "anthropic".into(),
            value: "sig".into(),
        };
        assert_eq!(
            classify_thinking(ProviderKind::Anthropic, "t", Some(&anthropic), false),
            ThinkingUse::Native {
                text: "t".into(),
                signature: "sig".into()
            }
        );
        assert_eq!(
            classify_thinking(ProviderKind::Gemini, "t", Some(&anthropic), false),
            ThinkingUse::ForeignText("t\n\n---".into())
        );
        assert_eq!(
            classify_thinking(ProviderKind::OpenAi, "", Some(&anthropic), false),
            ThinkingUse::Drop
        );
        assert_eq!(
            classify_thinking(ProviderKind::OpenAi, "opaque", None, true),
            ThinkingUse::Drop
        );
        assert_eq!(
            classify_thinking(ProviderKind::Anthropic, "opaque", None, true),
            ThinkingUse::NativeRedacted {
                data: "opaque".into()
            }
        );
    }
}
