//! Every `--help` of the command line, compared with its snapshot in `tests/it/help/`: a help
//! text that changes fails here, so its change is reviewed like code. After an intended change,
//! `FLEMMA_UPDATE_HELP=1 cargo test --test it help_snapshots` rewrites the snapshots (read the
//! diff before committing it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/help")
}

/// `flemmad ARGS… --help`, run with a neutral environment (no terminal, so no wrapping to its
/// width; no configuration).
fn help(args: &[String]) -> String {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_flemmad"))
        .args(args)
        .arg("--help")
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("flemmad runs");
    assert!(
        out.status.success(),
        "flemmad {} --help failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        // A command's line starts two spaces in; a wrapped description starts further in.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_help_text_matches_its_snapshot() {
    let update = std::env::var_os("FLEMMA_UPDATE_HELP").is_some();
    let dir = snapshots();
    let mut seen = BTreeSet::new();
    let mut differ = Vec::new();
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(args) = queue.pop() {
        let text = help(&args);
        for sub in subcommands(&text) {
            let mut deeper = args.clone();
            deeper.push(sub);
            queue.push(deeper);
        }
        let name = std::iter::once("flemmad".to_owned())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        let file = dir.join(format!("{name}.txt"));
        seen.insert(format!("{name}.txt"));
        if update {
            std::fs::create_dir_all(&dir).expect("tests/it/help");
            std::fs::write(&file, &text).expect("a snapshot is written");
            continue;
        }
        match std::fs::read_to_string(&file) {
            Ok(snapshot) if snapshot == text => {}
            Ok(snapshot) => differ.push(format!(
                "`flemmad {} --help` differs from {}:\n--- snapshot\n{snapshot}\n--- now\n{text}",
                args.join(" "),
                file.display()
            )),
            Err(_) => differ.push(format!(
                "`flemmad {} --help` has no snapshot {}",
                args.join(" "),
                file.display()
            )),
        }
    }
    assert!(seen.len() > 15, "the commands were found: {seen:?}");
    for entry in std::fs::read_dir(&dir).expect("tests/it/help") {
        let name = entry
            .expect("a directory entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !seen.contains(&name) {
            if update {
                std::fs::remove_file(dir.join(&name)).expect("a stale snapshot is removed");
            } else {
                differ.push(format!("tests/it/help/{name} belongs to no command"));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{}\n\nIf the change is intended: FLEMMA_UPDATE_HELP=1 cargo test --test it help_snapshots",
        differ.join("\n\n")
    );
}
