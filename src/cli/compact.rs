//! `flemmad compact FILE [--keep N] [--focus TEXT]` and `flemmad compact --undo FILE`: the
//! older turns of a chat replaced by a summary written into the chat as ordinary text, the
//! turns themselves moved byte for byte into an archive `.chat` where no tool of the chat can
//! write, and put back exactly by `--undo` (docs/context.md).

use std::path::{Path, PathBuf};

use clap::Args;
use flemma_config::{ConfigLayer, LayerKind};
use flemma_conversation::{Conversation, Message, Part, Role, StreamEvent};
use flemma_provider::credentials::CredentialEnvironment;
use flemma_provider::http::ClientEvent;
use flemma_syntax::{Document, SegmentKind};
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::chat;

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// The exchanges (a `@You:` and what answers it) kept verbatim at the end (default:
    /// `context.keep`).
    #[arg(long, conflicts_with = "undo")]
    pub keep: Option<u64>,
    /// What the summary should keep above all (a task, a file, a decision).
    #[arg(long, conflicts_with = "undo")]
    pub focus: Option<String>,
    /// Put back the turns the last compaction replaced, exactly as they were.
    #[arg(long)]
    pub undo: bool,
}

/// The first line of a summary: where its turns are and how to check them.
use flemma_syntax::write::COMPACTED_MARKER as MARKER;

pub fn run(args: CompactArgs, config_path: Option<&Path>) -> Result<(), CliError> {
    if let Some(owner) = crate::driver_lock::DriverLock::owner(&args.file) {
        return Err(CliError::failed(
            "compact",
            format!(
                "a send runs on this chat (pid {}); nothing was changed: compact once it has stopped",
                owner.pid
            ),
        ));
    }
    if args.undo {
        return undo(&args.file);
    }
    let loaded = chat::load(
        "compact",
        flemma_ide::Purpose::Send,
        &args.file,
        config_path,
    )?;
    let Some(resolved) = &loaded.analysis.config else {
        return Err(CliError::blocked(
            "compact",
            loaded.report(false),
            "the configuration does not resolve; fix the errors above",
        ));
    };
    let doc = &*loaded.analysis.document;
    let text = doc.text();
    let keep = args.keep.unwrap_or(resolved.config.context.keep).max(1);
    let plan = plan(doc, usize::try_from(keep).unwrap_or(usize::MAX))
        .map_err(|why| CliError::failed("compact", format!("{why}; nothing was changed")))?;
    let region = &text[plan.start..plan.cut];

    // The summary request: to `context.compact_model`, else the chat's own model.
    let mut layers = loaded.analysis.layers.clone();
    if let Some(model) = &resolved.config.context.compact_model {
        let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
        layer
            .set("model", serde_json::Value::String(model.clone()))
            .map_err(|error| {
                CliError::failed("compact", format!("context.compact_model: {error}"))
            })?;
        layers.push(layer);
    }
    let config = flemma_config::resolve(&layers)
        .map_err(|errors| CliError::failed("compact", format!("context.compact_model: {errors}")))?
        .config;
    let environment = CredentialEnvironment::from_process();
    let setup = crate::provider_setup::provider_setup(&config, Some(&args.file), &environment)?;
    let client = crate::provider_setup::client(&config, &setup, environment)?;
    let request = summary_request(region, args.focus.as_deref());
    let mut summary = String::new();
    let streamed = crate::runtime::get()?.block_on(client.stream(
        setup.kind,
        &request,
        &setup.options,
        &setup.endpoint,
        CancellationToken::new(),
        &mut |event| {
            if let ClientEvent::Event(StreamEvent::TextDelta { text }) = event {
                summary.push_str(&text);
            }
        },
    ));
    let failed = |why: String| {
        CliError::failed(
            "compact",
            format!("the summary request failed ({why}); nothing was changed"),
        )
    };
    let outcome = streamed.map_err(|error| failed(error.to_string()))?;
    if let Some(error) = outcome.stop_error() {
        return Err(failed(error.to_string()));
    }
    if summary.trim().is_empty() {
        return Err(failed(format!("{} answered no text", setup.options.model)));
    }

    // The archive first: a valid chat of the frontmatter (and system prompt) and the turns.
    let head = &text[..plan.start];
    let archive_text = format!("{head}{region}");
    let archive = archive_path(&args.file).ok_or_else(|| {
        CliError::failed("compact", "no state directory (set XDG_STATE_HOME or HOME)")
    })?;
    if let Some(dir) = archive.parent() {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| {
                CliError::failed(
                    "compact",
                    format!("cannot create {}: {error}", dir.display()),
                )
            })?;
    }
    crate::fsutil::write_atomic(&archive, &archive_text)
        .map_err(|error| CliError::failed("compact", format!("{error:#}")))?;
    let summary_message =
        summary_message(&archive, &archive_text, head.len(), plan.messages, &summary);
    let next = format!("{head}{summary_message}{}", &text[plan.cut..]);
    let written = check_summary(&next, plan.start, summary_message.len())
        .and_then(|()| {
            crate::fsutil::replace_chat_if_unchanged(&args.file, text, &next)
                .map_err(|error| format!("{error:#}"))
        })
        .and_then(|written| {
            written.then_some(()).ok_or_else(|| {
                "the chat changed while its summary was written; compact again".to_owned()
            })
        });
    if let Err(why) = written {
        let _ = std::fs::remove_file(&archive);
        return Err(CliError::failed(
            "compact",
            format!("{why}; nothing was changed"),
        ));
    }
    let mut meter = flemma_provider::Meter::new();
    let before = meter.estimate(&loaded.analysis.evaluation.conversation, &[]);
    let after = chat::load_text(
        "compact",
        flemma_ide::Purpose::Send,
        &args.file,
        next,
        config_path,
    )
    .map(|loaded| meter.estimate(&loaded.analysis.evaluation.conversation, &[]))
    .unwrap_or(before);
    println!(
        "compacted {} messages into a summary by {} (≈{} → ≈{} tokens of messages); the turns are kept in {}; `flemmad compact --undo {}` puts them back",
        plan.messages,
        setup.options.model,
        crate::context::thousands(before),
        crate::context::thousands(after),
        archive.display(),
        args.file.display()
    );
    Ok(())
}

