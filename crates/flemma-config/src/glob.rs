//! Globs: one implementation (`globset`, ripgrep's) behind one function per use. The rules are
//! written once for users in `docs/configuration.md` ("Globs"), and one table of cases
//! (`tests/fixtures/globs.txt`) is run against every use.
//!
//! * Tool names ([`glob_match`], for `tools.enabled`, `tools.auto_approve`,
//!   `tools.mcp.include`/`exclude`): `*` is any run of characters, dots included, so
//!   `slack.*` matches `slack.chat.post` (a tool name has no folders; `**` means `*`).
//! * Paths ([`PathGlob`], for `[trust] paths` and the `find` tool): `*` and `?` stay within one
//!   path segment, `**` as a whole segment is any number of folders (`a/**/b` matches `a/b`);
//!   elsewhere (`a**`) it is `*`.
//!
//! Both: `?` one character, `[abc]`, `[a-z]`, `[!a]` or `[^a]` one character of (or not of) a
//! class, `{a,b}` either alternative, `\` makes the next character literal.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use globset::{GlobBuilder, GlobMatcher};

/// A pattern that is not a valid glob (an unclosed `[` or `{`, a class with nothing in it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{pattern}` is not a valid glob: {reason}")]
pub struct GlobError {
    pub pattern: String,
    pub reason: String,
}

/// Whether a tool-list item is a glob rather than a name: it has `*`, `?`, `[` or `{` (no tool
/// name has them).
pub fn is_glob(item: &str) -> bool {
    item.contains(['*', '?', '[', '{'])
}

/// The literal start of a tool-name pattern, before its first wildcard (`github.` of
/// `github.*`; the whole item when it is a name).
pub fn literal_prefix(item: &str) -> &str {
    item.find(['*', '?', '[', '{', '\\'])
        .map_or(item, |index| &item[..index])
}

/// Whether the tool name `name` matches `pattern` (a name, or a glob whose `*` also crosses
/// dots). A pattern that is not a valid glob matches only the name spelled the same.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if !is_glob(pattern) {
        return pattern == name;
    }
    match tool_matcher(pattern) {
        Ok(matcher) => matcher.is_match(name),
        Err(_) => pattern == name,
    }
}

/// The first of `patterns` that matches the tool name `name`.
pub fn first_match<'a>(patterns: &'a [String], name: &str) -> Option<&'a str> {
    patterns
        .iter()
        .find(|pattern| glob_match(pattern, name))
        .map(String::as_str)
}

/// Checks a tool-name glob (for configuration errors); names are always valid.
pub fn check_tool_glob(pattern: &str) -> Result<(), GlobError> {
    if is_glob(pattern) {
        tool_matcher(pattern)?;
    }
    Ok(())
}

fn tool_matcher(pattern: &str) -> Result<Arc<GlobMatcher>, GlobError> {
    compiled(pattern, false)
}

/// Compiled globs, per mode (tool names, paths) and pattern. Compiling builds a regular
/// expression (tens of µs) and a configuration's few globs are matched on every analysis,
/// approval and expansion, so each is compiled once per process. Bounded: emptied when full.
type Cache = Mutex<HashMap<String, Result<Arc<GlobMatcher>, GlobError>>>;

const CACHE_LIMIT: usize = 4096;

fn compiled(pattern: &str, by_segment: bool) -> Result<Arc<GlobMatcher>, GlobError> {
    static CACHES: OnceLock<[Cache; 2]> = OnceLock::new();
    let cache = &CACHES.get_or_init(Default::default)[usize::from(by_segment)];
    let Ok(mut cache) = cache.lock() else {
        return compile(pattern, by_segment).map(Arc::new);
    };
    if let Some(hit) = cache.get(pattern) {
        return hit.clone();
    }
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    let fresh = compile(pattern, by_segment).map(Arc::new);
    cache.insert(pattern.to_owned(), fresh.clone());
    fresh
}

fn compile(pattern: &str, by_segment: bool) -> Result<GlobMatcher, GlobError> {
    GlobBuilder::new(pattern)
        .literal_separator(by_segment)
        .backslash_escape(true)
        .empty_alternates(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| GlobError {
            pattern: pattern.to_owned(),
            reason: error.kind().to_string(),
        })
}

/// `text` as a glob that matches it literally (a home directory put in front of a pattern).
pub fn escape(text: &str) -> String {
    globset::escape(text)
}

/// A path glob: `*` and `?` within one segment, `**` (a whole segment) any number of folders.
/// Matched against the whole path given (relative or absolute, as the pattern is written).
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: Arc<GlobMatcher>,
}

impl PathGlob {
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        Ok(Self {
            matcher: compiled(pattern, true)?,
        })
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        self.matcher.glob().glob()
    }

    /// Whether `path` matches the whole pattern.
    pub fn matches(&self, path: impl AsRef<Path>) -> bool {
        self.matcher.is_match(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_prefix_ends_at_the_first_wildcard() {
        assert_eq!(literal_prefix("github.*"), "github.");
        assert_eq!(literal_prefix("git?ub.x"), "git");
        assert_eq!(literal_prefix("bash"), "bash");
        assert_eq!(literal_prefix("*"), "");
    }

    #[test]
    fn invalid_globs_say_why() {
        let error = PathGlob::new("/a/[b").expect_err("unclosed class");
        assert!(
            error
                .to_string()
                .starts_with("`/a/[b` is not a valid glob: "),
            "{error}"
        );
        assert!(check_tool_glob("github.**").is_ok(), "** is * over names");
        assert!(check_tool_glob("github.{a").is_err());
        assert!(!glob_match("github.{a", "github.a"));
        assert!(glob_match("github.{a", "github.{a"));
    }
}
