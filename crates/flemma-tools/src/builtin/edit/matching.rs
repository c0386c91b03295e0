//! Finding where an edit's `old` text sits in a file: three passes, strictest first (exact,
//! edges, indent), the first pass that finds anything at all winning; plus the closest region
//! of the file when nothing matches. Pure: works on a `&str` already normalised to `\n`.

use super::indent::{IndentStyle, Reindent, leading_ws};

/// One line of the file: where it starts and its text without the newline.
#[derive(Debug)]
pub(crate) struct Line<'a> {
    pub start: usize,
    pub text: &'a str,
    pub trimmed: &'a str,
}

/// The file, split once and shared by every edit of a call.
#[derive(Debug)]
pub(crate) struct Source<'a> {
    pub text: &'a str,
    pub lines: Vec<Line<'a>>,
    pub style: IndentStyle,
}

impl<'a> Source<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut lines = Vec::new();
        let mut start = 0;
        for piece in text.split('\n') {
            lines.push(Line {
                start,
                text: piece,
                trimmed: piece.trim(),
            });
            start += piece.len() + 1;
        }
        let style = IndentStyle::detect(lines.iter().map(|l| l.text));
        Self { text, lines, style }
    }

    /// 0-based index of the line holding byte `pos`.
    pub fn line_of(&self, pos: usize) -> usize {
        match self.lines.binary_search_by(|l| l.start.cmp(&pos)) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// Byte offset of the end of the line holding `pos` (its newline, or the end of the text).
    pub fn line_end(&self, pos: usize) -> usize {
        let line = &self.lines[self.line_of(pos)];
        line.start + line.text.len()
    }
}

/// Which pass found the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Exact,
    Edges,
    Indent,
}

/// A unique match: the byte range of the file it replaces and the text that goes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub replacement: String,
    pub pass: Pass,
}

/// Why an edit could not be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Miss {
    Empty,
    NotFound {
        closest: Option<Region>,
    },
    /// 1-based line numbers of every place it matched (the count is `lines.len()`).
    Ambiguous {
        lines: Vec<usize>,
    },
}

/// Lines of the file shown as "the closest the file comes to it": 0-based first line, count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Region {
    pub first: usize,
    pub count: usize,
}

/// Places one edit. `old` and `new` are already `\n`-normalised.
pub(crate) fn locate(src: &Source<'_>, old: &str, new: &str) -> Result<Found, Miss> {
    if old.trim().is_empty() {
        return Err(Miss::Empty);
    }
    // Pass 1: exact.
    let exact = occurrences(src.text, old);
    if let Some(found) = unique(src, &exact, |start| Found {
        start,
        end: start + old.len(),
        replacement: new.to_string(),
        pass: Pass::Exact,
    })? {
        return Ok(found);
    }
    // Pass 2: edges — the whitespace around `old`.
    let core = old.trim();
    if core.len() != old.len() {
        let hits = occurrences(src.text, core);
        if let Some(found) = unique(src, &hits, |start| Found {
            start,
            end: start + core.len(),
            replacement: edges_replacement(src, start, old, new),
            pass: Pass::Edges,
        })? {
            return Ok(found);
        }
    }
    // Pass 3: indent — every line's leading and trailing whitespace.
    let old_lines = content_lines(old);
    if old_lines.len() >= 2 {
        let hits = indent_matches(src, &old_lines);
        if let Some(&first) = hits.first() {
            if hits.len() > 1 {
                return Err(Miss::Ambiguous {
                    lines: hits.iter().map(|&i| i + 1).collect(),
                });
            }
            let last = first + old_lines.len() - 1;
            let start = src.lines[first].start;
            let end = src.lines[last].start + src.lines[last].text.len();
            let new_lines = content_lines(new);
            let reindent = Reindent::new(
                &src.style,
                leading_ws(src.lines[first].text),
                old_lines[0],
                old_lines.iter().chain(new_lines.iter()).copied(),
            );
            let replacement = new_lines
                .iter()
                .map(|l| reindent.apply(l))
                .collect::<Vec<_>>()
                .join("\n");
            return Ok(Found {
                start,
                end,
                replacement,
                pass: Pass::Indent,
            });
        }
    }
    Err(Miss::NotFound {
        closest: closest_region(src, old),
    })
}

