//! `flemmad count FILE`: count the input tokens of a chat with the provider's counting endpoint,
//! or estimate them locally for providers without one (the Codex backend, Chat Completions
//! servers; `flemma_wire::estimate`), and say which it is.

use std::path::PathBuf;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::chat;
use crate::context::Counted;
use crate::process_context::ProcessContext;
use crate::provider_setup::{client, provider_setup};

#[derive(Debug, Args)]
pub struct CountArgs {
    /// The .chat file to count.
    pub file: PathBuf,
    /// Count the text read from stdin as the chat's (an editor's unsaved buffer); FILE still
    /// says where the chat lives, for its references and configuration.
    #[arg(long)]
    pub stdin: bool,
}

pub fn run(args: CountArgs, context: &ProcessContext) -> Result<(), CliError> {
    let loaded = if args.stdin {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|error| {
            CliError::unreadable(
                "count",
                &anyhow::anyhow!("cannot read the chat from stdin: {error}"),
            )
        })?;
        chat::load_text(
            "count",
            flemma_ide::Purpose::Send,
            &args.file,
            text,
            context,
        )?
    } else {
        chat::load("count", flemma_ide::Purpose::Send, &args.file, context)?
    };
    let report = loaded.report(true);
    // The same rules as `send`: what cannot be sent is not counted (no request is made).
    if !loaded.analysis.send_blockers().is_empty() {
        return Err(CliError::blocked(
            "count",
            report,
            "nothing was counted; fix the errors above and count again",
        ));
    }
    let ui = super::Ui::new("count");
    ui.stderr(&report);
    let Some(resolved) = &loaded.analysis.config else {
        return Err(CliError::failed(
            "count",
            "the configuration does not resolve",
        ));
    };
    let config = &resolved.config;
    let environment = context.credentials();
    // The chat by its absolute path for every part below (its folder is never "").
    let chat = context.absolute(&args.file);
    let mut setup = provider_setup(config, Some(&chat), &environment)?;
    // What the request really holds: the enabled tools' definitions too (no MCP server is
    // started here; theirs are not counted).
    setup.options.tools = crate::tool_setup::ToolSetup::for_chat(context, &loaded.analysis, &chat)
        .map(|tools| tools.definitions())
        .unwrap_or_default();
    let conversation = &*crate::context::request_conversation(&loaded.analysis);
    let (tokens, counted) = if setup.kind.counts_tokens() {
        let client = client(config, &setup, environment)?;
        let counted = crate::runtime::get()?.block_on(client.count_tokens(
            setup.kind,
            conversation,
            &setup.options,
            &setup.endpoint,
            CancellationToken::new(),
        ));
        let tokens = counted.map_err(|error| CliError::failed("count", error))?;
        (tokens, Counted::Exact)
    } else {
        let tokens =
            flemma_provider::estimate_input_tokens(setup.kind, conversation, &setup.options)
                .map_err(|error| CliError::failed("count", error))?;
        (tokens, Counted::Estimate)
    };
    let meter = crate::context::status(tokens, counted, &setup, &config.context);
    let how = match counted {
        Counted::Exact => String::new(),
        Counted::Estimate => format!(
            " (estimated locally: {} has no token counting endpoint)",
            setup.kind
        ),
    };
    ui.line(&format!("{}{how}", crate::context::line(&meter)))?;
    if let Some(advice) = crate::context::advice(&meter) {
        ui.stderr(&format!("count: {advice}\n"));
    }
    Ok(())
}
