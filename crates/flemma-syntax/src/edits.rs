//! Edits of a document expressed as [`TextEdit`]s, so the engine (writing files) and the LSP
//! (sending `workspace/applyEdit`) share one way of changing documents.

use crate::TextRange;
use crate::document::{Document, TextEdit};
use crate::suffix::{Status, Suffix};
use crate::tree::ToolResult;
use crate::write;

impl Document {
    /// Rewrites the status of the tool result answering `tool_use_id`, keeping its meta tokens
    /// exactly as written. `None` removes the status (and the parentheses when nothing is left).
    pub fn set_tool_result_status(
        &self,
        tool_use_id: &str,
        status: Option<Status>,
    ) -> Option<TextEdit> {
        let (_, _, result) = self.tool_result(tool_use_id)?;
        Some(self.suffix_edit(result, status))
    }

    fn suffix_edit(&self, result: &ToolResult, status: Option<Status>) -> TextEdit {
        // Replace from just after the id's closing backtick to the end of the suffix.
        let after_id = result.id_range.end + 1;
        let end = result.suffix_range.map_or(after_id, |r| r.end);
        let rendered = match &result.suffix {
            Some(suffix) => suffix.render_with_status(status),
            None => Suffix::render(status, &[]),
        };
        let new_text = if rendered.is_empty() {
            String::new()
        } else {
            format!(" ({rendered})")
        };
        TextEdit::replace(TextRange::new(after_id, end), new_text)
    }

    /// Replaces the header and fence of the tool result answering `tool_use_id` with a final
    /// result: the status becomes `error` (when `is_error`) or disappears; meta is kept.
    pub fn resolve_tool_result(
        &self,
        tool_use_id: &str,
        content: &str,
        is_error: bool,
        language: &str,
        compact: bool,
    ) -> Option<TextEdit> {
        let (_, segment, result) = self.tool_result(tool_use_id)?;
        let status = is_error.then_some(Status::Error);
        let suffix = match &result.suffix {
            Some(suffix) => suffix.render_with_status(status),
            None => Suffix::render(status, &[]),
        };
        Some(TextEdit::replace(
            segment.range,
            write::tool_result_block(tool_use_id, &suffix, content, language, compact),
        ))
    }

    /// The text to append so the document ends with an empty `@You:` message ready for typing:
    /// a blank line before the role line when needed, the role line, and a blank line.
    pub fn append_you_prompt(&self) -> TextEdit {
        TextEdit::insert(
            self.text().len(),
            format!("{}@You:\n\n", self.blank_line_before_end()),
        )
    }

    /// The edit that starts an assistant turn at the end of the document: a blank line before
    /// `@Assistant:` when the last line is not blank, then the role line.
    pub fn append_assistant_start(&self) -> TextEdit {
        TextEdit::insert(
            self.text().len(),
            format!("{}@Assistant:\n", self.blank_line_before_end()),
        )
    }

    /// What must precede a new role line at the end so it stands on its own line after a blank
    /// line.
    fn blank_line_before_end(&self) -> &'static str {
        let text = self.text();
        if text.is_empty() || text.ends_with("\n\n") || text == "\n" {
            ""
        } else if text.ends_with('\n') {
            "\n"
        } else {
            "\n\n"
        }
    }

    /// Normalisations `flemmad fmt` applies: legacy inline role markers split onto their own
    /// line, `:` tool namespaces rewritten to `.`. Everything else stays byte-identical.
    pub fn format_edits(&self) -> Vec<(TextEdit, String)> {
        let mut edits = Vec::new();
        for diagnostic in self.diagnostics() {
            match diagnostic.code {
                crate::DiagnosticCode::LegacyInlineRole => {
                    let line = self.slice(diagnostic.range);
                    if let Some(colon) = line.find(':') {
                        let rest = line[colon + 1..].trim_start();
                        let new_text = format!("{}\n{rest}", &line[..=colon]);
                        edits.push((
                            TextEdit::replace(diagnostic.range, new_text),
                            format!(
                                "split the inline role marker `{}` onto its own line",
                                &line[..=colon]
                            ),
                        ));
                    }
                }
                crate::DiagnosticCode::ColonToolNamespace => {
                    let name = self.slice(diagnostic.range);
                    edits.push((
                        TextEdit::replace(diagnostic.range, name.replace(':', ".")),
                        format!(
                            "rewrite the tool name `{name}` as `{}`",
                            name.replace(':', ".")
                        ),
                    ));
                }
                _ => {}
            }
        }
        edits
    }
}

#[cfg(test)]
mod tests {
    use crate::{Status, apply_edits, parse};

    #[test]
    fn status_rewrite_keeps_meta() {
        let text = "@You:\n**Tool Result:** `t1` (status=pending sandbox=false)\n```\n```\n";
        let doc = parse(text);
        let edit = doc
            .set_tool_result_status("t1", Some(Status::Approved))
            .unwrap();
        let (out, _) = apply_edits(text, &[edit]);
        assert_eq!(
            out,
            "@You:\n**Tool Result:** `t1` (status=approved sandbox=false)\n```\n```\n"
        );
    }

    #[test]
    fn resolve_keeps_job_meta() {
        let text = "@You:\n**Tool Result:** `t1` (pending job=job_abcdefgh)\n```\n```\nhi\n";
        let doc = parse(text);
        let edit = doc
            .resolve_tool_result("t1", "out", true, "", true)
            .unwrap();
        let (out, _) = apply_edits(text, &[edit]);
        assert_eq!(
            out,
            "@You:\n**Tool Result:** `t1` (error job=job_abcdefgh)\n```\nout\n```\nhi\n"
        );
    }

    #[test]
    fn prompts() {
        let doc = parse("@You:\nhi");
        assert_eq!(doc.append_assistant_start().new_text, "\n\n@Assistant:\n");
        let doc = parse("@You:\nhi\n");
        assert_eq!(doc.append_assistant_start().new_text, "\n@Assistant:\n");
        assert_eq!(doc.append_you_prompt().new_text, "\n@You:\n\n");
    }

    #[test]
    fn fmt_edits() {
        let text =
            "@You: hello\n@Assistant:\n**Tool Use:** `slack:list` (`t1`)\n```json\n{}\n```\n";
        let doc = parse(text);
        let edits: Vec<_> = doc.format_edits().into_iter().map(|(e, _)| e).collect();
        let (out, _) = apply_edits(text, &edits);
        assert_eq!(
            out,
            "@You:\nhello\n@Assistant:\n**Tool Use:** `slack.list` (`t1`)\n```json\n{}\n```\n"
        );
    }
}