/// Every start offset of `needle` in `hay`, overlapping ones included.
fn occurrences(hay: &str, needle: &str) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let bytes = hay.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = finder.find(&bytes[from..]) {
        let at = from + i;
        out.push(at);
        // The next search starts one character further, so overlapping copies count too.
        let step = hay[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
        if from >= bytes.len() {
            break;
        }
    }
    out
}

/// `None` when there is no hit (try the next pass), the match when there is exactly one, and
/// the ambiguity when there are several.
fn unique(
    src: &Source<'_>,
    hits: &[usize],
    make: impl FnOnce(usize) -> Found,
) -> Result<Option<Found>, Miss> {
    match hits {
        [] => Ok(None),
        [one] => Ok(Some(make(*one))),
        many => Err(Miss::Ambiguous {
            lines: many.iter().map(|&p| src.line_of(p) + 1).collect(),
        }),
    }
}

/// The replacement for an edges match: the padding `old` carried comes off `new` too, and a
/// multi-line `new` is re-indented to the file's style.
fn edges_replacement(src: &Source<'_>, start: usize, old: &str, new: &str) -> String {
    let lead = &old[..old.len() - old.trim_start().len()];
    let trail = &old[old.trim_end().len()..];
    let new_lead_len = common_prefix_len(lead, &new[..new.len() - new.trim_start().len()]);
    let mut body = &new[new_lead_len..];
    let body_ws_tail = &body[body.trim_end().len()..];
    let tail_len = common_suffix_len(trail, body_ws_tail);
    body = &body[..body.len() - tail_len];
    if !body.contains('\n') {
        return body.to_string();
    }
    // The first line lands where the match starts; the others are re-indented relative to the
    // indent `old` carried on its first line.
    let line = &src.lines[src.line_of(start)];
    let before_match = &line.text[..start - line.start];
    if !before_match.trim().is_empty() {
        return body.to_string();
    }
    let model_first = lead.rsplit('\n').next().unwrap_or("");
    let mut parts = body.split('\n');
    let first = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    let model_first_line = format!("{model_first}{first}");
    let reindent = Reindent::new(
        &src.style,
        before_match,
        &model_first_line,
        std::iter::once(model_first_line.as_str()).chain(rest.iter().copied()),
    );
    let mut out = first.to_string();
    for l in rest {
        out.push('\n');
        out.push_str(&reindent.apply(l));
    }
    out
}

fn common_prefix_len(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn common_suffix_len(a: &str, b: &str) -> usize {
    a.bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// The lines of `text` without its leading and trailing blank lines.
fn content_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.split('\n').collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    match (first, last) {
        (Some(a), Some(b)) => lines[a..=b].to_vec(),
        _ => Vec::new(),
    }
}

/// 0-based first lines of every window of the file whose trimmed lines equal `old`'s.
fn indent_matches(src: &Source<'_>, old_lines: &[&str]) -> Vec<usize> {
    let want: Vec<&str> = old_lines.iter().map(|l| l.trim()).collect();
    let k = want.len();
    if src.lines.len() < k {
        return Vec::new();
    }
    (0..=src.lines.len() - k)
        .filter(|&i| {
            src.lines[i].trimmed == want[0]
                && want
                    .iter()
                    .enumerate()
                    .all(|(j, w)| src.lines[i + j].trimmed == *w)
        })
        .collect()
}

/// Similarity at which a line "lines up" with a line of `old` without being equal.
const LINE_SIMILARITY: f64 = 0.7;

/// A line of `old` with its byte bigrams, sorted, computed once per call.
struct Wanted<'a> {
    text: &'a str,
    bigrams: Vec<u16>,
}

impl<'a> Wanted<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            bigrams: bigrams(text),
        }
    }

    fn lines_up(&self, file_trimmed: &str) -> bool {
        if file_trimmed == self.text {
            return true;
        }
        if self.bigrams.is_empty() || file_trimmed.len() < 2 {
            return false;
        }
        // Dice ≥ s needs the lengths within a ratio: cheap rejection first.
        let (a, b) = (self.text.len() as f64, file_trimmed.len() as f64);
        if 2.0 * a.min(b) / (a + b) < LINE_SIMILARITY {
            return false;
        }
        dice(&self.bigrams, &bigrams(file_trimmed)) >= LINE_SIMILARITY
    }
}

