//! The tool `ask_agent` as the model sees it — its definition with the agents it may ask, and
//! the texts of its results and errors — and what it sends the asked agent: the task, after the
//! conversation it comes from when asked (`with_context`). Pure: no IO. The asking itself is
//! [`crate::client`]'s; the binary ties both to a chat.

use flemma_syntax::{Document, Role, SegmentKind};
use flemma_tools::spec::{Capability, ToolSpec, strict_object_schema};
use serde_json::json;

/// The tool's name.
pub const NAME: &str = flemma_config::ASK_AGENT_TOOL;

/// How deep agents may ask agents: the chat the user talks to asks (level 1), its asked agent
/// may ask (level 2), and no further.
pub const MAX_DEPTH: u32 = 2;

/// The variable that tells an asked agent's process how deep it is (`1` for an agent the user's
/// chat asked); flemmad's own `ask_agent` refuses at [`MAX_DEPTH`].
pub const DEPTH_VARIABLE: &str = "FLEMMA_ASK_DEPTH";

/// At most this many characters of the conversation go before the task (`with_context`), the
/// newest kept.
pub const CONTEXT_LIMIT: usize = 50 * 1024;

/// One agent as the tool's description lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    /// The entry's `description`, else the title the agent gave at `initialize`.
    pub purpose: Option<String>,
}

/// The tool's definition: a fixed paragraph, then `Agents:` and one `  <name> — <purpose>`
/// line per agent, sorted by name.
pub fn spec(agents: &[Listed]) -> ToolSpec {
    let mut sorted: Vec<&Listed> = agents.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut description = String::from(
        "Hand a task to another agent and get its answer as this tool's result. The agent \
works on its own, with its own model and tools, in the same working directory, and knows \
nothing of this conversation unless `with_context` is true: write the task complete and \
self-contained (what to do, where, what to answer with). Use it when an agent below is better \
suited to the task, or to work on several tasks at once (`flemma.background: true` runs the call \
as a background job).\n\nAgents:",
    );
    for agent in &sorted {
        let purpose = agent
            .purpose
            .as_deref()
            .map(|p| p.lines().next().unwrap_or_default().trim())
            .filter(|p| !p.is_empty())
            .unwrap_or("(no description)");
        description.push_str(&format!("\n  {} — {purpose}", agent.name));
    }
    let names: Vec<&str> = sorted.iter().map(|a| a.name.as_str()).collect();
    ToolSpec {
        name: NAME.into(),
        description,
        input_schema: strict_object_schema(vec![
            (
                "agent",
                json!({"type": "string", "enum": names, "description": "The agent to ask, by its name in the list above."}),
            ),
            (
                "prompt",
                json!({"type": "string", "description": "The task, complete and self-contained."}),
            ),
            (
                "with_context",
                json!({"type": ["boolean", "null"], "description": "Send this conversation before the task (its questions and answers, one line per tool call, never tool outputs). Default false."}),
            ),
        ]),
        strict: true,
        is_async: true,
        capabilities: vec![Capability::ReadsConversation],
    }
}

/// `[ask_agent: unknown agent "x" — agents: a, b]`
pub fn unknown_agent(name: &str, agents: &[String]) -> String {
    let mut sorted: Vec<&str> = agents.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    format!(
        "[ask_agent: unknown agent {name:?} — agents: {}]",
        sorted.join(", ")
    )
}

/// `[ask_agent: the prompt is empty — say what <agent> must do]`
pub fn empty_prompt(agent: &str) -> String {
    format!("[ask_agent: the prompt is empty — say what {agent} must do]")
}

/// `[ask_agent: <agent> failed: <reason>]`: it did not start, or refused the task.
pub fn failed(agent: &str, reason: &str) -> String {
    format!("[ask_agent: {agent} failed: {reason}]")
}

/// `[ask_agent: <agent> gave no answer]`
pub fn no_answer(agent: &str) -> String {
    format!("[ask_agent: {agent} gave no answer]")
}

/// What a cancelled or broken run answered, then
/// `[ask_agent: <agent> stopped before finishing: <reason>]`.
pub fn stopped(agent: &str, answered: &str, reason: &str) -> String {
    let line = format!("[ask_agent: {agent} stopped before finishing: {reason}]");
    let answered = answered.trim_end();
    if answered.is_empty() {
        line
    } else {
        format!("{answered}\n\n{line}")
    }
}

