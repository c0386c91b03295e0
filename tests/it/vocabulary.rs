//! One vocabulary: every event name is written once, in the type that owns it
//! (`flemma_protocol::event`), and every `flemma/*` method name once, in the typed method list
//! (`flemma_protocol::methods`); every other source file uses the type. A name spelled as a
//! string literal elsewhere is a second copy of the vocabulary that drifts (issue 28); tests,
//! which check the JSON form, may spell names (a file's `#[cfg(test)]` module and the test
//! directories are not searched).

use std::path::Path;

use crate::sources::{self, without_tests};

use flemma_protocol::event::{DaemonEvent, EngineEvent};
use flemma_protocol::methods::{DAEMON_METHODS, EVENT_NOTIFICATION, METHODS};

/// The one file allowed to spell the names.
const OWNER: &str = "crates/flemma-protocol/src/event.rs";

/// The one file allowed to spell the method names.
const METHODS_OWNER: &str = "crates/flemma-protocol/src/methods.rs";

/// Where a line of code (comments left out) spells one of `names` as a string literal.
fn literals_in(text: &str, names: &[&str]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in without_tests(text).lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for name in names {
            if line.contains(&format!("\"{name}\"")) {
                found.push((number + 1, (*name).to_owned()));
            }
        }
    }
    found
}

#[test]
fn no_method_name_is_a_string_literal_outside_the_typed_method_list() {
    let root = sources::root();
    let names: Vec<&str> = METHODS
        .iter()
        .chain(DAEMON_METHODS)
        .copied()
        .chain([EVENT_NOTIFICATION])
        .collect();
    let mut found = Vec::new();
    for file in sources::workspace_sources() {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        if relative == Path::new(METHODS_OWNER) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a readable source");
        for (number, name) in literals_in(&text, &names) {
            found.push(format!("{}:{number}: \"{name}\"", relative.display()));
        }
    }
    assert!(
        found.is_empty(),
        "method names spelled outside {METHODS_OWNER} (build a `FlemmaRequest` and send it, or use its constant):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_event_name_is_a_string_literal_outside_the_type_that_owns_it() {
    let root = sources::root();
    let files = sources::workspace_sources();
    let names: Vec<&str> = EngineEvent::NAMES
        .iter()
        .chain(DaemonEvent::NAMES)
        .copied()
        .collect();
    let mut found = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(root).unwrap_or(file);
        if relative == Path::new(OWNER) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a readable source");
        for (number, line) in without_tests(&text).lines().enumerate() {
            for name in &names {
                if line.contains(&format!("\"{name}\"")) {
                    found.push(format!("{}:{}: \"{name}\"", relative.display(), number + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "event names spelled outside {OWNER} (use the `EngineEvent`/`DaemonEvent` variant):\n{}",
        found.join("\n")
    );
}

/// The check finds what it looks for: a literal outside a test module counts, one inside does
/// not.
#[test]
fn the_check_sees_a_literal_and_skips_test_modules() {
    let text =
        "fn a() { let _ = \"tool:executing\"; }\n#[cfg(test)]\nmod tests { \"engine:stopped\" }\n";
    assert!(without_tests(text).contains("\"tool:executing\""));
    assert!(!without_tests(text).contains("\"engine:stopped\""));
    let text = "fn a() { c.request(\"flemma/send\", p); }\n/// `\"flemma/cancel\"`\nfn b() { p(\"flemma/locks\"); }\n#[cfg(test)]\nmod tests { \"flemma/approve\" }\n";
    let found = literals_in(text, METHODS);
    assert_eq!(found, vec![(1, "flemma/send".to_owned())]);
}
