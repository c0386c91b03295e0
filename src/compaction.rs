//! Compaction (docs/context.md): the older turns of a chat replaced by a summary written into
//! the chat as ordinary text, the turns themselves moved byte for byte into an archive `.chat`
//! where no tool of the chat can write, and put back exactly by an undo. One implementation
//! for every front end: `flemmad compact` (on the file), the engine driver's automatic
//! compaction before a request (through the document session, like every other write of a
//! driver), the language server's `flemma.compact` and ACP's `/compact`.
//!
//! The steps: [`plan`] what to replace, [`Summariser::summarise`] asks the model, [`prepare`]
//! writes the archive and the summary message, and the caller writes the chat (replacing the
//! plan's range with [`Compaction::message`]) or [`Compaction::discard`]s the archive.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use crate::process_context::ProcessContext;
use flemma_config::{Config, ConfigLayer, LayerKind};
use flemma_conversation::{Conversation, Message, Part, Role, StreamEvent};
use flemma_engine::RequestId;
use flemma_provider::http::{ClientEvent, ProviderClient};
use flemma_syntax::write::COMPACTED_MARKER as MARKER;
use flemma_syntax::{Document, SegmentKind, TextEdit, TextRange};
use tokio_util::sync::CancellationToken;

use flemma_protocol::event::{ContextCompacted, ContextRestored, EngineEvent};

use crate::provider_setup::ProviderSetup;
use crate::user_dirs::UserDirs;

/// Why nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The chat cannot be read.
    Unreadable(String),
    /// The chat was left as it was, for this reason.
    Unchanged(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreadable(why) => f.write_str(why),
            Self::Unchanged(why) => write!(f, "{why}; nothing was changed"),
        }
    }
}

/// The model that writes summaries and the client that asks it.
#[derive(Clone)]
pub struct Summariser {
    pub setup: ProviderSetup,
    pub client: Arc<ProviderClient>,
}

impl Summariser {
    /// `context.compact_model` of `config` (the chat's resolved configuration, from `layers`),
    /// else `chat_model` when the caller has the chat's own provider at hand, else the chat's
    /// model set up anew.
    pub fn for_chat(
        layers: &[ConfigLayer],
        config: &Config,
        chat: &Path,
        chat_model: Option<(&ProviderSetup, &Arc<ProviderClient>)>,
        process: &ProcessContext,
    ) -> anyhow::Result<Self> {
        let config = match (&config.context.compact_model, chat_model) {
            (None, Some((setup, client))) => {
                return Ok(Self {
                    setup: setup.clone(),
                    client: client.clone(),
                });
            }
            (None, None) => config.clone(),
            (Some(model), _) => {
                let mut layers = layers.to_vec();
                let mut layer = ConfigLayer::new(LayerKind::Frontmatter);
                layer
                    .set("model", serde_json::Value::String(model.clone()))
                    .map_err(|error| anyhow::anyhow!("context.compact_model: {error}"))?;
                layers.push(layer);
                flemma_config::resolve(&layers)
                    .map_err(|errors| anyhow::anyhow!("context.compact_model: {errors}"))?
                    .config
            }
        };
        let environment = process.credentials();
        let setup = crate::provider_setup::provider_setup(&config, Some(chat), &environment)?;
        let client = crate::provider_setup::client(&config, &setup, environment)?;
        Ok(Self {
            setup,
            client: Arc::new(client),
        })
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.setup.options.model
    }

    /// Asks the model to summarise `region` (chat text); an error says why in a sentence.
    pub async fn summarise(
        &self,
        region: &str,
        focus: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<String, String> {
        let request = summary_request(region, focus);
        // The summary is text only: no tools offered.
        let mut options = self.setup.options.clone();
        options.tools.clear();
        let mut summary = String::new();
        let streamed = self
            .client
            .stream(
                self.setup.kind,
                &request,
                &options,
                &self.setup.endpoint,
                cancel,
                &mut |event| {
                    if let ClientEvent::Event(StreamEvent::TextDelta { text }) = event {
                        summary.push_str(&text);
                    }
                },
            )
            .await;
        let failed = |why: String| format!("the summary request failed ({why})");
        let outcome = streamed.map_err(|error| failed(error.to_string()))?;
        if let Some(error) = outcome.stop_error() {
            return Err(failed(error.to_string()));
        }
        if summary.trim().is_empty() {
            return Err(failed(format!("{} answered no text", self.model())));
        }
        Ok(summary)
    }
}

/// A compaction ready to be written: its archive is on disk; replace `plan.start..plan.cut`
/// of the text it was planned on with `message`, or [`discard`](Self::discard) it.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub plan: Plan,
    pub archive: PathBuf,
    /// The summary as a `@You:` message.
    pub message: String,
    /// The summary as the model wrote it.
    pub summary: String,
}

