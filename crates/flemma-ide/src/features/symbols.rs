//! Document symbols: the frontmatter, each message, and inside a message its tool calls, tool
//! results, job results and thinking blocks.

use flemma_syntax::{Document, SegmentKind, TextRange};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    Frontmatter,
    Message,
    ToolUse,
    ToolResult,
    JobResult,
    Thinking,
}

/// A symbol: its whole range, the range to select (a header or role line), and its children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    /// A short extra (the tool call id, a result's status).
    pub detail: Option<String>,
    pub kind: SymbolKind,
    pub range: TextRange,
    pub selection: TextRange,
    pub children: Vec<Symbol>,
}

/// The symbols of `doc`, in document order.
pub fn document_symbols(doc: &Document) -> Vec<Symbol> {
    let mut out = Vec::new();
    if let Some(frontmatter) = doc.frontmatter() {
        out.push(Symbol {
            name: "frontmatter".into(),
            detail: Some(doc.slice(frontmatter.language_range).to_owned()),
            kind: SymbolKind::Frontmatter,
            range: frontmatter.range,
            selection: frontmatter.language_range,
            children: Vec::new(),
        });
    }
    for message in doc.messages() {
        let children = message
            .segments
            .iter()
            .filter_map(|segment| {
                let (name, detail, kind, selection) = match &segment.kind {
                    SegmentKind::ToolUse(t) => (
                        t.name.clone(),
                        Some(t.id.clone()),
                        SymbolKind::ToolUse,
                        t.header,
                    ),
                    SegmentKind::ToolResult(r) => (
                        format!("result {}", r.tool_use_id),
                        r.suffix
                            .as_ref()
                            .and_then(|s| s.status())
                            .map(|s| s.to_string()),
                        SymbolKind::ToolResult,
                        r.header,
                    ),
                    SegmentKind::JobResult(j) => (
                        format!("job {}", j.job_id),
                        None,
                        SymbolKind::JobResult,
                        j.header,
                    ),
                    SegmentKind::Thinking(t) => (
                        "thinking".to_owned(),
                        t.provider.clone(),
                        SymbolKind::Thinking,
                        t.open,
                    ),
                    _ => return None,
                };
                Some(Symbol {
                    name,
                    detail,
                    kind,
                    range: segment.range,
                    selection,
                    children: Vec::new(),
                })
            })
            .collect();
        let role_name = doc.slice(message.role_line).trim_end().to_owned();
        out.push(Symbol {
            name: role_name,
            detail: None,
            kind: SymbolKind::Message,
            range: message.range,
            selection: TextRange::new(
                message.role_line.start,
                message.role_line.start + doc.slice(message.role_line).trim_end().len(),
            ),
            children,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = r#"```rhai
flemma.opt.thinking = "low";
```
@You:
list files

@Assistant:
<thinking>
hmm
</thinking>
**Tool Use:** `ls` (`t1`)
```json
{"path": ".", "label": "look"}
```

@You:
**Tool Result:** `t1` (pending)
```
```
"#;

    /// `kind name [detail]` lines, children indented.
    fn outline(symbols: &[Symbol], depth: usize, out: &mut String) {
        for symbol in symbols {
            out.push_str(&"  ".repeat(depth));
            out.push_str(&format!("{:?} {}", symbol.kind, symbol.name));
            if let Some(detail) = &symbol.detail {
                out.push_str(&format!(" [{detail}]"));
            }
            out.push('\n');
            outline(&symbol.children, depth + 1, out);
        }
    }

    #[test]
    fn messages_and_their_blocks_nest() {
        let mut out = String::new();
        outline(&document_symbols(&flemma_syntax::parse(CHAT)), 0, &mut out);
        assert_eq!(
            out,
            r#"Frontmatter frontmatter [rhai]
Message @You:
Message @Assistant:
  Thinking thinking
  ToolUse ls [t1]
Message @You:
  ToolResult result t1 [pending]
"#
        );
    }

    #[test]
    fn selections_lie_inside_ranges() {
        let doc = flemma_syntax::parse(CHAT);
        fn check(symbols: &[Symbol]) {
            for s in symbols {
                assert!(s.range.start <= s.selection.start && s.selection.end <= s.range.end);
                check(&s.children);
            }
        }
        check(&document_symbols(&doc));
    }
}
