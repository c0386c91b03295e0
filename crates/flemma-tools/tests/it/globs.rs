//! The glob rules, one table of cases (`flemma-config/tests/fixtures/globs.txt`, the rules of
//! `docs/configuration.md`) run against each of their three uses: tool-name globs, `[trust]
//! paths` and the `find` tool's patterns. This crate sees all three.

use std::path::Path;

use flemma_config::{PathGlob, TrustSettings, chat_trust, check_tool_glob, glob_match};
use flemma_tools::builtin::find::Glob;

const TABLE: &str = include_str!("../../../flemma-config/tests/fixtures/globs.txt");

/// What a row expects of one use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Match,
    NoMatch,
    Invalid,
    NotApplicable,
}

struct Case<'a> {
    line: usize,
    pattern: &'a str,
    subject: &'a str,
    tool: Expect,
    trust: Expect,
    find: Expect,
}

fn cases() -> Vec<Case<'static>> {
    let expect = |line: usize, word: &str| match word {
        "yes" => Expect::Match,
        "no" => Expect::NoMatch,
        "invalid" => Expect::Invalid,
        "-" => Expect::NotApplicable,
        other => panic!("globs.txt line {line}: `{other}` is not yes, no, invalid or -"),
    };
    TABLE
        .lines()
        .enumerate()
        .map(|(index, text)| (index + 1, text.trim()))
        .filter(|(_, text)| !text.is_empty() && !text.starts_with('#'))
        .map(|(line, text)| {
            let fields: Vec<&str> = text.split_whitespace().collect();
            let [pattern, subject, tool, trust, find] = fields[..] else {
                panic!("globs.txt line {line}: five columns expected, got `{text}`");
            };
            Case {
                line,
                pattern,
                subject,
                tool: expect(line, tool),
                trust: expect(line, trust),
                find: expect(line, find),
            }
        })
        .collect()
}

/// One use of globs: what it does with a pattern and a subject.
type Use = fn(&str, &str) -> Expect;

/// What a use did with a case: matched, did not, or refused the pattern.
fn outcome(valid: bool, matched: bool) -> Expect {
    match (valid, matched) {
        (false, false) => Expect::Invalid,
        (false, true) => panic!("a refused pattern matched"),
        (true, true) => Expect::Match,
        (true, false) => Expect::NoMatch,
    }
}

fn tool(pattern: &str, name: &str) -> Expect {
    outcome(check_tool_glob(pattern).is_ok(), glob_match(pattern, name))
}

fn trust(pattern: &str, subject: &str) -> Expect {
    let (pattern, chat) = if pattern.starts_with(['/', '~']) {
        (pattern.to_owned(), subject.to_owned())
    } else {
        (format!("/t/{pattern}"), format!("/t/{subject}"))
    };
    let valid = PathGlob::new(&pattern).is_ok();
    let settings = TrustSettings {
        paths: vec![pattern],
        restricted: false,
    };
    let home = Path::new("/home/me");
    outcome(
        valid,
        chat_trust(Path::new(&chat), &settings, &[], Some(home)).trusted,
    )
}

fn find(pattern: &str, path: &str) -> Expect {
    match Glob::new(pattern) {
        Ok(glob) => outcome(true, glob.matches(path)),
        Err(_) => Expect::Invalid,
    }
}

#[test]
fn one_table_of_glob_rules_holds_for_every_use() {
    let cases = cases();
    assert!(cases.len() > 40, "the table is read: {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let uses: [(&str, Expect, Use); 3] = [
            ("tool", case.tool, tool),
            ("trust", case.trust, trust),
            ("find", case.find, find),
        ];
        for (name, expected, run) in uses {
            if expected == Expect::NotApplicable {
                continue;
            }
            let got = run(case.pattern, case.subject);
            if got != expected {
                failures.push(format!(
                    "line {}: {name} `{}` against `{}`: expected {expected:?}, got {got:?}",
                    case.line, case.pattern, case.subject
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
