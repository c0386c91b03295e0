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
    /// Evaluate the frontmatter and templates too, and print the conversation that would be
    /// sent (with --json: `{conversation, config_layer, diagnostics}`, see protocol/eval.md).
    #[arg(long)]
    pub eval: bool,
    /// Unit of `character` in JSON positions.
    #[arg(long, value_enum, default_value_t = PositionEncoding::Utf16, requires = "json")]
    pub position_encoding: PositionEncoding,
}

pub fn run(args: ParseArgs, config_path: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let text = match fsutil::read_chat(&args.file) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("flemmad parse: {error:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let doc = flemma_syntax::parse(text);
    let mut stdout = std::io::stdout().lock();
    if args.eval {
        let base = match crate::chat::base_config(config_path) {
            Ok(base) => base,
            Err(crate::chat::LoadError::Unreadable(error)) => {
                eprintln!("flemmad parse: {error:#}");
                return Ok(ExitCode::from(2));
            }
            Err(crate::chat::LoadError::Blocked(report)) => crate::chat::BaseConfig {
                errors: report,
                ..Default::default()
            },
        };
        let evaluation = flemma_template::evaluate(
            &doc,
            std::sync::Arc::new(flemma_template::FsHost),
            &crate::chat::eval_options(&args.file, &base),
        );
        if args.json {
            let json = eval_json(&doc, &evaluation, base, args.position_encoding.into());
            serde_json::to_writer_pretty(&mut stdout, &json)?;
            writeln!(stdout)?;
        } else {
            write!(stdout, "{}", conversation_outline(&evaluation.conversation))?;
            let index = doc.line_index();
            for d in &evaluation.diagnostics {
                let p = index.position(doc.text(), d.range.start, flemma_syntax::Encoding::Utf8);
                writeln!(
                    stdout,
                    "{}:{}:{}: {}{}: {}",
                    args.file.display(),
                    p.line + 1,
                    p.character + 1,
                    d.severity.as_str(),
                    if d.blocking { " (blocks sending)" } else { "" },
                    d.message
                )?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let tree = flemma_ide::to_protocol::parsed_document(&doc, args.position_encoding.into());
        serde_json::to_writer_pretty(&mut stdout, &tree)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", doc.outline())?;
    }
    Ok(ExitCode::SUCCESS)
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

/// The evaluation as JSON (protocol/eval.md): the template crate's form, with diagnostic ranges
/// as line/character positions (byte offsets kept under `offsets`), plus the resolved
/// configuration of the document and the layer that set each value.
fn eval_json(
    doc: &flemma_syntax::Document,
    evaluation: &flemma_template::Evaluation,
    base: crate::chat::BaseConfig,
    encoding: flemma_syntax::Encoding,
) -> serde_json::Value {
    use serde_json::{Value, json};
    let mut json = serde_json::to_value(evaluation).unwrap_or(Value::Null);
    let index = doc.line_index();
    if let Some(Value::Array(diagnostics)) = json.get_mut("diagnostics") {
        for (value, diagnostic) in diagnostics.iter_mut().zip(&evaluation.diagnostics) {
            let (start, end) = index.range(doc.text(), diagnostic.range, encoding);
            value["offsets"] =
                json!({"start": diagnostic.range.start, "end": diagnostic.range.end});
            value["range"] = json!({
                "start": {"line": start.line, "character": start.character},
                "end": {"line": end.line, "character": end.character},
            });
        }
    }
    let mut config_errors: Vec<String> = base.errors.lines().map(str::to_owned).collect();
    let mut layers = base.layers;
    layers.push(evaluation.frontmatter_layer.clone());
    match flemma_config::resolve(&layers) {
        Ok(resolved) => {
            json["config"] = serde_json::to_value(&resolved.config).unwrap_or(Value::Null);
            json["config_sources"] = resolved
                .provenance()
                .into_iter()
                .filter(|(_, layer)| *layer != flemma_config::LayerKind::Defaults)
                .map(|(path, layer)| (path, Value::String(layer.as_str().to_owned())))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        Err(errors) => config_errors.extend(errors.errors().iter().map(|e| e.to_string())),
    }
    json["config_errors"] = json!(config_errors);
    json
}
