//! Editor features over `flemma_syntax::Document`, as plain data in byte ranges.
//!
//! **Temporary:** `flemma_ide::features::*` replaces each function here; each handler calls
//! exactly one of them, so the swap is one line per handler. Keep these small and LSP-free.

use flemma_syntax::{
    Document, FrontmatterLanguage, NodeAt, Role, SegmentKind, Severity, Status, TextRange,
};

/// A diagnostic to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiagnosticData {
    pub range: TextRange,
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
}

/// Every diagnostic of a document. The ONE place diagnostics come from: switch this to
/// `flemma_ide`'s analysis when it lands.
pub(crate) fn diagnostics(doc: &Document) -> Vec<DiagnosticData> {
    let mut out: Vec<DiagnosticData> = doc
        .diagnostics()
        .into_iter()
        .map(|d| DiagnosticData {
            range: d.range,
            severity: d.severity,
            code: d.code.as_str(),
            message: d.message.clone(),
        })
        .collect();
    for (_, _, result) in doc.placeholders(Some(Status::Pending)) {
        out.push(DiagnosticData {
            range: result.header,
            severity: Severity::Hint,
            code: "pending-approval",
            message: format!(
                "tool call `{}` waits for approval: use the code actions \"Approve\" or \"Reject\"",
                result.tool_use_id
            ),
        });
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HoverData {
    pub range: TextRange,
    pub markdown: String,
}

/// What the node under the cursor is.
pub(crate) fn hover(doc: &Document, offset: usize) -> Option<HoverData> {
    let node = doc.node_at(offset)?;
    let (range, markdown) = match node {
        NodeAt::Frontmatter(f) => (
            f.range,
            format!(
                "**Frontmatter** ({})",
                match f.language {
                    FrontmatterLanguage::Rhai => "Rhai",
                    FrontmatterLanguage::Json => "JSON",
                    FrontmatterLanguage::Lua => "Lua: not executed, convert it to Rhai or JSON",
                    FrontmatterLanguage::Other => "unknown language",
                }
            ),
        ),
        NodeAt::Preamble => return None,
        NodeAt::RoleLine(m) => (m.role_line, role_hover(&m.role)),
        NodeAt::Segment(_, segment) => match &segment.kind {
            SegmentKind::ToolUse(tool) => {
                let input = tool
                    .fence
                    .as_ref()
                    .map(|f| doc.slice(f.content))
                    .unwrap_or("");
                let state = match doc.tool_result(&tool.id) {
                    Some((_, _, result)) => match result.suffix.as_ref().and_then(|s| s.status()) {
                        Some(status) => format!("result: **{status}**"),
                        None => "result: written".to_owned(),
                    },
                    None => "no result yet".to_owned(),
                };
                (
                    segment.range,
                    format!(
                        "**Tool use** `{}` (`{}`), {state}\n\n```json\n{}```",
                        tool.name,
                        tool.id,
                        ensure_newline(input)
                    ),
                )
            }
            SegmentKind::ToolResult(result) => {
                let tool = doc
                    .tool_use(&result.tool_use_id)
                    .map(|(_, _, t)| t.name.as_str())
                    .unwrap_or("unknown tool");
                let status = result
                    .suffix
                    .as_ref()
                    .and_then(|s| s.status())
                    .map_or("final".to_owned(), |s| s.to_string());
                let mut text = format!(
                    "**Tool result** of `{tool}` (`{}`): {status}",
                    result.tool_use_id
                );
                if let Some(flemma_syntax::SuffixValue::String(job)) =
                    result.suffix.as_ref().and_then(|s| s.get("job"))
                {
                    let job_state = if doc.job_result(job).is_some() {
                        "completed"
                    } else {
                        "running or lost (the engine knows; not wired yet)"
                    };
                    text.push_str(&format!("\n\njob `{job}`: {job_state}"));
                }
                (segment.range, text)
            }
            SegmentKind::JobResult(job) => {
                let started_by = doc
                    .tool_result_for_job(&job.job_id)
                    .map(|(_, _, r)| format!("started by tool call `{}`", r.tool_use_id))
                    .unwrap_or_else(|| "no tool result started it".to_owned());
                (
                    segment.range,
                    format!("**Job result** `{}`, {started_by}", job.job_id),
                )
            }
            SegmentKind::Thinking(t) => (
                segment.range,
                match (&t.provider, t.redacted) {
                    (_, true) => "**Thinking** (redacted)".to_owned(),
                    (Some(p), false) => format!("**Thinking** (signed by {p})"),
                    (None, false) => "**Thinking**".to_owned(),
                },
            ),
            SegmentKind::Aborted(a) => (segment.range, format!("**Aborted turn**: {}", a.message)),
            SegmentKind::Expression(_) => (segment.range, "**Template expression**".to_owned()),
            SegmentKind::Code(_) => (segment.range, "**Template code**".to_owned()),
            SegmentKind::FileReference(f) => (
                segment.range,
                format!(
                    "**File reference** `{}`{}",
                    f.path,
                    f.option("type")
                        .map(|t| format!(", type `{t}`"))
                        .unwrap_or_default()
                ),
            ),
            SegmentKind::Text => return None,
        },
    };
    Some(HoverData { range, markdown })
}

fn role_hover(role: &Role) -> String {
    match role {
        Role::You => "**@You**: your message".to_owned(),
        Role::Assistant => "**@Assistant**: the model's reply".to_owned(),
        Role::System => "**@System**: the system prompt".to_owned(),
        Role::Other(name) => format!("**@{name}**: a note, never sent"),
    }
}

fn ensure_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    }
}

