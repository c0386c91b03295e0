//! `flemmad parse FILE [--json]`.

use std::io::Write as _;

use clap::Args;

use super::{ChatPath, CliError, PositionEncoding};
use crate::fsutil;
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct ParseArgs {
    /// The .chat file to parse.
    pub file: ChatPath,
    /// Print the stable JSON form (see protocol/parse.md) instead of the outline.
    #[arg(long)]
    pub json: bool,
    /// Evaluate the frontmatter and templates too, and print the conversation that would be
    /// sent (with --json: `{conversation, config_layer, diagnostics}`, see protocol/eval.md).
    #[arg(long)]
    pub eval: bool,
    /// Unit of `character` in JSON positions.
    #[arg(long, value_enum, default_value_t = PositionEncoding::Utf16, requires = "json")]
    pub position_encoding: PositionEncoding,
}

pub fn run(args: ParseArgs, context: &ProcessContext) -> Result<(), CliError> {
    if args.eval {
        return run_eval(&args, context);
    }
    let text = fsutil::read_chat(&context.dirs, &args.file)
        .map_err(|error| CliError::unreadable("parse", &error))?;
    let doc = flemma_syntax::parse(text);
    let mut stdout = super::Ui::new("parse").stdout();
    if args.json {
        let tree = flemma_ide::to_protocol::parsed_document(&doc, args.position_encoding.into());
        serde_json::to_writer_pretty(&mut stdout, &tree)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", doc.outline())?;
    }
    Ok(())
}

/// `parse --eval`: the conversation on stdout (or the JSON form), the diagnostics on stderr
/// exactly as `send` reports them; exit 1 when one blocks sending.
fn run_eval(args: &ParseArgs, context: &ProcessContext) -> Result<(), CliError> {
    let loaded = crate::chat::load("parse", flemma_ide::Purpose::Inspect, &args.file, context)?;
    let mut stdout = super::Ui::new("parse").stdout();
    if args.json {
        let json = flemma_ide::to_protocol::evaluated_document(
            &loaded.analysis,
            args.position_encoding.into(),
        );
        serde_json::to_writer_pretty(&mut stdout, &json)?;
        writeln!(stdout)?;
    } else {
        write!(
            stdout,
            "{}",
            conversation_outline(&loaded.analysis.evaluation.conversation)
        )?;
    }
    let report = loaded.report(false);
    if loaded.analysis.has_blocking_diagnostics() {
        return Err(CliError::blocked(
            "parse",
            report,
            "this chat cannot be sent as it is; fix the errors above",
        ));
    }
    super::Ui::new("parse").stderr(&report);
    Ok(())
}

/// A readable view of an evaluated conversation: roles, text, and one line per other part.
fn conversation_outline(conversation: &flemma_conversation::Conversation) -> String {
    use flemma_conversation::Part;
    use std::fmt::Write as _;
    fn parts(out: &mut String, list: &[Part]) {
        for part in list {
            let _ = match part {
                Part::Text { text } => writeln!(out, "{}", text.trim_end_matches('\n')),
                Part::Image { mime, data, path } => {
                    writeln!(out, "[image {path} {mime}, {} bytes]", data.len())
                }
                Part::Pdf { data, path } => writeln!(out, "[pdf {path}, {} bytes]", data.len()),
                Part::TextFile { mime, text, path } => {
                    writeln!(out, "[file {path} {mime}, {} bytes]", text.len())
                }
                Part::Thinking {
                    text,
                    signature,
                    redacted,
                } => writeln!(
                    out,
                    "[thinking{}{}, {} bytes]",
                    signature
                        .as_ref()
                        .map_or(String::new(), |s| format!(" signed by {}", s.provider)),
                    if *redacted { " redacted" } else { "" },
                    text.len()
                ),
                Part::ToolUse {
                    id,
                    name,
                    raw_input,
                    ..
                } => writeln!(out, "[tool use {name} {id}: {raw_input}]"),
                Part::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let written = writeln!(
                        out,
                        "[tool result {tool_use_id}{}]",
                        if *is_error { " (error)" } else { "" }
                    );
                    parts(out, content);
                    written
                }
            };
        }
    }
    let mut out = String::new();
    if !conversation.system.is_empty() {
        out.push_str("== system\n");
        parts(&mut out, &conversation.system);
    }
    for message in &conversation.messages {
        let role = match message.role {
            flemma_conversation::Role::User => "user",
            flemma_conversation::Role::Assistant => "assistant",
        };
        let _ = writeln!(out, "== {role}");
        parts(&mut out, &message.parts);
    }
    out
}
