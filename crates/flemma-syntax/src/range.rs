//! Byte ranges and line/column positions.

use std::fmt;

/// A half-open byte range `[start, end)` into a document's text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct TextRange {
    pub start: usize,
    pub end: usize,
}

impl TextRange {
    pub const fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    pub const fn empty(at: usize) -> Self {
        Self { start: at, end: at }
    }

    pub const fn len(&self) -> usize {
        self.end - self.start
    }

    pub const fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub const fn contains(&self, offset: usize) -> bool {
        self.start <= offset && offset < self.end
    }

    pub fn shifted(self, delta: isize) -> Self {
        Self {
            start: self.start.wrapping_add_signed(delta),
            end: self.end.wrapping_add_signed(delta),
        }
    }
}

impl fmt::Debug for TextRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// The unit a client counts columns in (LSP `positionEncoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Bytes of UTF-8 (Helix).
    Utf8,
    /// UTF-16 code units (VS Code, the LSP default).
    Utf16,
}

/// A 0-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

/// Line starts of a text, for converting between byte offsets and positions.
///
/// Built on demand (one `memchr` pass); the parser itself works in byte offsets only.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut line_starts = Vec::with_capacity(text.len() / 40 + 1);
        line_starts.push(0);
        line_starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        Self {
            line_starts,
            len: text.len(),
        }
    }

    /// Updates the index for `range` of the old text replaced by `inserted` (the text the
    /// index describes is then the edited one): the line starts inside the range go, the
    /// inserted text's come in, and the later ones shift. Only `inserted` is scanned, so an
    /// edit costs a shift of the line starts after it, never a pass over the whole text.
    ///
    /// A range outside the indexed text (a caller bug) is clamped to it.
    pub fn apply_edit(&mut self, range: TextRange, inserted: &str) {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        // Line starts s with start < s <= end come from line breaks inside the range.
        let first_removed = self.line_starts.partition_point(|&s| s <= start);
        let after_removed = self.line_starts.partition_point(|&s| s <= end);
        let delta = inserted.len() as isize - (end - start) as isize;
        for s in &mut self.line_starts[after_removed..] {
            *s = s.wrapping_add_signed(delta);
        }
        let new_starts = memchr::memchr_iter(b'\n', inserted.as_bytes()).map(|i| start + i + 1);
        self.line_starts
            .splice(first_removed..after_removed, new_starts);
        self.len = self.len - (end - start) + inserted.len();
    }

    /// The length of the indexed text.
    pub fn text_len(&self) -> usize {
        self.len
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// Byte offset where `line` starts (the end of the text for lines past the end).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts.get(line).copied().unwrap_or(self.len)
    }

    /// The line holding `offset` (0-based).
    pub fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next.saturating_sub(1),
        }
    }

    /// The position of a byte offset. Offsets inside a UTF-8 sequence count as the start of it;
    /// offsets past the end clamp to the end.
    pub fn position(&self, text: &str, offset: usize, encoding: Encoding) -> Position {
        let offset = offset.min(self.len);
        let line = self.line_of(offset);
        let start = self.line_starts[line];
        let mut end = offset;
        while end > start && !text.is_char_boundary(end) {
            end -= 1;
        }
        let prefix = &text[start..end];
        let character = match encoding {
            Encoding::Utf8 => prefix.len(),
            Encoding::Utf16 => prefix.chars().map(char::len_utf16).sum(),
        };
        Position {
            line: line as u32,
            character: character as u32,
        }
    }

    /// The byte offset of a position. Columns past the end of the line clamp to the end of the
    /// line (before its line break), lines past the end clamp to the end of the text, and a column
    /// inside a character (a UTF-16 surrogate pair half, a UTF-8 continuation byte) rounds down.
    pub fn offset(&self, text: &str, position: Position, encoding: Encoding) -> usize {
        let line = position.line as usize;
        if line >= self.line_starts.len() {
            return self.len;
        }
        let start = self.line_starts[line];
        let line_end = self
            .line_starts
            .get(line + 1)
            .map(|next| next - 1)
            .unwrap_or(self.len);
        let line_text = &text[start..line_end];
        let line_text = line_text.strip_suffix('\r').unwrap_or(line_text);
        let wanted = position.character as usize;
        match encoding {
            Encoding::Utf8 => {
                let mut column = wanted.min(line_text.len());
                while column > 0 && !line_text.is_char_boundary(column) {
                    column -= 1;
                }
                start + column
            }
            Encoding::Utf16 => {
                let mut units = 0;
                for (byte, ch) in line_text.char_indices() {
                    let next = units + ch.len_utf16();
                    if next > wanted {
                        return start + byte;
                    }
                    units = next;
                }
                start + line_text.len()
            }
        }
    }

    pub fn range(
        &self,
        text: &str,
        range: crate::TextRange,
        encoding: Encoding,
    ) -> (Position, Position) {
        (
            self.position(text, range.start, encoding),
            self.position(text, range.end, encoding),
        )
    }
}

