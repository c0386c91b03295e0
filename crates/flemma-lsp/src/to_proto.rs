//! Plain data in byte offsets → LSP types, in the negotiated encoding.

use flemma_syntax::{Encoding, LineIndex, Severity, TextRange};

use crate::features_shim::{DiagnosticData, FoldData, FoldKind, SymbolData, SymbolKind};

pub(crate) fn position(
    index: &LineIndex,
    text: &str,
    offset: usize,
    encoding: Encoding,
) -> lsp_types::Position {
    let p = index.position(text, offset.min(text.len()), encoding);
    lsp_types::Position::new(p.line, p.character)
}

pub(crate) fn range(
    index: &LineIndex,
    text: &str,
    range: TextRange,
    encoding: Encoding,
) -> lsp_types::Range {
    lsp_types::Range::new(
        position(index, text, range.start, encoding),
        position(index, text, range.end, encoding),
    )
}

pub(crate) fn encoding_kind(encoding: Encoding) -> lsp_types::PositionEncodingKind {
    match encoding {
        Encoding::Utf8 => lsp_types::PositionEncodingKind::UTF8,
        Encoding::Utf16 => lsp_types::PositionEncodingKind::UTF16,
    }
}

fn severity(severity: Severity) -> lsp_types::DiagnosticSeverity {
    match severity {
        Severity::Error => lsp_types::DiagnosticSeverity::ERROR,
        Severity::Warning => lsp_types::DiagnosticSeverity::WARNING,
        Severity::Information => lsp_types::DiagnosticSeverity::INFORMATION,
        Severity::Hint => lsp_types::DiagnosticSeverity::HINT,
    }
}

pub(crate) fn diagnostic(
    index: &LineIndex,
    text: &str,
    data: DiagnosticData,
    encoding: Encoding,
) -> lsp_types::Diagnostic {
    lsp_types::Diagnostic {
        range: range(index, text, data.range, encoding),
        severity: Some(severity(data.severity)),
        code: Some(lsp_types::NumberOrString::String(data.code.to_owned())),
        source: Some("flemma".to_owned()),
        message: data.message,
        ..Default::default()
    }
}

#[allow(deprecated)] // `DocumentSymbol::deprecated` must still be filled in.
pub(crate) fn symbol(
    index: &LineIndex,
    text: &str,
    data: SymbolData,
    encoding: Encoding,
) -> lsp_types::DocumentSymbol {
    lsp_types::DocumentSymbol {
        name: data.name,
        detail: data.detail,
        kind: match data.kind {
            SymbolKind::Message => lsp_types::SymbolKind::NAMESPACE,
            SymbolKind::ToolUse => lsp_types::SymbolKind::FUNCTION,
            SymbolKind::ToolResult => lsp_types::SymbolKind::EVENT,
            SymbolKind::JobResult => lsp_types::SymbolKind::OBJECT,
        },
        tags: None,
        deprecated: None,
        range: range(index, text, data.range, encoding),
        selection_range: range(index, text, data.selection, encoding),
        children: Some(
            data.children
                .into_iter()
                .map(|c| symbol(index, text, c, encoding))
                .collect(),
        ),
    }
}

/// Folds are whole lines; one-line folds are dropped.
pub(crate) fn folding_range(index: &LineIndex, data: FoldData) -> Option<lsp_types::FoldingRange> {
    let start_line = index.line_of(data.range.start) as u32;
    let end_line = index.line_of(data.range.end) as u32;
    (end_line > start_line).then(|| lsp_types::FoldingRange {
        start_line,
        end_line,
        kind: Some(match data.kind {
            FoldKind::Frontmatter => lsp_types::FoldingRangeKind::Imports,
            FoldKind::Message | FoldKind::Thinking | FoldKind::ToolBlock => {
                lsp_types::FoldingRangeKind::Region
            }
        }),
        ..Default::default()
    })
}
