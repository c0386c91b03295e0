//! The syntax tree of a `.chat` document.
//!
//! Every byte of the text belongs to exactly one leaf: the frontmatter, the preamble, a role line
//! or a segment of a message body. Nodes hold byte ranges into the document's text (never copies
//! of it), plus the few decoded values a consumer needs (tool names, ids, suffix tokens).

use crate::TextRange;
use crate::suffix::Suffix;

/// How bad a diagnostic is. Mirrors LSP severities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
    Information,
    Hint,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Information => "information",
            Severity::Hint => "hint",
        }
    }
}

/// What a syntax diagnostic is about; stable, so code actions can match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiagnosticCode {
    UnclosedFence,
    UnclosedFrontmatter,
    ToolUseWithoutFence,
    ToolResultWithoutFence,
    JobResultWithoutFence,
    InvalidToolInput,
    MalformedHeader,
    LegacyInlineRole,
    UnknownRole,
    LuaFrontmatter,
    UnknownFrontmatterLanguage,
    UnterminatedThinking,
    JobResultInAssistant,
    ColonToolNamespace,
    InvalidSuffix,
}

impl DiagnosticCode {
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticCode::UnclosedFence => "unclosed-fence",
            DiagnosticCode::UnclosedFrontmatter => "unclosed-frontmatter",
            DiagnosticCode::ToolUseWithoutFence => "tool-use-without-fence",
            DiagnosticCode::ToolResultWithoutFence => "tool-result-without-fence",
            DiagnosticCode::JobResultWithoutFence => "job-result-without-fence",
            DiagnosticCode::InvalidToolInput => "invalid-tool-input",
            DiagnosticCode::MalformedHeader => "malformed-header",
            DiagnosticCode::LegacyInlineRole => "legacy-inline-role",
            DiagnosticCode::UnknownRole => "unknown-role",
            DiagnosticCode::LuaFrontmatter => "lua-frontmatter",
            DiagnosticCode::UnknownFrontmatterLanguage => "unknown-frontmatter-language",
            DiagnosticCode::UnterminatedThinking => "unterminated-thinking",
            DiagnosticCode::JobResultInAssistant => "job-result-in-assistant",
            DiagnosticCode::ColonToolNamespace => "colon-tool-namespace",
            DiagnosticCode::InvalidSuffix => "invalid-suffix",
        }
    }
}

/// A problem found while parsing. Parsing never fails; it reports these instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub range: TextRange,
    pub severity: Severity,
    pub code: DiagnosticCode,
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn new(
        range: TextRange,
        severity: Severity,
        code: DiagnosticCode,
        message: impl Into<String>,
    ) -> Self {
        Self {
            range,
            severity,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn shift(&mut self, delta: isize) {
        self.range = self.range.shifted(delta);
    }
}

/// The language of the frontmatter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontmatterLanguage {
    Rhai,
    Json,
    /// Recognised for Flemma compatibility; not executed (blocking diagnostic).
    Lua,
    /// Any other info string.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    /// The whole block, opener line to closer line (with its line break).
    pub range: TextRange,
    pub language: FrontmatterLanguage,
    /// The info string as written (`rhai`, `json`, `yaml`…).
    pub language_range: TextRange,
    /// The code between the opener and the closer lines.
    pub code: TextRange,
}

/// A message role. Roles are case-sensitive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    You,
    Assistant,
    System,
    /// Any other alphanumeric role (`@Note:`): kept, never sent.
    Other(String),
}

impl Role {
    pub fn from_name(name: &str) -> Self {
        match name {
            "You" => Role::You,
            "Assistant" => Role::Assistant,
            "System" => Role::System,
            other => Role::Other(other.to_owned()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Role::You => "You",
            Role::Assistant => "Assistant",
            Role::System => "System",
            Role::Other(name) => name,
        }
    }

    /// Whether `{{ }}`, `{% %}` and `@./file` references are recognised in this role's text.
    pub fn is_templated(&self) -> bool {
        matches!(self, Role::You | Role::System)
    }
}

/// A fenced block: opener line, content, closer line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The opener line, without its line break.
    pub open: TextRange,
    /// The info string (language) on the opener line; empty when none.
    pub info: TextRange,
    /// Number of backticks of the opener.
    pub ticks: usize,
    /// The lines between opener and closer (with their line breaks).
    pub content: TextRange,
    /// The closer line without its line break; `None` when the fence is unclosed.
    pub close: Option<TextRange>,
}