impl Compaction {
    /// The chat after the compaction, from `text` (the text it was planned on).
    pub fn apply(&self, text: &str) -> String {
        format!(
            "{}{}{}",
            &text[..self.plan.start],
            self.message,
            &text[self.plan.cut..]
        )
    }

    /// Nothing was written: the archive goes.
    pub fn discard(&self) {
        let _ = std::fs::remove_file(&self.archive);
    }

    /// The lifecycle event's data.
    pub fn event_data(
        &self,
        model: &str,
        before: u64,
        after: u64,
        automatic: bool,
    ) -> ContextCompacted {
        ContextCompacted {
            messages: self.plan.messages as u64,
            archive: self.archive.display().to_string(),
            model: model.to_owned(),
            tokens_before: before,
            tokens_after: after,
            automatic,
            summary: Some(self.summary.clone()),
        }
    }
}

/// Writes the archive of `plan` over `text` (the chat `chat`'s) and makes the summary message
/// of `summary`; an error when the summary would not read as one plain `@You:` message, or the
/// archive cannot be written (nothing is left behind then).
pub fn prepare(
    dirs: &UserDirs,
    chat: &Path,
    text: &str,
    plan: Plan,
    summary: &str,
) -> Result<Compaction, String> {
    // The archive: a valid chat of the frontmatter (and system prompt) and the turns.
    let head = &text[..plan.start];
    let region = &text[plan.start..plan.cut];
    let archive_text = format!("{head}{region}");
    let archive =
        archive_path(dirs, chat).ok_or("no state directory (set XDG_STATE_HOME or HOME)")?;
    let message = summary_message(&archive, &archive_text, head.len(), plan.messages, summary);
    let next = format!("{head}{message}{}", &text[plan.cut..]);
    check_summary(&next, plan.start, message.len())?;
    if let Some(dir) = archive.parent() {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    }
    crate::fsutil::write_atomic(&archive, &archive_text).map_err(|error| format!("{error:#}"))?;
    Ok(Compaction {
        plan,
        archive,
        message,
        summary: summary.trim().to_owned(),
    })
}

/// What a compaction replaces: `start..cut` of the chat, `messages` messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub start: usize,
    pub cut: usize,
    pub messages: usize,
}

/// The turns to compact: from the first message after the system prompt up to the last
/// `keep` exchanges (an exchange starts at a `@You:` that holds no tool or job result) — or,
/// when the chat has no more than `keep` exchanges (one long autopilot run answering one
/// question), up to its last `keep` turns (an `@Assistant:` message and the results answering
/// it) — and never past the turn of a call still waiting (no result, a pending placeholder, a
/// job not delivered). What is compacted holds at least one answer of the model.
pub fn plan(doc: &Document, keep: usize) -> Result<Plan, String> {
    plan_for(doc, Upto::Keep(keep))
}

/// Where a compaction stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upto {
    /// Before the last `n` exchanges (or turns: [`plan`]).
    Keep(usize),
    /// Through the message holding this line (0-based; "compact up to here"): the turns after
    /// it are kept.
    Line(usize),
}

