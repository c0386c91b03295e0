//! The crate's one integration-test binary: real MCP servers written with the official Python
//! SDK (PyPI `mcp`, `tests/servers/demo_server.py`) over stdio and streamable HTTP.

mod http;
mod schemas;
mod stdio;
mod support;

/// Every test file in this directory is a module of this binary.
#[test]
fn no_test_file_is_forgotten() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("tests/it/main.rs");
    for entry in std::fs::read_dir(&dir).expect("tests/it") {
        let name = entry
            .expect("a directory entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(module) = name.strip_suffix(".rs") {
            if module != "main" {
                assert!(
                    main.contains(&format!("mod {module};")),
                    "tests/it/{name} is not a module of tests/it/main.rs"
                );
            }
        }
    }
}
