//! Folding ranges: the frontmatter, each message, thinking blocks and tool blocks (tool uses,
//! tool results, job results), each with a preview of what it hides (an editor shows it on the
//! closed fold: `⬢ Tool Result: bash: 1↵2↵3… (64 lines)`).

use std::collections::HashMap;

use flemma_syntax::{Document, Fence, SegmentKind, TextRange};
use serde_json::Value;

use super::inlay_hints::preview;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldKind {
    Frontmatter,
    Message,
    Thinking,
    ToolBlock,
}

/// A foldable region: from the start of its first line to the end of its last line (without the
/// final line break). Only regions of two lines or more are listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fold {
    pub range: TextRange,
    pub kind: FoldKind,
    /// One line saying what the fold hides, ending with its line count.
    pub preview: String,
}

/// Longest summary of a block's text in a preview before it is cut with `…`.
const SUMMARY_CHARS: usize = 48;

/// The folding ranges of `doc`, in document order (outer before inner).
pub fn folding_ranges(doc: &Document) -> Vec<Fold> {
    // Tool uses by id, found once (a result's preview names its tool).
    let mut tools: HashMap<&str, &str> = HashMap::new();
    for message in doc.messages() {
        for (_, tool_use) in message.tool_uses() {
            tools.insert(&tool_use.id, &tool_use.name);
        }
    }
    let mut out = Vec::new();
    let mut push = |range: TextRange, kind: FoldKind, what: String| {
        let text = doc.slice(range);
        let trimmed = text.trim_end_matches(['\n', '\r']);
        if trimmed.contains('\n') {
            let lines = trimmed.lines().count();
            out.push(Fold {
                range: TextRange::new(range.start, range.start + trimmed.len()),
                kind,
                preview: format!("{what} ({lines} lines)"),
            });
        }
    };
    if let Some(frontmatter) = doc.frontmatter() {
        let language = doc.slice(frontmatter.language_range);
        push(
            frontmatter.range,
            FoldKind::Frontmatter,
            format!("```{language} frontmatter ```"),
        );
    }
    for message in doc.messages() {
        let marker = format!("@{}:", message.role.name());
        let mut blocks = Vec::new();
        let mut first = None;
        for segment in &message.segments {
            let block = match &segment.kind {
                SegmentKind::Text => {
                    let text = doc.slice(segment.range);
                    if first.is_none() {
                        first = text
                            .lines()
                            .map(str::trim)
                            .find(|l| !l.is_empty())
                            .map(summary);
                    }
                    continue;
                }
                SegmentKind::Thinking(thinking) => {
                    let tag = match (&thinking.provider, thinking.redacted) {
                        (_, true) => "<thinking redacted>".to_owned(),
                        (Some(provider), false) => format!("<thinking {provider}>"),
                        (None, false) => "<thinking>".to_owned(),
                    };
                    (FoldKind::Thinking, format!("{tag} … </thinking>"))
                }
                SegmentKind::ToolUse(tool_use) => {
                    let input: Value = tool_use
                        .fence
                        .as_ref()
                        .and_then(|f| serde_json::from_str(doc.slice(f.content)).ok())
                        .unwrap_or(Value::Null);
                    (
                        FoldKind::ToolBlock,
                        format!("⬡ Tool Use: {}", preview(&tool_use.name, &input)),
                    )
                }
                // A result with nothing in its fence (a placeholder waiting for approval or to
                // run) has nothing to hide: no fold, so folding never hides a pending call.
                SegmentKind::ToolResult(result)
                    if result
                        .fence
                        .as_ref()
                        .is_none_or(|f| doc.slice(f.content).trim().is_empty()) =>
                {
                    continue;
                }
                SegmentKind::ToolResult(result) => {
                    let status = result
                        .suffix
                        .as_ref()
                        .and_then(|suffix| suffix.status())
                        .map(|status| format!(" ({})", status.as_str()))
                        .unwrap_or_default();
                    let name = tools
                        .get(result.tool_use_id.as_str())
                        .copied()
                        .unwrap_or(result.tool_use_id.as_str());
                    (
                        FoldKind::ToolBlock,
                        format!(
                            "⬢ Tool Result{status}: {name}: {}",
                            fence_summary(doc, result.fence.as_ref())
                        ),
                    )
                }
                SegmentKind::JobResult(job) => (
                    FoldKind::ToolBlock,
                    format!(
                        "⬢ Job Result: {}: {}",
                        job.job_id,
                        fence_summary(doc, job.fence.as_ref())
                    ),
                ),
                _ => continue,
            };
            if first.is_none() {
                first = Some(summary(&block.1));
            }
            blocks.push((segment.range, block));
        }
        // The message's preview: its first line of text, else its first block's.
        push(
            TextRange::new(message.range.start, message.content.end),
            FoldKind::Message,
            match first {
                Some(line) => format!("{marker} {line}"),
                None => marker,
            },
        );
        for (range, (kind, what)) in blocks {
            push(range, kind, what);
        }
    }
    out
}

