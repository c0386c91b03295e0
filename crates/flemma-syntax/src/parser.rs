//! The parser: a line scanner over byte offsets. Never fails, never panics.

use crate::TextRange;
use crate::lines::{
    Line, fence_closer, fence_opener, is_blank, legacy_inline_role, line_at, role_line, trim_end,
};
use crate::scan::scan_templated;
use crate::suffix::Suffix;
use crate::tree::*;

/// Frontmatter and preamble of a document, and where its first message starts.
pub(crate) struct Head {
    pub frontmatter: Option<Frontmatter>,
    pub preamble: TextRange,
    pub diagnostics: Vec<Diagnostic>,
    /// Whether line 1 opens a frontmatter-like fence that never closes. Any later edit may add
    /// the closer and turn messages into frontmatter, so incremental re-analysis starts over.
    pub head_sensitive: bool,
}

pub(crate) fn parse_head(text: &str) -> Head {
    let bytes = text.as_bytes();
    let mut diagnostics = Vec::new();
    let mut frontmatter = None;
    let mut body_start = 0;
    let mut head_sensitive = false;
    if !bytes.is_empty() {
        let first = line_at(bytes, 0);
        if let Some(language_range) = frontmatter_opener(bytes, first) {
            head_sensitive = true;
            let mut pos = first.next;
            while pos < bytes.len() {
                let line = line_at(bytes, pos);
                if is_frontmatter_closer(bytes, line) {
                    let language_text = &text[language_range.start..language_range.end];
                    let language = match language_text {
                        "rhai" => FrontmatterLanguage::Rhai,
                        "json" => FrontmatterLanguage::Json,
                        "lua" => FrontmatterLanguage::Lua,
                        _ => FrontmatterLanguage::Other,
                    };
                    let range = TextRange::new(0, line.next);
                    match language {
                        FrontmatterLanguage::Lua => diagnostics.push(Diagnostic::new(
                            language_range,
                            Severity::Error,
                            DiagnosticCode::LuaFrontmatter,
                            "Lua frontmatter is not supported; use rhai or json (`flemmad fmt --convert-lua FILE` or the editor's code action converts the common declarative subset to Rhai)",
                        )),
                        FrontmatterLanguage::Other => diagnostics.push(Diagnostic::new(
                            language_range,
                            Severity::Error,
                            DiagnosticCode::UnknownFrontmatterLanguage,
                            format!("unknown frontmatter language `{language_text}`; use rhai or json, or configure a parser for it (templating.frontmatter_parsers)"),
                        )),
                        _ => {}
                    }
                    frontmatter = Some(Frontmatter {
                        range,
                        language,
                        language_range,
                        code: TextRange::new(first.next, line.start),
                    });
                    body_start = line.next;
                    head_sensitive = false;
                    break;
                }
                pos = line.next;
            }
            if head_sensitive {
                diagnostics.push(Diagnostic::new(
                    TextRange::new(first.start, first.end),
                    Severity::Error,
                    DiagnosticCode::UnclosedFrontmatter,
                    "this frontmatter fence is never closed, so the frontmatter is ignored; close it with ``` on its own line before the first message",
                ));
            }
        }
    }
    // The preamble: lines before the first role line. Fences are not tracked here.
    let mut pos = body_start;
    while pos < bytes.len() {
        let line = line_at(bytes, pos);
        if role_line(bytes, line).is_some() {
            break;
        }
        if let Some(role) = legacy_inline_role(bytes, line) {
            diagnostics.push(legacy_diagnostic(line, role));
        }
        pos = line.next;
    }
    Head {
        frontmatter,
        preamble: TextRange::new(body_start, pos),
        diagnostics,
        head_sensitive,
    }
}