/// The depth message: this chat is already `depth` levels below the one the user talks to.
pub fn too_deep(depth: u32) -> String {
    format!(
        "[ask_agent: agents may ask agents only {MAX_DEPTH} levels deep, and this conversation is already {depth} level{} below the user's — do the task yourself]",
        if depth == 1 { "" } else { "s" }
    )
}

/// How deep the chat at `path` is: how many asked agents' conversation folders
/// (`.flemma/<chat>/agents/`) its path goes through. The chat the user talks to is at 0.
pub fn depth_of(path: &std::path::Path) -> u32 {
    let parts: Vec<&std::ffi::OsStr> = path.iter().collect();
    let found = parts.windows(3).filter(|w| {
        w[0] == ".flemma"
            && std::path::Path::new(w[1])
                .extension()
                .is_some_and(|ext| ext == "chat")
            && w[2] == "agents"
    });
    u32::try_from(found.count()).unwrap_or(u32::MAX)
}

/// Whether `path` is where an asked agent's conversation is kept: an absolute `.chat` path
/// directly in a chat's `.flemma/<chat>/agents/` folder (what a `session/new` asked to create
/// its chat there must name).
pub fn is_agent_chat(path: &std::path::Path) -> bool {
    let named = |p: Option<&std::path::Path>, name: &str| {
        p.and_then(std::path::Path::file_name)
            .is_some_and(|n| n == name)
    };
    let agents = path.parent();
    let store = agents.and_then(std::path::Path::parent);
    path.is_absolute()
        && path.extension().is_some_and(|ext| ext == "chat")
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        && named(agents, "agents")
        && store.is_some_and(|s| s.extension().is_some_and(|ext| ext == "chat"))
        && named(store.and_then(std::path::Path::parent), ".flemma")
}

/// The task as the asked agent gets it: the prompt, after the conversation it comes from when
/// there is one to send.
pub fn task(prompt: &str, context: Option<&str>) -> String {
    match context.map(str::trim).filter(|c| !c.is_empty()) {
        Some(context) => format!(
            "The conversation this task comes from (for context, newest last):\n\n{context}\n\n---\n\nThe task:\n\n{}",
            prompt.trim()
        ),
        None => prompt.trim().to_owned(),
    }
}