fn bigrams(s: &str) -> Vec<u16> {
    let mut v: Vec<u16> = s
        .as_bytes()
        .windows(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]))
        .collect();
    v.sort_unstable();
    v
}

/// Sørensen–Dice coefficient of two sorted bigram multisets.
fn dice(a: &[u16], b: &[u16]) -> f64 {
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

/// The window of the file that comes closest to `old`, when at least half its lines line up.
fn closest_region(src: &Source<'_>, old: &str) -> Option<Region> {
    let want: Vec<Wanted<'_>> = content_lines(old)
        .iter()
        .map(|l| Wanted::new(l.trim()))
        .collect();
    let k = want.len();
    if k == 0 || src.lines.len() < k {
        return None;
    }
    let mut candidates: Vec<usize> = Vec::new();
    if k == 1 {
        candidates.extend(0..src.lines.len());
    } else {
        // Windows that share at least one non-blank line exactly with `old`.
        for (p, line) in src.lines.iter().enumerate() {
            if line.trimmed.is_empty() {
                continue;
            }
            for (j, w) in want.iter().enumerate() {
                if w.text == line.trimmed && p >= j && p - j + k <= src.lines.len() {
                    candidates.push(p - j);
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
    }
    let mut best: Option<(usize, usize)> = None; // (score, first)
    for i in candidates {
        let score = want
            .iter()
            .enumerate()
            .filter(|(j, w)| w.lines_up(src.lines[i + j].trimmed))
            .count();
        if score * 2 >= k && score > 0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, i));
        }
    }
    best.map(|(_, first)| Region { first, count: k })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(text: &str, old: &str, new: &str) -> Result<Found, Miss> {
        locate(&Source::new(text), old, new)
    }

    #[test]
    fn exact_wins_over_relaxed() {
        // Relaxed, "  b()" would also match the third line; verbatim it is unique.
        let f = loc("a\n  b()\nb()\n", "  b()", "c").unwrap_or_else(|m| panic!("{m:?}"));
        assert_eq!(f.pass, Pass::Exact);
        assert_eq!((f.start, f.end), (2, 7));
    }

    #[test]
    fn edges_strip_padding_from_new() {
        let text = "fn main() {\n\tfoo();\n}\n";
        let f = loc(text, "    foo();", "    bar();").unwrap_or_else(|m| panic!("{m:?}"));
        assert_eq!(f.pass, Pass::Edges);
        assert_eq!(&text[f.start..f.end], "foo();");
        assert_eq!(f.replacement, "bar();");
    }

    #[test]
    fn indent_pass_reindents_spaces_to_tabs() {
        let text = "func main() {\n\tif x {\n\t\ty()\n\t}\n}\n";
        let old = "    if x {\n        y()\n    }";
        let new = "    if x {\n        y()\n\n        z()\n    }";
        let f = loc(text, old, new).unwrap_or_else(|m| panic!("{m:?}"));
        assert_eq!(f.pass, Pass::Indent);
        assert_eq!(f.replacement, "\tif x {\n\t\ty()\n\n\t\tz()\n\t}");
    }

    #[test]
    fn ambiguous_lists_lines() {
        let m = loc("x = 1\ny\nx = 1\n", "x = 1", "x = 2");
        assert_eq!(m, Err(Miss::Ambiguous { lines: vec![1, 3] }));
    }

    #[test]
    fn closest_region_needs_half_the_lines() {
        let text = "a\nb\nfunc main() {\n\tcount := 1\n\tprint(count)\n}\n";
        let old = "func main() {\n    count := 2\n    print(count)\n}";
        match loc(text, old, "") {
            Err(Miss::NotFound { closest }) => {
                assert_eq!(closest, Some(Region { first: 2, count: 4 }))
            }
            other => panic!("{other:?}"),
        }
        match loc(text, "zzz\nyyy\nqqq\nb", "") {
            Err(Miss::NotFound { closest }) => assert_eq!(closest, None),
            other => panic!("{other:?}"),
        }
    }
}