fn frontmatter_opener(bytes: &[u8], line: Line) -> Option<TextRange> {
    let text = &bytes[line.start..line.end];
    if !text.starts_with(b"```") || text.get(3) == Some(&b'`') {
        return None;
    }
    let info_end = trim_end(bytes, line.start + 3, line.end);
    let info = &bytes[line.start + 3..info_end];
    if !info.is_empty()
        && info
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+'))
    {
        Some(TextRange::new(line.start + 3, info_end))
    } else {
        None
    }
}

fn is_frontmatter_closer(bytes: &[u8], line: Line) -> bool {
    let text = &bytes[line.start..line.end];
    text.starts_with(b"```") && text[3..].iter().all(|b| *b == b' ' || *b == b'\t')
}

fn legacy_diagnostic(line: Line, role: &str) -> Diagnostic {
    Diagnostic::new(
        TextRange::new(line.start, line.end),
        Severity::Warning,
        DiagnosticCode::LegacyInlineRole,
        format!(
            "`@{role}:` must stand alone on its line; this line is plain text. Put the text on the next line (`flemmad fmt` or the quick fix does it)"
        ),
    )
}

/// Parses messages starting at `start` (which must be a role line, or the end of the text).
/// `resync(new_start)` is asked at every message start after the first; when it returns true
/// parsing stops there and the offset is returned.
pub(crate) fn parse_messages(
    text: &str,
    start: usize,
    mut resync: impl FnMut(usize) -> bool,
) -> (Vec<Message>, Option<usize>) {
    let bytes = text.as_bytes();
    let mut messages = Vec::new();
    let mut pos = start;
    while pos < bytes.len() {
        if !messages.is_empty() && resync(pos) {
            return (messages, Some(pos));
        }
        let line = line_at(bytes, pos);
        let Some((name_start, name_end)) = role_line(bytes, line) else {
            // Not a role line: cannot happen when callers respect the contract; recover by
            // treating the rest as preamble-like text of an unknown message.
            break;
        };
        let message =
            MessageParser::new(text, Role::from_name(&text[name_start..name_end]), line).parse();
        pos = message.range.end;
        messages.push(message);
    }
    (messages, None)
}

struct MessageParser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    role: Role,
    role_line: Line,
    segments: Vec<Segment>,
    diagnostics: Vec<Diagnostic>,
    /// Start of the text run not yet pushed as segments.
    text_start: usize,
}

