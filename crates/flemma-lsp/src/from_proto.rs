//! LSP positions → byte offsets, in the negotiated encoding.

use flemma_syntax::{Encoding, LineIndex, Position, TextRange};

pub(crate) fn offset(
    index: &LineIndex,
    text: &str,
    position: lsp_types::Position,
    encoding: Encoding,
) -> usize {
    index.offset(
        text,
        Position {
            line: position.line,
            character: position.character,
        },
        encoding,
    )
}

pub(crate) fn range(
    index: &LineIndex,
    text: &str,
    range: lsp_types::Range,
    encoding: Encoding,
) -> TextRange {
    let start = offset(index, text, range.start, encoding);
    let end = offset(index, text, range.end, encoding);
    TextRange::new(start.min(end), end.max(start))
}

/// The encoding to use, from the client's `general.positionEncodings`: utf-8 when offered
/// (Helix), else utf-16 (VS Code, and the LSP default).
pub(crate) fn negotiate_encoding(capabilities: &lsp_types::ClientCapabilities) -> Encoding {
    let offered = capabilities
        .general
        .as_ref()
        .and_then(|g| g.position_encodings.as_ref());
    match offered {
        Some(kinds) if kinds.contains(&lsp_types::PositionEncodingKind::UTF8) => Encoding::Utf8,
        _ => Encoding::Utf16,
    }
}
