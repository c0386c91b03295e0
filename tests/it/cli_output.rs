//! One output (issue 28, item 5): every file of `src/cli` writes to the user through `Ui`
//! (`src/cli/ui.rs`), never with `print!`/`println!`/`eprint!`/`eprintln!` or a stdout/stderr
//! handle of its own. The exceptions write a protocol, not output for a person: `acp.rs` serves
//! ACP on stdio and `proxy.rs` copies the daemon's LSP stream to stdout.

use crate::sources;

/// The one file allowed to write to stdout and stderr.
const OWNER: &str = "ui.rs";

/// Files whose stdout is a protocol stream handed to a transport.
const PROTOCOL_STREAMS: &[&str] = &["acp.rs", "proxy.rs"];

/// What writes to the terminal directly.
const DIRECT: &[&str] = &[
    "print!(",
    "println!(",
    "eprint!(",
    "eprintln!(",
    "io::stdout()",
    "io::stderr()",
];

/// The lines of a file that write directly (test modules and comments left out).
fn direct_writes(text: &str) -> Vec<(usize, String)> {
    let code = sources::code(text);
    code.lines()
        .zip(text.lines())
        .enumerate()
        .filter(|(_, (code, _))| DIRECT.iter().any(|direct| code.contains(direct)))
        .map(|(number, (_, line))| (number + 1, line.trim().to_owned()))
        .collect()
}

#[test]
fn no_cli_file_but_ui_writes_to_the_terminal_directly() {
    let cli = sources::root().join("src/cli");
    let files = sources::rust_files(&cli);
    assert!(files.len() > 20, "the sources were found ({})", files.len());
    let mut found = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&cli).unwrap_or(file);
        let name = relative.to_string_lossy();
        if name == OWNER || PROTOCOL_STREAMS.contains(&name.as_ref()) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a readable source");
        for (number, line) in direct_writes(&text) {
            found.push(format!("src/cli/{name}:{number}: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "written to the terminal outside src/cli/ui.rs (use the command's `Ui`):\n{}",
        found.join("\n")
    );
}

/// The check finds what it looks for: a direct write counts, one in a comment or a test
/// module does not.
#[test]
fn the_check_sees_a_direct_write_and_skips_comments_and_tests() {
    let text = "fn a() { eprintln!(\"x\"); }\n// println!(\"y\")\nfn b() { let _ = std::io::stdout().lock(); }\n#[cfg(test)]\nmod tests { fn c() { print!(\"z\"); } }\n";
    let lines: Vec<usize> = direct_writes(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, vec![1, 3]);
}
