//! Folding ranges: the frontmatter, each message, thinking blocks and tool blocks (tool uses,
//! tool results, job results).

use flemma_syntax::{Document, SegmentKind, TextRange};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldKind {
    Frontmatter,
    Message,
    Thinking,
    ToolBlock,
}

/// A foldable region: from the start of its first line to the end of its last line (without the
/// final line break). Only regions of two lines or more are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fold {
    pub range: TextRange,
    pub kind: FoldKind,
}

/// The folding ranges of `doc`, in document order (outer before inner).
pub fn folding_ranges(doc: &Document) -> Vec<Fold> {
    let mut out = Vec::new();
    let mut push = |range: TextRange, kind: FoldKind| {
        let text = doc.slice(range);
        let trimmed = text.trim_end_matches(['\n', '\r']);
        if trimmed.contains('\n') {
            out.push(Fold {
                range: TextRange::new(range.start, range.start + trimmed.len()),
                kind,
            });
        }
    };
    if let Some(frontmatter) = doc.frontmatter() {
        push(frontmatter.range, FoldKind::Frontmatter);
    }
    for message in doc.messages() {
        push(
            TextRange::new(message.range.start, message.content.end),
            FoldKind::Message,
        );
        for segment in &message.segments {
            let kind = match segment.kind {
                SegmentKind::Thinking(_) => FoldKind::Thinking,
                SegmentKind::ToolUse(_)
                | SegmentKind::ToolResult(_)
                | SegmentKind::JobResult(_) => FoldKind::ToolBlock,
                _ => continue,
            };
            push(segment.range, kind);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_cover_messages_thinking_frontmatter_and_tool_blocks() {
        let text = r#"```json
{"flemma": {}}
```
@You:
one line

@Assistant:
<thinking>
a
</thinking>
**Tool Use:** `ls` (`t1`)
```json
{}
```
@You: inline is text
"#;
        let doc = flemma_syntax::parse(text);
        let folds: Vec<(FoldKind, &str)> = folding_ranges(&doc)
            .into_iter()
            .map(|f| (f.kind, doc.slice(f.range)))
            .collect();
        assert_eq!(
            folds,
            vec![
                (FoldKind::Frontmatter, "```json\n{\"flemma\": {}}\n```"),
                (FoldKind::Message, "@You:\none line"),
                (
                    FoldKind::Message,
                    "@Assistant:\n<thinking>\na\n</thinking>\n**Tool Use:** `ls` (`t1`)\n```json\n{}\n```\n@You: inline is text"
                ),
                (FoldKind::Thinking, "<thinking>\na\n</thinking>"),
                (
                    FoldKind::ToolBlock,
                    "**Tool Use:** `ls` (`t1`)\n```json\n{}\n```"
                ),
            ]
        );
    }
}