impl Fence {
    fn shift(&mut self, delta: isize) {
        self.open = self.open.shifted(delta);
        self.info = self.info.shifted(delta);
        self.content = self.content.shifted(delta);
        self.close = self.close.map(|r| r.shifted(delta));
    }
}

/// `**Tool Use:** `name` (`id`)` plus its JSON fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUse {
    /// The header line without its line break.
    pub header: TextRange,
    /// The tool name as written (may use the legacy `:` separator).
    pub name_range: TextRange,
    /// The tool name normalised to `.` namespaces.
    pub name: String,
    pub id_range: TextRange,
    pub id: String,
    pub fence: Option<Fence>,
    /// Whether the fence content is a valid JSON object.
    pub input_is_valid: bool,
}

/// `**Tool Result:** `id` (suffix)` plus its fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub header: TextRange,
    pub id_range: TextRange,
    pub tool_use_id: String,
    /// The parenthesised suffix, when present.
    pub suffix: Option<Suffix>,
    /// Range of the suffix text including its parentheses.
    pub suffix_range: Option<TextRange>,
    pub fence: Option<Fence>,
}

/// `**Job Result:** `job_id` (suffix)` plus its fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    pub header: TextRange,
    pub id_range: TextRange,
    pub job_id: String,
    pub suffix: Option<Suffix>,
    pub suffix_range: Option<TextRange>,
    pub fence: Option<Fence>,
}

/// A thinking block in one of its four forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thinking {
    /// The opening tag line, without its line break.
    pub open: TextRange,
    /// `anthropic`, `openai`, `vertex`… when signed.
    pub provider: Option<String>,
    /// The signature payload, when signed.
    pub signature: Option<String>,
    pub redacted: bool,
    /// `<thinking provider:signature="…"/>`: no body, no closing tag.
    pub self_closing: bool,
    /// The lines between the tags.
    pub content: TextRange,
    /// The closing tag line; `None` for self-closing or unterminated blocks.
    pub close: Option<TextRange>,
}

/// `<!-- flemma:aborted: … -->`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aborted {
    pub message: String,
}

/// `{{ expr }}` or `{% code %}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The Rhai source between the delimiters (trim markers excluded).
    pub code: TextRange,
    /// `{{-` / `{%-`: trim whitespace before the tag back to and including the previous newline.
    pub trim_before: bool,
    /// `-}}` / `-%}`: trim whitespace after the tag up to and including the next newline.
    pub trim_after: bool,
}

/// `@./path;type=…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReference {
    /// The path as written, after the `@` (without options): `./a%20b.md`, `~/x`, `//abs`.
    pub raw_path: TextRange,
    /// The path percent-decoded, with `@//` turned into `/`: `./a b.md`, `~/x`, `/abs`.
    pub path: String,
    /// `;key=value` options, values unquoted.
    pub options: Vec<(String, String)>,
}

impl FileReference {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
///
/// Structured payloads are boxed so the common text and template segments stay small (the tree
/// of a 10 MB chat must stay under twice the file's size).
pub enum SegmentKind {
    Text,
    ToolUse(Box<ToolUse>),
    ToolResult(Box<ToolResult>),
    JobResult(Box<JobResult>),
    Thinking(Box<Thinking>),
    Aborted(Box<Aborted>),
    Expression(Template),
    Code(Template),
    FileReference(Box<FileReference>),
}

impl SegmentKind {
    /// The name used in the JSON form of the tree.
    pub fn name(&self) -> &'static str {
        match self {
            SegmentKind::Text => "text",
            SegmentKind::ToolUse(_) => "tool_use",
            SegmentKind::ToolResult(_) => "tool_result",
            SegmentKind::JobResult(_) => "job_result",
            SegmentKind::Thinking(_) => "thinking",
            SegmentKind::Aborted(_) => "aborted",
            SegmentKind::Expression(_) => "expression",
            SegmentKind::Code(_) => "code",
            SegmentKind::FileReference(_) => "file_reference",
        }
    }
}

