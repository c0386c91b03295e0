//! A session's chat: where new ones go, and what a new one holds.

use std::path::{Path, PathBuf};

/// The sessions folder of `cwd`.
pub fn sessions_dir(cwd: &Path) -> PathBuf {
    cwd.join(".flemma").join("sessions")
}

/// The text of a new session's chat: a frontmatter that records the session's working
/// directory relative to the chat (`tools.bash.cwd`, the tools' working directory) and an
/// empty `@You:`.
pub fn new_chat_text(chat: &Path, cwd: &Path) -> String {
    let dir = chat.parent().unwrap_or(Path::new("/"));
    let relative = match dir.strip_prefix(cwd) {
        Ok(rest) => {
            let depth = rest.components().count();
            if depth == 0 {
                ".".to_owned()
            } else {
                vec![".."; depth].join("/")
            }
        }
        Err(_) => cwd.display().to_string(),
    };
    let value = serde_json::json!({"flemma": {"tools": {"bash": {"cwd": relative}}}});
    format!("```json\n{value}\n```\n@You:\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_chat_records_its_cwd_relative_to_itself() {
        let cwd = Path::new("/home/me/project");
        let chat = sessions_dir(cwd).join("a.chat");
        assert_eq!(
            new_chat_text(&chat, cwd),
            "```json\n{\"flemma\":{\"tools\":{\"bash\":{\"cwd\":\"../..\"}}}}\n```\n@You:\n"
        );
        let doc = flemma_syntax::parse(new_chat_text(&chat, cwd));
        assert!(doc.diagnostics().is_empty());
    }
}