/// [`plan`], or up to the message holding a line.
pub fn plan_for(doc: &Document, upto: Upto) -> Result<Plan, String> {
    use flemma_syntax::Role;
    let keep = match upto {
        Upto::Keep(keep) => keep.max(1),
        Upto::Line(_) => 1,
    };
    let messages = doc.messages();
    let first = messages
        .iter()
        .position(|m| m.role != Role::System)
        .ok_or("the chat has no conversation to compact")?;
    // A last `@You:` still empty is where the next question goes, not an exchange.
    let mut end = messages.len();
    if end > first
        && messages[end - 1].role == Role::You
        && doc.slice(messages[end - 1].content).trim().is_empty()
    {
        end -= 1;
    }
    let exchanges: Vec<usize> = (first..end)
        .filter(|&i| {
            messages[i].role == Role::You
                && !messages[i].segments.iter().any(|s| {
                    matches!(
                        s.kind,
                        SegmentKind::ToolResult(_) | SegmentKind::JobResult(_)
                    )
                })
        })
        .collect();
    let turns: Vec<usize> = (first + 1..messages.len())
        .filter(|&i| messages[i].role == Role::Assistant)
        .collect();
    let mut cut = if let Upto::Line(line) = upto {
        let offset = doc.line_index().line_start(line);
        let here = messages
            .iter()
            .position(|m| m.range.contains(offset) || m.range.start >= offset)
            .unwrap_or(messages.len());
        exchanges
            .iter()
            .chain(&turns)
            .copied()
            .filter(|&start| start > here.max(first))
            .min()
            .ok_or("nothing follows this message to keep: compact up to an earlier one")?
    } else if exchanges.len() > keep {
        exchanges[exchanges.len() - keep]
    } else if turns.len() > keep {
        turns[turns.len() - keep]
    } else if exchanges.len() <= 1 {
        return Err(
            "the chat is a single exchange (one `@You:` and what answers it), which cannot be compacted: remove large tool results or attachments from it, or start a new chat"
                .to_owned(),
        );
    } else {
        return Err(format!(
            "the chat has {} exchanges and the last {keep} are kept verbatim (`--keep`, `context.keep`): there is nothing older to compact",
            exchanges.len()
        ));
    };
    if !messages[first..cut]
        .iter()
        .any(|m| m.role == Role::Assistant)
    {
        return Err(match upto {
            Upto::Keep(_) => format!(
                "the turns before the last {keep} hold no answer of the model: there is nothing older to compact"
            ),
            Upto::Line(_) => {
                "the messages up to here hold no answer of the model: there is nothing to compact"
                    .to_owned()
            }
        });
    }
    // What still waits stays with its turn.
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
        let turn = exchanges
            .iter()
            .chain(&turns)
            .copied()
            .filter(|&start| start <= index)
            .max();
        if let Some(start) = turn {
            cut = cut.min(start);
        }
    }
    if !messages[first..cut]
        .iter()
        .any(|m| m.role == Role::Assistant)
    {
        return Err(
            "the oldest turn has a call still waiting (no result, pending, or a job running): finish or reject it first"
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
pub fn summary_request(region: &str, focus: Option<&str>) -> Conversation {
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
fn archive_dir(dirs: &UserDirs, chat: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(chat).unwrap_or_else(|_| chat.to_owned());
    Some(
        dirs.flemma_state()?
            .join("compacted")
            .join(crate::user_dirs::chat_key(&absolute)),
    )
}

fn archive_path(dirs: &UserDirs, chat: &Path) -> Option<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Some(archive_dir(dirs, chat)?.join(format!("{nanos}.chat")))
}

/// An undo ready to be written: replace `range` of the text it was planned on with `turns`,
/// then [`spend`](Self::spend) the archive once the chat is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The summary message.
    pub range: TextRange,
    /// The turns it replaced, exactly as they were.
    pub turns: String,
    pub archive: PathBuf,
}

impl Restore {
    /// The chat after the undo, from `text` (the text it was planned on).
    pub fn apply(&self, text: &str) -> String {
        format!(
            "{}{}{}",
            &text[..self.range.start],
            self.turns,
            &text[self.range.end..]
        )
    }

    /// The edit that undoes the compaction.
    pub fn edit(&self) -> TextEdit {
        TextEdit {
            range: self.range,
            new_text: self.turns.clone(),
        }
    }

    /// Whether `current` (the text after the edit) holds the turns where the summary was.
    pub fn applied(&self, current: &str) -> bool {
        current.get(self.range.start..self.range.start + self.turns.len())
            == Some(self.turns.as_str())
    }

    /// How many messages come back.
    pub fn messages(&self) -> usize {
        flemma_syntax::parse(self.turns.clone()).messages().len()
    }

    /// The chat is written: the archive goes (what it held is in the chat again).
    pub fn spend(&self) {
        let _ = std::fs::remove_file(&self.archive);
    }

    /// The lifecycle event's data.
    pub fn event_data(&self) -> ContextRestored {
        ContextRestored {
            messages: self.messages() as u64,
            archive: self.archive.display().to_string(),
        }
    }
}

/// The undo of a compaction of the chat `path` whose text is `text`: the summary whose message
/// holds `line` (0-based), else the last summary, replaced by the turns its archive holds —
/// when the archive is this chat's and unchanged since it was written.
pub fn plan_undo(
    dirs: &UserDirs,
    path: &Path,
    text: &str,
    line: Option<usize>,
) -> Result<Restore, Refused> {
    let failed = |why: String| Refused::Unchanged(why);
    let doc = flemma_syntax::parse(text.to_owned());
    let summary = |m: &&flemma_syntax::Message| {
        m.role == flemma_syntax::Role::You && doc.slice(m.body).starts_with(MARKER)
    };
    let message = match line {
        Some(line) => {
            let offset = doc.line_index().line_start(line);
            doc.message_index_at(offset)
                .map(|index| &doc.messages()[index])
                .filter(summary)
                .ok_or_else(|| {
                    failed(format!("line {} is not in a compaction summary", line + 1))
                })?
        }
        None => doc
            .messages()
            .iter()
            .rev()
            .find(summary)
            .ok_or_else(|| failed("the chat holds no compaction summary".to_owned()))?,
    };
    let marker = doc.slice(message.body).lines().next().unwrap_or_default();
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
    let own = archive_dir(dirs, path).is_some_and(|dir| archive.parent() == Some(dir.as_path()));
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
    Ok(Restore {
        range: message.range,
        turns: turns.to_owned(),
        archive,
    })
}

/// `--undo` on the file: the last summary in the chat replaced by the turns its archive holds
/// ([`plan_undo`]).
pub fn undo(dirs: &UserDirs, path: &Path) -> Result<Restore, Refused> {
    let failed = |why: String| Refused::Unchanged(why);
    let text = crate::fsutil::read_chat(dirs, path)
        .map_err(|error| Refused::Unreadable(format!("{error:#}")))?;
    let restore = plan_undo(dirs, path, &text, None)?;
    match crate::fsutil::replace_chat_if_unchanged(dirs, path, &text, &restore.apply(&text)) {
        Ok(true) => {}
        Ok(false) => {
            return Err(failed(
                "the chat changed while it was restored; try again".to_owned(),
            ));
        }
        Err(error) => return Err(failed(format!("{error:#}"))),
    }
    restore.spend();
    Ok(restore)
}

/// Automatic compaction before a request (`context.compact_at`), for one engine driver: the
/// decisions, so that the driver only runs them. A request is compacted for once at most.
#[derive(Default)]
pub struct Auto {
    /// The request a compaction was tried for.
    tried: Option<RequestId>,
    /// Why the chat could not be compacted before that request.
    cannot: Option<String>,
    /// A compaction handed to the session, until its text shows it.
    written: Option<Written>,
    /// A compaction written, told once the next request's size is known.
    done: Option<Written>,
}

struct Written {
    compaction: Compaction,
    model: String,
    before: u64,
    automatic: bool,
}

/// A compaction asked for by hand (`flemma/compact`: an editor's command, ACP's `/compact`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Order {
    /// Through the message holding this line (0-based), else all but the last `context.keep`
    /// exchanges.
    pub line: Option<usize>,
    pub focus: Option<String>,
    /// Without `line`: the exchanges kept verbatim (else `context.keep`).
    pub keep: Option<usize>,
}

