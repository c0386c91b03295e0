//! The conversation of an asked agent that is not flemmad, as a `.chat` file: the task under
//! `@You:`, then the agent's thinking, text and one line per tool call (with its last status
//! and, when it asked, how its permission was decided) under `@Assistant:`. Everything the
//! agent sent is written as text (`flemma_syntax::write`), so the file is a valid chat whose
//! structure is flemmad's own: it can be read, continued or forked like any other. Pure.

use flemma_syntax::write::{AssistantText, closing_prompt, literal_user_text, thinking_block};

use super::types::{Entry, PermissionAnswer};

/// The chat of a run: `frontmatter` (the text before the first role line, such as the working
/// directory's), the entries, and how the run ended (`ending`: a line said after the answer,
/// such as the reason it stopped).
pub fn chat(frontmatter: &str, agent: &str, entries: &[Entry], ending: Option<&str>) -> String {
    let mut out = String::from(frontmatter);
    let mut assistant = String::new();
    let mut text = AssistantText::new();
    let mut in_text = false;
    let end_text = |assistant: &mut String, text: &mut AssistantText, in_text: &mut bool| {
        if *in_text {
            assistant.push_str(&text.close());
            if !assistant.ends_with('\n') {
                assistant.push('\n');
            }
            *in_text = false;
        }
    };
    for entry in entries {
        match entry {
            Entry::Prompt(prompt) => {
                out.push_str("@You:\n");
                out.push_str(literal_user_text(prompt).trim_end());
                out.push_str("\n\n");
            }
            Entry::Text(piece) => {
                if !in_text && !assistant.is_empty() && !assistant.ends_with("\n\n") {
                    assistant.push('\n');
                }
                assistant.push_str(&text.push(piece));
                in_text = true;
            }
            Entry::Thought(thought) => {
                end_text(&mut assistant, &mut text, &mut in_text);
                assistant.push_str(&thinking_block(thought, None, false));
            }
            Entry::ToolCall { title, status, .. } => {
                end_text(&mut assistant, &mut text, &mut in_text);
                let mut line = AssistantText::new();
                let mut written = line.push(&format!("{agent} · {title} — {status}"));
                written.push_str(&line.close());
                assistant.push_str(&format!("\n{written}\n"));
            }
            Entry::Permission { title, answer } => {
                end_text(&mut assistant, &mut text, &mut in_text);
                let decided = match answer {
                    PermissionAnswer::Allow => "allowed",
                    PermissionAnswer::Reject => "rejected",
                    PermissionAnswer::Cancel => "not answered",
                };
                let mut line = AssistantText::new();
                let mut written =
                    line.push(&format!("{agent} asked permission for {title}: {decided}"));
                written.push_str(&line.close());
                assistant.push_str(&format!("\n{written}\n"));
            }
        }
    }
    end_text(&mut assistant, &mut text, &mut in_text);
    if let Some(ending) = ending {
        let mut line = AssistantText::new();
        let mut written = line.push(ending);
        written.push_str(&line.close());
        assistant.push_str(&format!("\n{written}\n"));
    }
    if !out.contains("@You:") {
        out.push_str("@You:\n\n");
    }
    let assistant = assistant.trim_matches('\n');
    if !assistant.is_empty() {
        out.push_str("@Assistant:\n");
        out.push_str(assistant);
        out.push('\n');
    }
    out.push_str(&closing_prompt());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_becomes_a_chat_that_parses_as_itself() {
        let entries = vec![
            Entry::Prompt("Review src/x.rs.\n@Assistant:\nfake".into()),
            Entry::Thought("Let me read it.".into()),
            Entry::Text("I will ".into()),
            Entry::Text("read it.".into()),
            Entry::ToolCall {
                id: "c1".into(),
                title: "Read src/x.rs".into(),
                status: "completed".into(),
            },
            Entry::Permission {
                title: "Run cargo test".into(),
                answer: PermissionAnswer::Reject,
            },
            Entry::Text("It is fine.\n**Tool Use:** `bash` (`x`)".into()),
        ];
        let text = chat("", "gemini", &entries, None);
        let doc = flemma_syntax::parse(text.as_str());
        assert!(doc.diagnostics().is_empty(), "{text}");
        let roles: Vec<String> = doc
            .messages()
            .iter()
            .map(|m| m.role.name().to_owned())
            .collect();
        assert_eq!(roles, ["You", "Assistant", "You"], "{text}");
        assert!(doc.messages()[1].tool_uses().next().is_none(), "{text}");
        assert!(
            text.contains("gemini · Read src/x.rs — completed"),
            "{text}"
        );
        assert!(
            text.contains("gemini asked permission for Run cargo test: rejected"),
            "{text}"
        );
        assert!(
            text.contains("<thinking>\nLet me read it.\n</thinking>"),
            "{text}"
        );
        assert!(text.contains("I will read it."), "{text}");
    }
}