/// The conversation the turn started from (its questions and answers, one line per tool call,
/// never tool outputs or thinking), at most `limit` characters, the newest kept. The turn
/// starts at the last `@You:` message that holds more than tool results; what follows it (this
/// turn's replies and tool rounds) is left out.
pub fn context(chat: &str, limit: usize) -> String {
    let doc = Document::parse(chat.to_owned());
    let messages = doc.messages();
    let asked = messages.iter().rposition(|message| {
        message.role == Role::You
            && message.segments.iter().any(|s| {
                !matches!(
                    s.kind,
                    SegmentKind::ToolResult(_) | SegmentKind::JobResult(_)
                ) && !doc.slice(s.range).trim().is_empty()
            })
    });
    let Some(asked) = asked else {
        return String::new();
    };
    let mut blocks: Vec<String> = Vec::new();
    for message in &messages[..=asked] {
        let speaker = match message.role {
            Role::You => "User",
            Role::Assistant => "Assistant",
            _ => continue,
        };
        let mut text = String::new();
        for segment in &message.segments {
            match &segment.kind {
                SegmentKind::ToolUse(tool) => {
                    text.truncate(text.trim_end().len());
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("[tool call: {}]\n", tool.name));
                }
                SegmentKind::ToolResult(_)
                | SegmentKind::JobResult(_)
                | SegmentKind::Thinking(_)
                | SegmentKind::Aborted(_) => {}
                _ => text.push_str(&flemma_syntax::write::unescape_model_text(
                    doc.slice(segment.range),
                )),
            }
        }
        let text = text.trim();
        if !text.is_empty() {
            blocks.push(format!("{speaker}:\n{text}"));
        }
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut size = 0;
    for block in blocks.iter().rev() {
        let count = block.chars().count() + 2;
        if size + count > limit {
            if kept.is_empty() {
                // The newest message alone is too long: its end is kept.
                let skip = block.chars().count().saturating_sub(limit);
                let tail: String = block.chars().skip(skip).collect();
                return format!("[… the start of the conversation is left out]\n{tail}");
            }
            let mut out = String::from("[… earlier messages are left out]\n\n");
            out.push_str(&kept.iter().rev().copied().collect::<Vec<_>>().join("\n\n"));
            return out;
        }
        size += count;
        kept.push(block);
    }
    kept.iter().rev().copied().collect::<Vec<_>>().join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_lists_the_agents_sorted_by_name() {
        let spec = spec(&[
            Listed {
                name: "writer".into(),
                purpose: Some("Writes prose.\nMore.".into()),
            },
            Listed {
                name: "reviewer".into(),
                purpose: None,
            },
        ]);
        assert!(
            spec.description
                .ends_with("Agents:\n  reviewer — (no description)\n  writer — Writes prose."),
            "{}",
            spec.description
        );
        assert_eq!(
            spec.input_schema["properties"]["agent"]["enum"],
            json!(["reviewer", "writer"])
        );
        assert_eq!(
            spec.input_schema["required"],
            json!(["label", "agent", "prompt", "with_context"])
        );
        assert!(spec.is_async);
    }

    #[test]
    fn the_error_texts_are_the_seeds() {
        assert_eq!(
            unknown_agent("x", &["b".into(), "a".into()]),
            "[ask_agent: unknown agent \"x\" — agents: a, b]"
        );
        assert_eq!(
            empty_prompt("a"),
            "[ask_agent: the prompt is empty — say what a must do]"
        );
        assert_eq!(failed("a", "boom"), "[ask_agent: a failed: boom]");
        assert_eq!(no_answer("a"), "[ask_agent: a gave no answer]");
        assert_eq!(
            stopped("a", "Half of it.\n", "cancelled"),
            "Half of it.\n\n[ask_agent: a stopped before finishing: cancelled]"
        );
        assert_eq!(
            stopped("a", "", "cancelled"),
            "[ask_agent: a stopped before finishing: cancelled]"
        );
    }

    #[test]
    fn depth_is_counted_from_the_path() {
        use std::path::Path;
        assert_eq!(depth_of(Path::new("/p/talk.chat")), 0);
        assert_eq!(
            depth_of(Path::new("/p/.flemma/talk.chat/agents/reviewer-1.chat")),
            1
        );
        assert_eq!(
            depth_of(Path::new(
                "/p/.flemma/talk.chat/agents/.flemma/reviewer-1.chat/agents/helper-1.chat"
            )),
            2
        );
        assert_eq!(depth_of(Path::new("/p/agents/x.chat")), 0);
        assert!(is_agent_chat(Path::new(
            "/p/.flemma/t.chat/agents/r-1.chat"
        )));
        for not in [
            "p/.flemma/t.chat/agents/r-1.chat",
            "/p/.flemma/t.chat/agents/r-1.txt",
            "/p/.flemma/t.chat/other/r-1.chat",
            "/p/.flemma/t/agents/r-1.chat",
            "/p/flemma/t.chat/agents/r-1.chat",
            "/p/.flemma/t.chat/agents/../../../x.chat",
        ] {
            assert!(!is_agent_chat(Path::new(not)), "{not}");
        }
    }

    #[test]
    fn the_context_is_the_conversation_without_tool_outputs() {
        let chat = "```json\n{\"flemma\":{}}\n```\n@System:\nBe brief.\n\n@You:\nWhat is in src?\n\n@Assistant:\nLet me look.\n\n**Tool Use:** `ls` (`t1`)\n```json\n{\"path\":\"src\"}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nsecret-output.rs\n```\n\n@Assistant:\n<thinking>\nhidden\n</thinking>\nOne file.\n\n@You:\nAsk the reviewer about it.\n\n@Assistant:\n**Tool Use:** `ask_agent` (`t2`)\n```json\n{}\n```\n";
        let context = context(chat, CONTEXT_LIMIT);
        assert_eq!(
            context,
            "User:\nWhat is in src?\n\nAssistant:\nLet me look.\n[tool call: ls]\n\nAssistant:\nOne file.\n\nUser:\nAsk the reviewer about it."
        );
        // Capped, newest kept.
        let short = super::context(chat, 60);
        assert!(
            short.starts_with("[… earlier messages are left out]"),
            "{short}"
        );
        assert!(short.ends_with("Ask the reviewer about it."), "{short}");
        assert_eq!(
            task("Review x.", Some(&context)).lines().last(),
            Some("Review x.")
        );
        assert_eq!(task(" Review x. ", None), "Review x.");
    }
}
