//! Conversions from analyses to the stable JSON types of `flemma-protocol` (the protocol crate
//! knows none of our types). Byte offsets become line/character positions here, at the edge.

use flemma_protocol::eval::{EvalDiagnostic, EvaluatedDocument, Offsets};
use flemma_protocol::parse_tree::{
    DiagnosticJson, FrontmatterJson, MessageJson, ParsedDocument, Position, Range, SegmentJson,
    SegmentKindJson,
};
use flemma_syntax::{Document, Encoding, LineIndex, SegmentKind, TextRange};
use serde_json::{Map, Value};

use crate::{Analysis, Diagnostic, Source};

/// `flemmad parse --eval --json`: the analysis as [`EvaluatedDocument`].
pub fn evaluated_document(analysis: &Analysis, encoding: Encoding) -> EvaluatedDocument {
    let doc = &*analysis.document;
    let index = doc.line_index();
    let diagnostics = analysis
        .diagnostics
        .iter()
        .map(|d| eval_diagnostic(doc, &index, d, encoding))
        .collect();
    let config_errors = analysis
        .diagnostics
        .iter()
        .filter(|d| d.source == Source::Config && d.blocking)
        .map(|d| match &d.hint {
            Some(hint) => format!("{} ({hint})", d.message),
            None => d.message.clone(),
        })
        .collect();
    let (config, config_sources) = match &analysis.config {
        Some(resolved) => (
            serde_json::to_value(&resolved.config).ok(),
            resolved
                .provenance()
                .into_iter()
                .filter(|(_, layer)| *layer != flemma_config::LayerKind::Defaults)
                .map(|(path, layer)| (path, Value::String(layer.as_str().to_owned())))
                .collect(),
        ),
        None => (None, Map::new()),
    };
    EvaluatedDocument {
        conversation: serde_json::to_value(&analysis.evaluation.conversation)
            .unwrap_or(Value::Null),
        config_layer: flemma_template::layer_to_json(&analysis.evaluation.frontmatter_layer),
        diagnostics,
        config,
        config_sources,
        config_errors,
        blocked: analysis.has_blocking_diagnostics(),
    }
}

fn eval_diagnostic(
    doc: &Document,
    index: &LineIndex,
    d: &Diagnostic,
    encoding: Encoding,
) -> EvalDiagnostic {
    let category = match d.source {
        Source::Template => d
            .code
            .strip_prefix("template-")
            .map(|category| category.replace('-', "_")),
        _ => None,
    };
    EvalDiagnostic {
        range: to_range(doc, index, d.range, encoding),
        offsets: Offsets {
            start: d.range.start as u64,
            end: d.range.end as u64,
        },
        file: d.file.as_ref().map(|f| f.display().to_string()),
        line_in_file: d.line_in_file.map(|line| line as u64),
        severity: d.severity.as_str().to_owned(),
        source: d.source.as_str().to_owned(),
        code: d.code.clone(),
        category,
        message: d.message.clone(),
        hint: d.hint.clone(),
        include_stack: d
            .include_stack
            .iter()
            .map(|f| f.display().to_string())
            .collect(),
        blocking: d.blocking,
    }
}

/// `flemmad parse --json`: the syntax tree and the parser's diagnostics.
pub fn parsed_document(doc: &Document, encoding: Encoding) -> ParsedDocument {
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
    ParsedDocument {
        frontmatter,
        messages,
        diagnostics,
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
