//! robots.txt (RFC 9309): the rules of the group that names us (else `*`), and a process-wide
//! cache so each origin's file is asked for once a day, whatever the number of fetches (the
//! caller caches only answers that came with rules: 2xx and 4xx).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long one origin's answer is kept.
pub const CACHE_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// What robots.txt says for one origin.
#[derive(Debug, Clone)]
pub enum Robots {
    Rules(Rules),
    /// A 5xx or unreachable robots.txt forbids everything; the text says why.
    Forbidden(String),
}

static CACHE: LazyLock<Mutex<HashMap<String, (Instant, Robots)>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The cached answer for `origin`, when younger than [`CACHE_FOR`].
pub fn cached(origin: &str) -> Option<Robots> {
    let cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .get(origin)
        .filter(|(at, _)| at.elapsed() < CACHE_FOR)
        .map(|(_, robots)| robots.clone())
}

pub fn remember(origin: &str, robots: &Robots) {
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache.insert(origin.to_string(), (Instant::now(), robots.clone()));
}

/// The `Allow`/`Disallow` rules of the group that applies to us (RFC 9309).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// `(allow, pattern)`.
    rules: Vec<(bool, String)>,
}

impl Rules {
    /// The group naming `token`, else the `*` group.
    pub fn parse(text: &str, token: &str) -> Self {
        let mut ours: Vec<(bool, String)> = Vec::new();
        let mut star: Vec<(bool, String)> = Vec::new();
        let mut found_ours = false;
        let mut agents: Vec<String> = Vec::new();
        let mut in_rules = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim().to_ascii_lowercase();
            let value = value.trim();
            match key.as_str() {
                "user-agent" => {
                    if in_rules {
                        agents.clear();
                        in_rules = false;
                    }
                    agents.push(value.to_ascii_lowercase());
                }
                "allow" | "disallow" => {
                    in_rules = true;
                    if value.is_empty() {
                        continue;
                    }
                    let rule = (key == "allow", value.to_string());
                    if agents.iter().any(|a| a == &token.to_ascii_lowercase()) {
                        found_ours = true;
                        ours.push(rule.clone());
                    }
                    if agents.iter().any(|a| a == "*") {
                        star.push(rule);
                    }
                }
                _ => {}
            }
        }
        Self {
            rules: if found_ours { ours } else { star },
        }
    }

    /// Longest match wins; `Allow` wins a tie; nothing matching allows.
    pub fn allows(&self, path: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            if robots_match(pattern, path) {
                let len = pattern.len();
                best = match best {
                    Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                    _ => Some((len, *allow)),
                };
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// A robots.txt path pattern: a prefix match with `*` for any run and a final `$` for the end.
fn robots_match(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let Some(rest) = path.strip_prefix(parts[0]) else {
        return false;
    };
    let mut rest = rest;
    for (i, part) in parts.iter().enumerate().skip(1) {
        let last = i == parts.len() - 1;
        if last && anchored {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    !anchored || rest.is_empty()
}
