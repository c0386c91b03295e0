//! Edits of a document expressed as [`TextEdit`]s, so the engine (writing files) and the LSP
//! (sending `workspace/applyEdit`) share one way of changing documents.

use crate::TextRange;
use crate::document::Document;
use crate::suffix::{Status, Suffix};
use crate::text_edit::{TextEdit, apply_edits};
use crate::tree::{Role, ToolResult};
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

    /// Sets the status of the tool result answering `tool_use_id` and adds the bare meta word
    /// `word` to its suffix (once: a word already there is not repeated); other meta is kept.
    pub fn mark_tool_result(
        &self,
        tool_use_id: &str,
        status: Status,
        word: &str,
    ) -> Option<TextEdit> {
        let (_, _, result) = self.tool_result(tool_use_id)?;
        let mut edit = self.suffix_edit(result, Some(status));
        if !result.suffix.as_ref().is_some_and(|s| s.has_word(word)) {
            // The rendered suffix holds the status: it is ` (…)`.
            edit.new_text
                .insert_str(edit.new_text.len() - 1, &format!(" {word}"));
        }
        Some(edit)
    }

    fn suffix_edit(&self, result: &ToolResult, status: Option<Status>) -> TextEdit {
        // Replace from just after the id's closing backtick to the end of the suffix.
        let after_id = result.id_range.end + 1;
        let end = result.suffix_range.map_or(after_id, |r| r.end);
        let rendered = match &result.suffix {
            Some(suffix) => suffix.render_with_status(status),
            None => Suffix::render(status, &[]),
        };
        // A suffix holds no line break: no line-ending conversion needed.
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
            self.in_line_ending(write::tool_result_block(
                tool_use_id,
                &suffix,
                content,
                language,
                compact,
            )),
        ))
    }

    /// The text to append so the document ends with an empty `@You:` message ready for typing:
    /// a blank line before the role line when needed, the role line, and a blank line.
    pub fn append_you_prompt(&self) -> TextEdit {
        self.insert_at_end(format!(
            "{}{}\n",
            self.blank_line_before_end(),
            write::role_line(&Role::You)
        ))
    }

    /// The edit that starts an assistant turn at the end of the document: a blank line before
    /// `@Assistant:` when the last line is not blank, then the role line.
    pub fn append_assistant_start(&self) -> TextEdit {
        self.insert_at_end(format!(
            "{}{}",
            self.blank_line_before_end(),
            write::role_line(&Role::Assistant)
        ))
    }

    /// An insertion at the end of the text, in the document's line-ending convention.
    fn insert_at_end(&self, text: String) -> TextEdit {
        TextEdit::insert(self.text().len(), self.in_line_ending(text))
    }

    /// What must precede a new role line at the end so it stands on its own line after a blank
    /// line (with `\n` breaks; the caller converts).
    fn blank_line_before_end(&self) -> &'static str {
        let text = self.text();
        let Some(without_last_break) = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
        else {
            return if text.is_empty() { "" } else { "\n\n" };
        };
        if without_last_break.is_empty() || without_last_break.ends_with('\n') {
            ""
        } else {
            "\n"
        }
    }

    /// Normalisations `flemmad fmt` applies: legacy inline role markers split onto their own
    /// line, `:` tool namespaces rewritten to `.`. Everything else stays byte-identical.
    ///
    /// The result is a fixed point: splitting a marker can turn text into structure (a tool use
    /// that was plain text in a `@You:` message becomes one of an `@Assistant:` message, with its
    /// own legacy name), so passes repeat on the result until nothing changes, and the edits of
    /// later passes are composed onto the original text. Applying the edits to the text and
    /// calling this again gives no edits.
    pub fn format_edits(&self) -> Vec<(TextEdit, String)> {
        let mut composed = self.format_pass();
        if composed.is_empty() {
            return composed;
        }
        let Ok(mut text) = apply_edits(self.text(), &edits_of(&composed)) else {
            return composed;
        };
        for _ in 0..MAX_FORMAT_PASSES {
            let next = Document::parse(text.as_str()).format_pass();
            if next.is_empty() {
                break;
            }
            let Ok(next_text) = apply_edits(&text, &edits_of(&next)) else {
                break;
            };
            composed = compose(composed, next, &text);
            text = next_text;
        }
        composed
    }

    /// The fmt edit of one legacy inline role diagnostic (`@You: hi` → `@You:` + `hi`), for the
    /// quick fix: `None` when the range does not hold a role marker.
    pub fn split_legacy_marker(&self, range: TextRange) -> Option<(TextEdit, String)> {
        let line = self.slice(range);
        let colon = line.find(':')?;
        let rest = line[colon + 1..].trim_start();
        let new_text = self.in_line_ending(format!("{}\n{rest}", &line[..=colon]));
        Some((
            TextEdit::replace(range, new_text),
            format!(
                "split the inline role marker `{}` onto its own line",
                &line[..=colon]
            ),
        ))
    }

    /// One pass of the fmt normalisations, from this parse's diagnostics.
    fn format_pass(&self) -> Vec<(TextEdit, String)> {
        let mut edits = Vec::new();
        for diagnostic in self.diagnostics() {
            match diagnostic.code {
                crate::DiagnosticCode::LegacyInlineRole => {
                    edits.extend(self.split_legacy_marker(diagnostic.range));
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

/// Enough for any input: each pass only splits lines or renames, and a pass that changes
/// nothing ends the loop.
const MAX_FORMAT_PASSES: usize = 16;

fn edits_of(described: &[(TextEdit, String)]) -> Vec<TextEdit> {
    described.iter().map(|(e, _)| e.clone()).collect()
}

/// Composes `first` (edits of text 0, giving `text1`) with `second` (edits of `text1`) into edits
/// of text 0 with the same result. Edits of `second` inside (or touching) the new text of an edit
/// of `first` merge into it; the others are mapped back to text 0. Both inputs are disjoint.
fn compose(
    mut first: Vec<(TextEdit, String)>,
    mut second: Vec<(TextEdit, String)>,
    text1: &str,
) -> Vec<(TextEdit, String)> {
    first.sort_by_key(|(e, _)| e.range.start);
    second.sort_by_key(|(e, _)| e.range.start);
    // Every item as a range of text1: the new text of a first edit, the old range of a second.
    enum Item {
        First(usize, isize),
        Second(usize),
    }
    let mut items: Vec<(TextRange, Item)> = Vec::with_capacity(first.len() + second.len());
    let mut delta: isize = 0;
    for (i, (edit, _)) in first.iter().enumerate() {
        let start = edit.range.start.wrapping_add_signed(delta);
        let own_delta = edit.new_text.len() as isize - edit.range.len() as isize;
        items.push((
            TextRange::new(start, start + edit.new_text.len()),
            Item::First(i, own_delta),
        ));
        delta += own_delta;
    }
    for (j, (edit, _)) in second.iter().enumerate() {
        items.push((edit.range, Item::Second(j)));
    }
    items.sort_by_key(|(r, _)| (r.start, r.end));

    let mut out = Vec::new();
    let mut delta_before: isize = 0;
    let mut i = 0;
    while i < items.len() {
        let mut cluster = TextRange::new(items[i].0.start, items[i].0.end);
        let mut k = i + 1;
        while k < items.len() && items[k].0.start <= cluster.end {
            cluster.end = cluster.end.max(items[k].0.end);
            k += 1;
        }
        let mut cluster_delta: isize = 0;
        let mut seconds: Vec<&TextEdit> = Vec::new();
        let mut descriptions: Vec<&str> = Vec::new();
        for (_, item) in &items[i..k] {
            match item {
                Item::First(index, own_delta) => {
                    cluster_delta += own_delta;
                    descriptions.push(&first[*index].1);
                }
                Item::Second(index) => {
                    seconds.push(&second[*index].0);
                    descriptions.push(&second[*index].1);
                }
            }
        }
        let mut new_text = String::new();
        let mut cursor = cluster.start;
        for edit in seconds {
            new_text.push_str(text1.get(cursor..edit.range.start).unwrap_or(""));
            new_text.push_str(&edit.new_text);
            cursor = edit.range.end;
        }
        new_text.push_str(text1.get(cursor..cluster.end).unwrap_or(""));
        let range = TextRange::new(
            cluster.start.wrapping_add_signed(-delta_before),
            cluster
                .end
                .wrapping_add_signed(-(delta_before + cluster_delta)),
        );
        out.push((TextEdit::replace(range, new_text), descriptions.join("; ")));
        delta_before += cluster_delta;
        i = k;
    }
    out
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
        let out = apply_edits(text, &[edit]).unwrap();
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
        let out = apply_edits(text, &[edit]).unwrap();
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
        let out = apply_edits(text, &edits).unwrap();
        assert_eq!(
            out,
            "@You:\nhello\n@Assistant:\n**Tool Use:** `slack.list` (`t1`)\n```json\n{}\n```\n"
        );
    }
}
