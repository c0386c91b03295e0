//! Text edits with invariants: [`TextEdit`], the checked sorted-and-disjoint [`TextEdits`],
//! offset mapping through edits ([`map_offset`], with the one [`Assoc`] rule), and the diffs:
//! [`diff_to_edits`], which turns an external change (old text → new text) into minimal edits,
//! and [`single_edit`], the one edit between two texts.
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
    pub fn delta(&self) -> isize {
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

/// Which side of a change an offset keeps to when the change is exactly where it points: the
/// one rule every offset that points into a document follows (the engine's stream anchors, the
/// writer mapping someone else's change through its own, an edit sent to an editor moved
/// through the user's typing).
///
/// * Text **inserted exactly at** the offset goes after it with `Before` (the offset stays
///   before the insertion) and before it with `After` (the offset moves past it).
/// * An offset **inside a replaced range, or at its start**, goes to the start of the new text
///   with `Before` and to its end with `After`; at the **end** of a replaced range it follows
///   the new text (it points at the untouched text after it).
///
/// So an offset mapped with `Before` never moves past text that arrived at or over it, and one
/// mapped with `After` never stays before it. Example: the end of a reply being streamed is
/// mapped with `Before` through the user's changes, so what the user types at it, or over it,
/// stays after the reply, and the reply goes on before it; text inserted by the stream itself
/// at that end is mapped with `After`. (helix's `map_pos` has the same rule.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assoc {
    Before,
    After,
}

/// Where `offset` (in the text before `edits`) is in the text after them. `edits` are in the
/// coordinates of the text before them, in any order, and disjoint as [`edits_fit`] checks
/// (an insertion may share its offset with the start of a replacement: it goes before it, as
/// [`apply_edits`] of a checked set and `Document::edit` in reverse order apply them).
/// [`Assoc`] says where an offset at or inside a change goes. Monotone in `offset` for a fixed
/// `assoc`.
pub fn map_offset(offset: usize, edits: &[TextEdit], assoc: Assoc) -> usize {
    let mut shift: isize = 0;
    // The replaced range holding `offset` (at its start or inside): its start and new length.
    let mut inside: Option<(usize, usize)> = None;
    for edit in edits {
        let TextRange { start, end } = edit.range;
        if offset < start {
            continue;
        }
        if start == end {
            if start < offset || assoc == Assoc::After {
                shift += edit.new_text.len() as isize;
            }
        } else if end <= offset {
            shift += edit.delta();
        } else {
            inside = Some((start, edit.new_text.len()));
        }
    }
    match inside {
        Some((start, new_len)) => {
            let new_start = start.saturating_add_signed(shift);
            match assoc {
                Assoc::Before => new_start,
                Assoc::After => new_start + new_len,
            }
        }
        None => offset.saturating_add_signed(shift),
    }
}

/// Whether `edits` can be applied to `text` in one go: each inside it, on character
/// boundaries, and none overlapping another (an insertion may share its offset with the start
/// of a replacement).
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

/// The one edit turning `before` into `after`: everything between their common prefix and
/// common suffix (on character boundaries). What an editor is sent: one range, whatever
/// changed inside it.
pub fn single_edit(before: &str, after: &str) -> TextEdit {
    let (a, b) = (before.as_bytes(), after.as_bytes());
    let mut prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    while !before.is_char_boundary(prefix) || !after.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = a.len().min(b.len()) - prefix;
    let mut suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    while !before.is_char_boundary(a.len() - suffix) || !after.is_char_boundary(b.len() - suffix) {
        suffix -= 1;
    }
    TextEdit {
        range: TextRange::new(prefix, a.len() - suffix),
        new_text: after[prefix..b.len() - suffix].to_owned(),
    }
}

