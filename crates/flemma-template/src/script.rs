//! Turning templated text (a message body, an included file) into one Rhai script, and mapping
//! Rhai positions back to the text.
//!
//! Literal text becomes `__t(n);` (write fragment n), `{{ expr }}` becomes
//! `try{__v((expr))}catch(__e){__x(n,__e)}` (write the value; on error warn and write tag n's
//! literal text) and `{% code %}` is
//! inserted as is, each tag's code on its own lines, so control flow spans tags and every script
//! line maps back to an offset in the source text.

use flemma_conversation::Part;
use flemma_syntax::{Segment, SegmentKind, Severity, TextRange};
use std::sync::Arc;

use rhai::{AST, Engine, Position};

use crate::{Category, TemplateCache, TemplateDiagnostic, origin::Origin};

/// Where one script line comes from.
#[derive(Debug, Clone, Copy)]
struct LineOrigin {
    /// Offset in the source text of the script line's first byte (exact lines only).
    offset: usize,
    /// Whether the line is user code (columns map one to one) or generated glue.
    exact: bool,
    /// The segment (tag) the line belongs to.
    segment: TextRange,
}

/// What `__t(n)` writes.
#[derive(Debug, Clone)]
pub(crate) enum Fragment {
    Text(String),
    Parts(Vec<Part>),
}

/// One `{{ }}` tag: its range and the literal text sent when it fails.
#[derive(Debug, Clone)]
pub(crate) struct TagInfo {
    pub range: TextRange,
    pub literal: String,
}

/// A compiled-to-text template.
#[derive(Debug, Default)]
pub(crate) struct Script {
    pub code: String,
    lines: Vec<LineOrigin>,
    line_starts: Vec<usize>,
    pub fragments: Vec<Fragment>,
    pub tags: Vec<TagInfo>,
    /// Identifiers assigned without `let` at statement level in `{% %}` code.
    pub assigned: Vec<String>,
    /// Identifiers declared with `let`/`const` in `{% %}` code.
    pub declared: Vec<String>,
}

impl Script {
    fn push_generated(&mut self, line: &str, segment: TextRange) {
        debug_assert!(line.ends_with('\n'));
        self.line_starts.push(self.code.len());
        self.code.push_str(line);
        self.lines.push(LineOrigin {
            offset: segment.start,
            exact: false,
            segment,
        });
    }

    /// Appends user code starting at `offset` of the source, line by line.
    pub(crate) fn push_code(&mut self, code: &str, offset: usize, segment: TextRange) {
        let mut line_offset = 0;
        for line in code.split('\n') {
            self.line_starts.push(self.code.len());
            self.code.push_str(line);
            self.code.push('\n');
            self.lines.push(LineOrigin {
                offset: offset + line_offset,
                exact: true,
                segment,
            });
            line_offset += line.len() + 1;
        }
    }

    /// The source range a Rhai position points at: the token under it for user code, the whole
    /// tag for generated glue, `fallback` when the position is unknown.
    pub(crate) fn locate(&self, position: Position, fallback: TextRange) -> TextRange {
        let Some(line) = position.line() else {
            return fallback;
        };
        let Some(origin) = self.lines.get(line.saturating_sub(1)) else {
            return fallback;
        };
        if !origin.exact {
            return origin.segment;
        }
        let start = self.line_starts[line - 1];
        let end = self.code[start..]
            .find('\n')
            .map_or(self.code.len(), |n| start + n);
        let text = &self.code[start..end];
        let column = position.position().unwrap_or(1).saturating_sub(1);
        let byte = text
            .char_indices()
            .nth(column)
            .map_or(text.len(), |(index, _)| index);
        let token = text[byte..]
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(text.len() - byte, |(index, _)| index)
            .max(1)
            .min(text.len().saturating_sub(byte).max(1));
        let from = origin.offset + byte;
        TextRange::new(from, (from + token).min(origin.segment.end.max(from)))
    }
}

impl Script {
    /// Whether `position` is on a line we generated (glue such as the `;` that ends a tag's
    /// statement) rather than on the user's code.
    pub(crate) fn is_generated(&self, position: Position) -> bool {
        position
            .line()
            .and_then(|line| self.lines.get(line.saturating_sub(1)))
            .is_some_and(|origin| !origin.exact)
    }

    /// The trimmed source line a position is on (for errors about a whole statement, such as
    /// a rejected `flemma.opt` assignment).
    pub(crate) fn line_range(&self, position: Position, fallback: TextRange) -> TextRange {
        let Some(line) = position.line() else {
            return fallback;
        };
        let Some(origin) = self.lines.get(line.saturating_sub(1)).filter(|o| o.exact) else {
            return self.locate(position, fallback);
        };
        let start = self.line_starts[line - 1];
        let end = self.code[start..]
            .find('\n')
            .map_or(self.code.len(), |n| start + n);
        let text = &self.code[start..end];
        let leading = text.len() - text.trim_start().len();
        let trimmed = text.trim();
        let from = origin.offset + leading;
        TextRange::new(from, from + trimmed.len())
    }

