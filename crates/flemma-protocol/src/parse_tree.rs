//! The JSON form of a parsed `.chat` document (`flemmad parse FILE --json`).
//!
//! Stable: fields are only ever added. Lines are 0-based; `character` counts in the encoding
//! the caller chose (UTF-16 code units by default, like LSP; UTF-8 bytes on request).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Range {
    pub start: Position,
    pub end: Position,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ParsedDocument {
    pub frontmatter: Option<FrontmatterJson>,
    pub messages: Vec<MessageJson>,
    pub diagnostics: Vec<DiagnosticJson>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FrontmatterJson {
    /// The info string as written: `rhai`, `json`, `lua`, or anything else.
    pub language: String,
    pub code: String,
    pub range: Range,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MessageJson {
    /// `You`, `Assistant`, `System`, or any other role name as written.
    pub role: String,
    pub range: Range,
    pub segments: Vec<SegmentJson>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SegmentJson {
    pub range: Range,
    #[serde(flatten)]
    pub kind: SegmentKindJson,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SegmentKindJson {
    Text {
        text: String,
    },
    ToolUse {
        /// Normalised to `.` namespaces.
        name: String,
        id: String,
        /// The parsed input, or null when the fence is missing or not a JSON object.
        input: Option<Value>,
        /// The fence content as written (empty when there is no fence).
        raw_input: String,
    },
    ToolResult {
        tool_use_id: String,
        /// `pending`, `approved`, `rejected`, `denied`, `aborted`, `error`, or null.
        status: Option<String>,
        /// Suffix tokens other than the status (bare words map to `true`).
        meta: Map<String, Value>,
        content: String,
    },
    JobResult {
        job_id: String,
        status: Option<String>,
        meta: Map<String, Value>,
        content: String,
    },
    Thinking {
        provider: Option<String>,
        signature: Option<String>,
        redacted: bool,
        content: String,
    },
    Aborted {
        message: String,
    },
    Expression {
        code: String,
        trim_before: bool,
        trim_after: bool,
    },
    Code {
        code: String,
        trim_before: bool,
        trim_after: bool,
    },
    FileReference {
        /// Percent-decoded; `@//abs` becomes `/abs`.
        path: String,
        options: Map<String, Value>,
    },
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiagnosticJson {
    /// `error`, `warning`, `information` or `hint`.
    pub severity: String,
    /// A stable identifier (`unclosed-fence`, `legacy-inline-role`, …).
    pub code: String,
    pub message: String,
    pub range: Range,
}
