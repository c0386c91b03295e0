//! `flemmad parse FILE [--json]`.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;

use super::{ChatPath, PositionEncoding};
use crate::fsutil;

#[derive(Debug, Args)]
pub struct ParseArgs {
    /// The .chat file to parse.
    pub file: ChatPath,
    /// Print the stable JSON form (see protocol/parse.md) instead of the outline.
    #[arg(long)]
    pub json: bool,
    /// Unit of `character` in JSON positions.
    #[arg(long, value_enum, default_value_t = PositionEncoding::Utf16, requires = "json")]
    pub position_encoding: PositionEncoding,
}

pub fn run(args: ParseArgs) -> anyhow::Result<ExitCode> {
    let text = match fsutil::read_chat(&args.file) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("flemmad parse: {error:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let doc = flemma_syntax::parse(text);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let tree = flemma_protocol::parse_tree::ParsedDocument::from_document(
            &doc,
            args.position_encoding.into(),
        );
        serde_json::to_writer_pretty(&mut stdout, &tree)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", doc.outline())?;
    }
    Ok(ExitCode::SUCCESS)
}