/// A piece of a message body. The segments of a message tile its body exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub range: TextRange,
    pub kind: SegmentKind,
}

impl Segment {
    pub(crate) fn shift(&mut self, delta: isize) {
        self.range = self.range.shifted(delta);
        match &mut self.kind {
            SegmentKind::Text | SegmentKind::Aborted(_) => {}
            SegmentKind::ToolUse(t) => {
                t.header = t.header.shifted(delta);
                t.name_range = t.name_range.shifted(delta);
                t.id_range = t.id_range.shifted(delta);
                if let Some(f) = &mut t.fence {
                    f.shift(delta);
                }
            }
            SegmentKind::ToolResult(t) => {
                t.header = t.header.shifted(delta);
                t.id_range = t.id_range.shifted(delta);
                t.suffix_range = t.suffix_range.map(|r| r.shifted(delta));
                if let Some(f) = &mut t.fence {
                    f.shift(delta);
                }
            }
            SegmentKind::JobResult(t) => {
                t.header = t.header.shifted(delta);
                t.id_range = t.id_range.shifted(delta);
                t.suffix_range = t.suffix_range.map(|r| r.shifted(delta));
                if let Some(f) = &mut t.fence {
                    f.shift(delta);
                }
            }
            SegmentKind::Thinking(t) => {
                t.open = t.open.shifted(delta);
                t.content = t.content.shifted(delta);
                t.close = t.close.map(|r| r.shifted(delta));
            }
            SegmentKind::Expression(t) | SegmentKind::Code(t) => {
                t.code = t.code.shifted(delta);
            }
            SegmentKind::FileReference(f) => {
                f.raw_path = f.raw_path.shifted(delta);
            }
        }
    }
}

/// A role line and the body under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Role line through the end of the body.
    pub range: TextRange,
    pub role: Role,
    /// The role line including its line break.
    pub role_line: TextRange,
    /// Everything after the role line up to the next message (segments tile it).
    pub body: TextRange,
    /// The body without its trailing blank lines.
    pub content: TextRange,
    pub segments: Vec<Segment>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Message {
    pub(crate) fn shift(&mut self, delta: isize) {
        self.range = self.range.shifted(delta);
        self.role_line = self.role_line.shifted(delta);
        self.body = self.body.shifted(delta);
        self.content = self.content.shifted(delta);
        for segment in &mut self.segments {
            segment.shift(delta);
        }
        for diagnostic in &mut self.diagnostics {
            diagnostic.shift(delta);
        }
    }

    pub fn tool_uses(&self) -> impl Iterator<Item = (&Segment, &ToolUse)> {
        self.segments.iter().filter_map(|s| match &s.kind {
            SegmentKind::ToolUse(t) => Some((s, &**t)),
            _ => None,
        })
    }

    pub fn tool_results(&self) -> impl Iterator<Item = (&Segment, &ToolResult)> {
        self.segments.iter().filter_map(|s| match &s.kind {
            SegmentKind::ToolResult(t) => Some((s, &**t)),
            _ => None,
        })
    }

    pub fn job_results(&self) -> impl Iterator<Item = (&Segment, &JobResult)> {
        self.segments.iter().filter_map(|s| match &s.kind {
            SegmentKind::JobResult(t) => Some((s, &**t)),
            _ => None,
        })
    }

    /// Whether this assistant turn ends with the abort marker.
    pub fn is_aborted(&self) -> bool {
        self.segments
            .iter()
            .any(|s| matches!(s.kind, SegmentKind::Aborted(_)))
    }
}
