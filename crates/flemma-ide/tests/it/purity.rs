//! The analysis core does no IO of its own: the disk, the home directory, the clock and
//! processes are reached only through the caller's template `Host` (evaluations, and the
//! features through `AnalysisHost::file_system`).

#[test]
fn no_source_file_touches_the_outside_world() {
    let forbidden = [
        "std::fs",
        "std::env",
        "std::process",
        "std::net",
        "File::open",
        "SystemTime::now",
        "Instant::now",
    ];
    let mut dirs = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src"
    ))];
    let mut found = Vec::new();
    let mut read = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file is readable");
            read += 1;
            for needle in forbidden {
                if text.contains(needle) {
                    found.push(format!("{}: {needle}", path.display()));
                }
            }
        }
    }
    assert!(read > 10, "only {read} source files read");
    assert!(
        found.is_empty(),
        "flemma-ide reaches the outside world itself (use the Host port): {found:?}"
    );
}
