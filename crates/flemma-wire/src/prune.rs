//! Pruning old tool results from a request, not from the file (docs/context.md): the results
//! of every tool cycle but the last `keep` ones are replaced in the conversation sent by a short
//! placeholder that says where the whole result is, so the model can read it again.

use flemma_conversation::{Conversation, Part, Role};

/// The conversation with the tool results older than the last `keep` tool cycles (an assistant
/// message with tool calls, and the results answering them) replaced by a placeholder naming
/// the line of the chat `text` that holds the whole result. `keep == 0` prunes nothing.
pub fn prune_tool_results(conversation: &Conversation, keep: usize, text: &str) -> Conversation {
    if keep == 0 {
        return conversation.clone();
    }
    // The tool uses of the last `keep` cycles.
    let mut kept_ids = std::collections::HashSet::new();
    let mut cycles = 0;
    for message in conversation.messages.iter().rev() {
        if message.role != Role::Assistant {
            continue;
        }
        let ids: Vec<&str> = message
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if ids.is_empty() {
            continue;
        }
        if cycles == keep {
            break;
        }
        cycles += 1;
        kept_ids.extend(ids);
    }
    let mut pruned = conversation.clone();
    for message in &mut pruned.messages {
        let prunable = message.parts.iter().any(|part| {
            matches!(part, Part::ToolResult { tool_use_id, content, .. }
                if !kept_ids.contains(tool_use_id.as_str()) && !content.is_empty())
        });
        if !prunable {
            continue;
        }
        let line = message.span.map(|span| line_of(text, span.start));
        for part in message.parts.iter_mut() {
            if let Part::ToolResult {
                tool_use_id,
                content,
                ..
            } = part
                && !kept_ids.contains(tool_use_id.as_str())
            {
                let (lines, bytes) = content.iter().fold((0, 0), |(l, b), part| match part {
                    Part::Text { text } | Part::TextFile { text, .. } => {
                        (l + text.lines().count(), b + text.len())
                    }
                    _ => (l, b),
                });
                let place = line.map_or_else(String::new, |line| {
                    format!(" in the chat's message at line {line}")
                });
                *content = vec![Part::Text {
                    text: format!(
                        "[flemmad left this result of `{tool_use_id}` out of the request to save context ({lines} lines, {bytes} bytes): the whole result is{place}; run the call again or `read` what it produced if you need it]"
                    ),
                }];
            }
        }
    }
    pruned
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    1 + memchr::memchr_iter(b'\n', &text.as_bytes()[..end]).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_conversation::{Message, SourceSpan};

    fn message(role: Role, parts: Vec<Part>, start: usize) -> Message {
        Message {
            role,
            parts: parts.into(),
            span: Some(SourceSpan { start, end: start }),
        }
    }

    fn cycle(id: &str, output: &str, start: usize) -> [Message; 2] {
        [
            message(
                Role::Assistant,
                vec![Part::ToolUse {
                    id: id.into(),
                    name: "bash".into(),
                    input: serde_json::json!({}),
                    raw_input: "{}".into(),
                }],
                start,
            ),
            message(
                Role::User,
                vec![Part::ToolResult {
                    tool_use_id: id.into(),
                    content: vec![Part::Text {
                        text: output.into(),
                    }],
                    is_error: false,
                }],
                start + 2,
            ),
        ]
    }

    #[test]
    fn results_before_the_last_cycles_become_placeholders() {
        let mut messages = vec![message(Role::User, vec![Part::text("go")], 0)];
        messages.extend(cycle("t1", "one\ntwo\n", 2));
        messages.extend(cycle("t2", "three\n", 6));
        let conversation = Conversation {
            system: Vec::new(),
            messages,
        };
        let text = "a\nb\nc\nd\ne\nf\ng\nh\n";
        assert_eq!(prune_tool_results(&conversation, 0, text), conversation);
        assert_eq!(prune_tool_results(&conversation, 2, text), conversation);
        let pruned = prune_tool_results(&conversation, 1, text);
        let Part::ToolResult { content, .. } = &pruned.messages[2].parts[0] else {
            panic!("{pruned:?}")
        };
        let Part::Text { text: placeholder } = &content[0] else {
            panic!()
        };
        assert!(
            placeholder.contains("`t1`")
                && placeholder.contains("(2 lines, 8 bytes)")
                && placeholder.contains("at line 3"),
            "{placeholder}"
        );
        assert_eq!(
            pruned.messages[4], conversation.messages[4],
            "the last cycle is kept"
        );
    }
}
