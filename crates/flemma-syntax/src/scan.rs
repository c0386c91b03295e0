//! Scanning of templated text: `{{ expr }}`, `{% code %}` and `@./file` references.

use crate::TextRange;
use crate::tree::{FileReference, Segment, SegmentKind, Template};

/// A tag longer than this is not a tag (keeps pathological input linear enough).
const MAX_TAG_LEN: usize = 256 * 1024;

/// Splits `range` of `text` into text, expression, code and file-reference segments that tile
/// it exactly. Used for `@You:`/`@System:` text and for the result of tools that emit templates.
pub fn scan_templated(text: &str, range: TextRange) -> Vec<Segment> {
    let bytes = text.as_bytes();
    let mut segments = Vec::new();
    let mut pending = range.start;
    let mut i = range.start;
    while i < range.end {
        let Some(offset) = memchr::memchr2(b'{', b'@', &bytes[i..range.end]) else {
            break;
        };
        let at = i + offset;
        if bytes[at] == b'{' {
            if let Some((kind, end)) = scan_tag(bytes, at, range.end) {
                push_text(&mut segments, pending, at);
                segments.push(Segment {
                    range: TextRange::new(at, end),
                    kind,
                });
                pending = end;
                i = end;
                continue;
            }
        } else if let Some((reference, end)) = scan_file_reference(text, at, range) {
            push_text(&mut segments, pending, at);
            segments.push(Segment {
                range: TextRange::new(at, end),
                kind: SegmentKind::FileReference(Box::new(reference)),
            });
            pending = end;
            i = end;
            continue;
        }
        i = at + 1;
    }
    push_text(&mut segments, pending, range.end);
    segments
}

fn push_text(segments: &mut Vec<Segment>, start: usize, end: usize) {
    if start < end {
        segments.push(Segment {
            range: TextRange::new(start, end),
            kind: SegmentKind::Text,
        });
    }
}