#[cfg(test)]
mod line_index_tests {
    use super::*;
    use proptest::prelude::*;

    fn starts(index: &LineIndex) -> (Vec<usize>, usize) {
        (index.line_starts.clone(), index.len)
    }

    /// A text of short lines (LF and CRLF, multi-byte characters) and an edit on character
    /// boundaries of it.
    fn text_and_edit() -> impl Strategy<Value = (String, usize, usize, String)> {
        let piece = prop_oneof![
            Just("a".to_owned()),
            Just("\n".to_owned()),
            Just("\r\n".to_owned()),
            Just("é".to_owned()),
            Just("😀".to_owned()),
            Just("@You:\n".to_owned()),
        ];
        let text = proptest::collection::vec(piece.clone(), 0..40).prop_map(|p| p.concat());
        let inserted = proptest::collection::vec(piece, 0..8).prop_map(|p| p.concat());
        (text, any::<usize>(), any::<usize>(), inserted).prop_map(|(text, a, b, inserted)| {
            let boundaries: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .chain(std::iter::once(text.len()))
                .collect();
            let a = boundaries[a % boundaries.len()];
            let b = boundaries[b % boundaries.len()];
            (text, a.min(b), a.max(b), inserted)
        })
    }

    proptest! {
        #[test]
        fn an_edited_index_is_the_index_of_the_edited_text(
            edits in proptest::collection::vec(text_and_edit(), 1..4)
        ) {
            for (text, start, end, inserted) in edits {
                let mut index = LineIndex::new(&text);
                index.apply_edit(TextRange::new(start, end), &inserted);
                let mut edited = text.clone();
                edited.replace_range(start..end, &inserted);
                prop_assert_eq!(starts(&index), starts(&LineIndex::new(&edited)));
            }
        }

        #[test]
        fn a_series_of_edits_keeps_the_index_exact(
            text in "[a\n\ré]{0,60}",
            steps in proptest::collection::vec((any::<usize>(), any::<usize>(), "[b\n😀]{0,6}"), 1..12)
        ) {
            let mut text = text;
            let mut index = LineIndex::new(&text);
            for (a, b, inserted) in steps {
                let boundaries: Vec<usize> = text
                    .char_indices()
                    .map(|(i, _)| i)
                    .chain(std::iter::once(text.len()))
                    .collect();
                let a = boundaries[a % boundaries.len()];
                let b = boundaries[b % boundaries.len()];
                let (start, end) = (a.min(b), a.max(b));
                index.apply_edit(TextRange::new(start, end), &inserted);
                text.replace_range(start..end, &inserted);
                prop_assert_eq!(starts(&index), starts(&LineIndex::new(&text)));
            }
        }
    }

    #[test]
    fn joining_and_splitting_lines() {
        let mut index = LineIndex::new("ab\ncd\nef");
        index.apply_edit(TextRange::new(2, 3), "");
        assert_eq!(starts(&index), starts(&LineIndex::new("abcd\nef")));
        index.apply_edit(TextRange::new(0, 0), "x\n\n");
        assert_eq!(starts(&index), starts(&LineIndex::new("x\n\nabcd\nef")));
    }
}
