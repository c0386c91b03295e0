//! Plain data in byte offsets → LSP types, in the negotiated encoding.

use std::path::Path;

use flemma_ide::Diagnostic;
use flemma_ide::features::completion::{CompletionItem, CompletionKind};
use flemma_ide::features::folding::{Fold, FoldKind};
use flemma_ide::features::highlights::{Highlight, HighlightKind};
use flemma_ide::features::symbols::{Symbol, SymbolKind};
use flemma_syntax::{Encoding, LineIndex, Role, Severity, TextEdit, TextRange};
use serde_json::json;

use crate::open_document::OpenDocument;

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

/// Folds are whole lines; one-line folds are dropped. Thinking is a `comment` fold (so an
/// editor can close every thinking block by kind: Neovim's `vim.lsp.foldclose("comment")`),
/// the frontmatter `imports`; the preview goes out as `collapsedText` when the client shows it.
pub(crate) fn folding_range(
    index: &LineIndex,
    data: Fold,
    collapsed_text: bool,
) -> Option<lsp_types::FoldingRange> {
    let start_line = index.line_of(data.range.start) as u32;
    let end_line = index.line_of(data.range.end) as u32;
    (end_line > start_line).then(|| lsp_types::FoldingRange {
        start_line,
        end_line,
        kind: Some(match data.kind {
            FoldKind::Frontmatter => lsp_types::FoldingRangeKind::Imports,
            FoldKind::Thinking => lsp_types::FoldingRangeKind::Comment,
            FoldKind::Message | FoldKind::ToolBlock => lsp_types::FoldingRangeKind::Region,
        }),
        collapsed_text: collapsed_text.then_some(data.preview),
        ..Default::default()
    })
}

/// The semantic token types flemmad uses: standard ones, which themes already colour.
const TOKEN_TYPES: [&str; 5] = ["keyword", "function", "comment", "macro", "string"];

/// The modifiers: which piece of a chat a token is (a role, a block, a status). Custom
/// modifiers are part of the protocol's legend; clients that know none still colour the type.
const TOKEN_MODIFIERS: [&str; 18] = [
    "user",
    "assistant",
    "system",
    "role",
    "toolUse",
    "toolResult",
    "jobResult",
    "pending",
    "approved",
    "rejected",
    "denied",
    "aborted",
    "error",
    "thinking",
    "frontmatter",
    "template",
    "reference",
    "abortMarker",
];

pub(crate) fn semantic_token_legend() -> lsp_types::SemanticTokensLegend {
    lsp_types::SemanticTokensLegend {
        token_types: TOKEN_TYPES
            .iter()
            .map(|t| lsp_types::SemanticTokenType::new(t))
            .collect(),
        token_modifiers: TOKEN_MODIFIERS
            .iter()
            .map(|m| lsp_types::SemanticTokenModifier::new(m))
            .collect(),
    }
}

/// A highlight's token type and modifiers, by their names in the legend.
fn token_of(kind: &HighlightKind) -> (&'static str, Vec<&'static str>) {
    match kind {
        HighlightKind::Role(role) => (
            "keyword",
            vec![
                "role",
                match role {
                    Role::You => "user",
                    Role::Assistant => "assistant",
                    Role::System => "system",
                    Role::Other(_) => "role",
                },
            ],
        ),
        HighlightKind::ToolUse => ("function", vec!["toolUse"]),
        HighlightKind::ToolResult(status) => {
            let mut modifiers = vec!["toolResult"];
            if let Some(status) = status {
                modifiers.push(status.as_str());
            }
            ("function", modifiers)
        }
        HighlightKind::JobResult => ("function", vec!["jobResult"]),
        HighlightKind::Thinking => ("comment", vec!["thinking"]),
        HighlightKind::Frontmatter => ("macro", vec!["frontmatter"]),
        HighlightKind::Template => ("macro", vec!["template"]),
        HighlightKind::FileReference => ("string", vec!["reference"]),
        HighlightKind::Aborted => ("comment", vec!["abortMarker"]),
    }
}

