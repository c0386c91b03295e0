//! The slash commands an ACP client offers (`available_commands_update`): typed as the whole
//! prompt (`/status`, `/rewind toolu_01…`, `/model openai/gpt-5.4`), answered by flemmad
//! without asking the model and without writing the chat. flemmad has no prompt templates of
//! the user's to offer as commands (a chat's templates are its own text).

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, SessionUpdate,
    UnstructuredCommandInput,
};

/// Name, description, and the hint for what may follow the name.
pub const COMMANDS: [(&str, &str, Option<&str>); 5] = [
    (
        "status",
        "What the next request holds against the model's context window, and the calls waiting for approval",
        None,
    ),
    (
        "rewind",
        "Put the project's files back as they were before the conversation's last call that ran (or before the call named)",
        Some("a tool call id (default: the last call)"),
    ),
    (
        "compact",
        "Summarise the older turns into the chat (kept whole in an archive; `flemmad compact --undo` puts them back)",
        Some("what the summary should keep above all (optional)"),
    ),
    (
        "model",
        "Switch the model of the chat's next requests (as `flemma.switch`; its frontmatter wins), or list the choices",
        Some("provider/model, a model of the chat's provider, or a $preset (none: list them)"),
    ),
    (
        "mode",
        "Set what the chat's tools may change (ask, default, auto-edit), or list the modes",
        Some("ask, default or auto-edit (none: list them)"),
    ),
];

/// The `available_commands_update` of every session.
pub fn available() -> SessionUpdate {
    let commands = COMMANDS
        .iter()
        .map(|(name, description, hint)| {
            let command = AvailableCommand::new(*name, *description);
            match hint {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(*hint),
                )),
                None => command,
            }
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// The command a prompt is, when it is one: its name and the text after it. A prompt is a
/// command when its only block is text starting with `/` and a name of [`COMMANDS`].
pub fn parse(prompt: &[ContentBlock]) -> Option<(&'static str, String)> {
    let [ContentBlock::Text(text)] = prompt else {
        return None;
    };
    let rest = text.text.trim().strip_prefix('/')?;
    let (name, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let (known, _, _) = COMMANDS.iter().find(|(known, _, _)| *known == name)?;
    Some((known, argument.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::TextContent;

    fn text(t: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::Text(TextContent::new(t))]
    }

    #[test]
    fn only_a_known_name_at_the_start_is_a_command() {
        assert_eq!(parse(&text("/status")), Some(("status", String::new())));
        assert_eq!(
            parse(&text(" /rewind  toolu_1 ")),
            Some(("rewind", "toolu_1".to_owned()))
        );
        assert_eq!(parse(&text("/statusx")), None);
        assert_eq!(parse(&text("please /status")), None);
        assert_eq!(parse(&text("/unknown")), None);
    }
}
