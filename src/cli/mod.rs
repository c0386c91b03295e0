//! The `flemmad` command line: one module per subcommand.

mod fmt;
mod parse;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// flemmad makes `.chat` files live conversations with LLMs, from any editor or the command line.
///
/// A `.chat` file is plain text: role markers (`@System:`, `@You:`, `@Assistant:`), optional
/// frontmatter, templates, file references, tool calls and their results. The file is the whole
/// state of the conversation.
///
/// Logs go to standard error; set RUST_LOG (e.g. `RUST_LOG=flemmad=debug`) for more detail.
#[derive(Debug, Parser)]
#[command(
    name = "flemmad",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse a .chat file and print its tree and diagnostics.
    ///
    /// Without --json, prints an outline: one line per node with its line:column range.
    /// With --json, prints the stable JSON form documented in protocol/parse.md.
    /// Exits 0 even when the file has diagnostics; 2 when it cannot be read.
    Parse(parse::ParseArgs),
    /// Normalise a .chat file in place (or check that it is normalised).
    ///
    /// Only what the format lets us normalise changes: legacy inline role markers (`@You: hi`)
    /// are split onto their own line and Flemma 0.11 `:` tool namespaces become `.`.
    /// Everything else stays byte-identical. With --check, nothing is written: the command
    /// exits 1 and names each change it would make.
    Fmt(fmt::FmtArgs),
}

/// Unit of the `character` field of positions in JSON output.
#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum PositionEncoding {
    /// UTF-16 code units (the LSP default; what VS Code uses).
    #[default]
    #[value(name = "utf-16")]
    Utf16,
    /// UTF-8 bytes (what Helix uses).
    #[value(name = "utf-8")]
    Utf8,
}

impl From<PositionEncoding> for flemma_syntax::Encoding {
    fn from(value: PositionEncoding) -> Self {
        match value {
            PositionEncoding::Utf16 => flemma_syntax::Encoding::Utf16,
            PositionEncoding::Utf8 => flemma_syntax::Encoding::Utf8,
        }
    }
}

/// A path argument for a chat file.
pub type ChatPath = PathBuf;

pub fn init_logging(_cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Parse(args) => parse::run(args),
        Command::Fmt(args) => fmt::run(args),
    }
}
