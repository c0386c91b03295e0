//! One test binary for the engine: data-driven cycle tests, jobs, and properties.

mod common;
mod crlf;
mod cycle;
mod jobs;
mod properties;
mod provenance;
mod resolutions;
mod session;
mod session_properties;
mod session_world;

/// Every test file in this directory is a module of this binary.
#[test]
fn no_test_file_is_forgotten() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let runner = std::fs::read_to_string(dir.join("runner.rs")).expect("tests/runner.rs");
    for entry in std::fs::read_dir(&dir).expect("tests") {
        let name = entry
            .expect("a directory entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(module) = name.strip_suffix(".rs") {
            if module != "runner" {
                assert!(
                    runner.contains(&format!("mod {module};")),
                    "tests/{name} is not a module of tests/runner.rs"
                );
            }
        }
    }
}