/// Scans a tag starting at `open` (`{{` or `{%`). Returns its kind and end offset.
fn scan_tag(bytes: &[u8], open: usize, limit: usize) -> Option<(SegmentKind, usize)> {
    let is_code = match bytes.get(open + 1) {
        Some(b'{') => false,
        Some(b'%') => true,
        _ => return None,
    };
    let mut code_start = open + 2;
    let trim_before = bytes.get(code_start) == Some(&b'-') && code_start < limit;
    if trim_before {
        code_start += 1;
    }
    let limit = limit.min(open.saturating_add(MAX_TAG_LEN));
    let mut depth = 0usize;
    let mut i = code_start;
    while i < limit {
        match bytes[i] {
            b'"' => i = skip_string(bytes, i + 1, b'"', limit),
            b'`' => i = skip_string(bytes, i + 1, b'`', limit),
            b'\'' => i = skip_char_literal(bytes, i, limit),
            b'/' if bytes.get(i + 1) == Some(&b'/') && i + 1 < limit => {
                i = memchr::memchr(b'\n', &bytes[i..limit]).map_or(limit, |n| i + n + 1);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') && i + 1 < limit => {
                i = skip_block_comment(bytes, i + 2, limit);
            }
            b'%' if is_code && bytes.get(i + 1) == Some(&b'}') && i + 1 < limit => {
                return Some(finish_tag(bytes, code_start, i, i + 2, trim_before, true));
            }
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                if !is_code && depth == 0 && bytes.get(i + 1) == Some(&b'}') && i + 1 < limit {
                    return Some(finish_tag(bytes, code_start, i, i + 2, trim_before, false));
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

fn finish_tag(
    bytes: &[u8],
    code_start: usize,
    closer: usize,
    end: usize,
    trim_before: bool,
    is_code: bool,
) -> (SegmentKind, usize) {
    let trim_after = closer > code_start && bytes[closer - 1] == b'-';
    let code_end = if trim_after { closer - 1 } else { closer };
    let template = Template {
        code: TextRange::new(code_start, code_end.max(code_start)),
        trim_before,
        trim_after,
    };
    let kind = if is_code {
        SegmentKind::Code(template)
    } else {
        SegmentKind::Expression(template)
    };
    (kind, end)
}

fn skip_string(bytes: &[u8], mut i: usize, quote: u8, limit: usize) -> usize {
    while i < limit {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    limit
}

/// Rhai character literals are short (`'a'`, `'\n'`, `'\u{1F600}'`); anything else is a lone quote.
fn skip_char_literal(bytes: &[u8], open: usize, limit: usize) -> usize {
    let mut i = open + 1;
    let stop = limit.min(open + 14);
    while i < stop {
        match bytes[i] {
            b'\\' => i += 2,
            b'\'' => return i + 1,
            b'\n' => break,
            _ => i += 1,
        }
    }
    open + 1
}

fn skip_block_comment(bytes: &[u8], mut i: usize, limit: usize) -> usize {
    let mut depth = 1usize;
    while i < limit {
        if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') && i + 1 < limit {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') && i + 1 < limit {
            depth += 1;
            i += 2;
        } else {
            i += 1;
        }
    }
    limit
}

const TRAILING_PUNCTUATION: &[u8] = b".,;:!?)";

/// `@./rel`, `@../rel`, `@~/rel`, `@//abs`, optionally followed by `;key=value` options.
fn scan_file_reference(text: &str, at: usize, range: TextRange) -> Option<(FileReference, usize)> {
    let bytes = text.as_bytes();
    if at > range.start {
        let before = bytes[at - 1];
        if !(before.is_ascii_whitespace() || matches!(before, b'(' | b'[' | b'"' | b'\'' | b'<')) {
            return None;
        }
    }
    let rest = &bytes[at + 1..range.end];
    let prefix_len =
        if rest.starts_with(b"./") || rest.starts_with(b"~/") || rest.starts_with(b"//") {
            2
        } else if rest.starts_with(b"../") {
            3
        } else {
            return None;
        };
    let path_start = at + 1;
    let mut i = path_start;
    while i < range.end && !bytes[i].is_ascii_whitespace() && bytes[i] != b';' {
        i += 1;
    }
    let mut path_end = i;
    let mut options = Vec::new();
    let mut end = i;
    let mut last_value_unquoted = false;
    while end < range.end && bytes[end] == b';' {
        let key_start = end + 1;
        let mut k = key_start;
        while k < range.end
            && (bytes[k].is_ascii_alphanumeric() || bytes[k] == b'_' || bytes[k] == b'-')
        {
            k += 1;
        }
        if k == key_start || k >= range.end || bytes[k] != b'=' {
            break;
        }
        let value_start = k + 1;
        let (value, value_end, quoted) = match bytes.get(value_start) {
            Some(&q @ (b'\'' | b'"')) if value_start < range.end => {
                let close = skip_string(bytes, value_start + 1, q, range.end);
                if close > range.end || bytes.get(close - 1) != Some(&q) || close == value_start + 1
                {
                    break;
                }
                (unescape(&text[value_start + 1..close - 1]), close, true)
            }
            _ => {
                let mut v = value_start;
                while v < range.end && !bytes[v].is_ascii_whitespace() && bytes[v] != b';' {
                    v += 1;
                }
                (text[value_start..v].to_owned(), v, false)
            }
        };
        options.push((text[key_start..k].to_owned(), value));
        end = value_end;
        last_value_unquoted = !quoted;
    }
    if options.is_empty() {
        while path_end > path_start + prefix_len
            && TRAILING_PUNCTUATION.contains(&bytes[path_end - 1])
        {
            path_end -= 1;
        }
        end = path_end;
    } else if last_value_unquoted {
        let mut trimmed = end;
        while trimmed > 0 && TRAILING_PUNCTUATION.contains(&bytes[trimmed - 1]) {
            trimmed -= 1;
        }
        if let Some((_, value)) = options.last_mut() {
            let cut = end - trimmed;
            if cut < value.len() {
                value.truncate(value.len() - cut);
                end = trimmed;
            }
        }
    }
    if path_end <= path_start + prefix_len {
        return None;
    }
    let raw = &text[path_start..path_end];
    let decoded = percent_decode(raw);
    let path = match decoded.strip_prefix("//") {
        Some(absolute) => format!("/{absolute}"),
        None => decoded,
    };
    Some((
        FileReference {
            raw_path: TextRange::new(path_start, path_end),
            path,
            options,
        },
        end,
    ))
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(&'static str, &str)> {
        scan_templated(text, TextRange::new(0, text.len()))
            .into_iter()
            .map(|s| (s.kind.name(), &text[s.range.start..s.range.end]))
            .collect()
    }

    #[test]
    fn expressions_and_code() {
        assert_eq!(
            kinds("a {{ x }} b {% if y { %}c{% } %}"),
            vec![
                ("text", "a "),
                ("expression", "{{ x }}"),
                ("text", " b "),
                ("code", "{% if y { %}"),
                ("text", "c"),
                ("code", "{% } %}")
            ]
        );
    }

    #[test]
    fn rhai_aware_closers() {
        assert_eq!(
            kinds(r#"{{ "}}" }}"#),
            vec![("expression", r#"{{ "}}" }}"#)]
        );
        assert_eq!(
            kinds("{{ #{a: 1} }}"),
            vec![("expression", "{{ #{a: 1} }}")]
        );
        assert_eq!(kinds("{{ '}' }}"), vec![("expression", "{{ '}' }}")]);
        assert_eq!(
            kinds("{{ /* }} */ 1 }}"),
            vec![("expression", "{{ /* }} */ 1 }}")]
        );
        assert_eq!(kinds("{{ `a}}b` }}"), vec![("expression", "{{ `a}}b` }}")]);
    }

    #[test]
    fn trim_markers() {
        let text = "{{- x -}}";
        let segs = scan_templated(text, TextRange::new(0, text.len()));
        let SegmentKind::Expression(t) = &segs[0].kind else {
            panic!()
        };
        assert!(t.trim_before && t.trim_after);
        assert_eq!(&text[t.code.start..t.code.end], " x ");
    }

    #[test]
    fn unclosed_opener_is_text() {
        assert_eq!(kinds("a {{ b"), vec![("text", "a {{ b")]);
    }

    #[test]
    fn file_references() {
        let text = "See @./notes/a%20b.md, and @//etc/hosts. Also @./x.txt;type='text/plain;charset=utf-8' ok";
        let segs = scan_templated(text, TextRange::new(0, text.len()));
        let refs: Vec<_> = segs
            .iter()
            .filter_map(|s| match &s.kind {
                SegmentKind::FileReference(f) => Some(f.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(refs[0].path, "./notes/a b.md");
        assert_eq!(refs[1].path, "/etc/hosts");
        assert_eq!(refs[2].option("type"), Some("text/plain;charset=utf-8"));
        assert_eq!(kinds("mail@./x")[0].0, "text");
    }
}