/// What is asked of a chat's compaction by hand, through its document session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByHand {
    /// `flemma/compact`.
    Compact(Order),
    /// `flemma/compactUndo`: the summary holding this line (0-based), else the last.
    Undo { line: Option<usize> },
    /// `flemma/rewind` with `chat`: the chat cut back to before the answer that made the call
    /// (`crate::rewind_chat`).
    Rewind { tool_id: String },
}

/// The summary request of a compaction, to run on the driver's tasks.
pub type SummaryTask = Pin<Box<dyn Future<Output = AutoSummary>>>;

/// What [`Auto::start`] decided.
pub enum AutoStart {
    /// The request goes as it is.
    No,
    /// The chat is past `context.compact_at` and cannot be compacted (why, for the user); the
    /// request goes as it is (and is refused when it cannot fit).
    Cannot(String),
    /// The summary is being asked for: run this and hand its answer to [`Auto::finish`].
    Summarising(SummaryTask),
}

/// The answer of an automatic compaction's summary request.
pub struct AutoSummary {
    /// The request it was made before; `None` for a compaction asked for by hand.
    pub request: Option<RequestId>,
    /// The text the request was to be made of (the compaction was planned on it).
    pub text: String,
    plan: Plan,
    model: String,
    before: u64,
    summary: Result<String, String>,
}

