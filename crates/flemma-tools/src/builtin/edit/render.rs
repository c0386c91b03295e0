//! Applying placed edits to the text and describing the change: the headline counts and a diff
//! with real line numbers. Pure.

use super::matching::{Found, Source};

/// The result of applying every edit to the original text.
#[derive(Debug)]
pub(crate) struct Applied {
    pub text: String,
    pub hunks: Vec<Hunk>,
}

/// One changed place: lines removed (numbered in the old file) and added (in the new file).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// 1-based number of the first removed line in the old file.
    pub old_line: usize,
    /// 1-based number of the first added line in the new file.
    pub new_line: usize,
    pub removed: Vec<String>,
    pub added: Vec<String>,
}

impl Applied {
    pub fn added(&self) -> usize {
        self.hunks.iter().map(|h| h.added.len()).sum()
    }
    pub fn removed(&self) -> usize {
        self.hunks.iter().map(|h| h.removed.len()).sum()
    }
    pub fn first_change(&self) -> Option<usize> {
        self.hunks.first().map(|h| h.new_line)
    }
}

/// Applies `found` (sorted by start, disjoint) to `src`.
pub(crate) fn apply(src: &Source<'_>, found: &[&Found]) -> Applied {
    let text = src.text;
    let mut out = String::with_capacity(text.len());
    let mut hunks = Vec::new();
    let mut cursor = 0;
    let mut line_delta: isize = 0;
    for f in found {
        out.push_str(&text[cursor..f.start]);
        out.push_str(&f.replacement);
        cursor = f.end;

        let span_start = src.lines[src.line_of(f.start)].start;
        let span_end = src.line_end(f.end);
        let old_span = &text[span_start..span_end];
        let new_span = format!(
            "{}{}{}",
            &text[span_start..f.start],
            f.replacement,
            &text[f.end..span_end]
        );
        let old_lines: Vec<&str> = old_span.split('\n').collect();
        let new_lines: Vec<&str> = new_span.split('\n').collect();
        let prefix = old_lines
            .iter()
            .zip(&new_lines)
            .take_while(|(a, b)| a == b)
            .count();
        let max_suffix = old_lines.len().min(new_lines.len()) - prefix;
        let suffix = old_lines
            .iter()
            .rev()
            .zip(new_lines.iter().rev())
            .take(max_suffix)
            .take_while(|(a, b)| a == b)
            .count();
        let removed: Vec<String> = old_lines[prefix..old_lines.len() - suffix]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let added: Vec<String> = new_lines[prefix..new_lines.len() - suffix]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let old_line = src.line_of(span_start) + 1 + prefix;
        let new_line = (old_line as isize + line_delta).max(1) as usize;
        line_delta += new_lines.len() as isize - old_lines.len() as isize;
        if !removed.is_empty() || !added.is_empty() {
            hunks.push(Hunk {
                old_line,
                new_line,
                removed,
                added,
            });
        }
    }
    out.push_str(&text[cursor..]);
    Applied { text: out, hunks }
}

/// The numbered diff: one context line on each side of every hunk, `-`/`+` for changed lines.
/// Removed lines carry their number in the old file; added and context lines their number in
/// the new one (what a follow-up edit or read sees).
pub(crate) fn diff(src: &Source<'_>, applied: &Applied) -> String {
    let mut out = String::new();
    let last_line = applied
        .hunks
        .iter()
        .map(|h| h.old_line + h.removed.len() + h.added.len() + 1)
        .max()
        .unwrap_or(1);
    let w = last_line.to_string().len();
    let mut previous_end: Option<usize> = None; // old line after the previous hunk's context
    for h in &applied.hunks {
        let before = h.old_line.checked_sub(1).filter(|&n| n >= 1);
        if let (Some(prev), Some(b)) = (previous_end, before)
            && b > prev + 1
        {
            out.push_str(&format!(" {:>w$} ┆\n", ""));
        }
        if let Some(b) = before
            && previous_end.is_none_or(|prev| b > prev)
        {
            let shown = h.new_line.saturating_sub(1).max(1);
            out.push_str(&format!(" {shown:>w$} │ {}\n", src.lines[b - 1].text));
        }
        for (i, l) in h.removed.iter().enumerate() {
            out.push_str(&format!("-{:>w$} │ {l}\n", h.old_line + i));
        }
        for (i, l) in h.added.iter().enumerate() {
            out.push_str(&format!("+{:>w$} │ {l}\n", h.new_line + i));
        }
        let after_old = h.old_line + h.removed.len(); // 1-based old line after the hunk
        let mut end = after_old - 1;
        if after_old <= src.lines.len() && !is_final_empty(src, after_old) {
            let after_new = h.new_line + h.added.len();
            out.push_str(&format!(
                " {after_new:>w$} │ {}\n",
                src.lines[after_old - 1].text
            ));
            end = after_old;
        }
        previous_end = Some(end);
    }
    out
}

/// The empty "line" after a final newline is not a line of the file.
fn is_final_empty(src: &Source<'_>, line: usize) -> bool {
    line == src.lines.len() && src.lines[line - 1].text.is_empty()
}
