//! A human-readable outline of a document's tree (`flemmad parse FILE`, snapshot tests).

use std::fmt::Write as _;

use crate::document::Document;
use crate::tree::SegmentKind;
use crate::{Encoding, TextRange};

impl Document {
    /// An indented outline: one line per node with its `line:column` range (UTF-8 columns) and
    /// a short excerpt, then the diagnostics.
    pub fn outline(&self) -> String {
        let index = self.line_index();
        let at = |range: TextRange| {
            let (s, e) = index.range(self.text(), range, Encoding::Utf8);
            format!("{}:{}-{}:{}", s.line, s.character, e.line, e.character)
        };
        let mut out = String::new();
        if let Some(frontmatter) = self.frontmatter() {
            let _ = writeln!(
                out,
                "frontmatter {} {} code={:?}",
                self.slice(frontmatter.language_range),
                at(frontmatter.range),
                excerpt(self.slice(frontmatter.code))
            );
        }
        if !self.preamble().is_empty() {
            let _ = writeln!(
                out,
                "preamble {} {:?}",
                at(self.preamble()),
                excerpt(self.slice(self.preamble()))
            );
        }
        for message in self.messages() {
            let _ = writeln!(
                out,
                "message @{} {} content={}",
                message.role.name(),
                at(message.range),
                at(message.content)
            );
            for segment in &message.segments {
                let detail = match &segment.kind {
                    SegmentKind::Text => format!("{:?}", excerpt(self.slice(segment.range))),
                    SegmentKind::ToolUse(t) => format!(
                        "name={} id={} fence={} valid_json={}",
                        t.name,
                        t.id,
                        t.fence.as_ref().map_or("none".to_owned(), |f| format!(
                            "{}{}",
                            "`".repeat(f.ticks),
                            if f.close.is_some() { "" } else { " (unclosed)" }
                        )),
                        t.input_is_valid
                    ),
                    SegmentKind::ToolResult(t) => format!(
                        "id={} status={} meta=[{}] content={:?}",
                        t.tool_use_id,
                        t.suffix
                            .as_ref()
                            .and_then(|s| s.status())
                            .map_or("none", |s| s.as_str()),
                        t.suffix.as_ref().map_or(String::new(), |s| s
                            .meta()
                            .map(|(k, v)| format!("{k}={}", v.to_json()))
                            .collect::<Vec<_>>()
                            .join(" ")),
                        t.fence.as_ref().map_or("", |f| self.slice(f.content))
                    ),
                    SegmentKind::JobResult(j) => format!(
                        "id={} status={} content={:?}",
                        j.job_id,
                        j.suffix
                            .as_ref()
                            .and_then(|s| s.status())
                            .map_or("none", |s| s.as_str()),
                        excerpt(j.fence.as_ref().map_or("", |f| self.slice(f.content)))
                    ),
                    SegmentKind::Thinking(t) => format!(
                        "provider={} signature={:?} redacted={} content={:?}",
                        t.provider.as_deref().unwrap_or("none"),
                        t.signature.as_deref().map(excerpt),
                        t.redacted,
                        excerpt(self.slice(t.content))
                    ),
                    SegmentKind::Aborted(a) => format!("message={:?}", a.message),
                    SegmentKind::Expression(t) | SegmentKind::Code(t) => format!(
                        "code={:?} trim_before={} trim_after={}",
                        self.slice(t.code),
                        t.trim_before,
                        t.trim_after
                    ),
                    SegmentKind::FileReference(f) => {
                        format!("path={:?} options={:?}", f.path, f.options)
                    }
                };
                let _ = writeln!(
                    out,
                    "  {} {} {}",
                    segment.kind.name(),
                    at(segment.range),
                    detail
                );
            }
        }
        let diagnostics = self.diagnostics();
        if !diagnostics.is_empty() {
            out.push_str("diagnostics:\n");
            for d in diagnostics {
                let _ = writeln!(
                    out,
                    "  {} {} [{}] {}",
                    d.severity.as_str(),
                    at(d.range),
                    d.code.as_str(),
                    d.message
                );
            }
        }
        out
    }
}

fn excerpt(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}…")
}