    /// Like [`Script::locate`], but covers a whole call `name(…)` when it fits on its line.
    pub(crate) fn locate_call(&self, position: Position, fallback: TextRange) -> TextRange {
        let range = self.locate(position, fallback);
        let Some(line) = position
            .line()
            .filter(|l| self.lines.get(l.saturating_sub(1)).is_some_and(|o| o.exact))
        else {
            return range;
        };
        let origin = self.lines[line - 1];
        let start = self.line_starts[line - 1];
        let end = self.code[start..]
            .find('\n')
            .map_or(self.code.len(), |n| start + n);
        let text = &self.code[start..end];
        let Some(from) = range.start.checked_sub(origin.offset) else {
            return range;
        };
        let bytes = text.as_bytes();
        let mut i = from;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if bytes.get(i) != Some(&b'(') {
            return range;
        }
        let mut depth = 0usize;
        while i < bytes.len() {
            match bytes[i] {
                b'"' | b'`' => {
                    i = skip_quoted(bytes, i + 1, bytes[i]);
                    continue;
                }
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return TextRange::new(range.start, origin.offset + i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        range
    }
}

/// Builds and compiles the script for `segments` of `text`. The first attempt trusts every
/// expression; when the script does not compile, it is rebuilt with each expression checked
/// alone, so expressions that do not parse degrade to warnings and their literal text.
pub(crate) fn build_and_compile(
    engine: &Engine,
    text: &str,
    segments: &[Segment],
    part_for: &mut dyn FnMut(&Segment) -> Option<Vec<Part>>,
    origin: &Origin,
    cache: &TemplateCache,
    diagnostics: &mut Vec<TemplateDiagnostic>,
) -> (Script, Result<Arc<AST>, rhai::ParseError>) {
    let script = build(engine, text, segments, part_for, origin, diagnostics, false);
    match cache.compile(engine, &script.code) {
        Ok(ast) => (script, Ok(ast)),
        Err(_) => {
            let script = build(engine, text, segments, part_for, origin, diagnostics, true);
            let compiled = cache.compile(engine, &script.code);
            (script, compiled)
        }
    }
}

/// Builds the script for `segments` of `text`. `part_for` turns non-template segments (file
/// references, tool and job results) into parts; `None` keeps their text. Expressions that do not
/// parse become warnings and their literal text.
fn build(
    engine: &Engine,
    text: &str,
    segments: &[Segment],
    part_for: &mut dyn FnMut(&Segment) -> Option<Vec<Part>>,
    origin: &Origin,
    diagnostics: &mut Vec<TemplateDiagnostic>,
    check_expressions: bool,
) -> Script {
    let mut script = Script::default();
    let trims = |index: usize| -> (bool, bool) {
        let after_previous = index
            .checked_sub(1)
            .and_then(|i| segments.get(i))
            .is_some_and(|s| template_of(s).is_some_and(|t| t.trim_after));
        let before_next = segments
            .get(index + 1)
            .is_some_and(|s| template_of(s).is_some_and(|t| t.trim_before));
        (after_previous, before_next)
    };
    for (index, segment) in segments.iter().enumerate() {
        let raw = &text[segment.range.start..segment.range.end];
        match &segment.kind {
            SegmentKind::Expression(template) => {
                let code = &text[template.code.start..template.code.end];
                let parsed = if check_expressions {
                    engine.compile_expression(code).map(|_| ())
                } else {
                    Ok(())
                };
                match parsed {
                    Ok(()) => {
                        let tag = script.tags.len();
                        script.tags.push(TagInfo {
                            range: segment.range,
                            literal: raw.to_string(),
                        });
                        script.push_generated("try{__v((\n", segment.range);
                        script.push_code(code, template.code.start, segment.range);
                        script.push_generated(
                            &format!("))}}catch(__e){{__x({tag},__e)}}\n"),
                            segment.range,
                        );
                    }
                    Err(error) => {
                        let range = parse_error_range(
                            code,
                            template.code.start,
                            error.position(),
                            segment.range,
                        );
                        diagnostics.push(origin.diagnostic(
                            range,
                            Severity::Warning,
                            Category::Expression,
                            format!(
                                "the expression does not parse as Rhai ({}); the literal text is sent. Fix the expression (Lua syntax is not supported)",
                                error.err_type()
                            ),
                            false,
                        ));
                        push_fragment(&mut script, Fragment::Text(raw.to_string()), segment.range);
                    }
                }
            }
            SegmentKind::Code(template) => {
                let code = &text[template.code.start..template.code.end];
                scan_assignments(code, &mut script.assigned, &mut script.declared);
                script.push_code(code, template.code.start, segment.range);
                // Ends the statement (`{% x = 1 %}` needs no `;`), except before `{% else … %}`.
                let next_is_else = segments
                    .get(index + 1)
                    .is_some_and(|next| match &next.kind {
                        SegmentKind::Code(next_template) => text
                            [next_template.code.start..next_template.code.end]
                            .trim_start()
                            .starts_with("else"),
                        _ => false,
                    });
                if !next_is_else {
                    script.push_generated(";\n", segment.range);
                }
            }
            SegmentKind::Text => {
                let (after_previous, before_next) = trims(index);
                let mut piece = raw;
                if after_previous {
                    piece = trim_line_start(piece);
                }
                if before_next {
                    piece = trim_line_end(piece);
                }
                if !piece.is_empty() {
                    push_fragment(
                        &mut script,
                        Fragment::Text(piece.to_string()),
                        segment.range,
                    );
                }
            }
            _ => match part_for(segment) {
                Some(parts) => push_fragment(&mut script, Fragment::Parts(parts), segment.range),
                None => push_fragment(&mut script, Fragment::Text(raw.to_string()), segment.range),
            },
        }
    }
    script
}

fn push_fragment(script: &mut Script, fragment: Fragment, range: TextRange) {
    let index = script.fragments.len();
    script.fragments.push(fragment);
    script.push_generated(&format!("__t({index});\n"), range);
}

fn template_of(segment: &Segment) -> Option<&flemma_syntax::Template> {
    match &segment.kind {
        SegmentKind::Expression(template) | SegmentKind::Code(template) => Some(template),
        _ => None,
    }
}

/// `{%-`/`{{-`: spaces and tabs before the tag, then one line break.
fn trim_line_end(text: &str) -> &str {
    let text = text.trim_end_matches([' ', '\t']);
    text.strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(text)
}

/// `-%}`/`-}}`: spaces and tabs after the tag, then one line break.
fn trim_line_start(text: &str) -> &str {
    let text = text.trim_start_matches([' ', '\t']);
    text.strip_prefix("\r\n")
        .or_else(|| text.strip_prefix('\n'))
        .unwrap_or(text)
}

/// The range of a parse error at `position` of `code` (which starts at `offset`).
pub(crate) fn parse_error_range(
    code: &str,
    offset: usize,
    position: Position,
    fallback: TextRange,
) -> TextRange {
    let (Some(line), Some(column)) = (position.line(), position.position()) else {
        return fallback;
    };
    let mut line_start = 0;
    for _ in 1..line {
        match code[line_start..].find('\n') {
            Some(n) => line_start += n + 1,
            None => return fallback,
        }
    }
    let line_text = code[line_start..].split('\n').next().unwrap_or("");
    let byte = line_text
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(line_text.len(), |(index, _)| index);
    let from = offset + line_start + byte;
    TextRange::new(from, from + usize::from(byte < line_text.len()))
}

/// Finds `name = …` at statement level (after start, `;`, `{` or `}`) and `let`/`const` names.
pub(crate) fn scan_assignments(code: &str, assigned: &mut Vec<String>, declared: &mut Vec<String>) {
    let bytes = code.as_bytes();
    let mut i = 0;
    let mut statement_start = true;
    let mut after_let = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' || c == b'`' {
            i = skip_quoted(bytes, i + 1, c);
            statement_start = false;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            i = code[i..].find('\n').map_or(bytes.len(), |n| i + n + 1);
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &code[start..i];
            if after_let {
                declared.push(word.to_string());
                after_let = false;
                statement_start = false;
                continue;
            }
            if word == "let" || word == "const" {
                after_let = true;
                continue;
            }
            if statement_start {
                let mut j = i;
                while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
                    j += 1;
                }
                if bytes.get(j) == Some(&b'=')
                    && !matches!(bytes.get(j + 1), Some(b'=' | b'>'))
                    && !assigned.iter().any(|a| a == word)
                {
                    assigned.push(word.to_string());
                }
            }
            statement_start = false;
            continue;
        }
        statement_start = matches!(c, b';' | b'{' | b'}');
        after_let = false;
        i += 1;
    }
}

fn skip_quoted(bytes: &[u8], mut i: usize, quote: u8) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_statement_level_assignments_and_lets() {
        let mut assigned = Vec::new();
        let mut declared = Vec::new();
        scan_assignments(
            "mode = \"a = b\"; if x == 1 { count = 2; } let local = 3; obj.field = 4; y == 5; z => 1",
            &mut assigned,
            &mut declared,
        );
        assert_eq!(assigned, ["mode", "count"]);
        assert_eq!(declared, ["local"]);
    }

    #[test]
    fn trims_one_line_break_and_its_spaces() {
        assert_eq!(trim_line_end("a\n  "), "a");
        assert_eq!(trim_line_end("a\n\n"), "a\n");
        assert_eq!(trim_line_start("  \nb"), "b");
        assert_eq!(trim_line_start("\r\n\nb"), "\nb");
    }
}