/// The highlights as LSP semantic tokens (relative, one token per line of a range, lengths in
/// the negotiated encoding). `highlights` are in order and disjoint.
pub(crate) fn semantic_tokens(
    index: &LineIndex,
    text: &str,
    highlights: Vec<Highlight>,
    encoding: Encoding,
) -> lsp_types::SemanticTokens {
    let mut data = Vec::new();
    let (mut last_line, mut last_start) = (0u32, 0u32);
    for highlight in highlights {
        let (token_type, modifiers) = token_of(&highlight.kind);
        let token_type = TOKEN_TYPES
            .iter()
            .position(|t| *t == token_type)
            .unwrap_or(0) as u32;
        let modifiers = modifiers
            .iter()
            .filter_map(|m| TOKEN_MODIFIERS.iter().position(|known| known == m))
            .fold(0u32, |bits, n| bits | (1 << n));
        let range = highlight.range;
        let first = index.line_of(range.start);
        let last = index.line_of(range.end);
        for line in first..=last {
            let start = index.line_start(line).max(range.start);
            let line_end = text[start..].find('\n').map_or(text.len(), |n| start + n);
            let end = line_end.min(range.end);
            let piece = text[start..end].trim_end_matches('\r');
            if piece.is_empty() {
                continue;
            }
            let from = index.position(text, start, encoding);
            let to = index.position(text, start + piece.len(), encoding);
            let delta_line = from.line - last_line;
            let delta_start = if delta_line == 0 {
                from.character - last_start
            } else {
                from.character
            };
            data.push(lsp_types::SemanticToken {
                delta_line,
                delta_start,
                length: to.character - from.character,
                token_type,
                token_modifiers_bitset: modifiers,
            });
            (last_line, last_start) = (from.line, from.character);
        }
    }
    lsp_types::SemanticTokens {
        result_id: None,
        data,
    }
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
        CompletionKind::Agent => lsp_types::CompletionItemKind::MODULE,
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
/// user typed meanwhile). An insertion at the very end of a text that ends with a line break
/// goes out as [`past_the_end`] says.
pub(crate) fn workspace_edit(
    doc: &OpenDocument,
    text: &str,
    edits: &[TextEdit],
    encoding: Encoding,
) -> lsp_types::WorkspaceEdit {
    let edits = edits
        .iter()
        .map(|edit| {
            let edit = past_the_end(text, edit, edits);
            lsp_types::OneOf::Left(lsp_types::TextEdit::new(
                range(&doc.index, text, edit.range, encoding),
                edit.new_text,
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

/// The same change as `edit`, in the shape every client applies exactly and at once. Neovim
/// keeps a buffer's last line break outside its lines: an edit reaching the end of a text that
/// ends with one is appended as whole lines (`@You:\n\n` arrived as `@You:\n\n\n`) or
/// clamped and then "fixed" with a second change (which Neovim reports 150 ms later, so the
/// next streamed edit, built on the first, arrives stale and is dropped). When the new text
/// ends with that line break too, the edit stops before it instead: `[s, end)` with `Z\n`
/// becomes `[s, end - 1)` with `Z`, and an insertion at the end becomes `\nZ` inserted before
/// the last line break. Left alone when another edit of the batch touches that line break.
fn past_the_end(text: &str, edit: &TextEdit, batch: &[TextEdit]) -> TextEdit {
    let end = text.len();
    let line_break = if text.ends_with("\r\n") {
        "\r\n"
    } else if text.ends_with('\n') {
        "\n"
    } else {
        return edit.clone();
    };
    let before_break = end - line_break.len();
    let Some(body) = edit.new_text.strip_suffix(line_break) else {
        return edit.clone();
    };
    let others_touch = batch
        .iter()
        .any(|other| !std::ptr::eq(other, edit) && other.range.end > before_break);
    if edit.range.end != end || others_touch {
        return edit.clone();
    }
    if edit.range.start > before_break && edit.range.start < end {
        // The edit starts inside a `\r\n`: left as it is.
        return edit.clone();
    }
    if edit.range.start == end {
        return TextEdit::insert(before_break, format!("{line_break}{body}"));
    }
    TextEdit::replace(TextRange::new(edit.range.start, before_break), body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn rewritten(text: &str, edit: TextEdit) -> TextEdit {
        past_the_end(text, &edit, std::slice::from_ref(&edit))
    }

    #[test]
    fn an_insertion_at_the_end_goes_before_the_last_line_break() {
        let text = "@You:\nhi\n";
        let edit = rewritten(text, TextEdit::insert(text.len(), "\n@Assistant:\n"));
        assert_eq!(edit, TextEdit::insert(8, "\n\n@Assistant:"));
        // Text without a final line break of its own stays where it is (an editor that always
        // ends a buffer with one adds it; nothing can avoid that).
        let edit = rewritten(text, TextEdit::insert(text.len(), "Hello"));
        assert_eq!(edit, TextEdit::insert(text.len(), "Hello"));
        // A replacement up to the end stops before the last line break.
        let edit = rewritten(
            text,
            TextEdit::replace(TextRange::new(6, 9), "bye\n\n@You:\n"),
        );
        assert_eq!(
            edit,
            TextEdit::replace(TextRange::new(6, 8), "bye\n\n@You:")
        );
        // CRLF documents keep their line breaks whole.
        let crlf = "@You:\r\nhi\r\n";
        let edit = rewritten(crlf, TextEdit::insert(crlf.len(), "x\r\n"));
        assert_eq!(edit, TextEdit::insert(crlf.len() - 2, "\r\nx"));
    }

    proptest! {
        /// The rewritten edit makes the same text, and an edit whose text ends with the
        /// document's last line break no longer reaches past it.
        #[test]
        fn the_rewrite_is_the_same_change(
            body in "[a-z\n]{0,12}",
            crlf in any::<bool>(),
            start_back in 0usize..14,
            new in "[a-z@:\n]{0,10}",
        ) {
            let lb = if crlf { "\r\n" } else { "\n" };
            let text = format!("{}{lb}", body.replace('\n', lb));
            let new = new.replace('\n', lb);
            let mut start = text.len().saturating_sub(start_back);
            while !text.is_char_boundary(start) || (crlf && text[..start].ends_with('\r')) {
                start -= 1;
            }
            let edit = TextEdit::replace(TextRange::new(start, text.len()), new.clone());
            let out = rewritten(&text, edit.clone());
            prop_assert_eq!(
                flemma_syntax::apply_edits(&text, std::slice::from_ref(&out)).unwrap(),
                flemma_syntax::apply_edits(&text, &[edit]).unwrap()
            );
            if new.ends_with(lb) {
                prop_assert!(out.range.end <= text.len() - lb.len(), "{:?}", out);
            }
        }
    }
}
