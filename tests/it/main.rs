//! The crate's one integration-test binary (one link instead of one per file).

mod cli_agentic;
mod cli_agreement;
mod cli_approval_function;
mod cli_faults;
mod cli_figures;
mod cli_lsp_tool;
mod cli_mcp;
mod cli_models_count;
mod cli_parse_fmt;
mod cli_progress;
mod cli_safety;
mod cli_send;
mod cli_tools;
mod common;
mod daemon;
mod daemon_engine;
mod daemon_two_editors;
mod daemon_watch;
mod daemon_watch_jobs;
mod doctor;
mod flemma14_requests;
mod flemma14_switch;
mod flemma14_tools;
mod lsp;
mod lsp_engine;
mod lsp_hostile_files;
mod lsp_layers;
mod lsp_proxy;
mod lsp_stream_latency;
mod lsp_two_writers;
mod quickstart;
mod sandbox_holds;
mod trust;

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
