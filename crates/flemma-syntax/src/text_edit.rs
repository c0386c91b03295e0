//! Text edits with invariants: [`TextEdit`], the checked sorted-and-disjoint [`TextEdits`],
//! offset mapping through edits ([`TextEdits::map_offset`]), and [`diff_to_edits`], which turns
//! an external change (old text → new text) into minimal edits.
//!
//! ```
//! use flemma_syntax::{Assoc, TextEdit, TextEdits, TextRange, apply_edits};
//! let edits = vec![TextEdit::insert(0, "> "), TextEdit::replace(TextRange::new(3, 6), "you")];
//! assert_eq!(apply_edits("hi there", &edits).unwrap(), "> hi youre");
//! let set = TextEdits::new(edits).unwrap();
//! assert_eq!(set.map_offset(0, Assoc::Before), 0);
//! assert_eq!(set.map_offset(0, Assoc::After), 2);
//! assert!(apply_edits("hi", &[TextEdit::insert(9, "x")]).is_err());
//! ```

use std::fmt;

use crate::TextRange;

/// One change to a document's text: replace `range` (in the old text) with `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    pub range: TextRange,
    pub new_text: String,
}

impl TextEdit {
    pub fn insert(at: usize, text: impl Into<String>) -> Self {
        Self {
            range: TextRange::empty(at),
            new_text: text.into(),
        }
    }

    pub fn replace(range: TextRange, text: impl Into<String>) -> Self {
        Self {
            range,
            new_text: text.into(),
        }
    }

    pub fn delete(range: TextRange) -> Self {
        Self::replace(range, String::new())
    }

    /// The change in text length this edit makes.
    fn delta(&self) -> isize {
        self.new_text.len() as isize - self.range.len() as isize
    }
}

/// Why a set of edits was refused. The text is never changed when edits are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("edit {range:?} ends before it starts")]
    Reversed { range: TextRange },
    #[error(
        "edit {range:?} reaches past the end of the text ({len} bytes); the text changed since the edit was made"
    )]
    OutOfRange { range: TextRange, len: usize },
    #[error("edit {range:?} does not start and end on character boundaries")]
    NotOnCharBoundary { range: TextRange },
    #[error(
        "edits {first:?} and {second:?} overlap (or start at the same offset); their order would be ambiguous"
    )]
    Overlap { first: TextRange, second: TextRange },
}

/// How an offset inside (or at the start of) a replaced range maps through an edit: to the start
/// of the new text (`Before`) or to its end (`After`). Text inserted exactly at an offset goes
/// after it with `Before` and before it with `After` (helix's `map_pos`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assoc {
    Before,
    After,
}

/// Edits sorted by offset and pairwise disjoint (no two starting at the same offset), built only
/// through the checked [`TextEdits::new`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TextEdits {
    // disjoint and sorted
    edits: Vec<TextEdit>,
}

impl TextEdits {
    /// Sorts `edits` and checks that they are well formed and do not overlap.
    pub fn new(mut edits: Vec<TextEdit>) -> Result<Self, EditError> {
        if let Some(edit) = edits.iter().find(|e| e.range.start > e.range.end) {
            return Err(EditError::Reversed { range: edit.range });
        }
        edits.sort_by_key(|e| (e.range.start, e.range.end));
        for pair in edits.windows(2) {
            let (first, second) = (&pair[0], &pair[1]);
            if second.range.start < first.range.end || second.range.start == first.range.start {
                return Err(EditError::Overlap {
                    first: first.range,
                    second: second.range,
                });
            }
        }
        Ok(Self { edits })
    }

    pub fn as_slice(&self) -> &[TextEdit] {
        &self.edits
    }

    pub fn into_vec(self) -> Vec<TextEdit> {
        self.edits
    }

    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    pub fn len(&self) -> usize {
        self.edits.len()
    }

