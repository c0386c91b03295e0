//! Offsets that point into the text, moved through every change (helix's `map_pos`).
//!
//! The engine keeps a few anchors (the end of the reply being streamed, its start) and maps them
//! through each `TextChanged`. When `flemma-syntax` grows its own `map_offset(offset, Assoc)`
//! this module becomes a re-export.

use flemma_syntax::TextEdit;

/// Which side an insertion exactly at the anchor goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assoc {
    /// Text inserted at the anchor lands after it (the anchor stays before the insertion).
    Before,
    /// Text inserted at the anchor lands before it (the anchor moves past the insertion).
    After,
}

/// Maps `offset` through `edits` (non-overlapping, in the coordinates of the text before them,
/// in any order). An offset inside a replaced range moves to the end of the replacement.
pub fn map_offset(offset: usize, edits: &[TextEdit], assoc: Assoc) -> usize {
    let mut shift: isize = 0;
    for edit in edits {
        let (start, end) = (edit.range.start, edit.range.end);
        let new_len = edit.new_text.len() as isize;
        let old_len = (end - start) as isize;
        if end < offset || (end == offset && start < end) {
            shift += new_len - old_len;
        } else if start == offset && end == offset {
            if assoc == Assoc::After {
                shift += new_len;
            }
        } else if start < offset && offset < end {
            // Inside a replaced range: to the end of the new text.
            shift += (start as isize + new_len) - offset as isize;
        }
    }
    offset.saturating_add_signed(shift)
}

/// Whether `edits` are valid for a text of `len` bytes: inside it, on char boundaries, and not
/// overlapping each other.
pub fn edits_fit(text: &str, edits: &[TextEdit]) -> bool {
    let mut ranges: Vec<(usize, usize)> =
        edits.iter().map(|e| (e.range.start, e.range.end)).collect();
    ranges.sort_unstable();
    let mut cursor = 0;
    for (i, (start, end)) in ranges.iter().copied().enumerate() {
        if start > end
            || end > text.len()
            || !text.is_char_boundary(start)
            || !text.is_char_boundary(end)
            || (i > 0 && start < cursor)
        {
            return false;
        }
        cursor = end;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_syntax::TextRange;

    #[test]
    fn insertions_before_shift_and_at_the_anchor_follow_assoc() {
        let edits = [TextEdit::insert(2, "ab"), TextEdit::insert(5, "xyz")];
        assert_eq!(map_offset(5, &edits, Assoc::Before), 7);
        assert_eq!(map_offset(5, &edits, Assoc::After), 10);
        assert_eq!(map_offset(1, &edits, Assoc::After), 1);
    }

    #[test]
    fn deletions_around_and_inside() {
        let edits = [TextEdit::replace(TextRange::new(2, 6), "Q")];
        assert_eq!(map_offset(8, &edits, Assoc::Before), 5);
        assert_eq!(map_offset(4, &edits, Assoc::Before), 3);
        assert_eq!(map_offset(6, &edits, Assoc::Before), 3);
        assert_eq!(map_offset(2, &edits, Assoc::Before), 2);
    }

    #[test]
    fn overlapping_or_outside_edits_do_not_fit() {
        let text = "hello";
        assert!(edits_fit(text, &[TextEdit::insert(5, "!")]));
        assert!(!edits_fit(text, &[TextEdit::insert(6, "!")]));
        assert!(!edits_fit(
            text,
            &[
                TextEdit::replace(TextRange::new(0, 3), ""),
                TextEdit::replace(TextRange::new(2, 4), "")
            ]
        ));
        assert!(!edits_fit("é", &[TextEdit::insert(1, "x")]));
    }
}
