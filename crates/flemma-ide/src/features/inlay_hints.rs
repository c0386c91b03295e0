//! Inlay hints: a preview of the call in each empty tool result placeholder, such as
//! `bash: $ make test — running tests` or `write: hello.md — writing snippet`, from the tool use's
//! input and its `label`.

use flemma_syntax::{Document, TextRange};
use serde_json::Value;

/// A hint shown at `offset` (the end of the placeholder's opening fence line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlayHint {
    pub offset: usize,
    pub label: String,
    /// The tool use the preview is of.
    pub tool_use_id: String,
}

/// Longest preview of the main input before it is cut with `…`.
const PREVIEW_CHARS: usize = 72;

/// The hints of every empty placeholder (pending or approved, fence still empty) in `range`
/// (the whole document when `None`).
pub fn inlay_hints(doc: &Document, range: Option<TextRange>) -> Vec<InlayHint> {
    let mut out = Vec::new();
    for (_, segment, result) in doc.placeholders(None) {
        if let Some(range) = range {
            if segment.range.end < range.start || segment.range.start > range.end {
                continue;
            }
        }
        let Some(fence) = &result.fence else { continue };
        if !doc.slice(fence.content).trim().is_empty() {
            continue;
        }
        let Some((_, _, tool_use)) = doc.tool_use(&result.tool_use_id) else {
            continue;
        };
        let input: Value = tool_use
            .fence
            .as_ref()
            .and_then(|f| serde_json::from_str(doc.slice(f.content)).ok())
            .unwrap_or(Value::Null);
        out.push(InlayHint {
            offset: fence.open.end,
            label: preview(&tool_use.name, &input),
            tool_use_id: result.tool_use_id.clone(),
        });
    }
    out
}

/// `name: main input — label` for a tool call.
pub fn preview(name: &str, input: &Value) -> String {
    let field = |key: &str| input.get(key).and_then(Value::as_str);
    let main = match name {
        "bash" => field("command").map(|c| format!("$ {c}")),
        "read" | "write" | "edit" | "ls" => field("path").map(str::to_owned),
        "grep" | "find" => field("pattern").map(|p| match field("path") {
            Some(path) => format!("{p} in {path}"),
            None => p.to_owned(),
        }),
        "fetch_content" => field("url").map(str::to_owned),
        _ => None,
    }
    .or_else(|| {
        // Any other tool: its first string input besides the label.
        input.as_object().and_then(|map| {
            map.iter()
                .filter(|(k, _)| k.as_str() != "label")
                .find_map(|(_, v)| v.as_str().map(str::to_owned))
        })
    });
    let mut out = name.to_owned();
    if let Some(main) = main {
        out.push_str(": ");
        out.push_str(&shorten(&main));
    }
    if let Some(label) = field("label").filter(|l| !l.trim().is_empty()) {
        out.push_str(" — ");
        out.push_str(&shorten(label));
    }
    out
}

/// The first line of `text`, cut to [`PREVIEW_CHARS`] characters.
fn shorten(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim_end();
    let cut = line.chars().count() > PREVIEW_CHARS || text.trim_end().contains('\n');
    let mut out: String = line.chars().take(PREVIEW_CHARS).collect();
    if cut {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = r#"@Assistant:
**Tool Use:** `bash` (`t1`)
```json
{"command": "make test", "label": "running tests"}
```
**Tool Use:** `write` (`t2`)
```json
{"path": "hello.md", "content": "hi", "label": "writing snippet"}
```
**Tool Use:** `slack.post` (`t3`)
```json
{"channel": "general\nsecond line"}
```

@You:
**Tool Result:** `t1` (pending)
```
```

**Tool Result:** `t2` (approved)
```
```

**Tool Result:** `t3` (pending)
```
```
"#;

    #[test]
    fn each_empty_placeholder_gets_a_preview() {
        let doc = flemma_syntax::parse(CHAT);
        let hints = inlay_hints(&doc, None);
        let labels: Vec<&str> = hints.iter().map(|h| h.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "bash: $ make test — running tests",
                "write: hello.md — writing snippet",
                "slack.post: general…",
            ]
        );
        // Shown at the end of the placeholder's opening fence line.
        let text = doc.text();
        assert!(text[..hints[0].offset].ends_with("(pending)\n```"));
    }

    #[test]
    fn filled_results_and_ranges_outside_get_none() {
        let filled = CHAT.replacen("(pending)\n```\n```", "\n```\nok\n```", 1);
        let doc = flemma_syntax::parse(filled.as_str());
        assert_eq!(inlay_hints(&doc, None).len(), 2);
        assert!(inlay_hints(&doc, Some(TextRange::new(0, 10))).is_empty());
    }
}