impl Auto {
    /// Whether `request` (of `text`, analysed as `analysis`, `estimate` input tokens) is to be
    /// compacted first.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        request: RequestId,
        text: &str,
        analysis: &flemma_ide::Analysis,
        estimate: u64,
        chat_model: (&ProviderSetup, &Arc<ProviderClient>),
        chat: &Path,
        process: &ProcessContext,
        cancel: CancellationToken,
    ) -> AutoStart {
        if self.tried == Some(request) {
            return AutoStart::No;
        }
        let Some(resolved) = &analysis.config else {
            return AutoStart::No;
        };
        let context = &resolved.config.context;
        let window = chat_model.0.model.as_ref().map_or(0, |m| m.context_window);
        let Some(share) = context.compact_at else {
            return AutoStart::No;
        };
        #[allow(clippy::cast_precision_loss)]
        if window == 0 || (estimate as f64) < share * window as f64 {
            return AutoStart::No;
        }
        self.tried = Some(request);
        self.cannot = None;
        let keep = usize::try_from(context.keep).unwrap_or(usize::MAX);
        let planned = plan(&analysis.document, keep).and_then(|plan| {
            Summariser::for_chat(
                &analysis.layers,
                &resolved.config,
                chat,
                Some(chat_model),
                process,
            )
            .map(|summariser| (plan, summariser))
            .map_err(|error| format!("{error:#}"))
        });
        let (plan, summariser) = match planned {
            Ok(planned) => planned,
            Err(why) => {
                let notice = format!(
                    "the chat is past `context.compact_at` ({:.0}% of {}'s {}-token context window) and cannot be compacted: {why}",
                    share * 100.0,
                    chat_model.0.options.model,
                    crate::context::thousands(window),
                );
                self.cannot = Some(why);
                return AutoStart::Cannot(notice);
            }
        };
        AutoStart::Summarising(summary_task(
            Some(request),
            text,
            plan,
            summariser,
            None,
            estimate,
            cancel,
        ))
    }

    /// A compaction asked for by hand of `text` (analysed as `analysis`, `estimate` input
    /// tokens): its summary request, or why it cannot be done.
    #[allow(clippy::too_many_arguments)]
    pub fn manual(
        &mut self,
        text: &str,
        analysis: &flemma_ide::Analysis,
        order: Order,
        estimate: u64,
        chat_model: (&ProviderSetup, &Arc<ProviderClient>),
        chat: &Path,
        process: &ProcessContext,
    ) -> Result<SummaryTask, String> {
        let resolved = analysis
            .config
            .as_ref()
            .ok_or("the configuration does not resolve; fix its errors first")?;
        let upto =
            match order.line {
                Some(line) => Upto::Line(line),
                None => Upto::Keep(order.keep.unwrap_or(
                    usize::try_from(resolved.config.context.keep).unwrap_or(usize::MAX),
                )),
            };
        let plan = plan_for(&analysis.document, upto)?;
        let summariser = Summariser::for_chat(
            &analysis.layers,
            &resolved.config,
            chat,
            Some(chat_model),
            process,
        )
        .map_err(|error| format!("{error:#}"))?;
        Ok(summary_task(
            None,
            text,
            plan,
            summariser,
            order.focus,
            estimate,
            CancellationToken::new(),
        ))
    }

    /// Why the chat could not be compacted before `request`, when it was tried and could not.
    pub fn cannot(&self, request: RequestId) -> Option<String> {
        self.cannot.clone().filter(|_| self.tried == Some(request))
    }

    /// The summary is back and the engine's text is `current`: the edit that compacts it and
    /// the request's text compacted; or why not (for the user: the chat is unchanged).
    pub fn finish(
        &mut self,
        answer: AutoSummary,
        dirs: &UserDirs,
        chat: &Path,
        current: &str,
    ) -> Result<(TextEdit, String), String> {
        let plan = answer.plan.clone();
        let prepared = answer.summary.and_then(|summary| {
            // The head and the turns must still be as the summary read them.
            if current.get(..plan.cut) != answer.text.get(..plan.cut) {
                return Err("the chat changed while its summary was written".to_owned());
            }
            prepare(dirs, chat, &answer.text, answer.plan, &summary)
        });
        match prepared {
            Ok(compaction) => {
                let next = compaction.apply(&answer.text);
                let edit = TextEdit {
                    range: TextRange::new(plan.start, plan.cut),
                    new_text: compaction.message.clone(),
                };
                self.written = Some(Written {
                    compaction,
                    model: answer.model,
                    before: answer.before,
                    automatic: answer.request.is_some(),
                });
                Ok((edit, next))
            }
            Err(why) => {
                let which = if answer.request.is_some() {
                    "automatic compaction"
                } else {
                    "compaction"
                };
                let notice = format!("{which}: {why}; the chat is unchanged");
                self.cannot = Some(why);
                Err(notice)
            }
        }
    }

    /// Whether the engine's text (`current`) took the compaction [`finish`](Self::finish)
    /// made; its archive goes when it did not.
    pub fn applied(&mut self, current: &str) -> bool {
        let Some(written) = self.written.take() else {
            return false;
        };
        let message = &written.compaction.message;
        let start = written.compaction.plan.start;
        if current.get(start..start + message.len()) == Some(message.as_str()) {
            self.done = Some(written);
            true
        } else {
            written.compaction.discard();
            self.cannot = Some("the chat changed while its summary was written".to_owned());
            false
        }
    }

    /// The event of the compaction made before this request, once (`after`: its size).
    pub fn compacted_event(&mut self, after: u64) -> Option<EngineEvent> {
        let done = self.done.take()?;
        Some(EngineEvent::ContextCompacted(done.compaction.event_data(
            &done.model,
            done.before,
            after,
            done.automatic,
        )))
    }
}

