//! `flemmad`: the command-line entry point. Parses arguments and hands off to `cli::*`.

mod chat;
mod cli;
mod fsutil;
mod provider_setup;
mod reply_file;
mod send_lock;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_logging(&args);
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => error.exit(),
    }
}
