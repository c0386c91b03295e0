//! The header suffix grammar ("modeline"): `(pending)`, `(status=pending sandbox=false)`,
//! `(error job=job_lost1)`.
//!
//! Tokens are separated by whitespace; `'…'` and `"…"` quote with `\` escapes; a token is
//! `key=value` (key `[A-Za-z0-9_]+`) or a bare word. The status is an explicit `status=` token,
//! else the first bare word that is a status word. Every other token is meta and round-trips
//! unchanged (as written) when the status is rewritten.

use std::fmt;

/// Lifecycle and final statuses of a tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Pending,
    Approved,
    Rejected,
    Denied,
    Aborted,
    Error,
}

impl Status {
    /// Parses a status word, including the aliases `reject` and `deny`.
    pub fn from_word(word: &str) -> Option<Status> {
        Some(match word {
            "pending" => Status::Pending,
            "approved" => Status::Approved,
            "rejected" | "reject" => Status::Rejected,
            "denied" | "deny" => Status::Denied,
            "aborted" => Status::Aborted,
            "error" => Status::Error,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Rejected => "rejected",
            Status::Denied => "denied",
            Status::Aborted => "aborted",
            Status::Error => "error",
        }
    }

    /// Lifecycle statuses mark an unresolved placeholder; `error` is a final result.
    pub fn is_lifecycle(self) -> bool {
        !matches!(self, Status::Error)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed suffix value.
#[derive(Debug, Clone, PartialEq)]
pub enum SuffixValue {
    Bool(bool),
    Number(f64),
    String(String),
}

impl SuffixValue {
    fn from_text(text: &str, quoted: bool) -> Self {
        if quoted {
            return SuffixValue::String(text.to_owned());
        }
        match text {
            "true" => SuffixValue::Bool(true),
            "false" => SuffixValue::Bool(false),
            _ => match text.parse::<f64>() {
                Ok(n) if n.is_finite() && looks_numeric(text) => SuffixValue::Number(n),
                _ => SuffixValue::String(text.to_owned()),
            },
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            SuffixValue::Bool(b) => serde_json::Value::Bool(*b),
            // Whole numbers print as integers (`attempt=2` → 2, not 2.0).
            SuffixValue::Number(n) if n.fract() == 0.0 && n.abs() < 9e15 => {
                serde_json::Value::from(*n as i64)
            }
            SuffixValue::Number(n) => serde_json::Number::from_f64(*n)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            SuffixValue::String(s) => serde_json::Value::String(s.clone()),
        }
    }
}

impl Eq for SuffixValue {}

fn looks_numeric(text: &str) -> bool {
    let body = text.strip_prefix('-').unwrap_or(text);
    !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && body.bytes().next().is_some_and(|b| b.is_ascii_digit())
}

/// One token of a suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuffixToken {
    /// The token exactly as written (quotes and escapes included).
    pub raw: String,
    /// `Some(key)` for `key=value`, `None` for a bare word.
    pub key: Option<String>,
    /// The value (for a bare word: the word as a string).
    pub value: SuffixValue,
}

/// A parsed suffix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Suffix {
    pub tokens: Vec<SuffixToken>,
    /// Index of the token that holds the status.
    status_token: Option<usize>,
}

impl Suffix {
    /// Parses the text between the parentheses. Returns a message when quoting is broken (the
    /// rest of the text is then taken as one value).
    pub fn parse(text: &str) -> (Suffix, Option<String>) {
        let mut tokens = Vec::new();
        let mut problem = None;
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            if i >= bytes.len() {
                break;
            }
            let start = i;
            let mut value = String::new();
            let mut quoted = false;
            let mut key = None;
            let mut in_quote: Option<u8> = None;
            while i < bytes.len() {
                let b = bytes[i];
                if let Some(q) = in_quote {
                    if b == b'\\' && i + 1 < bytes.len() {
                        let ch_len = utf8_len(bytes[i + 1]);
                        value.push_str(&text[i + 1..(i + 1 + ch_len).min(text.len())]);
                        i += 1 + ch_len;
                        continue;
                    }
                    if b == q {
                        in_quote = None;
                        i += 1;
                        continue;
                    }
                } else {
                    if b.is_ascii_whitespace() {
                        break;
                    }
                    if b == b'\'' || b == b'"' {
                        in_quote = Some(b);
                        quoted = true;
                        i += 1;
                        continue;
                    }
                    if b == b'=' && key.is_none() && !quoted && is_key(&value) {
                        key = Some(std::mem::take(&mut value));
                        i += 1;
                        continue;
                    }
                }
                let ch_len = utf8_len(b);
                value.push_str(&text[i..(i + ch_len).min(text.len())]);
                i += ch_len;
            }
            if in_quote.is_some() {
                problem = Some(format!(
                    "unterminated quote in header suffix: `{}`",
                    &text[start..]
                ));
            }
            tokens.push(SuffixToken {
                raw: text[start..i.min(text.len())].to_owned(),
                value: SuffixValue::from_text(&value, quoted),
                key,
            });
        }
        let mut suffix = Suffix {
            tokens,
            status_token: None,
        };
        suffix.status_token = suffix.find_status_token();
        (suffix, problem)
    }

    fn find_status_token(&self) -> Option<usize> {
        let explicit = self.tokens.iter().position(|t| {
            t.key.as_deref() == Some("status")
                && matches!(&t.value, SuffixValue::String(s) if Status::from_word(s).is_some())
        });
        explicit.or_else(|| {
            self.tokens.iter().position(|t| {
                t.key.is_none()
                    && matches!(&t.value, SuffixValue::String(s) if Status::from_word(s).is_some())
                    && !t.raw.starts_with(['"', '\''])
            })
        })
    }

