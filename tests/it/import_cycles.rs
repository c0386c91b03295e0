//! No file-level import cycle (issue 28, item 6): within each of these source trees, no file
//! reaches (through `crate::…` or `super::…` paths, test modules left out) a file that reaches
//! it back. A cycle means two files that cannot be read, changed or moved apart; the fix is the
//! piece both need in a file of its own (`cli/progress.rs`, `flemma-tools`'s `PathGuard` in
//! `sandbox.rs`, `flemma-provider/src/environment.rs`, …).
//!
//! Every source tree of the workspace is checked: the binary's whole `src` (its top level with
//! `cli` and `daemon` in it) and each crate's `src`. The session of `flemma-lsp` holds the
//! state of the modules that handle it (the rust-analyzer shape), so that state lives in files
//! that name no `Session` (`open_document.rs`, `analysis_pool.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::sources::{self, code};

const TREES: &[&str] = &[
    "src",
    "crates/flemma-tools/src",
    "crates/flemma-provider/src",
    "crates/flemma-template/src",
    "crates/flemma-config/src",
    "crates/flemma-engine/src",
    "crates/flemma-ide/src",
    "crates/flemma-syntax/src",
    "crates/flemma-wire/src",
    "crates/flemma-acp/src",
    "crates/flemma-lsp/src",
    "crates/flemma-protocol/src",
    "crates/flemma-conversation/src",
    "crates/flemma-mcp/src",
    "crates/flemma-mock-provider/src",
];

/// The module path of `file` below `root` (`a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`,
/// `main.rs` and `mod.rs` at the root are the root, "").
fn module_of(root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(root).expect("below the root");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|last| ["mod", "lib", "main"].contains(&last.as_str()))
    {
        parts.pop();
    }
    parts.join("::")
}

/// The identifiers after each occurrence of `prefix` (`crate::a::b` gives `["a", "b"]`).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        out.push(rest[..end].split("::").filter(|s| !s.is_empty()).collect());
    }
    out
}

/// Which modules each module of the files (module path → code) names.
fn edges(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = BTreeMap::new();
    for (module, code) in files {
        let mut targets = BTreeSet::new();
        let parent = module.rsplit_once("::").map_or("", |(parent, _)| parent);
        let named = paths_after(code, "crate::")
            .into_iter()
            .map(|segments| segments.join("::"))
            .chain(paths_after(code, "super::").into_iter().map(|segments| {
                let path = segments.join("::");
                if parent.is_empty() {
                    path
                } else {
                    format!("{parent}::{path}")
                }
            }));
        for path in named {
            // The longest module the path starts with.
            let segments: Vec<&str> = path.split("::").collect();
            for take in (1..=segments.len()).rev() {
                let candidate = segments[..take].join("::");
                if files.contains_key(&candidate) {
                    if candidate != *module && !module.starts_with(&format!("{candidate}::")) {
                        targets.insert(candidate);
                    }
                    break;
                }
            }
        }
        edges.insert(module.clone(), targets);
    }
    edges
}

/// A cycle through `start`, if there is one: the modules in order.
fn cycle_from(edges: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in edges.get(&at).into_iter().flatten() {
            if next == start {
                return Some(path);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

fn cycles(files: &BTreeMap<String, String>) -> Vec<String> {
    let edges = edges(files);
    let mut found = BTreeSet::new();
    for module in files.keys() {
        if let Some(mut cycle) = cycle_from(&edges, module) {
            // One line per cycle, whichever module it was found from.
            let first = cycle
                .iter()
                .enumerate()
                .min_by_key(|(_, m)| (*m).clone())
                .map_or(0, |(i, _)| i);
            cycle.rotate_left(first);
            found.insert(cycle.join(" -> "));
        }
    }
    found.into_iter().collect()
}

#[test]
fn no_source_tree_has_a_file_level_import_cycle() {
    let mut found = Vec::new();
    for tree in TREES {
        let dir = sources::root().join(tree);
        let paths = sources::rust_files(&dir);
        assert!(!paths.is_empty(), "{tree}: the sources were found");
        let files: BTreeMap<String, String> = paths
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).expect("a readable source");
                (module_of(&dir, path), code(&text))
            })
            .collect();
        found.extend(cycles(&files).into_iter().map(|c| format!("{tree}: {c}")));
    }
    assert!(
        found.is_empty(),
        "file-level import cycles (move what both files need into a file of its own):\n{}",
        found.join("\n")
    );
}

/// Every crate's tree is checked (a new crate is not forgotten).
#[test]
fn every_crate_is_checked() {
    let crates = std::fs::read_dir(sources::root().join("crates")).expect("crates/");
    for entry in crates.flatten() {
        let tree = format!("crates/{}/src", entry.file_name().to_string_lossy());
        assert!(
            TREES.contains(&tree.as_str()),
            "{tree} is not in TREES of tests/it/import_cycles.rs"
        );
    }
}

/// The check finds a cycle through `crate::` and `super::` paths, and none where there is none.
#[test]
fn the_check_sees_a_cycle() {
    let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(module, text)| ((*module).to_owned(), code(text)))
            .collect()
    };
    let cyclic = files(&[
        ("a", "use crate::b::Thing;"),
        ("b", "fn f() { crate::c::g(); }"),
        (
            "c",
            "use super::a;\n#[cfg(test)]\nmod tests { use crate::b; }",
        ),
    ]);
    assert_eq!(cycles(&cyclic), vec!["a -> b -> c".to_owned()]);
    let acyclic = files(&[
        ("a", "use crate::b::Thing; // crate::c"),
        ("b", "use crate::c::g;"),
        (
            "c",
            "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a; }",
        ),
    ]);
    assert!(cycles(&acyclic).is_empty());
}