fn summary_task(
    request: Option<RequestId>,
    text: &str,
    plan: Plan,
    summariser: Summariser,
    focus: Option<String>,
    before: u64,
    cancel: CancellationToken,
) -> SummaryTask {
    let region = text[plan.start..plan.cut].to_owned();
    let text = text.to_owned();
    Box::pin(async move {
        let summary = summariser
            .summarise(&region, focus.as_deref(), cancel)
            .await;
        AutoSummary {
            request,
            text,
            plan,
            model: summariser.model().to_owned(),
            before,
            summary,
        }
    })
}

/// The line that tells a compaction (`send`'s output, an editor's notice), from its event's
/// data.
pub fn notice(data: &ContextCompacted) -> String {
    format!(
        "compacted {} messages into a summary by {} (≈{} → ≈{} input tokens); the turns are kept in {}; `flemmad compact --undo FILE` puts them back",
        data.messages,
        data.model,
        crate::context::thousands(data.tokens_before),
        crate::context::thousands(data.tokens_after),
        data.archive,
    )
}

/// The line that tells an undone compaction, from its event's data.
pub fn restored_notice(data: &ContextRestored) -> String {
    format!(
        "restored the {} compacted messages from {}, exactly as they were",
        data.messages, data.archive
    )
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
            "@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n"
        );

        // A summary and the kept exchange: nothing older to compact.
        let again = "@You:\nSummary.\n\n@You:\nthree\n\n@Assistant:\nx\n";
        assert!(
            super::plan(&doc(again), 1)
                .unwrap_err()
                .contains("nothing older")
        );

        // Up to the message holding a line: the turns after it are kept.
        let plan = super::plan_for(&doc(text), Upto::Line(10)).unwrap();
        assert_eq!(
            &text[plan.start..plan.cut],
            "@You:\none\n\n@Assistant:\nfirst\n\n@You:\ntwo\n\n"
        );
        assert!(
            super::plan_for(&doc(text), Upto::Line(3))
                .unwrap_err()
                .contains("no answer")
        );
        assert!(
            super::plan_for(&doc(text), Upto::Line(16))
                .unwrap_err()
                .contains("nothing follows")
        );

        // One long autopilot run (a single exchange): its last turns are kept.
        let run = "@You:\nfix it\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n@You:\n**Tool Result:** `t1`\n\n```\na\n```\n\n@Assistant:\n**Tool Use:** `bash` (`t2`)\n```json\n{\"command\":\"ls\"}\n```\n\n@You:\n**Tool Result:** `t2`\n\n```\nb\n```\n\n@Assistant:\ndone\n";
        let plan = super::plan(&doc(run), 2).unwrap();
        assert!(run[plan.cut..].starts_with("@Assistant:\n**Tool Use:** `bash` (`t2`)"));
        assert_eq!(plan.messages, 3);
        // A waiting call in the oldest turn keeps everything.
        let pending = run.replace(
            "**Tool Result:** `t1`\n\n```\na\n```",
            "**Tool Result:** `t1` (pending)",
        );
        assert!(
            super::plan(&doc(&pending), 2)
                .unwrap_err()
                .contains("still waiting")
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
