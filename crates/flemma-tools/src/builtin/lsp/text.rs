//! The pure parts of the `lsp` tool: positions (1-based characters at the tool's boundary, the
//! negotiated encoding on the wire), symbol cleaning, where a symbol occurs, URIs.

use std::path::{Path, PathBuf};

/// The unit of `Position.character` the server negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

impl Encoding {
    /// The encoding the server's `positionEncoding` names (UTF-16 when it names none).
    pub fn from_kind(kind: Option<&str>) -> Self {
        match kind {
            Some("utf-8") => Encoding::Utf8,
            Some("utf-32") => Encoding::Utf32,
            _ => Encoding::Utf16,
        }
    }

    fn units(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
            Encoding::Utf32 => 1,
        }
    }
}

/// The lines of `text` without their line ends (`\n`, `\r\n`).
pub fn lines(text: &str) -> Vec<&str> {
    text.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect()
}

/// The wire `character` of the 0-based character column `column` of `line`.
pub fn to_wire(line: &str, column: usize, encoding: Encoding) -> u32 {
    let units: usize = line.chars().take(column).map(|c| encoding.units(c)).sum();
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// The 0-based character column of the wire `character` `units` of `line` (a position inside a
/// character, or past the end, is clamped).
pub fn from_wire(line: &str, units: u32, encoding: Encoding) -> usize {
    let target = units as usize;
    let mut seen = 0;
    for (column, c) in line.chars().enumerate() {
        if seen >= target {
            return column;
        }
        seen += encoding.units(c);
    }
    line.chars().count()
}

/// The byte offset in `text` of the wire position (`line`, `units`), or `None` when the line
/// is past the end. A character past the end of the line is clamped to its end.
pub fn byte_offset(text: &str, line: u32, units: u32, encoding: Encoding) -> Option<usize> {
    let mut start = 0;
    for _ in 0..line {
        start += text[start..].find('\n')? + 1;
    }
    let rest = &text[start..];
    let end = rest.find('\n').unwrap_or(rest.len());
    let content = rest[..end].strip_suffix('\r').unwrap_or(&rest[..end]);
    let column = from_wire(content, units, encoding);
    let within: usize = content.chars().take(column).map(char::len_utf8).sum();
    Some(start + within)
}

/// Why a 1-based `line`:`column` does not exist in `text`.
pub fn check_position(text: &str, line: usize, column: usize) -> Result<(), String> {
    let all = lines(text);
    let count = if text.ends_with('\n') {
        all.len() - 1
    } else {
        all.len()
    };
    if line == 0 || line > count.max(1) {
        return Err(format!(
            "line {line} is past the end of the file ({count} line{})",
            if count == 1 { "" } else { "s" }
        ));
    }
    let length = all.get(line - 1).map_or(0, |l| l.chars().count());
    if column == 0 || column > length + 1 {
        return Err(format!(
            "column {column} is past the end of line {line} ({length} character{})",
            if length == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}

fn is_identifier(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A symbol as the model wrote it, cleaned: stray quotes and punctuation cut off and a
/// `receiver.` / `pkg.` / `module::` prefix dropped (`Greet', ` and `person.Greet` both give
/// `Greet`). Only its first word counts.
pub fn clean_symbol(written: &str) -> String {
    let word = written.split_whitespace().next().unwrap_or("");
    let word = word.trim_matches(|c: char| !is_identifier(c));
    let last = word.rsplit(['.', ':', '>']).next().unwrap_or(word);
    last.trim_matches(|c: char| !is_identifier(c)).to_owned()
}

/// The symbol and the new name of a `rename`: `new_name` cleaned, or, when it is empty and the
/// symbol holds several words (`Greet 1 12 Hello`), the first identifier and the last.
pub fn rename_words(symbol: &str, new_name: &str) -> (String, String) {
    let new_name = clean_symbol(new_name);
    if !new_name.is_empty() {
        return (clean_symbol(symbol), new_name);
    }
    let words: Vec<String> = symbol
        .split_whitespace()
        .map(clean_symbol)
        .filter(|w| !w.is_empty() && !w.chars().all(|c| c.is_ascii_digit()))
        .collect();
    match words.as_slice() {
        [first, .., last] => (first.clone(), last.clone()),
        _ => (clean_symbol(symbol), String::new()),
    }
}

/// Whether a line is a comment: `//`, `--`, `;`, `<!--`, `*` (inside a block comment), `/*`
/// unless code follows its `*/`, and `#` followed by a space, `#` or nothing (`#include`,
/// `#define` and `#[attr]` are code).
fn is_comment_line(line: &str) -> bool {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix("/*") {
        return rest
            .split_once("*/")
            .is_none_or(|(_, after)| after.trim().is_empty());
    }
    if let Some(rest) = line.strip_prefix('#') {
        return rest.is_empty() || rest.starts_with([' ', '\t', '#', '!']);
    }
    ["//", "--", "*", ";", "<!--"]
        .iter()
        .any(|start| line.starts_with(start))
}

/// The 0-based (line, character column) of every whole-word occurrence of `symbol`: in code
/// first, then inside string literals or followed by `.` (`"greet.h"`: more likely a file name
/// than the symbol), comment lines last; only on the 1-based `only_line` when given.
pub fn occurrences(text: &str, symbol: &str, only_line: Option<usize>) -> Vec<(usize, usize)> {
    if symbol.is_empty() {
        return Vec::new();
    }
    let mut code = Vec::new();
    let mut quoted = Vec::new();
    let mut comments = Vec::new();
    for (index, line) in lines(text).into_iter().enumerate() {
        if only_line.is_some_and(|wanted| wanted != index + 1) {
            continue;
        }
        let comment = is_comment_line(line);
        for (byte, _) in line.match_indices(symbol) {
            let before = line[..byte].chars().next_back();
            let after = line[byte + symbol.len()..].chars().next();
            if before.is_some_and(is_identifier) || after.is_some_and(is_identifier) {
                continue;
            }
            let in_string = line[..byte].matches(['"', '\'']).count() % 2 == 1;
            let target = if comment {
                &mut comments
            } else if in_string || after == Some('.') {
                &mut quoted
            } else {
                &mut code
            };
            target.push((index, line[..byte].chars().count()));
        }
    }
    code.extend(quoted);
    code.extend(comments);
    code
}

/// The `file://` URI of an absolute path.
pub fn path_to_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(char::from(byte))
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

/// The path of a `file://` URI (percent-decoded), or `None` for another scheme.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = rest.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// `path` as shown to the model: relative to `cwd` when inside it, else absolute.
pub fn shown_path(path: &Path, cwd: &Path) -> String {
    path.strip_prefix(cwd)
        .map(|relative| relative.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_convert_in_every_encoding() {
        // "é" is 2 UTF-8 bytes, 1 UTF-16 unit; "😀" is 4 bytes, 2 UTF-16 units.
        let line = "é😀x = 1";
        assert_eq!(to_wire(line, 2, Encoding::Utf8), 6);
        assert_eq!(to_wire(line, 2, Encoding::Utf16), 3);
        assert_eq!(to_wire(line, 2, Encoding::Utf32), 2);
        for encoding in [Encoding::Utf8, Encoding::Utf16, Encoding::Utf32] {
            for column in 0..=line.chars().count() {
                let wire = to_wire(line, column, encoding);
                assert_eq!(from_wire(line, wire, encoding), column, "{encoding:?}");
            }
        }
        // Inside a surrogate pair: the next character; past the end: the end.
        assert_eq!(from_wire(line, 2, Encoding::Utf16), 2);
        assert_eq!(from_wire(line, 99, Encoding::Utf16), 7);
        assert_eq!(Encoding::from_kind(None), Encoding::Utf16);
        assert_eq!(Encoding::from_kind(Some("utf-8")), Encoding::Utf8);
    }

    #[test]
    fn byte_offsets_follow_lines_and_crlf() {
        let text = "a\r\nπb = 1\nlast";
        assert_eq!(byte_offset(text, 1, 1, Encoding::Utf16), Some(5));
        assert_eq!(&text[5..6], "b");
        assert_eq!(
            byte_offset(text, 0, 9, Encoding::Utf16),
            Some(1),
            "clamped before \\r"
        );
        assert_eq!(byte_offset(text, 2, 4, Encoding::Utf8), Some(text.len()));
        assert_eq!(byte_offset(text, 3, 0, Encoding::Utf8), None);
    }

    #[test]
    fn positions_past_the_end_are_refused_with_the_count() {
        let text = "fn main() {\n    greet();\n}\n";
        assert!(check_position(text, 2, 5).is_ok());
        assert_eq!(
            check_position(text, 2, 40).unwrap_err(),
            "column 40 is past the end of line 2 (12 characters)"
        );
        assert_eq!(
            check_position(text, 9, 1).unwrap_err(),
            "line 9 is past the end of the file (3 lines)"
        );
    }

    #[test]
    fn symbols_are_cleaned_like_the_seed_says() {
        assert_eq!(clean_symbol("Greet', "), "Greet");
        assert_eq!(clean_symbol("person.Greet"), "Greet");
        assert_eq!(clean_symbol("`std::mem::take`"), "take");
        assert_eq!(clean_symbol("greet()"), "greet");
        assert_eq!(
            rename_words("Greet 1 12 Hello", ""),
            ("Greet".into(), "Hello".into())
        );
        assert_eq!(
            rename_words("Greet", "`Hello`"),
            ("Greet".into(), "Hello".into())
        );
        assert_eq!(rename_words("Greet", ""), ("Greet".into(), String::new()));
    }

    #[test]
    fn occurrences_are_whole_words_code_before_comments() {
        let text = "// greet says hello\nfn greet() {}\nfn greeting() { greet() }\n";
        assert_eq!(
            occurrences(text, "greet", None),
            vec![(1, 3), (2, 16), (0, 3)]
        );
        assert_eq!(occurrences(text, "greet", Some(3)), vec![(2, 16)]);
        assert!(occurrences(text, "", None).is_empty());
        let c = "#include \"greet.h\"\nint main(void) { greet(\"greet\"); }\n";
        assert_eq!(
            occurrences(c, "greet", None),
            vec![(1, 17), (0, 10), (1, 24)]
        );
        assert!(is_comment_line("  # a note") && is_comment_line("/* all */"));
        assert!(!is_comment_line("#include <x>") && !is_comment_line("/* é */ greet();"));
        assert!(!is_comment_line("#[derive(Debug)]") && is_comment_line(" * greet"));
    }

    #[test]
    fn uris_round_trip_and_paths_show_relative() {
        let path = Path::new("/tmp/a dir/ü.rs");
        let uri = path_to_uri(path);
        assert_eq!(uri, "file:///tmp/a%20dir/%C3%BC.rs");
        assert_eq!(uri_to_path(&uri).as_deref(), Some(path));
        assert_eq!(uri_to_path("untitled:1"), None);
        assert_eq!(shown_path(path, Path::new("/tmp")), "a dir/ü.rs");
        assert_eq!(shown_path(path, Path::new("/home")), "/tmp/a dir/ü.rs");
    }
}