impl<'a> MessageParser<'a> {
    fn new(text: &'a str, role: Role, role_line: Line) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            role,
            role_line,
            segments: Vec::new(),
            diagnostics: Vec::new(),
            text_start: role_line.next,
        }
    }

    fn parse(mut self) -> Message {
        let bytes = self.bytes;
        let body_start = self.role_line.next;
        if let Role::Other(name) = &self.role {
            self.diagnostics.push(Diagnostic::new(
                TextRange::new(self.role_line.start, self.role_line.end),
                Severity::Hint,
                DiagnosticCode::UnknownRole,
                format!("`@{name}:` is not a role flemmad sends (You, Assistant, System); this message is kept in the file and never sent"),
            ));
        }
        let mut pos = body_start;
        // Text fence state: (ticks, opener line).
        let mut fence: Option<(usize, Line)> = None;
        let is_assistant = self.role == Role::Assistant;
        let is_you = self.role == Role::You;
        while pos < bytes.len() {
            let line = line_at(bytes, pos);
            if let Some((ticks, _)) = fence {
                if fence_closer(bytes, line, ticks) {
                    fence = None;
                }
                pos = line.next;
                continue;
            }
            let first = bytes.get(line.start).copied().unwrap_or(b'\n');
            match first {
                b'@' => {
                    if role_line(bytes, line).is_some() {
                        break;
                    }
                    if let Some(role) = legacy_inline_role(bytes, line) {
                        self.diagnostics.push(legacy_diagnostic(line, role));
                    }
                }
                b'`' => {
                    if let Some(ticks) = fence_opener(bytes, line) {
                        fence = Some((ticks, line));
                    }
                }
                b'*' if is_assistant && self.starts_with(line, "**Tool Use:**") => {
                    if let Some(end) = self.tool_use(line) {
                        pos = end;
                        continue;
                    }
                }
                b'*' if is_you && self.starts_with(line, "**Tool Result:**") => {
                    if let Some(end) = self.result_block(line, true) {
                        pos = end;
                        continue;
                    }
                }
                b'*' if self.starts_with(line, "**Job Result:**") => {
                    if is_you {
                        if let Some(end) = self.result_block(line, false) {
                            pos = end;
                            continue;
                        }
                    } else if is_assistant {
                        self.diagnostics.push(Diagnostic::new(
                            TextRange::new(line.start, line.end),
                            Severity::Hint,
                            DiagnosticCode::JobResultInAssistant,
                            "a job result written by the model is not a job result (real ones arrive in @You: messages); this is plain text",
                        ));
                    }
                }
                b'<' if is_assistant => {
                    if let Some(end) = self.thinking(line) {
                        pos = end;
                        continue;
                    }
                    if let Some(end) = self.abort_marker(line) {
                        pos = end;
                        continue;
                    }
                }
                _ => {}
            }
            pos = line.next;
        }
        let end = pos;
        if let Some((_, opener)) = fence {
            self.diagnostics.push(Diagnostic::new(
                TextRange::new(opener.start, opener.end),
                Severity::Error,
                DiagnosticCode::UnclosedFence,
                "unclosed fence: this code block runs to the end of the file and swallows every message after it; add a closing line of backticks",
            ));
        }
        self.flush_text(end);
        let content = TextRange::new(body_start, content_end(bytes, body_start, end));
        Message {
            range: TextRange::new(self.role_line.start, end),
            role: self.role,
            role_line: TextRange::new(self.role_line.start, self.role_line.next),
            body: TextRange::new(body_start, end),
            content,
            segments: self.segments,
            diagnostics: self.diagnostics,
        }
    }

    fn starts_with(&self, line: Line, prefix: &str) -> bool {
        self.bytes[line.start..line.end].starts_with(prefix.as_bytes())
    }

    /// Pushes the pending text run up to `end` as segments.
    fn flush_text(&mut self, end: usize) {
        if self.text_start >= end {
            return;
        }
        let range = TextRange::new(self.text_start, end);
        if self.role.is_templated() {
            self.segments.extend(scan_templated(self.text, range));
        } else {
            self.segments.push(Segment {
                range,
                kind: SegmentKind::Text,
            });
        }
        self.text_start = end;
    }

    fn push_block(&mut self, start: usize, end: usize, kind: SegmentKind) {
        self.flush_text(start);
        self.segments.push(Segment {
            range: TextRange::new(start, end),
            kind,
        });
        self.text_start = end;
    }

    /// Finds the fence after a header: blank lines, then an opener. Returns the fence and the
    /// end of the block, or `None` when the next non-blank line is not an opener.
    fn fence_after(&mut self, header: Line) -> Option<(Fence, usize)> {
        let bytes = self.bytes;
        let mut pos = header.next;
        while pos < bytes.len() {
            let line = line_at(bytes, pos);
            if is_blank(bytes, line) && line.next > line.start {
                pos = line.next;
                continue;
            }
            let ticks = fence_opener(bytes, line)?;
            let info = TextRange::new(
                line.start + ticks,
                trim_end(bytes, line.start + ticks, line.end),
            );
            let content_start = line.next;
            let mut p = content_start;
            while p < bytes.len() {
                let inner = line_at(bytes, p);
                if fence_closer(bytes, inner, ticks) {
                    return Some((
                        Fence {
                            open: TextRange::new(line.start, line.end),
                            info,
                            ticks,
                            content: TextRange::new(content_start, inner.start),
                            close: Some(TextRange::new(inner.start, inner.end)),
                        },
                        inner.next,
                    ));
                }
                p = inner.next;
            }
            self.diagnostics.push(Diagnostic::new(
                TextRange::new(line.start, line.end),
                Severity::Error,
                DiagnosticCode::UnclosedFence,
                "unclosed fence: this block runs to the end of the file and swallows every message after it; add a closing line of backticks",
            ));
            return Some((
                Fence {
                    open: TextRange::new(line.start, line.end),
                    info,
                    ticks,
                    content: TextRange::new(content_start, bytes.len()),
                    close: None,
                },
                bytes.len(),
            ));
        }
        None
    }

    fn tool_use(&mut self, header: Line) -> Option<usize> {
        let text = self.text;
        let header_range = TextRange::new(header.start, header.end);
        let mut cursor = Cursor::new(self.bytes, header.start + "**Tool Use:**".len(), header.end);
        let parsed = (|| {
            cursor.spaces();
            let name = cursor.backticked()?;
            cursor.spaces();
            cursor.byte(b'(')?;
            let id = cursor.backticked()?;
            cursor.byte(b')')?;
            Some((name, id))
        })();
        let Some((name_range, id_range)) = parsed else {
            self.diagnostics.push(Diagnostic::new(
                header_range,
                Severity::Warning,
                DiagnosticCode::MalformedHeader,
                "malformed tool use header; expected **Tool Use:** `name` (`id`)",
            ));
            return None;
        };
        let raw_name = &text[name_range.start..name_range.end];
        let name = if raw_name.contains(':') {
            self.diagnostics.push(Diagnostic::new(
                name_range,
                Severity::Hint,
                DiagnosticCode::ColonToolNamespace,
                format!("`{raw_name}` uses the Flemma 0.11 `:` namespace separator; it is read as `{}` (`flemmad fmt` rewrites it)", raw_name.replace(':', ".")),
            ));
            raw_name.replace(':', ".")
        } else {
            raw_name.to_owned()
        };
        let id = text[id_range.start..id_range.end].to_owned();
        let (fence, end) = match self.fence_after(header) {
            Some((fence, end)) => (Some(fence), end),
            None => {
                self.diagnostics.push(Diagnostic::new(
                    header_range,
                    Severity::Error,
                    DiagnosticCode::ToolUseWithoutFence,
                    "tool use requires a fenced block with JSON input",
                ));
                (None, header.next)
            }
        };
        let mut input_is_valid = false;
        if let Some(fence) = &fence {
            let input = &text[fence.content.start..fence.content.end];
            match validate_json_object(input) {
                Ok(()) => input_is_valid = true,
                Err(problem) => self.diagnostics.push(Diagnostic::new(
                    if fence.content.is_empty() {
                        fence.open
                    } else {
                        fence.content
                    },
                    Severity::Warning,
                    DiagnosticCode::InvalidToolInput,
                    format!(
                        "tool input is not a valid JSON object ({problem}); it is kept as written"
                    ),
                )),
            }
        }
        self.push_block(
            header.start,
            end,
            SegmentKind::ToolUse(Box::new(ToolUse {
                header: header_range,
                name_range,
                name,
                id_range,
                id,
                fence,
                input_is_valid,
            })),
        );
        Some(end)
    }

    /// `**Tool Result:**` (tool = true) or `**Job Result:**` blocks.
    fn result_block(&mut self, header: Line, tool: bool) -> Option<usize> {
        let text = self.text;
        let prefix = if tool {
            "**Tool Result:**"
        } else {
            "**Job Result:**"
        };
        let header_range = TextRange::new(header.start, header.end);
        let mut cursor = Cursor::new(self.bytes, header.start + prefix.len(), header.end);
        cursor.spaces();
        let Some(id_range) = cursor.backticked() else {
            self.diagnostics.push(Diagnostic::new(
                header_range,
                Severity::Warning,
                DiagnosticCode::MalformedHeader,
                if tool {
                    "malformed tool result header; expected **Tool Result:** `id` (status)"
                } else {
                    "malformed job result header; expected **Job Result:** `job_id`"
                },
            ));
            return None;
        };
        cursor.spaces();
        let mut suffix = None;
        let mut suffix_range = None;
        if cursor.peek() == Some(b'(') {
            let open = cursor.pos;
            let close = closing_paren(self.bytes, open + 1, header.end).or_else(|| {
                // Broken quoting: fall back to the last `)` so the status is still read.
                memchr::memrchr(b')', &self.bytes[open + 1..header.end]).map(|i| open + 1 + i)
            });
            match close {
                Some(close) => {
                    let (parsed, problem) = Suffix::parse(&text[open + 1..close]);
                    if let Some(problem) = problem {
                        self.diagnostics.push(Diagnostic::new(
                            TextRange::new(open, close + 1),
                            Severity::Warning,
                            DiagnosticCode::InvalidSuffix,
                            problem,
                        ));
                    }
                    suffix = Some(parsed);
                    suffix_range = Some(TextRange::new(open, close + 1));
                }
                None => self.diagnostics.push(Diagnostic::new(
                    TextRange::new(open, header.end),
                    Severity::Warning,
                    DiagnosticCode::InvalidSuffix,
                    "header suffix has no closing parenthesis; it is ignored",
                )),
            }
        }
        let id = text[id_range.start..id_range.end].to_owned();
        let (fence, end) = match self.fence_after(header) {
            Some((fence, end)) => (Some(fence), end),
            None => {
                self.diagnostics.push(Diagnostic::new(
                    header_range,
                    Severity::Error,
                    if tool {
                        DiagnosticCode::ToolResultWithoutFence
                    } else {
                        DiagnosticCode::JobResultWithoutFence
                    },
                    if tool {
                        "tool result requires a fenced block (an empty one for a placeholder: two lines of ```)"
                    } else {
                        "job result requires a fenced block"
                    },
                ));
                (None, header.next)
            }
        };
        let kind = if tool {
            SegmentKind::ToolResult(Box::new(ToolResult {
                header: header_range,
                id_range,
                tool_use_id: id,
                suffix,
                suffix_range,
                fence,
            }))
        } else {
            SegmentKind::JobResult(Box::new(JobResult {
                header: header_range,
                id_range,
                job_id: id,
                suffix,
                suffix_range,
                fence,
            }))
        };
        self.push_block(header.start, end, kind);
        Some(end)
    }

    fn thinking(&mut self, line: Line) -> Option<usize> {
        let bytes = self.bytes;
        let tag_end = trim_end(bytes, line.start, line.end);
        let tag = &self.text[line.start..tag_end];
        let inner = tag.strip_prefix("<thinking")?;
        let (attributes, self_closing) = if let Some(a) = inner.strip_suffix("/>") {
            (a, true)
        } else {
            (inner.strip_suffix('>')?, false)
        };
        let mut provider = None;
        let mut signature = None;
        let mut redacted = false;
        let attributes = attributes.trim_start_matches([' ', '\t']);
        if attributes.len() == inner.len() - if self_closing { 2 } else { 1 }
            && !attributes.is_empty()
        {
            // `<thinkingX>`: no space after the tag name.
            return None;
        }
        if attributes == "redacted" {
            redacted = true;
        } else if !attributes.is_empty() {
            let (prov, rest) = attributes.split_once(":signature=\"")?;
            let payload = rest.trim_end().strip_suffix('"')?;
            if prov.is_empty()
                || !prov
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return None;
            }
            provider = Some(prov.to_owned());
            signature = Some(crate::write::unescape_attribute(payload));
        }
        if self_closing && (redacted || signature.is_none()) {
            return None;
        }
        let open = TextRange::new(line.start, line.end);
        if self_closing {
            self.push_block(
                line.start,
                line.next,
                SegmentKind::Thinking(Box::new(Thinking {
                    open,
                    provider,
                    signature,
                    redacted,
                    self_closing: true,
                    content: TextRange::empty(line.next),
                    close: None,
                })),
            );
            return Some(line.next);
        }
        let content_start = line.next;
        let mut pos = content_start;
        let mut close = None;
        let mut end = bytes.len();
        while pos < bytes.len() {
            let inner = line_at(bytes, pos);
            if role_line(bytes, inner).is_some() {
                end = pos;
                break;
            }
            let trimmed = trim_end(bytes, inner.start, inner.end);
            if &bytes[inner.start..trimmed] == b"</thinking>" {
                close = Some(TextRange::new(inner.start, inner.end));
                end = inner.next;
                break;
            }
            pos = inner.next;
        }
        let content_end = close.map_or(end, |c| c.start);
        if close.is_none() {
            self.diagnostics.push(Diagnostic::new(
                open,
                Severity::Warning,
                DiagnosticCode::UnterminatedThinking,
                "thinking block has no </thinking> line; its remaining content is kept as thinking",
            ));
        }
        self.push_block(
            line.start,
            end,
            SegmentKind::Thinking(Box::new(Thinking {
                open,
                provider,
                signature,
                redacted,
                self_closing: false,
                content: TextRange::new(content_start, content_end),
                close,
            })),
        );
        Some(end)
    }

    fn abort_marker(&mut self, line: Line) -> Option<usize> {
        let end = trim_end(self.bytes, line.start, line.end);
        let tag = &self.text[line.start..end];
        let message = tag
            .strip_prefix("<!-- flemma:aborted:")?
            .strip_suffix("-->")?
            .trim()
            .to_owned();
        self.push_block(
            line.start,
            line.next,
            SegmentKind::Aborted(Box::new(Aborted { message })),
        );
        Some(line.next)
    }
}