    pub fn status(&self) -> Option<Status> {
        let token = &self.tokens[self.status_token?];
        match &token.value {
            SuffixValue::String(s) => Status::from_word(s),
            _ => None,
        }
    }

    /// Whether `word` is one of its meta tokens, as a bare word.
    pub fn has_word(&self, word: &str) -> bool {
        self.tokens
            .iter()
            .enumerate()
            .any(|(i, t)| Some(i) != self.status_token && t.key.is_none() && t.raw == word)
    }

    /// Meta tokens (everything but the status), in order. Bare words map to `true`.
    pub fn meta(&self) -> impl Iterator<Item = (&str, SuffixValue)> {
        self.tokens
            .iter()
            .enumerate()
            .filter(move |(i, _)| Some(*i) != self.status_token)
            .map(|(_, t)| match &t.key {
                Some(key) => (key.as_str(), t.value.clone()),
                None => (t.raw.as_str(), SuffixValue::Bool(true)),
            })
    }

    /// The value of a meta key (`job`).
    pub fn get(&self, key: &str) -> Option<&SuffixValue> {
        self.tokens
            .iter()
            .find(|t| t.key.as_deref() == Some(key))
            .map(|t| &t.value)
    }

    /// The suffix text (without parentheses) with the status replaced, meta kept as written.
    /// Returns an empty string when nothing is left.
    pub fn render_with_status(&self, status: Option<Status>) -> String {
        let mut parts: Vec<String> = Vec::with_capacity(self.tokens.len() + 1);
        let mut placed = false;
        for (i, token) in self.tokens.iter().enumerate() {
            if Some(i) == self.status_token {
                if let Some(status) = status {
                    if token.key.is_some() {
                        parts.push(format!("status={status}"));
                    } else {
                        parts.push(status.to_string());
                    }
                    placed = true;
                }
                continue;
            }
            parts.push(token.raw.clone());
        }
        if let (Some(status), false) = (status, placed) {
            parts.insert(0, status.to_string());
        }
        parts.join(" ")
    }

    /// Builds a suffix from a status and meta pairs (values quoted when needed).
    pub fn render(status: Option<Status>, meta: &[(&str, &str)]) -> String {
        let mut parts = Vec::with_capacity(meta.len() + 1);
        if let Some(status) = status {
            parts.push(status.to_string());
        }
        for (key, value) in meta {
            parts.push(format!("{key}={}", quote_value(value)));
        }
        parts.join(" ")
    }
}

/// Quotes a suffix value when it contains whitespace, quotes, parentheses or backslashes.
pub fn quote_value(value: &str) -> String {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '(' | ')'));
    if plain {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn is_key(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_status() {
        let (s, p) = Suffix::parse("pending");
        assert!(p.is_none());
        assert_eq!(s.status(), Some(Status::Pending));
        assert_eq!(s.meta().count(), 0);
    }

    #[test]
    fn explicit_status_wins_and_meta_is_typed() {
        let (s, _) = Suffix::parse("approved status=pending sandbox=false n=3 note='a b'");
        assert_eq!(s.status(), Some(Status::Pending));
        let meta: Vec<_> = s.meta().collect();
        assert_eq!(meta[0], ("approved", SuffixValue::Bool(true)));
        assert_eq!(meta[1], ("sandbox", SuffixValue::Bool(false)));
        assert_eq!(meta[2], ("n", SuffixValue::Number(3.0)));
        assert_eq!(meta[3], ("note", SuffixValue::String("a b".into())));
    }

    #[test]
    fn aliases() {
        assert_eq!(Suffix::parse("reject").0.status(), Some(Status::Rejected));
        assert_eq!(Suffix::parse("deny").0.status(), Some(Status::Denied));
    }

    #[test]
    fn rewrite_keeps_meta_as_written() {
        let (s, _) = Suffix::parse("status=pending sandbox=false  note=\"x \\\" y\"");
        assert_eq!(
            s.render_with_status(Some(Status::Approved)),
            "status=approved sandbox=false note=\"x \\\" y\""
        );
        assert_eq!(
            s.render_with_status(None),
            "sandbox=false note=\"x \\\" y\""
        );
        let (s, _) = Suffix::parse("job=job_k7x2m9qa");
        assert_eq!(s.status(), None);
        assert_eq!(
            s.render_with_status(Some(Status::Error)),
            "error job=job_k7x2m9qa"
        );
    }

    #[test]
    fn broken_quote_is_reported() {
        let (s, p) = Suffix::parse("pending note='oops");
        assert!(p.is_some());
        assert_eq!(s.status(), Some(Status::Pending));
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_value("job_1"), "job_1");
        assert_eq!(quote_value("a b"), "\"a b\"");
        assert_eq!(quote_value(""), "\"\"");
    }
}

#[cfg(test)]
mod quoted_bare_word_tests {
    use super::*;

    #[test]
    fn a_quoted_bare_word_keeps_its_quotes_in_meta_and_round_trips() {
        let written = "error \"quoted word\" 'single'";
        let (s, problem) = Suffix::parse(written);
        assert!(problem.is_none());
        assert_eq!(s.status(), Some(Status::Error));
        let meta: Vec<_> = s.meta().collect();
        assert_eq!(
            meta,
            vec![
                ("\"quoted word\"", SuffixValue::Bool(true)),
                ("'single'", SuffixValue::Bool(true)),
            ]
        );
        assert_eq!(s.render_with_status(s.status()), written);
    }
}