/// A fence's text on one line: its lines joined with `↵`, cut at [`SUMMARY_CHARS`].
fn fence_summary(doc: &Document, fence: Option<&Fence>) -> String {
    let text = fence.map(|f| doc.slice(f.content)).unwrap_or("");
    let joined = text.trim().lines().collect::<Vec<_>>().join("↵");
    if joined.is_empty() {
        "(empty)".to_owned()
    } else {
        summary(&joined)
    }
}

/// `text` cut at [`SUMMARY_CHARS`] characters, with `…` when cut.
fn summary(text: &str) -> String {
    let mut out: String = text.chars().take(SUMMARY_CHARS).collect();
    if text.chars().nth(SUMMARY_CHARS).is_some() {
        out = out.trim_end_matches(['↵', ' ']).to_owned();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_cover_messages_thinking_frontmatter_and_tool_blocks_with_previews() {
        // (`t9`'s empty result has no fold.)
        let text = r#"```json
{"flemma": {}}
```
@You:
one line

@Assistant:
<thinking anthropic:signature="c2ln">
a
</thinking>
**Tool Use:** `bash` (`t1`)
```json
{"label": "list numbers", "command": "seq 1 60"}
```
@You: inline is text

@You:
**Tool Result:** `t1`
```
1
2
3
```

**Tool Result:** `t9` (error)
```
```

**Job Result:** `job_ab12`
```
3 passed
```
"#;
        let doc = flemma_syntax::parse(text);
        let folds = folding_ranges(&doc);
        let folds: Vec<(FoldKind, &str, &str)> = folds
            .iter()
            .map(|f| (f.kind, doc.slice(f.range), f.preview.as_str()))
            .collect();
        assert_eq!(
            folds,
            vec![
                (
                    FoldKind::Frontmatter,
                    "```json\n{\"flemma\": {}}\n```",
                    "```json frontmatter ``` (3 lines)"
                ),
                (
                    FoldKind::Message,
                    "@You:\none line",
                    "@You: one line (2 lines)"
                ),
                (
                    FoldKind::Message,
                    "@Assistant:\n<thinking anthropic:signature=\"c2ln\">\na\n</thinking>\n**Tool Use:** `bash` (`t1`)\n```json\n{\"label\": \"list numbers\", \"command\": \"seq 1 60\"}\n```\n@You: inline is text",
                    "@Assistant: <thinking anthropic> … </thinking> (9 lines)"
                ),
                (
                    FoldKind::Thinking,
                    "<thinking anthropic:signature=\"c2ln\">\na\n</thinking>",
                    "<thinking anthropic> … </thinking> (3 lines)"
                ),
                (
                    FoldKind::ToolBlock,
                    "**Tool Use:** `bash` (`t1`)\n```json\n{\"label\": \"list numbers\", \"command\": \"seq 1 60\"}\n```",
                    "⬡ Tool Use: bash: $ seq 1 60 — list numbers (4 lines)"
                ),
                (
                    FoldKind::Message,
                    "@You:\n**Tool Result:** `t1`\n```\n1\n2\n3\n```\n\n**Tool Result:** `t9` (error)\n```\n```\n\n**Job Result:** `job_ab12`\n```\n3 passed\n```",
                    "@You: ⬢ Tool Result: bash: 1↵2↵3 (16 lines)"
                ),
                (
                    FoldKind::ToolBlock,
                    "**Tool Result:** `t1`\n```\n1\n2\n3\n```",
                    "⬢ Tool Result: bash: 1↵2↵3 (6 lines)"
                ),
                (
                    FoldKind::ToolBlock,
                    "**Job Result:** `job_ab12`\n```\n3 passed\n```",
                    "⬢ Job Result: job_ab12: 3 passed (4 lines)"
                ),
            ]
        );
    }

    #[test]
    fn a_long_result_is_summarised_on_one_line() {
        let numbers: String = (1..=64).map(|n| format!("{n}\n")).collect();
        let text = format!(
            "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{{}}\n```\n\n@You:\n**Tool Result:** `t1`\n```\n{numbers}```\n"
        );
        let doc = flemma_syntax::parse(&text);
        let result = folding_ranges(&doc)
            .into_iter()
            .find(|f| f.preview.starts_with("⬢"))
            .map(|f| f.preview);
        assert_eq!(
            result.as_deref(),
            Some(
                "⬢ Tool Result: bash: 1↵2↵3↵4↵5↵6↵7↵8↵9↵10↵11↵12↵13↵14↵15↵16↵17↵18↵19… (67 lines)"
            )
        );
    }
}
