//! The three-way merge of two texts edited from one base: what both sides agree on.
//!
//! ```
//! use flemma_syntax::three_way_base;
//! let base = "one\ntwo\n";
//! // Each side changed a different line: they agree on nothing but the base.
//! assert_eq!(three_way_base(base, "one!\ntwo\n", "one\ntwo!\n").as_deref(), Ok(base));
//! // Both made the same change: it is agreed once.
//! assert_eq!(three_way_base(base, "one\n2\n", "one\n2\n").as_deref(), Ok("one\n2\n"));
//! // Different changes of the same place conflict.
//! assert_eq!(three_way_base(base, "one\n2\n", "one\nII\n").unwrap_err().line, 2);
//! ```

use crate::{TextEdit, TextRange, diff_to_edits};

/// Where [`three_way_base`] found both sides changing the same text differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflict {
    /// The line (1-based) of the base where the changes meet.
    pub line: usize,
}

impl std::fmt::Display for MergeConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}", self.line)
    }
}

/// The three-way merge of `ours` and `theirs`, both edited from `base`, as the text both agree
/// on: `base` with the changes both made the same way. The rest of each side is then a change
/// from that text (the writer applies the rest of `theirs` over its own text, mapped through its
/// own changes). An insertion of `theirs` that begins `ours`'s insertion at the same place is
/// agreed too (the part of a streamed reply that reached them; line breaks after it stay
/// theirs: Neovim adds one after an insertion at the very end of its buffer). A change of one side that
/// overlaps a different change of the other (or two different insertions at one place) is a
/// conflict.
pub fn three_way_base(base: &str, ours: &str, theirs: &str) -> Result<String, MergeConflict> {
    let ours = diff_to_edits(base, ours);
    let theirs = diff_to_edits(base, theirs);
    let mut agreed: Vec<TextEdit> = Vec::new();
    for their in &theirs {
        if ours.contains(their) {
            agreed.push(their.clone());
            continue;
        }
        // An insertion that begins ours at the same place: what reached them of a stream (with
        // the line breaks Neovim adds after an insertion at the end of its buffer, which stay
        // theirs).
        let begun = their.new_text.trim_end_matches('\n');
        if !begun.is_empty()
            && ours.iter().any(|our| {
                our.range.is_empty() && our.range == their.range && our.new_text.starts_with(begun)
            })
        {
            agreed.push(TextEdit::replace(their.range, begun));
            continue;
        }
        for our in &ours {
            let (a, b) = (our.range, their.range);
            let overlap = a.start.max(b.start) < a.end.min(b.end);
            // An insertion inside the other's replaced range, or at its start: where it goes
            // in the other's text is a guess.
            let inside = |point: TextRange, other: TextRange| {
                point.is_empty() && other.start <= point.start && point.start < other.end
            };
            let same_point = a.is_empty() && b.is_empty() && a.start == b.start;
            if overlap || inside(a, b) || inside(b, a) || same_point {
                let at = a.start.max(b.start).min(base.len());
                let line = base.as_bytes()[..at]
                    .iter()
                    .filter(|&&c| c == b'\n')
                    .count()
                    + 1;
                return Err(MergeConflict { line });
            }
        }
    }
    let mut text = base.to_owned();
    for edit in agreed.iter().rev() {
        text.replace_range(edit.range.start..edit.range.end, &edit.new_text);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_three_way_merge_keeps_both_sides_and_finds_conflicts() {
        let base = "@You:\nfirst\n\n@Assistant:\nhello\n\n@You:\nlast\n";
        let ours = "@You:\nfirst\n\n@Assistant:\nhello\n\n@You:\nlast\n\n@Assistant:\nreply\n";
        let theirs = "@You:\nfirst, edited\n\n@Assistant:\nhello\n\n@You:\nlast\n";
        // Nothing both changed the same way: the agreed text is the base.
        assert_eq!(three_way_base(base, ours, theirs).as_deref(), Ok(base));
        // The same change on both sides is agreed once.
        assert_eq!(three_way_base(base, ours, ours).as_deref(), Ok(ours));
        // Different changes of one line conflict, and the conflict names it.
        let other = "@You:\nfirst\n\n@Assistant:\nhello there\n\n@You:\nlast\n";
        let mine = "@You:\nfirst\n\n@Assistant:\nhello, you\n\n@You:\nlast\n";
        assert_eq!(three_way_base(base, mine, other).unwrap_err().line, 5);
        // The beginning of what one side inserted, inserted by the other at the same place.
        let streamed = "@You:\nfirst\n\n@Assistant:\nhello\n\n@You:\nlast\n\n@Assistant:\nre";
        assert_eq!(
            three_way_base(base, ours, streamed).as_deref(),
            Ok(streamed)
        );
        let with_break = format!("{streamed}\n");
        assert_eq!(
            three_way_base(base, ours, &with_break).as_deref(),
            Ok(streamed)
        );
    }
}