/// What a compaction replaces: `start..cut` of the chat, `messages` messages.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    start: usize,
    cut: usize,
    messages: usize,
}

/// The turns to compact: from the first message after the system prompt up to the last
/// `keep` exchanges (an exchange starts at a `@You:` that holds no tool or job result), and
/// never past the exchange of a call still waiting (no result, a pending placeholder, a job
/// not delivered).
fn plan(doc: &Document, keep: usize) -> Result<Plan, String> {
    let messages = doc.messages();
    let first = messages
        .iter()
        .position(|m| m.role != flemma_syntax::Role::System)
        .ok_or("the chat has no conversation to compact")?;
    let starts: Vec<usize> = (first..messages.len())
        .filter(|&i| {
            messages[i].role == flemma_syntax::Role::You
                && !messages[i].segments.iter().any(|s| {
                    matches!(
                        s.kind,
                        SegmentKind::ToolResult(_) | SegmentKind::JobResult(_)
                    )
                })
        })
        .collect();
    if starts.len() <= 1 {
        return Err(
            "the chat is a single exchange (one `@You:` and what answers it), which cannot be compacted: remove large tool results or attachments from it, or start a new chat"
                .to_owned(),
        );
    }
    if starts.len() <= keep {
        return Err(format!(
            "the chat has {} exchanges and the last {keep} are kept verbatim (`--keep`, `context.keep`): there is nothing older to compact",
            starts.len()
        ));
    }
    let mut cut = starts[starts.len() - keep];
    // What still waits stays with its exchange.
    let mut waiting: Vec<usize> = doc
        .unresolved_tool_uses()
        .into_iter()
        .map(|(_, segment, _)| segment.range.start)
        .chain(
            doc.placeholders(None)
                .into_iter()
                .map(|(_, segment, _)| segment.range.start),
        )
        .collect();
    for message in messages {
        for (segment, result) in message.tool_results() {
            if let Some(flemma_syntax::SuffixValue::String(job)) =
                result.suffix.as_ref().and_then(|s| s.get("job"))
                && doc.job_result(job).is_none()
            {
                waiting.push(segment.range.start);
            }
        }
    }
    for offset in waiting {
        let Some(index) = messages.iter().position(|m| m.range.contains(offset)) else {
            continue;
        };
        if let Some(&start) = starts.iter().rev().find(|&&s| s <= index) {
            cut = cut.min(start);
        }
    }
    if cut <= first {
        return Err(
            "the oldest exchange has a call still waiting (no result, pending, or a job running): finish or reject it first"
                .to_owned(),
        );
    }
    Ok(Plan {
        start: messages[first].range.start,
        cut: messages[cut].range.start,
        messages: cut - first,
    })
}

