//! Line scanning primitives shared by the parser.

/// One line of the text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line {
    pub start: usize,
    /// End of the line's text, without `\n` and a `\r` before it.
    pub end: usize,
    /// Start of the next line (after the `\n`), or the end of the text.
    pub next: usize,
}

#[inline]
pub(crate) fn line_at(bytes: &[u8], start: usize) -> Line {
    match memchr::memchr(b'\n', &bytes[start..]) {
        Some(i) => {
            let nl = start + i;
            let end = if nl > start && bytes[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            Line {
                start,
                end,
                next: nl + 1,
            }
        }
        None => Line {
            start,
            end: bytes.len(),
            next: bytes.len(),
        },
    }
}

#[inline]
pub(crate) fn is_blank(bytes: &[u8], line: Line) -> bool {
    bytes[line.start..line.end]
        .iter()
        .all(|b| *b == b' ' || *b == b'\t')
}

/// `@ROLE:` + whitespace at column 0. Returns the role name range.
#[inline]
pub(crate) fn role_line(bytes: &[u8], line: Line) -> Option<(usize, usize)> {
    let text = &bytes[line.start..line.end];
    if text.first() != Some(&b'@') {
        return None;
    }
    let name_len = text[1..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if name_len == 0 || text.get(1 + name_len) != Some(&b':') {
        return None;
    }
    if text[2 + name_len..]
        .iter()
        .all(|b| *b == b' ' || *b == b'\t')
    {
        Some((line.start + 1, line.start + 1 + name_len))
    } else {
        None
    }
}

/// `@You: text` (a known role followed by text on the same line): the legacy inline form.
pub(crate) fn legacy_inline_role(bytes: &[u8], line: Line) -> Option<&'static str> {
    let text = &bytes[line.start..line.end];
    for role in ["You", "Assistant", "System"] {
        if text.len() > role.len() + 2
            && text[0] == b'@'
            && &text[1..1 + role.len()] == role.as_bytes()
            && text[1 + role.len()] == b':'
            && text[2 + role.len()..]
                .iter()
                .any(|b| !b.is_ascii_whitespace())
        {
            return Some(role);
        }
    }
    None
}

/// A fence opener: ≥3 backticks at column 0 and no backtick in the rest of the line.
/// Returns the number of backticks.
#[inline]
pub(crate) fn fence_opener(bytes: &[u8], line: Line) -> Option<usize> {
    let text = &bytes[line.start..line.end];
    let ticks = text.iter().take_while(|b| **b == b'`').count();
    if ticks >= 3 && !text[ticks..].contains(&b'`') {
        Some(ticks)
    } else {
        None
    }
}

/// A fence closer for a fence of `ticks` backticks: at least that many, then only whitespace.
#[inline]
pub(crate) fn fence_closer(bytes: &[u8], line: Line, ticks: usize) -> bool {
    let text = &bytes[line.start..line.end];
    let n = text.iter().take_while(|b| **b == b'`').count();
    n >= ticks && text[n..].iter().all(|b| *b == b' ' || *b == b'\t')
}

/// Trims trailing spaces and tabs of a line range.
pub(crate) fn trim_end(bytes: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && (bytes[end - 1] == b' ' || bytes[end - 1] == b'\t') {
        end -= 1;
    }
    end
}