/// The end of the last non-blank line of `[start, end)` (after its line break).
fn content_end(bytes: &[u8], start: usize, end: usize) -> usize {
    let mut i = end;
    while i > start && bytes[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i == start {
        return start;
    }
    match memchr::memchr(b'\n', &bytes[i..end]) {
        Some(n) => i + n + 1,
        None => end,
    }
}

fn validate_json_object(input: &str) -> Result<(), String> {
    let trimmed = input.trim_start();
    if !trimmed.starts_with('{') {
        return Err(if trimmed.is_empty() {
            "the block is empty".to_owned()
        } else {
            "expected an object starting with `{`".to_owned()
        });
    }
    serde_json::from_str::<serde::de::IgnoredAny>(input)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn closing_paren(bytes: &[u8], mut i: usize, end: usize) -> Option<usize> {
    let mut quote = None;
    while i < end {
        let b = bytes[i];
        match quote {
            Some(q) => {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'\'' | b'"' => quote = Some(b),
                b')' => return Some(i),
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// A tiny cursor over a header line.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8], pos: usize, end: usize) -> Self {
        Self {
            bytes,
            pos: pos.min(end),
            end,
        }
    }

    fn peek(&self) -> Option<u8> {
        (self.pos < self.end).then(|| self.bytes[self.pos])
    }

    fn spaces(&mut self) {
        while self.peek().is_some_and(|b| b == b' ' || b == b'\t') {
            self.pos += 1;
        }
    }

    fn byte(&mut self, expected: u8) -> Option<()> {
        (self.peek()? == expected).then(|| self.pos += 1)
    }

    /// `` `content` `` with non-empty content; returns the content range.
    fn backticked(&mut self) -> Option<TextRange> {
        self.byte(b'`')?;
        let start = self.pos;
        let len = memchr::memchr(b'`', &self.bytes[start..self.end])?;
        if len == 0 {
            return None;
        }
        self.pos = start + len + 1;
        Some(TextRange::new(start, start + len))
    }
}
