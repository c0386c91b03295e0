//! The source tree as the checks on the code read it (no import cycle, one output, one
//! vocabulary, one runtime): one walker and one rule for what counts as code.

use std::path::{Path, PathBuf};

/// The repository (the binary's crate).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files under `dir`, at every depth, sorted (none when `dir` is missing).
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every source file of the binary (`src/`) and of the crates (`crates/*/src/`); the test
/// directories are not among them.
pub fn workspace_sources() -> Vec<PathBuf> {
    let mut files = rust_files(&root().join("src"));
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/");
    for crate_dir in crates.flatten() {
        files.extend(rust_files(&crate_dir.path().join("src")));
    }
    assert!(
        files.len() > 100,
        "the sources were found ({})",
        files.len()
    );
    files
}

/// A source file without its test module (everything from its `#[cfg(test)]` on).
pub fn without_tests(text: &str) -> &str {
    text.find("\n#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// A source file's code: without its test module and `//` comments, one line for each line of
/// the file (line numbers stay true).
pub fn code(text: &str) -> String {
    without_tests(text)
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_walker_finds_nested_files_and_code_keeps_line_numbers() {
    let cli = rust_files(&root().join("src/cli"));
    assert!(
        cli.iter().any(|f| f.ends_with("src/cli/doctor/mod.rs")),
        "{cli:?}"
    );
    assert!(rust_files(&root().join("no/such/folder")).is_empty());
    let text = "a // one\nb\n#[cfg(test)]\nmod tests {}\n";
    assert_eq!(code(text), "a \nb");
}