/// The request that writes the summary: the turns as the chat has them.
fn summary_request(region: &str, focus: Option<&str>) -> Conversation {
    let focus = focus.map_or_else(String::new, |focus| {
        format!("\n\nAbove all, keep what matters for: {focus}")
    });
    Conversation {
        system: vec![Part::text(
            "You summarise the earlier part of a conversation between a user and an AI assistant so that the conversation can continue from the summary alone. Keep: the user's goals and instructions, decisions made and why, what was done (files changed, commands run and their important results), what failed, open questions, and the next steps. Name files, functions and values exactly. Write plain prose and lists; no headings with `@`, no code fences, no preamble.",
        )],
        messages: vec![Message {
            role: Role::User,
            parts: vec![Part::text(format!(
                "The earlier part of the conversation, as a .chat file (`@You:` the user, `@Assistant:` the assistant, `**Tool Use:**` and `**Tool Result:**` tool calls and their results):\n\n<conversation>\n{region}\n</conversation>\n\nSummarise it.{focus}"
            ))]
            .into(),
            span: None,
        }],
    }
}

/// The summary as a `@You:` message: its first line names the archive (its SHA-256 and where
/// the turns start in it), then the summary, with any line that would read as chat structure
/// or a template escaped.
fn summary_message(
    archive: &Path,
    archive_text: &str,
    from: usize,
    messages: usize,
    summary: &str,
) -> String {
    let escaped: String = summary
        .trim()
        .lines()
        .map(|line| {
            let line = line.replace("{{", "{\u{200B}{").replace("{%", "{\u{200B}%");
            let structural = ["@", "**Tool", "**Job", "<thinking", "```", "~~~", "<!--"]
                .iter()
                .any(|start| line.trim_start().starts_with(start));
            if structural {
                format!("{}{line}\n", flemma_syntax::write::STRUCTURE_ESCAPE)
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    format!(
        "@You:\n{MARKER}archive=\"{}\" sha256=\"{}\" from=\"{from}\" -->\nThe {messages} messages before this one were compacted into this summary; `flemmad compact --undo FILE` puts them back.\n\n{escaped}\n",
        archive.display(),
        crate::fsutil::sha256_hex(archive_text.as_bytes()),
    )
}

/// The summary must read as one `@You:` message of text: else nothing is written.
fn check_summary(next: &str, start: usize, len: usize) -> Result<(), String> {
    let doc = flemma_syntax::parse(next.to_owned());
    let message = doc
        .messages()
        .iter()
        .find(|m| m.range.start == start)
        .ok_or("the summary does not start a message")?;
    let plain = message.range.end == start + len
        && message.role == flemma_syntax::Role::You
        && message.diagnostics.is_empty()
        && message
            .segments
            .iter()
            .all(|s| matches!(s.kind, SegmentKind::Text));
    if plain {
        Ok(())
    } else {
        Err("the summary the model wrote does not read as plain chat text".to_owned())
    }
}

/// Where the archives of `chat` live: `$XDG_STATE_HOME/flemma/compacted/<chat key>/`, which
/// no tool of any chat may write (docs/security.md).
fn archive_dir(chat: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(chat).unwrap_or_else(|_| chat.to_owned());
    Some(
        crate::user_dirs::flemma_state()?
            .join("compacted")
            .join(crate::trust::chat_key(&absolute)),
    )
}

fn archive_path(chat: &Path) -> Option<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Some(archive_dir(chat)?.join(format!("{nanos}.chat")))
}

/// `--undo`: the last summary in the chat replaced by the turns its archive holds, when the
/// archive is this chat's and unchanged.
fn undo(path: &Path) -> Result<(), CliError> {
    let failed = |why: String| CliError::failed("compact", format!("{why}; nothing was changed"));
    let text =
        crate::fsutil::read_chat(path).map_err(|error| CliError::unreadable("compact", &error))?;
    let doc = flemma_syntax::parse(text.clone());
    let (message, marker) = doc
        .messages()
        .iter()
        .rev()
        .filter(|m| m.role == flemma_syntax::Role::You)
        .find_map(|m| {
            let body = doc.slice(m.body);
            body.starts_with(MARKER)
                .then(|| (m, body.lines().next().unwrap_or_default()))
        })
        .ok_or_else(|| failed("the chat holds no compaction summary".to_owned()))?;
    let field = |name: &str| {
        let start = marker.find(&format!("{name}=\""))? + name.len() + 2;
        let end = marker[start..].find('"')? + start;
        Some(marker[start..end].to_owned())
    };
    let (Some(archive), Some(sha), Some(from)) = (field("archive"), field("sha256"), field("from"))
    else {
        return Err(failed(
            "the summary's first line is not one `flemmad compact` wrote".to_owned(),
        ));
    };
    let archive = PathBuf::from(archive);
    // Only this chat's own archives: a summary line is text anyone could have written.
    let own = archive_dir(path).is_some_and(|dir| archive.parent() == Some(dir.as_path()));
    if !own {
        return Err(failed(format!(
            "{} is not an archive of this chat",
            archive.display()
        )));
    }
    let archived = std::fs::read_to_string(&archive).map_err(|error| {
        failed(format!(
            "cannot read the archive {}: {error}",
            archive.display()
        ))
    })?;
    if crate::fsutil::sha256_hex(archived.as_bytes()) != sha {
        return Err(failed(format!(
            "the archive {} changed since it was written",
            archive.display()
        )));
    }
    let turns = from
        .parse::<usize>()
        .ok()
        .and_then(|from| archived.get(from..))
        .ok_or_else(|| failed("the summary's `from` does not fit its archive".to_owned()))?;
    let next = format!(
        "{}{turns}{}",
        &text[..message.range.start],
        &text[message.range.end..]
    );
    match crate::fsutil::replace_chat_if_unchanged(path, &text, &next) {
        Ok(true) => {}
        Ok(false) => {
            return Err(failed(
                "the chat changed while it was restored; try again".to_owned(),
            ));
        }
        Err(error) => return Err(failed(format!("{error:#}"))),
    }
    let _ = std::fs::remove_file(&archive);
    println!(
        "restored the compacted turns from {} into {}",
        archive.display(),
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        flemma_syntax::parse(text.to_owned())
    }

    #[test]
    fn the_last_exchanges_are_kept_and_a_waiting_call_with_its_exchange() {
        let text = "@System:\nBe brief.\n\n@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n@Assistant:\nsecond\n\n@You:\nthree\n";
        let plan = plan(&doc(text), 1).unwrap();
        assert_eq!(
            &text[plan.start..plan.cut],
            "@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n@Assistant:\nsecond\n\n"
        );
        assert_eq!(plan.messages, 4);
        let plan2 = super::plan(&doc(text), 2).unwrap();
        assert_eq!(
            &text[plan2.start..plan2.cut],
            "@You:\none\n\n@Assistant:\nfirst\n\n"
        );
        assert!(
            super::plan(&doc(text), 3)
                .unwrap_err()
                .contains("nothing older")
        );
        assert!(
            super::plan(&doc("@You:\nhuge\n\n@Assistant:\nyes\n"), 1)
                .unwrap_err()
                .contains("single exchange")
        );

        // A call without a result in the second exchange keeps it.
        let waiting = "@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n@You:\nthree\n";
        let plan = super::plan(&doc(waiting), 1).unwrap();
        assert_eq!(
            &waiting[plan.start..plan.cut],
            "@You:\none\n\n@Assistant:\nfirst\n\n"
        );
    }

    #[test]
    fn a_summary_that_reads_as_structure_is_escaped() {
        let message = summary_message(
            Path::new("/s/1.chat"),
            "x",
            0,
            2,
            "Done.\n@Assistant:\n**Tool Use:** `bash` (`x`)\n{{ secret }}",
        );
        let text = format!("{message}@You:\nnext\n");
        check_summary(&text, 0, message.len()).unwrap();
    }
}
