//! The crate's one integration-test binary (one link instead of one per file).

mod acp;
mod ask_agent;
mod authority;
mod checkpoints;
mod cli_agentic;
mod cli_agreement;
mod cli_approval_function;
mod cli_codex;
mod cli_faults;
mod cli_figures;
mod cli_lsp_tool;
mod cli_mcp;
mod cli_models_count;
mod cli_output;
mod cli_parse_fmt;
mod cli_progress;
mod cli_safety;
mod cli_send;
mod cli_tools;
mod cli_usage;
mod common;
mod context;
mod daemon;
mod daemon_engine;
mod daemon_two_editors;
mod daemon_watch;
mod daemon_watch_jobs;
mod docs_examples;
mod doctor;
mod flemma14_requests;
mod flemma14_switch;
mod flemma14_tools;
mod help_snapshots;
mod import_cycles;
mod lsp;
mod lsp_engine;
mod lsp_hostile_files;
mod lsp_layers;
mod lsp_proxy;
mod lsp_stream_latency;
mod lsp_two_writers;
mod modes;
mod process_context;
mod provider_data;
mod reads;
mod review_hunks;
mod rewind_ui;
mod sandbox_holds;
mod sources;
mod start_nothing;
mod trust;
mod untrusted_limits;
mod vocabulary;

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
        if let Some(module) = name.strip_suffix(".rs")
            && module != "main"
        {
            assert!(
                main.contains(&format!("mod {module};")),
                "tests/it/{name} is not a module of tests/it/main.rs"
            );
        }
    }
}

/// One tokio runtime per process (issue 20): only `src/runtime.rs` builds one. The exceptions
/// are other processes (the mock provider) and `fetch_content`'s fallback for a library caller
/// that passes no runtime (flemmad always passes its own: `tool_setup`).
#[test]
fn only_src_runtime_rs_builds_a_runtime() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let allowed = [
        "src/runtime.rs",
        "crates/flemma-tools/src/builtin/fetch.rs",
        "crates/flemma-mock-provider/src/main.rs",
    ];
    let mut builders = Vec::new();
    for path in sources::workspace_sources() {
        let text = std::fs::read_to_string(&path).expect("a source file");
        let builds = [
            "Runtime::new(",
            "Builder::new_current_thread",
            "Builder::new_multi_thread",
            "#[tokio::main",
        ]
        .iter()
        .any(|pattern| text.contains(pattern));
        let relative = path
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        if builds && !allowed.contains(&relative.as_str()) {
            builders.push(relative);
        }
    }
    assert!(
        builders.is_empty(),
        "these build a tokio runtime of their own; use crate::runtime (the process's one): {builders:?}"
    );
    // The check sees what it looks for.
    let runtime = std::fs::read_to_string(root.join("src/runtime.rs")).expect("src/runtime.rs");
    assert!(runtime.contains("Builder::new_multi_thread"));
}
