//! One process context (issue 28): the binary reads its environment (variables, working
//! directory, its own path) once, in `main`, into `ProcessContext`, and hands that down. A
//! read anywhere else in `src/` is a second, unsynchronised copy of the process's context
//! (a test that builds a context with another `HOME` would not reach it). Tests may read the
//! environment (a file's `#[cfg(test)]` module and the test directories are not searched).

use crate::sources::{self, code};

/// The files that read the process's environment: where the context is built.
const READERS: &[&str] = &[
    // `ProcessContext::from_process`: the variables, the working directory, the executable.
    "src/process_context.rs",
    // `UserDirs::from_process`: the one rule for XDG and `HOME`, given the process's variables.
    "src/user_dirs.rs",
    // The command line (`args_os`), before the context is made from it.
    "src/main.rs",
];

/// The reads allowed elsewhere, each with why it belongs where it is.
const ALLOWED: &[(&str, &str)] = &[
    // systemd's socket activation and readiness protocol: `LISTEN_FDNAMES` is read with the
    // descriptors `listenfd` takes (and clears) from the environment at the same moment, and
    // `NOTIFY_SOCKET` when the daemon says it is ready; neither is the process's context.
    ("src/daemon/socket.rs", "LISTEN_FDNAMES"),
    ("src/daemon/socket.rs", "NOTIFY_SOCKET"),
    // The terminal's width, read by the progress display that draws on it.
    ("src/cli/progress.rs", "COLUMNS"),
];

/// What reads the environment, as code spells it.
const READS: &[&str] = &["env::var", "env::current_dir", "env::current_exe"];

/// The lines of the file `name` (relative to the repository) whose code reads the
/// environment without being allowed to.
fn unlisted_reads(name: &str, text: &str) -> Vec<String> {
    if READERS.contains(&name) {
        return Vec::new();
    }
    code(text)
        .lines()
        .enumerate()
        .filter(|(_, line)| READS.iter().any(|read| line.contains(read)))
        .filter(|(_, line)| {
            !ALLOWED
                .iter()
                .any(|(path, what)| *path == name && line.contains(what))
        })
        .map(|(number, line)| format!("{name}:{}: {}", number + 1, line.trim()))
        .collect()
}

#[test]
fn the_environment_is_read_only_where_the_process_context_is_made() {
    let root = sources::root();
    let mut found = Vec::new();
    for file in sources::rust_files(&root.join("src")) {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        let text = std::fs::read_to_string(&file).expect("a readable source");
        found.extend(unlisted_reads(&relative.display().to_string(), &text));
    }
    assert!(
        found.is_empty(),
        "the environment read outside `ProcessContext` (take it from the context handed down: \
         `context.var(..)`, `context.cwd`, `context.dirs`, `context.executable()`; or add the \
         read to this test's allow-list with the reason):\n{}",
        found.join("\n")
    );
}

/// The check finds a read in code, not in a comment or a test module, and lets through only
/// what its lists allow.
#[test]
fn the_check_finds_a_read() {
    let text = "fn f() {\n    // std::env::var(\"X\")\n    let home = std::env::var_os(\"HOME\");\n    let cwd = std::env::current_dir();\n    let exe = std::env::current_exe();\n}\n#[cfg(test)]\nmod t { fn g() { std::env::var(\"Y\"); } }\n";
    assert_eq!(
        unlisted_reads("src/x.rs", text),
        [
            "src/x.rs:3: let home = std::env::var_os(\"HOME\");",
            "src/x.rs:4: let cwd = std::env::current_dir();",
            "src/x.rs:5: let exe = std::env::current_exe();",
        ]
    );
    assert!(unlisted_reads("src/process_context.rs", text).is_empty());
    let columns = "let c = std::env::var(\"COLUMNS\");\nlet h = std::env::var(\"HOME\");\n";
    assert_eq!(
        unlisted_reads("src/cli/progress.rs", columns),
        ["src/cli/progress.rs:2: let h = std::env::var(\"HOME\");"]
    );
}
