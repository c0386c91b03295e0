//! A generated chat shaped like a long agentic session: a template in every question, a tool
//! call and its result in every turn (shared by the tests and the benchmarks).

/// The frontmatter every generated chat starts with.
pub const FRONTMATTER: &str =
    "```rhai\nlet project = \"flemmad\";\nlet steps = [\"build\", \"test\", \"lint\"];\n```\n";

/// One turn: a templated question, an answer with a tool use, the tool result.
pub fn turn(index: usize) -> String {
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(8);
    format!(
        "@You:\nStep {index} of {{{{ project }}}}: {{{{ steps[{step}] }}}} next, please. {filler}\n\n\
         @Assistant:\nRunning step {index}. {filler}\n\n\
         **Tool Use:** `bash` (`toolu_{index:08}`)\n```json\n{{\"command\":\"cargo test --step {index}\"}}\n```\n\n\
         @You:\n**Tool Result:** `toolu_{index:08}`\n```\nok {index}: {filler}\n```\n\n",
        step = index % 3
    )
}

/// A chat of about `bytes` bytes, ending with an open question.
pub fn agentic_chat(bytes: usize) -> String {
    let mut text = String::from(FRONTMATTER);
    text.push_str("@System:\nYou work on {{ project }}.\n\n");
    let mut index = 0;
    while text.len() < bytes {
        text.push_str(&turn(index));
        index += 1;
    }
    text.push_str(LAST_QUESTION);
    text
}

/// The last message of [`agentic_chat`].
pub const LAST_QUESTION: &str = "@You:\nAll steps of {{ project }} done?\n";