/// Where the node under the cursor is defined: tool use → its result; a `job=` result → its
/// job result; a job result → the tool result that started it.
pub(crate) fn definition(doc: &Document, offset: usize) -> Option<TextRange> {
    let NodeAt::Segment(_, segment) = doc.node_at(offset)? else {
        return None;
    };
    match &segment.kind {
        SegmentKind::ToolUse(tool) => doc.tool_result(&tool.id).map(|(_, _, r)| r.header),
        SegmentKind::ToolResult(result) => {
            match result.suffix.as_ref().and_then(|s| s.get("job")) {
                Some(flemma_syntax::SuffixValue::String(job)) => {
                    doc.job_result(job).map(|(_, _, j)| j.header)
                }
                _ => doc.tool_use(&result.tool_use_id).map(|(_, _, t)| t.header),
            }
        }
        SegmentKind::JobResult(job) => doc
            .tool_result_for_job(&job.job_id)
            .map(|(_, _, r)| r.header),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SymbolKind {
    Message,
    ToolUse,
    ToolResult,
    JobResult,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SymbolData {
    pub name: String,
    pub detail: Option<String>,
    pub kind: SymbolKind,
    pub range: TextRange,
    pub selection: TextRange,
    pub children: Vec<SymbolData>,
}

/// Messages, with their tool calls, results and job results as children.
pub(crate) fn symbols(doc: &Document) -> Vec<SymbolData> {
    doc.messages()
        .iter()
        .map(|message| {
            let first_line = doc
                .slice(message.content)
                .lines()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.chars().take(60).collect::<String>());
            let children = message
                .segments
                .iter()
                .filter_map(|segment| match &segment.kind {
                    SegmentKind::ToolUse(t) => Some(SymbolData {
                        name: format!("{} ({})", t.name, t.id),
                        detail: Some("tool use".into()),
                        kind: SymbolKind::ToolUse,
                        range: segment.range,
                        selection: t.header,
                        children: Vec::new(),
                    }),
                    SegmentKind::ToolResult(r) => Some(SymbolData {
                        name: format!("result {}", r.tool_use_id),
                        detail: r
                            .suffix
                            .as_ref()
                            .and_then(|s| s.status())
                            .map(|s| s.to_string()),
                        kind: SymbolKind::ToolResult,
                        range: segment.range,
                        selection: r.header,
                        children: Vec::new(),
                    }),
                    SegmentKind::JobResult(j) => Some(SymbolData {
                        name: format!("job {}", j.job_id),
                        detail: None,
                        kind: SymbolKind::JobResult,
                        range: segment.range,
                        selection: j.header,
                        children: Vec::new(),
                    }),
                    _ => None,
                })
                .collect();
            let role_line_end =
                message.role_line.end - usize::from(doc.slice(message.role_line).ends_with('\n'));
            SymbolData {
                name: format!("@{}", message.role.name()),
                detail: first_line,
                kind: SymbolKind::Message,
                range: message.range,
                selection: TextRange::new(message.role_line.start, role_line_end),
                children,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoldKind {
    Frontmatter,
    Message,
    Thinking,
    ToolBlock,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FoldData {
    /// From the first byte of the first line to a byte on the last line of the fold.
    pub range: TextRange,
    pub kind: FoldKind,
}

/// Frontmatter, messages, thinking and tool blocks.
pub(crate) fn folding(doc: &Document) -> Vec<FoldData> {
    let mut out = Vec::new();
    let last_byte = |range: TextRange| {
        let text = doc.slice(range);
        let trimmed = text.trim_end_matches('\n');
        TextRange::new(range.start, range.start + trimmed.len())
    };
    if let Some(frontmatter) = doc.frontmatter() {
        out.push(FoldData {
            range: last_byte(frontmatter.range),
            kind: FoldKind::Frontmatter,
        });
    }
    for message in doc.messages() {
        out.push(FoldData {
            range: last_byte(TextRange::new(message.range.start, message.content.end)),
            kind: FoldKind::Message,
        });
        for segment in &message.segments {
            let kind = match &segment.kind {
                SegmentKind::Thinking(_) => FoldKind::Thinking,
                SegmentKind::ToolUse(_)
                | SegmentKind::ToolResult(_)
                | SegmentKind::JobResult(_) => FoldKind::ToolBlock,
                _ => continue,
            };
            out.push(FoldData {
                range: last_byte(segment.range),
                kind,
            });
        }
    }
    out
}

/// A pending tool call whose placeholder touches `range`: what "Approve"/"Reject" act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingCall {
    pub tool_use_id: String,
    pub tool_name: String,
    pub range: TextRange,
}

pub(crate) fn pending_calls_in(doc: &Document, range: TextRange) -> Vec<PendingCall> {
    doc.placeholders(Some(Status::Pending))
        .into_iter()
        .filter(|(_, segment, _)| {
            segment.range.start <= range.end
                && (range.start < segment.range.end || range.start == segment.range.start)
        })
        .map(|(_, segment, result)| PendingCall {
            tool_use_id: result.tool_use_id.clone(),
            tool_name: doc
                .tool_use(&result.tool_use_id)
                .map(|(_, _, t)| t.name.clone())
                .unwrap_or_else(|| "tool".into()),
            range: segment.range,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CHAT: &str = "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"make\"}\n```\n\n@You:\n**Tool Result:** `t1` (pending job=job_1)\n```\n```\n\n**Job Result:** `job_1`\n```\nok\n```\n";

    #[test]
    fn hover_on_tool_use_shows_tool_input_and_result_status() {
        let doc = Document::parse(CHAT);
        let hover = hover(&doc, CHAT.find("bash").unwrap()).unwrap();
        assert!(
            hover.markdown.contains("`bash` (`t1`)"),
            "{}",
            hover.markdown
        );
        assert!(hover.markdown.contains("{\"command\":\"make\"}"));
        assert!(hover.markdown.contains("result: **pending**"));
    }

    #[test]
    fn definition_walks_use_result_job() {
        let doc = Document::parse(CHAT);
        let result_header = definition(&doc, CHAT.find("bash").unwrap()).unwrap();
        assert!(
            doc.slice(result_header)
                .starts_with("**Tool Result:** `t1`")
        );
        let job_header = definition(&doc, result_header.start).unwrap();
        assert!(doc.slice(job_header).starts_with("**Job Result:** `job_1`"));
        let back = definition(&doc, job_header.start).unwrap();
        assert_eq!(back, result_header);
    }

    #[test]
    fn pending_placeholders_are_hints_and_code_action_targets() {
        let doc = Document::parse(CHAT);
        let hints: Vec<_> = diagnostics(&doc)
            .into_iter()
            .filter(|d| d.code == "pending-approval")
            .collect();
        assert_eq!(hints.len(), 1);
        let calls = pending_calls_in(&doc, TextRange::empty(hints[0].range.start));
        assert_eq!(calls[0].tool_use_id, "t1");
        assert_eq!(calls[0].tool_name, "bash");
        assert!(pending_calls_in(&doc, TextRange::empty(0)).is_empty());
    }
}
