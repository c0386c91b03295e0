//! [`Document`]: the parsed text, its tree, printing, incremental re-analysis and queries.

use crate::parser::{parse_head, parse_messages};
use crate::suffix::Status;
use crate::text_edit::{EditError, TextEdit, TextEdits};
use crate::tree::*;
use crate::{Encoding, LineIndex, Position, TextRange};

/// A parsed `.chat` document: the text and its lossless tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    text: String,
    frontmatter: Option<Frontmatter>,
    preamble: TextRange,
    messages: Vec<Message>,
    /// Diagnostics of the frontmatter and the preamble.
    head_diagnostics: Vec<Diagnostic>,
    head_sensitive: bool,
}

/// A text's line-ending convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnding {
    /// `\n`.
    Lf,
    /// `\r\n`.
    CrLf,
}

impl LineEnding {
    /// The convention of `text`'s first line break; `Lf` when it has none.
    pub fn of(text: &str) -> Self {
        match memchr::memchr(b'\n', text.as_bytes()) {
            Some(nl) if nl > 0 && text.as_bytes()[nl - 1] == b'\r' => LineEnding::CrLf,
            _ => LineEnding::Lf,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::CrLf => "\r\n",
        }
    }

    /// Converts every lone `\n` of `text` to this convention (`\r\n` already there is kept).
    pub fn convert(self, text: String) -> String {
        match self {
            LineEnding::Lf => text,
            LineEnding::CrLf => {
                if !text.contains('\n') {
                    return text;
                }
                let mut out = String::with_capacity(text.len() + text.len() / 16);
                let mut previous = '\0';
                for ch in text.chars() {
                    if ch == '\n' && previous != '\r' {
                        out.push('\r');
                    }
                    out.push(ch);
                    previous = ch;
                }
                out
            }
        }
    }
}