    /// Checks that every edit lies inside `text` on character boundaries.
    pub fn check_against(&self, text: &str) -> Result<(), EditError> {
        for edit in &self.edits {
            let TextRange { start, end } = edit.range;
            if end > text.len() {
                return Err(EditError::OutOfRange {
                    range: edit.range,
                    len: text.len(),
                });
            }
            if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
                return Err(EditError::NotOnCharBoundary { range: edit.range });
            }
        }
        Ok(())
    }

    /// The text with every edit applied, or an error (and nothing applied).
    pub fn apply(&self, text: &str) -> Result<String, EditError> {
        self.check_against(text)?;
        let inserted: usize = self.edits.iter().map(|e| e.new_text.len()).sum();
        let mut out = String::with_capacity(text.len() + inserted);
        let mut cursor = 0;
        for edit in &self.edits {
            out.push_str(&text[cursor..edit.range.start]);
            out.push_str(&edit.new_text);
            cursor = edit.range.end;
        }
        out.push_str(&text[cursor..]);
        Ok(out)
    }

    /// Where `offset` (in the text before the edits) is in the text after them. Offsets in
    /// unchanged text move by the length change of the edits before them; an offset inside a
    /// replaced range (or at the start of one) goes to the start or the end of the new text as
    /// `assoc` says. Monotone in `offset` for a fixed `assoc`.
    pub fn map_offset(&self, offset: usize, assoc: Assoc) -> usize {
        let mut delta: isize = 0;
        for edit in &self.edits {
            let TextRange { start, end } = edit.range;
            if offset < start {
                break;
            }
            let new_start = start.wrapping_add_signed(delta);
            let new_end = new_start + edit.new_text.len();
            if offset < end || (offset == start && start == end) {
                return match assoc {
                    Assoc::Before => new_start,
                    Assoc::After => new_end,
                };
            }
            delta += edit.delta();
        }
        offset.wrapping_add_signed(delta)
    }

    /// Where `offset` in the text after the edits came from in the text before them: offsets
    /// inside inserted text map to the start of the range it replaced.
    pub fn map_offset_back(&self, offset: usize) -> usize {
        let mut delta: isize = 0;
        for edit in &self.edits {
            let new_start = edit.range.start.wrapping_add_signed(delta);
            let new_end = new_start + edit.new_text.len();
            if offset < new_start {
                break;
            }
            if offset < new_end {
                return edit.range.start;
            }
            delta += edit.delta();
        }
        offset.wrapping_add_signed(-delta)
    }
}

impl fmt::Display for TextEdits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} edit(s)", self.edits.len())
    }
}

/// Applies edits (in any order) to `text`. Overlapping, reversed or out-of-range edits and
/// edits that split a character are refused with an error; then nothing is applied.
pub fn apply_edits(text: &str, edits: &[TextEdit]) -> Result<String, EditError> {
    TextEdits::new(edits.to_vec())?.apply(text)
}

/// Regions larger than this are replaced whole instead of diffed character by character.
const CHAR_DIFF_LIMIT: usize = 16 * 1024;

/// Minimal edits that turn `old` into `new`: a line diff, refined to characters inside each
/// changed group of lines (so `@You: hi` → `@You:\nhi` is one insertion and one deletion).
/// Applying the result to `old` gives `new` exactly.
pub fn diff_to_edits(old: &str, new: &str) -> Vec<TextEdit> {
    if old == new {
        return Vec::new();
    }
    let lines = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .timeout(std::time::Duration::from_millis(500))
        .diff_lines(old, new);
    let old_starts = starts_of(lines.old_slices());
    let new_starts = starts_of(lines.new_slices());
    let mut edits = Vec::new();
    for (old_lines, new_lines) in changed_runs(lines.ops()) {
        let old_range = TextRange::new(old_starts[old_lines.start], old_starts[old_lines.end]);
        let new_range = TextRange::new(new_starts[new_lines.start], new_starts[new_lines.end]);
        refine(old, new, old_range, new_range, &mut edits);
    }
    edits
}

