//! The JSON form of a parsed `.chat` document (`flemmad parse FILE --json`).
//!
//! Stable: fields are only ever added. Lines are 0-based; `character` counts in the encoding
//! the caller chose (UTF-16 code units by default, like LSP; UTF-8 bytes on request).

use flemma_syntax::{Document, Encoding, LineIndex, SegmentKind, TextRange};
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

impl ParsedDocument {
    pub fn from_document(doc: &Document, encoding: Encoding) -> Self {
        let index = doc.line_index();
        let range = |r: TextRange| to_range(doc, &index, r, encoding);
        let frontmatter = doc.frontmatter().map(|f| FrontmatterJson {
            language: doc.slice(f.language_range).to_owned(),
            code: doc.slice(f.code).to_owned(),
            range: range(f.range),
        });
        let messages = doc
            .messages()
            .iter()
            .map(|m| MessageJson {
                role: m.role.name().to_owned(),
                range: range(m.range),
                segments: m
                    .segments
                    .iter()
                    .map(|s| SegmentJson {
                        range: range(s.range),
                        kind: segment_kind(doc, &s.kind, s.range),
                    })
                    .collect(),
            })
            .collect();
        let diagnostics = doc
            .diagnostics()
            .into_iter()
            .map(|d| DiagnosticJson {
                severity: d.severity.as_str().to_owned(),
                code: d.code.as_str().to_owned(),
                message: d.message.clone(),
                range: range(d.range),
            })
            .collect();
        Self {
            frontmatter,
            messages,
            diagnostics,
        }
    }
}

fn to_range(doc: &Document, index: &LineIndex, r: TextRange, encoding: Encoding) -> Range {
    let (s, e) = index.range(doc.text(), r, encoding);
    Range {
        start: Position {
            line: s.line,
            character: s.character,
        },
        end: Position {
            line: e.line,
            character: e.character,
        },
    }
}

fn meta_of(suffix: Option<&flemma_syntax::Suffix>) -> Map<String, Value> {
    suffix
        .map(|s| s.meta().map(|(k, v)| (k.to_owned(), v.to_json())).collect())
        .unwrap_or_default()
}

fn segment_kind(doc: &Document, kind: &SegmentKind, range: TextRange) -> SegmentKindJson {
    match kind {
        SegmentKind::Text => SegmentKindJson::Text {
            text: doc.slice(range).to_owned(),
        },
        SegmentKind::ToolUse(t) => {
            let raw_input = t.fence.as_ref().map_or("", |f| doc.slice(f.content));
            SegmentKindJson::ToolUse {
                name: t.name.clone(),
                id: t.id.clone(),
                input: if t.input_is_valid {
                    serde_json::from_str(raw_input).ok()
                } else {
                    None
                },
                raw_input: raw_input.to_owned(),
            }
        }
        SegmentKind::ToolResult(t) => SegmentKindJson::ToolResult {
            tool_use_id: t.tool_use_id.clone(),
            status: t
                .suffix
                .as_ref()
                .and_then(|s| s.status())
                .map(|s| s.as_str().to_owned()),
            meta: meta_of(t.suffix.as_ref()),
            content: t
                .fence
                .as_ref()
                .map_or("", |f| doc.slice(f.content))
                .to_owned(),
        },
        SegmentKind::JobResult(j) => SegmentKindJson::JobResult {
            job_id: j.job_id.clone(),
            status: j
                .suffix
                .as_ref()
                .and_then(|s| s.status())
                .map(|s| s.as_str().to_owned()),
            meta: meta_of(j.suffix.as_ref()),
            content: j
                .fence
                .as_ref()
                .map_or("", |f| doc.slice(f.content))
                .to_owned(),
        },
        SegmentKind::Thinking(t) => SegmentKindJson::Thinking {
            provider: t.provider.clone(),
            signature: t.signature.clone(),
            redacted: t.redacted,
            content: doc.slice(t.content).to_owned(),
        },
        SegmentKind::Aborted(a) => SegmentKindJson::Aborted {
            message: a.message.clone(),
        },
        SegmentKind::Expression(t) => SegmentKindJson::Expression {
            code: doc.slice(t.code).to_owned(),
            trim_before: t.trim_before,
            trim_after: t.trim_after,
        },
        SegmentKind::Code(t) => SegmentKindJson::Code {
            code: doc.slice(t.code).to_owned(),
            trim_before: t.trim_before,
            trim_after: t.trim_after,
        },
        SegmentKind::FileReference(f) => SegmentKindJson::FileReference {
            path: f.path.clone(),
            options: f
                .options
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        },
    }
}
