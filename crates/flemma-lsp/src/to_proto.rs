//! Plain data in byte offsets → LSP types, in the negotiated encoding.

use std::path::Path;

use flemma_ide::Diagnostic;
use flemma_ide::features::completion::{CompletionItem, CompletionKind};
use flemma_ide::features::folding::{Fold, FoldKind};
use flemma_ide::features::symbols::{Symbol, SymbolKind};
use flemma_syntax::{Encoding, LineIndex, Severity, TextEdit, TextRange};
use serde_json::json;

use crate::session::OpenDocument;

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

/// A `file://` URI for a path ([`crate::path_to_uri`]); `None` for a path that is not UTF-8.
pub(crate) fn file_uri(path: &Path) -> Option<lsp_types::Uri> {
    path.to_str()?;
    crate::path_to_uri(path).parse().ok()
}

/// One diagnostic of the analysis. The hint goes into the message (Helix shows no related
/// information); a problem in another file names it and points at it as related information;
/// `data` carries the stage and whether it blocks a send.
pub(crate) fn diagnostic(
    index: &LineIndex,
    text: &str,
    data: &Diagnostic,
    encoding: Encoding,
) -> lsp_types::Diagnostic {
    let mut message = data.message.clone();
    if let Some(file) = &data.file {
        let line = data
            .line_in_file
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        message = format!("{}{line}: {message}", file.display());
    }
    for included in &data.include_stack {
        message.push_str(&format!("\n  included from {}", included.display()));
    }
    if let Some(hint) = &data.hint {
        message.push_str(&format!("\nhint: {hint}"));
    }
    let related = data.file.as_ref().and_then(|file| {
        let line = data.line_in_file.map_or(0, |l| l.saturating_sub(1)) as u32;
        let position = lsp_types::Position::new(line, 0);
        Some(vec![lsp_types::DiagnosticRelatedInformation {
            location: lsp_types::Location::new(
                file_uri(file)?,
                lsp_types::Range::new(position, position),
            ),
            message: data.message.clone(),
        }])
    });
    lsp_types::Diagnostic {
        range: range(index, text, data.range, encoding),
        severity: Some(severity(data.severity)),
        code: Some(lsp_types::NumberOrString::String(data.code.clone())),
        source: Some("flemma".to_owned()),
        message,
        related_information: related,
        data: Some(json!({ "blocking": data.blocking, "stage": data.source.as_str() })),
        ..Default::default()
    }
}

#[allow(deprecated)] // `DocumentSymbol::deprecated` must still be filled in.
pub(crate) fn symbol(
    index: &LineIndex,
    text: &str,
    data: Symbol,
    encoding: Encoding,
) -> lsp_types::DocumentSymbol {
    lsp_types::DocumentSymbol {
        name: data.name,
        detail: data.detail,
        kind: match data.kind {
            SymbolKind::Frontmatter => lsp_types::SymbolKind::MODULE,
            SymbolKind::Message => lsp_types::SymbolKind::NAMESPACE,
            SymbolKind::ToolUse => lsp_types::SymbolKind::FUNCTION,
            SymbolKind::ToolResult => lsp_types::SymbolKind::EVENT,
            SymbolKind::JobResult => lsp_types::SymbolKind::OBJECT,
            SymbolKind::Thinking => lsp_types::SymbolKind::STRING,
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
pub(crate) fn folding_range(index: &LineIndex, data: Fold) -> Option<lsp_types::FoldingRange> {
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

pub(crate) fn completion_item(
    index: &LineIndex,
    text: &str,
    item: CompletionItem,
    encoding: Encoding,
) -> lsp_types::CompletionItem {
    let kind = match item.kind {
        CompletionKind::Role => lsp_types::CompletionItemKind::KEYWORD,
        CompletionKind::Tool => lsp_types::CompletionItemKind::FUNCTION,
        CompletionKind::Path => lsp_types::CompletionItemKind::FILE,
        CompletionKind::Option => lsp_types::CompletionItemKind::PROPERTY,
        CompletionKind::Value => lsp_types::CompletionItemKind::VALUE,
    };
    lsp_types::CompletionItem {
        label: item.label,
        kind: Some(kind),
        detail: item.detail,
        text_edit: Some(lsp_types::CompletionTextEdit::Edit(
            lsp_types::TextEdit::new(range(index, text, item.replace, encoding), item.insert),
        )),
        ..Default::default()
    }
}

/// Edits of one open document as a versioned workspace edit (refused by the client when the
/// user typed meanwhile).
pub(crate) fn workspace_edit(
    doc: &OpenDocument,
    text: &str,
    edits: &[TextEdit],
    encoding: Encoding,
) -> lsp_types::WorkspaceEdit {
    let edits = edits
        .iter()
        .map(|edit| {
            lsp_types::OneOf::Left(lsp_types::TextEdit::new(
                range(&doc.index, text, edit.range, encoding),
                edit.new_text.clone(),
            ))
        })
        .collect();
    lsp_types::WorkspaceEdit {
        document_changes: Some(lsp_types::DocumentChanges::Edits(vec![
            lsp_types::TextDocumentEdit {
                text_document: lsp_types::OptionalVersionedTextDocumentIdentifier {
                    uri: doc.uri.clone(),
                    version: Some(doc.version),
                },
                edits,
            },
        ])),
        ..Default::default()
    }
}
