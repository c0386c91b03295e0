//! `flemmad reject FILE TOOL_ID [--reason TEXT]`: mark a pending tool call rejected (with a
//! reason: an error result holding `User feedback: <reason>`), so the next `flemmad send` tells
//! the model.

use std::path::PathBuf;

use clap::Args;
use flemma_ide::actions;

use super::CliError;
use super::approve::edit_placeholders;
use super::send::shell_quote;

#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The id of the tool call to reject.
    pub tool_id: String,
    /// Why: written into the result as `User feedback: <reason>` for the model to read.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

pub fn run(args: RejectArgs) -> Result<(), CliError> {
    edit_placeholders("reject", &args.file, |doc| {
        actions::reject(doc, &args.tool_id, args.reason.as_deref())
            .map(|edit| (vec![args.tool_id.clone()], vec![edit]))
    })?;
    eprintln!(
        "flemmad reject: rejected `{}`; run `flemmad send {}` to tell the model",
        args.tool_id,
        shell_quote(&args.file.display().to_string())
    );
    Ok(())
}
