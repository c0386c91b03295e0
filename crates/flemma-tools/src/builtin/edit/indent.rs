//! A file's indentation style, and re-indenting a model's text to it (tabs versus spaces, and
//! the width of one level).

use std::collections::HashMap;

/// Columns a tab counts for when a model indents with tabs.
const TAB_COLS: usize = 4;
/// Width of one level when nothing says otherwise.
const DEFAULT_UNIT: usize = 4;
/// Lines looked at to detect a file's style.
const DETECT_LINES: usize = 20_000;

/// One level of indentation in a file: a tab or a number of spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndentStyle {
    pub unit: String,
}

impl IndentStyle {
    /// Tabs when more indented lines start with a tab than with a space; otherwise spaces, as
    /// many as the most common step between consecutive indented lines.
    pub fn detect<'a>(lines: impl Iterator<Item = &'a str>) -> Self {
        let lines: Vec<&str> = lines
            .take(DETECT_LINES)
            .filter(|l| !l.trim().is_empty())
            .collect();
        let tabs = lines.iter().filter(|l| l.starts_with('\t')).count();
        let spaces = lines.iter().filter(|l| l.starts_with(' ')).count();
        if tabs > spaces {
            return Self { unit: "\t".into() };
        }
        let n = most_common_step(lines.iter().map(|l| indent_width(leading_ws(l), TAB_COLS)))
            .unwrap_or(DEFAULT_UNIT);
        Self {
            unit: " ".repeat(n),
        }
    }

    fn unit_cols(&self) -> usize {
        if self.unit == "\t" {
            TAB_COLS
        } else {
            self.unit.len().max(1)
        }
    }
}

/// The most common positive difference between consecutive indent widths.
fn most_common_step(widths: impl Iterator<Item = usize>) -> Option<usize> {
    let mut counts: HashMap<usize, usize> = HashMap::new();
    let mut prev: Option<usize> = None;
    for w in widths {
        if let Some(p) = prev
            && w > p
            && w - p <= 8
        {
            *counts.entry(w - p).or_default() += 1;
        }
        prev = Some(w);
    }
    counts
        .into_iter()
        .max_by_key(|&(step, n)| (n, std::cmp::Reverse(step)))
        .map(|(step, _)| step)
}

pub(crate) fn leading_ws(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

pub(crate) fn indent_width(ws: &str, tab_cols: usize) -> usize {
    ws.chars()
        .map(|c| if c == '\t' { tab_cols } else { 1 })
        .sum()
}

/// Maps a line indented in the model's style onto the file's: the model's base indent becomes
/// the file's base indent, each model level one file level; blank lines stay empty.
#[derive(Debug)]
pub(crate) struct Reindent {
    file_base: String,
    file_unit: String,
    model_base: usize,
    model_unit: usize,
}

impl Reindent {
    /// `file_base`: the indent of the file line the match starts on; `model_first`: the line of
    /// the model's text that sits there; `model_lines`: all of the model's lines (old and new),
    /// to learn the width of its levels.
    pub fn new<'a>(
        style: &IndentStyle,
        file_base: &str,
        model_first: &str,
        model_lines: impl Iterator<Item = &'a str>,
    ) -> Self {
        let model_lines: Vec<&str> = model_lines.filter(|l| !l.trim().is_empty()).collect();
        let uses_tabs = model_lines.iter().any(|l| leading_ws(l).contains('\t'));
        let model_unit = if uses_tabs {
            TAB_COLS
        } else {
            let mut widths: Vec<usize> = model_lines
                .iter()
                .map(|l| indent_width(leading_ws(l), TAB_COLS))
                .collect();
            widths.sort_unstable();
            widths.dedup();
            most_common_step(widths.into_iter()).unwrap_or_else(|| style.unit_cols())
        };
        Self {
            file_base: file_base.to_string(),
            file_unit: style.unit.clone(),
            model_base: indent_width(leading_ws(model_first), TAB_COLS),
            model_unit: model_unit.max(1),
        }
    }

    pub fn apply(&self, line: &str) -> String {
        let content = line.trim_start();
        if content.trim_end().is_empty() {
            return String::new();
        }
        let width = indent_width(leading_ws(line), TAB_COLS);
        let mut out = if width >= self.model_base {
            let rel = width - self.model_base;
            let mut s = self.file_base.clone();
            s.push_str(&self.file_unit.repeat(rel / self.model_unit));
            s.push_str(&" ".repeat(rel % self.model_unit));
            s
        } else {
            let levels = (self.model_base - width).div_ceil(self.model_unit);
            let mut base = self.file_base.as_str();
            for _ in 0..levels {
                base = base.strip_suffix(self.file_unit.as_str()).unwrap_or("");
            }
            base.to_string()
        };
        out.push_str(content);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_tabs_and_space_widths() {
        let tabs = "a\n\tb\n\t\tc\n".lines();
        assert_eq!(IndentStyle::detect(tabs).unit, "\t");
        let two = "a\n  b\n    c\n  d\n".lines();
        assert_eq!(IndentStyle::detect(two).unit, "  ");
    }

    #[test]
    fn reindents_spaces_to_two_space_file() {
        let style = IndentStyle { unit: "  ".into() };
        let r = Reindent::new(&style, "  ", "    a", ["    a", "        b"].into_iter());
        assert_eq!(r.apply("        b"), "    b");
        assert_eq!(r.apply("    a"), "  a");
        assert_eq!(r.apply("a"), "a");
        assert_eq!(r.apply("   "), "");
    }
}