/// The node found at a position: the message and, when inside one, the segment.
#[derive(Debug, Clone, Copy)]
pub enum NodeAt<'a> {
    Frontmatter(&'a Frontmatter),
    Preamble,
    RoleLine(&'a Message),
    Segment(&'a Message, &'a Segment),
}

impl Document {
    /// Parses `text`. Never fails: problems are reported as diagnostics.
    pub fn parse(text: impl Into<String>) -> Self {
        let text = text.into();
        let head = parse_head(&text);
        let (messages, _) = parse_messages(&text, head.preamble.end, |_| false);
        Self {
            frontmatter: head.frontmatter,
            preamble: head.preamble,
            messages,
            head_diagnostics: head.diagnostics,
            head_sensitive: head.head_sensitive,
            text,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text of a range (empty when the range is out of bounds).
    pub fn slice(&self, range: TextRange) -> &str {
        self.text.get(range.start..range.end).unwrap_or("")
    }

    pub fn frontmatter(&self) -> Option<&Frontmatter> {
        self.frontmatter.as_ref()
    }

    /// Lines before the first role line (after the frontmatter). Never sent.
    pub fn preamble(&self) -> TextRange {
        self.preamble
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Every syntax diagnostic, in document order.
    pub fn diagnostics(&self) -> Vec<&Diagnostic> {
        let mut all: Vec<&Diagnostic> = self.head_diagnostics.iter().collect();
        for message in &self.messages {
            all.extend(message.diagnostics.iter());
        }
        all.sort_by_key(|d| (d.range.start, d.range.end));
        all
    }

    /// Re-creates the text from the tree's leaves: the frontmatter, the preamble, and for each
    /// message its role line and segments. Equal to [`Document::text`] for every input (the
    /// tree is lossless); tests assert it.
    pub fn print(&self) -> String {
        let mut out = String::with_capacity(self.text.len());
        if let Some(frontmatter) = &self.frontmatter {
            out.push_str(self.slice(frontmatter.range));
        }
        out.push_str(self.slice(self.preamble));
        for message in &self.messages {
            out.push_str(self.slice(message.role_line));
            for segment in &message.segments {
                out.push_str(self.slice(segment.range));
            }
        }
        out
    }

    /// A line index of the text, for position conversions (built on demand; callers that convert
    /// often should keep it).
    pub fn line_index(&self) -> LineIndex {
        LineIndex::new(&self.text)
    }

    /// Applies one edit and re-analyses only what it can affect: parsing restarts at the message
    /// holding the edit (the one before, when the edit touches a role line) and stops as soon as
    /// it reaches an unchanged message start after the edit; later messages are reused, shifted.
    ///
    /// An edit that is reversed, out of range or not on character boundaries is refused and the
    /// document is left as it was.
    pub fn edit(&mut self, edit: &TextEdit) -> Result<(), EditError> {
        TextEdits::new(vec![edit.clone()])?.check_against(&self.text)?;
        let TextRange { start, end } = edit.range;
        // Edits in the head (frontmatter, preamble, the first role line) or in a document whose
        // first line opens a frontmatter that never closes can change everything.
        let touches_role_line = |m: &Message| {
            start < m.role_line.end
                || (start == m.role_line.end && !self.text[..m.role_line.end].ends_with('\n'))
        };
        let restart_index = match self.messages.first() {
            Some(first)
                if !self.head_sensitive
                    && first.range.start <= start
                    && !touches_role_line(first) =>
            {
                // The last message starting at or before the edit; the one before it when the
                // edit touches its role line.
                let k = self.messages.partition_point(|m| m.range.start <= start) - 1;
                Some(if touches_role_line(&self.messages[k]) {
                    k - 1
                } else {
                    k
                })
            }
            _ => None,
        };
        self.text.replace_range(start..end, &edit.new_text);
        let delta = edit.new_text.len() as isize - (end - start) as isize;
        let Some(restart_index) = restart_index else {
            *self = Document::parse(std::mem::take(&mut self.text));
            return Ok(());
        };
        let restart = self.messages[restart_index].range.start;
        // Old message starts after the edit, in new coordinates, for resynchronisation.
        let old_starts_after: Vec<usize> = self.messages[restart_index + 1..]
            .iter()
            .map(|m| m.range.start)
            .filter(|s| *s > end)
            .map(|s| s.wrapping_add_signed(delta))
            .collect();
        let edit_end_new = end.wrapping_add_signed(delta);
        let mut candidate = 0;
        let (new_messages, stopped_at) = parse_messages(&self.text, restart, |pos| {
            if pos <= edit_end_new {
                return false;
            }
            while candidate < old_starts_after.len() && old_starts_after[candidate] < pos {
                candidate += 1;
            }
            old_starts_after.get(candidate) == Some(&pos)
        });
        let mut tail: Vec<Message> = match stopped_at {
            Some(pos) => {
                let old_pos = pos.wrapping_add_signed(-delta);
                let keep_from = self.messages.partition_point(|m| m.range.start < old_pos);
                self.messages.drain(keep_from..).collect()
            }
            None => Vec::new(),
        };
        if delta != 0 {
            for message in &mut tail {
                message.shift(delta);
            }
        }
        self.messages.truncate(restart_index);
        self.messages.extend(new_messages);
        self.messages.extend(tail);
        Ok(())
    }

    /// Applies several edits (in any order, disjoint) as one change. Refused edits leave the
    /// document as it was.
    pub fn apply(&mut self, edits: &TextEdits) -> Result<(), EditError> {
        edits.check_against(&self.text)?;
        // From the last to the first, so earlier ranges stay valid.
        for edit in edits.as_slice().iter().rev() {
            self.edit(edit)?;
        }
        Ok(())
    }

    /// Appends text at the end (the streaming case).
    pub fn append(&mut self, text: &str) {
        let at = self.text.len();
        // An insertion at the end is always on a character boundary and in range.
        let inserted = self.edit(&TextEdit::insert(at, text));
        debug_assert!(inserted.is_ok());
    }

    /// The document's line-ending convention: the one of its first line break (`\n` for a text
    /// without one). Everything the writers add to the document uses it.
    pub fn line_ending(&self) -> LineEnding {
        LineEnding::of(&self.text)
    }

    /// `text` (written with `\n` line breaks) in the document's line-ending convention.
    pub fn in_line_ending(&self, text: impl Into<String>) -> String {
        self.line_ending().convert(text.into())
    }

    // ----- queries -----

    /// The index of the message holding `offset` (a role line or body byte).
    pub fn message_index_at(&self, offset: usize) -> Option<usize> {
        let k = self.messages.partition_point(|m| m.range.start <= offset);
        if k == 0 {
            return None;
        }
        let message = &self.messages[k - 1];
        (offset < message.range.end || (offset == self.text.len() && offset == message.range.end))
            .then_some(k - 1)
    }

    /// The message holding line `line` (0-based).
    pub fn message_at_line(&self, index: &LineIndex, line: usize) -> Option<&Message> {
        let offset = index.line_start(line);
        self.message_index_at(offset).map(|i| &self.messages[i])
    }

    /// The most specific node at `offset`.
    pub fn node_at(&self, offset: usize) -> Option<NodeAt<'_>> {
        if let Some(frontmatter) = &self.frontmatter {
            if offset < frontmatter.range.end {
                return Some(NodeAt::Frontmatter(frontmatter));
            }
        }
        if self.preamble.contains(offset) {
            return Some(NodeAt::Preamble);
        }
        let message = &self.messages[self.message_index_at(offset)?];
        if message.role_line.contains(offset) {
            return Some(NodeAt::RoleLine(message));
        }
        let k = message
            .segments
            .partition_point(|s| s.range.start <= offset);
        let segment = message.segments.get(k.checked_sub(1)?)?;
        (segment.range.contains(offset) || offset == segment.range.end)
            .then_some(NodeAt::Segment(message, segment))
    }

    /// The node at a line/column position in the given encoding.
    pub fn node_at_position(
        &self,
        index: &LineIndex,
        position: Position,
        encoding: Encoding,
    ) -> Option<NodeAt<'_>> {
        self.node_at(index.offset(&self.text, position, encoding))
    }

    /// The tool use with this id (the last one, if the file repeats an id).
    pub fn tool_use(&self, id: &str) -> Option<(&Message, &Segment, &ToolUse)> {
        self.messages.iter().rev().find_map(|m| {
            m.tool_uses()
                .filter(|(_, t)| t.id == id)
                .last()
                .map(|(s, t)| (m, s, t))
        })
    }

    /// The tool result answering a tool use id.
    pub fn tool_result(&self, tool_use_id: &str) -> Option<(&Message, &Segment, &ToolResult)> {
        self.messages.iter().rev().find_map(|m| {
            m.tool_results()
                .filter(|(_, t)| t.tool_use_id == tool_use_id)
                .last()
                .map(|(s, t)| (m, s, t))
        })
    }

    /// The job result block of a job id.
    pub fn job_result(&self, job_id: &str) -> Option<(&Message, &Segment, &JobResult)> {
        self.messages.iter().rev().find_map(|m| {
            if m.role != Role::You {
                return None;
            }
            m.job_results()
                .filter(|(_, j)| j.job_id == job_id)
                .last()
                .map(|(s, j)| (m, s, j))
        })
    }

    /// The tool result whose suffix carries `job=<job_id>`.
    pub fn tool_result_for_job(&self, job_id: &str) -> Option<(&Message, &Segment, &ToolResult)> {
        self.messages.iter().find_map(|m| {
            m.tool_results()
                .find(|(_, t)| {
                    t.suffix
                        .as_ref()
                        .and_then(|s| s.get("job"))
                        .is_some_and(|v| matches!(v, crate::SuffixValue::String(j) if j == job_id))
                })
                .map(|(s, t)| (m, s, t))
        })
    }

    /// Tool uses that have no tool result anywhere after them.
    pub fn unresolved_tool_uses(&self) -> Vec<(&Message, &Segment, &ToolUse)> {
        let mut out = Vec::new();
        for (i, message) in self.messages.iter().enumerate() {
            for (segment, tool_use) in message.tool_uses() {
                let answered = self.messages[i + 1..]
                    .iter()
                    .any(|m| m.tool_results().any(|(_, r)| r.tool_use_id == tool_use.id));
                if !answered {
                    out.push((message, segment, tool_use));
                }
            }
        }
        out
    }

    /// Tool result placeholders with the given status (`None`: every lifecycle status).
    pub fn placeholders(&self, status: Option<Status>) -> Vec<(&Message, &Segment, &ToolResult)> {
        let mut out = Vec::new();
        for message in &self.messages {
            for (segment, result) in message.tool_results() {
                let Some(current) = result.suffix.as_ref().and_then(|s| s.status()) else {
                    continue;
                };
                let wanted = match status {
                    Some(s) => current == s,
                    None => current.is_lifecycle(),
                };
                if wanted {
                    out.push((message, segment, result));
                }
            }
        }
        out
    }
}

impl Document {
    /// Bytes of heap memory held by the tree, excluding the text itself (an estimate that counts
    /// vector capacities and owned strings; used by the memory benchmark).
    pub fn tree_heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut total = self.messages.capacity() * size_of::<Message>()
            + self.head_diagnostics.capacity() * size_of::<Diagnostic>();
        for message in &self.messages {
            total += message.segments.capacity() * size_of::<Segment>()
                + message.diagnostics.capacity() * size_of::<Diagnostic>()
                + message
                    .diagnostics
                    .iter()
                    .map(|d| d.message.capacity())
                    .sum::<usize>();
            if let Role::Other(name) = &message.role {
                total += name.capacity();
            }
            for segment in &message.segments {
                total += match &segment.kind {
                    SegmentKind::ToolUse(t) => t.name.capacity() + t.id.capacity(),
                    SegmentKind::ToolResult(t) => {
                        t.tool_use_id.capacity()
                            + t.suffix.as_ref().map_or(0, |s| {
                                s.tokens.capacity() * size_of::<crate::suffix::SuffixToken>()
                                    + s.tokens.iter().map(|t| t.raw.capacity() * 2).sum::<usize>()
                            })
                    }
                    SegmentKind::JobResult(j) => j.job_id.capacity(),
                    SegmentKind::Thinking(t) => {
                        t.provider.as_ref().map_or(0, String::capacity)
                            + t.signature.as_ref().map_or(0, String::capacity)
                    }
                    SegmentKind::Aborted(a) => a.message.capacity(),
                    SegmentKind::FileReference(f) => {
                        f.path.capacity()
                            + f.options
                                .iter()
                                .map(|(k, v)| k.capacity() + v.capacity())
                                .sum::<usize>()
                    }
                    SegmentKind::Text | SegmentKind::Expression(_) | SegmentKind::Code(_) => 0,
                };
            }
        }
        total
    }
}