/// Whether applying `a` to `text` gives the same text as applying `b` (each a single edit in
/// `text`'s coordinates), compared over the region the two touch only. Two edits can make the
/// same text and differ: inserting `b` after `ab` or after `a`, or an editor that reports the
/// edit it applied trimmed to what changed.
pub fn same_result(text: &str, a: &TextEdit, b: &TextEdit) -> bool {
    if a.delta() != b.delta() || a.range.end > text.len() || b.range.end > text.len() {
        return false;
    }
    let low = a.range.start.min(b.range.start);
    let high = a.range.end.max(b.range.end);
    let bytes = text.as_bytes();
    fn region<'a>(
        bytes: &'a [u8],
        low: usize,
        high: usize,
        edit: &'a TextEdit,
    ) -> impl Iterator<Item = &'a u8> {
        bytes[low..edit.range.start]
            .iter()
            .chain(edit.new_text.as_bytes())
            .chain(&bytes[edit.range.end..high])
    }
    region(bytes, low, high, a).eq(region(bytes, low, high, b))
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

    /// Where `offset` (in the text before the edits) is in the text after them: [`map_offset`].
    pub fn map_offset(&self, offset: usize, assoc: Assoc) -> usize {
        map_offset(offset, &self.edits, assoc)
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
/// Applying the result to `old` gives `new` exactly. The line diff aligns changed lines with
/// the lines they came from (see [`LCS_LINES`]; patience on large texts, anchored on lines that
/// occur once in both): a chat that grew a reply and some typing diffs as those insertions, not
/// as a realignment of its repeated role lines over the reply (which would turn a user's
/// insertion into a conflict-free "change" in the middle of it).
pub fn diff_to_edits(old: &str, new: &str) -> Vec<TextEdit> {
    if old == new {
        return Vec::new();
    }
    let lines = similar::TextDiff::configure()
        .algorithm(line_algorithm(old, new))
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

/// Texts with at most this many lines on both sides multiplied are diffed line by line with
/// a longest-common-subsequence table (it aligns a changed line with the line it came from,
/// where Myers and patience may pair it with a similar line far away, e.g. `ok.` with a line of
/// the reply, when the text repeats its role lines); larger ones with patience.
const LCS_LINES: usize = 300 * 300;

fn line_algorithm(old: &str, new: &str) -> similar::Algorithm {
    let lines = |text: &str| memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1;
    if lines(old).saturating_mul(lines(new)) <= LCS_LINES {
        similar::Algorithm::Lcs
    } else {
        similar::Algorithm::Patience
    }
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
        if range.is_empty() {
            // Not onto or over the edit before it (two insertions at one offset are refused).
            let floor = out.last().map_or(0, |e: &TextEdit| {
                e.range.end + usize::from(e.range.is_empty())
            });
            let (at, text) = slide_to_line_start(old, floor, range.start, text);
            out.push(TextEdit::insert(at, text));
        } else {
            out.push(TextEdit::replace(range, text));
        }
    }
}

/// An insertion of `text` at `at` in `old`, moved to the nearest line start before it where
/// the same insertion makes the same text (`U1; x` → `U9; U1; x` is `U9; ` typed at the line
/// start, not `9; U1` typed after `U1`), when there is one; else as it is. A character diff
/// picks any of the equal places; a merge that maps the insertion through other changes
/// needs the one a user meant.
fn slide_to_line_start(old: &str, floor: usize, at: usize, text: &str) -> (usize, String) {
    let line_start = |pos: usize| pos == 0 || old.as_bytes()[pos - 1] == b'\n';
    if line_start(at) {
        return (at, text.to_owned());
    }
    let mut pos = at;
    let mut moved = text.to_owned();
    while pos > floor {
        let (Some(before), Some(last)) =
            (old[..pos].chars().next_back(), moved.chars().next_back())
        else {
            break;
        };
        if before != last || pos - before.len_utf8() < floor {
            break;
        }
        pos -= before.len_utf8();
        moved.truncate(moved.len() - last.len_utf8());
        moved.insert(0, before);
        if line_start(pos) {
            return (pos, moved);
        }
    }
    (at, text.to_owned())
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
    fn one_assoc_rule_for_insertions_replacements_and_any_order() {
        // An insertion exactly at the offset: after it with Before, before it with After.
        let insert = [TextEdit::insert(2, "ab"), TextEdit::insert(5, "xyz")];
        assert_eq!(map_offset(5, &insert, Assoc::Before), 7);
        assert_eq!(map_offset(5, &insert, Assoc::After), 10);
        assert_eq!(map_offset(1, &insert, Assoc::After), 1);
        // Inside or at the start of a replaced range: its new start (Before) or end (After).
        let replace = [TextEdit::replace(TextRange::new(2, 6), "Q")];
        assert_eq!(map_offset(4, &replace, Assoc::Before), 2);
        assert_eq!(map_offset(4, &replace, Assoc::After), 3);
        assert_eq!(map_offset(2, &replace, Assoc::Before), 2);
        assert_eq!(map_offset(2, &replace, Assoc::After), 3);
        // At its end, and after it: with the text that follows.
        assert_eq!(map_offset(6, &replace, Assoc::Before), 3);
        assert_eq!(map_offset(8, &replace, Assoc::Before), 5);
        // The order of the edits does not matter.
        let both = [
            TextEdit::replace(TextRange::new(8, 9), "long"),
            TextEdit::insert(1, "+"),
        ];
        let reversed = [both[1].clone(), both[0].clone()];
        for offset in 0..10 {
            for assoc in [Assoc::Before, Assoc::After] {
                assert_eq!(
                    map_offset(offset, &both, assoc),
                    map_offset(offset, &reversed, assoc)
                );
            }
        }
        assert_eq!(map_offset(8, &both, Assoc::After), 13);
        // An insertion at the start of a replacement goes before it.
        let shared = [
            TextEdit::insert(2, "ab"),
            TextEdit::replace(TextRange::new(2, 4), "Z"),
        ];
        assert_eq!(map_offset(2, &shared, Assoc::Before), 2);
        assert_eq!(map_offset(2, &shared, Assoc::After), 5);
        assert_eq!(map_offset(3, &shared, Assoc::Before), 4);
    }

    #[test]
    fn edits_fit_inside_on_boundaries_and_apart() {
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

    #[test]
    fn one_edit_turns_before_into_after() {
        for (before, after) in [
            ("abc", "abXc"),
            ("abc", "abc"),
            ("", "x"),
            ("x", ""),
            ("aaa", "aaaa"),
            ("héllo", "hèllo"),
            ("é", "ée"),
            ("@You:\nhi\n", "@You:\nhi\n\nTYPED"),
        ] {
            let edit = single_edit(before, after);
            assert_eq!(
                apply_edits(before, std::slice::from_ref(&edit)).unwrap(),
                after,
                "{before:?} -> {after:?}"
            );
        }
        assert_eq!(single_edit("aaa", "aaaa").new_text, "a");
    }

    #[test]
    fn same_result_compares_what_two_edits_make() {
        let text = "ab\nc";
        // `b` inserted after `ab` or after `a`: the same text.
        assert!(same_result(
            text,
            &TextEdit::insert(2, "b"),
            &TextEdit::insert(1, "b")
        ));
        assert!(!same_result(
            text,
            &TextEdit::insert(2, "b"),
            &TextEdit::insert(0, "b")
        ));
        // A replacement reported trimmed to what changed.
        assert!(same_result(
            text,
            &TextEdit::replace(TextRange::new(0, 2), "aX"),
            &TextEdit::replace(TextRange::new(1, 2), "X")
        ));
        assert!(!same_result(
            text,
            &TextEdit::insert(2, "b"),
            &TextEdit::insert(9, "b")
        ));
    }

    #[test]
    fn an_insertion_is_put_at_the_line_start_it_can_be_at() {
        let edits = diff_to_edits("@You:\nU1; second line\n", "@You:\nU19; U1; second line\n");
        assert_eq!(edits, vec![TextEdit::insert(6, "U19; ")]);
        // Not across another change, and not where it would change the text.
        let edits = diff_to_edits("ab\nxy\n", "ab\nxxy\n");
        assert_eq!(apply_edits("ab\nxy\n", &edits).unwrap(), "ab\nxxy\n");
    }

    #[test]
    fn diff_splits_an_inline_marker_minimally() {
        let edits = diff_to_edits("@You: hi\nthere\n", "@You:\nhi\nthere\n");
        assert_eq!(edits, vec![TextEdit::replace(TextRange::new(5, 6), "\n")]);
    }
}
