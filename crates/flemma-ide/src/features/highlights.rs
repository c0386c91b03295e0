//! Semantic highlights: what the marked pieces of a chat are — role markers, tool use, tool
//! result and job result headers (a result with its status), thinking blocks, the frontmatter's
//! fences, templates, file references and the abort marker — so an editor colours the
//! structure the parser sees (not a guess from the text: `@You:` inside a code fence is text).

use flemma_syntax::{Document, Role, SegmentKind, Status, TextRange};

/// What a highlighted range is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HighlightKind {
    /// A role marker (`@You:`), without its line break.
    Role(Role),
    /// A `**Tool Use:**` header line.
    ToolUse,
    /// A `**Tool Result:**` header line, with its status when it has one (`pending`, `error`…).
    ToolResult(Option<Status>),
    /// A `**Job Result:**` header line.
    JobResult,
    /// A thinking block, tags included.
    Thinking,
    /// The frontmatter's opening and closing fence lines.
    Frontmatter,
    /// A `{{ … }}` or `{% … %}` template, delimiters included.
    Template,
    /// A file reference (`@./notes.md`).
    FileReference,
    /// The abort marker (`<!-- flemma:aborted: … -->`).
    Aborted,
}

/// One highlighted range of bytes. A range may span lines (a thinking block); front ends that
/// need one range per line split it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Highlight {
    pub range: TextRange,
    pub kind: HighlightKind,
}

/// The highlights of `doc`, in document order, never overlapping.
pub fn highlights(doc: &Document) -> Vec<Highlight> {
    let mut out = Vec::new();
    let text = doc.text();
    let mut push = |range: TextRange, kind: HighlightKind| {
        let trimmed = text[range.start..range.end].trim_end_matches(['\n', '\r']);
        if !trimmed.is_empty() {
            out.push(Highlight {
                range: TextRange::new(range.start, range.start + trimmed.len()),
                kind,
            });
        }
    };
    if let Some(frontmatter) = doc.frontmatter() {
        let block = &text[frontmatter.range.start..frontmatter.range.end];
        let first_end = block.find('\n').map_or(block.len(), |n| n);
        push(
            TextRange::new(frontmatter.range.start, frontmatter.range.start + first_end),
            HighlightKind::Frontmatter,
        );
        let body = block.trim_end_matches(['\n', '\r']);
        if let Some(last_start) = body.rfind('\n').map(|n| n + 1)
            && last_start > first_end
        {
            push(
                TextRange::new(
                    frontmatter.range.start + last_start,
                    frontmatter.range.start + body.len(),
                ),
                HighlightKind::Frontmatter,
            );
        }
    }
    for message in doc.messages() {
        push(message.role_line, HighlightKind::Role(message.role.clone()));
        for segment in &message.segments {
            match &segment.kind {
                SegmentKind::ToolUse(tool_use) => push(tool_use.header, HighlightKind::ToolUse),
                SegmentKind::ToolResult(result) => push(
                    result.header,
                    HighlightKind::ToolResult(
                        result.suffix.as_ref().and_then(|suffix| suffix.status()),
                    ),
                ),
                SegmentKind::JobResult(job) => push(job.header, HighlightKind::JobResult),
                SegmentKind::Thinking(thinking) => {
                    let end = thinking.close.map_or(segment.range.end, |close| close.end);
                    push(
                        TextRange::new(thinking.open.start, end),
                        HighlightKind::Thinking,
                    );
                }
                SegmentKind::Expression(_) | SegmentKind::Code(_) => {
                    push(segment.range, HighlightKind::Template)
                }
                SegmentKind::FileReference(_) => push(segment.range, HighlightKind::FileReference),
                SegmentKind::Aborted(_) => push(segment.range, HighlightKind::Aborted),
                SegmentKind::Text => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structure_is_highlighted_and_text_that_looks_like_it_is_not() {
        let text = r#"```json
{"flemma": {}}
```
@System:
Be brief. See @./notes.md and {{ name }}.

@You:
```text
@You:
**Tool Use:** `fake` (`t0`)
```

@Assistant:
<thinking>
hmm
</thinking>
**Tool Use:** `bash` (`t1`)
```json
{"command": "ls"}
```

@You:
**Tool Result:** `t1` (pending)
```
```

**Job Result:** `job_1`
```
done
```
"#;
        let doc = flemma_syntax::parse(text);
        let found: Vec<(HighlightKind, &str)> = highlights(&doc)
            .into_iter()
            .map(|h| (h.kind, doc.slice(h.range)))
            .collect();
        assert_eq!(
            found,
            vec![
                (HighlightKind::Frontmatter, "```json"),
                (HighlightKind::Frontmatter, "```"),
                (HighlightKind::Role(Role::System), "@System:"),
                (HighlightKind::FileReference, "@./notes.md"),
                (HighlightKind::Template, "{{ name }}"),
                (HighlightKind::Role(Role::You), "@You:"),
                (HighlightKind::Role(Role::Assistant), "@Assistant:"),
                (HighlightKind::Thinking, "<thinking>\nhmm\n</thinking>"),
                (HighlightKind::ToolUse, "**Tool Use:** `bash` (`t1`)"),
                (HighlightKind::Role(Role::You), "@You:"),
                (
                    HighlightKind::ToolResult(Some(Status::Pending)),
                    "**Tool Result:** `t1` (pending)"
                ),
                (HighlightKind::JobResult, "**Job Result:** `job_1`"),
            ]
        );
        // In document order, never overlapping.
        let ranges: Vec<TextRange> = highlights(&doc).into_iter().map(|h| h.range).collect();
        assert!(
            ranges.windows(2).all(|w| w[0].end <= w[1].start),
            "{ranges:?}"
        );
    }
}
