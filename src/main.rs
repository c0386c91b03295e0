//! `flemmad`: the command-line entry point. Parses arguments and hands off to `cli::*`.

mod acp_backend;
mod agent_permissions;
mod agent_setup;
mod analyses;
mod chat;
mod chat_archive;
mod chat_store;
mod checkpoints;
mod cli;
mod compaction;
mod context;
mod daemon;
mod driver_lock;
mod editor_sessions;
mod engine_driver;
mod engine_host;
mod engine_setup;
mod fsutil;
mod interruptions;
mod lsp_backend;
mod mcp_setup;
mod process_context;
mod proposals;
mod provider_setup;
mod reviewed;
mod rewind_chat;
mod runtime;
mod runtime_dir;
mod tool_reporter;
mod tool_setup;
mod trust;
mod usage_report;
mod user_dirs;
mod watcher;

use std::process::ExitCode;

/// Ends the process quietly when printing fails because the reader closed the pipe (Rust
/// ignores SIGPIPE, so `println!` panics with "Broken pipe" instead); other panics report as
/// usual.
fn exit_quietly_on_broken_pipe() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if payload.starts_with("failed printing to std")
            && (payload.contains("Broken pipe") || payload.contains("os error 32"))
        {
            std::process::exit(i32::from(cli::BROKEN_PIPE_EXIT));
        }
        default_hook(info);
    }));
}

fn main() -> ExitCode {
    // A stdio MCP server starts through flemmad itself (see `flemma_mcp::shim`).
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if raw
        .get(1)
        .is_some_and(|arg| arg == flemma_mcp::shim::SHIM_ARG)
    {
        eprintln!("flemmad: {}", flemma_mcp::shim::run(&raw[2..]));
        return ExitCode::from(127);
    }
    exit_quietly_on_broken_pipe();
    let matches = <cli::Cli as clap::CommandFactory>::command().get_matches();
    let args = <cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        .unwrap_or_else(|error| error.exit());
    // The environment, read once here and handed down from here (issue 28, item 4).
    let mut context = process_context::ProcessContext::from_process(args.config.as_deref());
    if let Some(command) = matches.subcommand_name() {
        context.role = command.to_owned();
    }
    cli::init_logging(&args, &context);
    match cli::run(args, &context) {
        Ok(code) => code,
        Err(error) => error.exit(),
    }
}