/// The runs of consecutive non-equal diff ops, each as the token ranges it covers in the old and
/// the new sequence (a delete next to an insert is one replacement). Positions are counted from
/// the ops' lengths, in order (the `old_index` similar reports for an insertion is not always
/// where it applies).
fn changed_runs(ops: &[similar::DiffOp]) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let mut runs = Vec::new();
    let (mut old_at, mut new_at) = (0, 0);
    let mut run_start: Option<(usize, usize)> = None;
    for op in ops {
        let (old_len, new_len) = (op.old_range().len(), op.new_range().len());
        if matches!(op, similar::DiffOp::Equal { .. }) {
            if let Some((old_start, new_start)) = run_start.take() {
                runs.push((old_start..old_at, new_start..new_at));
            }
        } else if run_start.is_none() {
            run_start = Some((old_at, new_at));
        }
        old_at += old_len;
        new_at += new_len;
    }
    if let Some((old_start, new_start)) = run_start {
        runs.push((old_start..old_at, new_start..new_at));
    }
    runs
}

/// Byte offsets where each slice starts, plus the total length at the end.
fn starts_of(slices: &[&str]) -> Vec<usize> {
    let mut starts = Vec::with_capacity(slices.len() + 1);
    let mut at = 0;
    starts.push(0);
    for slice in slices {
        at += slice.len();
        starts.push(at);
    }
    starts
}

/// Character-level edits turning `old[old_range]` into `new[new_range]`, pushed to `out`.
fn refine(
    old: &str,
    new: &str,
    old_range: TextRange,
    new_range: TextRange,
    out: &mut Vec<TextEdit>,
) {
    let old_part = &old[old_range.start..old_range.end];
    let new_part = &new[new_range.start..new_range.end];
    if old_part.is_empty()
        || new_part.is_empty()
        || old_part.len() + new_part.len() > CHAR_DIFF_LIMIT
    {
        out.push(TextEdit::replace(old_range, new_part));
        return;
    }
    let chars = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .timeout(std::time::Duration::from_millis(100))
        .diff_chars(old_part, new_part);
    let old_starts = starts_of(chars.old_slices());
    let new_starts = starts_of(chars.new_slices());
    for (o, n) in changed_runs(chars.ops()) {
        let range = TextRange::new(
            old_range.start + old_starts[o.start],
            old_range.start + old_starts[o.end],
        );
        let text = &new_part[new_starts[n.start]..new_starts[n.end]];
        out.push(TextEdit::replace(range, text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_overlap_and_out_of_range() {
        let overlapping = [
            TextEdit::replace(TextRange::new(0, 3), "a"),
            TextEdit::replace(TextRange::new(2, 4), "b"),
        ];
        assert!(matches!(
            apply_edits("hello", &overlapping),
            Err(EditError::Overlap { .. })
        ));
        assert!(matches!(
            apply_edits("hello", &[TextEdit::insert(6, "x")]),
            Err(EditError::OutOfRange { len: 5, .. })
        ));
        assert!(matches!(
            apply_edits("日本", &[TextEdit::insert(1, "x")]),
            Err(EditError::NotOnCharBoundary { .. })
        ));
        let same_start = [TextEdit::insert(1, "a"), TextEdit::insert(1, "b")];
        assert!(apply_edits("hello", &same_start).is_err());
    }

    #[test]
    fn map_offset_associates() {
        let edits = TextEdits::new(vec![TextEdit::replace(TextRange::new(2, 4), "xyz")]).unwrap();
        assert_eq!(edits.map_offset(1, Assoc::After), 1);
        assert_eq!(edits.map_offset(2, Assoc::Before), 2);
        assert_eq!(edits.map_offset(3, Assoc::Before), 2);
        assert_eq!(edits.map_offset(3, Assoc::After), 5);
        assert_eq!(edits.map_offset(4, Assoc::Before), 5);
        assert_eq!(edits.map_offset(6, Assoc::Before), 7);
        assert_eq!(edits.map_offset_back(3), 2);
        assert_eq!(edits.map_offset_back(7), 6);
    }

    #[test]
    fn diff_splits_an_inline_marker_minimally() {
        let edits = diff_to_edits("@You: hi\nthere\n", "@You:\nhi\nthere\n");
        assert_eq!(edits, vec![TextEdit::replace(TextRange::new(5, 6), "\n")]);
    }
}
