//! `flemmad fmt FILE [--check]`.

use std::process::ExitCode;

use clap::Args;

use super::ChatPath;
use crate::fsutil;

#[derive(Debug, Args)]
pub struct FmtArgs {
    /// The .chat file to normalise.
    pub file: ChatPath,
    /// Write nothing; exit 1 and list the changes when the file is not normalised.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: FmtArgs) -> anyhow::Result<ExitCode> {
    let text = match fsutil::read_chat(&args.file) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("flemmad fmt: {error:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let doc = flemma_syntax::parse(text.as_str());
    let changes = doc.format_edits();
    if changes.is_empty() {
        if args.check {
            eprintln!("{}: already formatted", args.file.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let index = doc.line_index();
    if args.check {
        for (edit, description) in &changes {
            let line = index.line_of(edit.range.start) + 1;
            println!("{}:{line}: would {description}", args.file.display());
        }
        return Ok(ExitCode::from(1));
    }
    let edits: Vec<_> = changes.iter().map(|(e, _)| e.clone()).collect();
    let formatted = flemma_syntax::apply_edits(&text, &edits)?;
    fsutil::write_atomic(&args.file, &formatted)?;
    eprintln!(
        "{}: {} change(s) written",
        args.file.display(),
        changes.len()
    );
    Ok(ExitCode::SUCCESS)
}
