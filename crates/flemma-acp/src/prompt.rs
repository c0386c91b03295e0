//! A prompt's content blocks as chat text, and the chat with that text under its trailing
//! `@You:`. Pure: no IO.

use std::path::{Component, Path, PathBuf};

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use flemma_syntax::Role;

/// Why a prompt cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error(
        "the prompt has no content: send at least one text block, resource link or embedded resource"
    )]
    Empty,
    #[error(
        "the prompt holds {0} content, which flemmad cannot put in a chat (the initialize answer says which prompt content it takes: text, resource links and embedded text resources)"
    )]
    Unsupported(&'static str),
}

/// The prompt's blocks as the text of a `@You:` message of the chat at `chat` (whose folder is
/// the base of file references): text as text, a `resource_link` to a file as a file reference
/// to it (`@../../src/x.rs`), an embedded text resource as a fenced block naming its URI.
pub fn to_chat_text(blocks: &[ContentBlock], chat: &Path) -> Result<String, PromptError> {
    let base = chat.parent().unwrap_or(Path::new("/"));
    let mut pieces: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => {
                if !text.text.trim().is_empty() {
                    pieces.push(text.text.clone());
                }
            }
            ContentBlock::ResourceLink(link) => match file_path(&link.uri) {
                Some(path) => pieces.push(format!("@{}", file_reference(&path, base))),
                None => pieces.push(format!("<{}>", link.uri)),
            },
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => {
                    pieces.push(fenced(&contents.uri, &contents.text));
                }
                EmbeddedResourceResource::BlobResourceContents(_) => {
                    return Err(PromptError::Unsupported("an embedded binary resource"));
                }
                _ => {
                    return Err(PromptError::Unsupported(
                        "an embedded resource of a new kind",
                    ));
                }
            },
            ContentBlock::Image(_) => return Err(PromptError::Unsupported("image")),
            ContentBlock::Audio(_) => return Err(PromptError::Unsupported("audio")),
            _ => return Err(PromptError::Unsupported("a content block of a new kind")),
        }
    }
    if pieces.is_empty() {
        return Err(PromptError::Empty);
    }
    let mut text = String::new();
    for piece in pieces {
        if !text.is_empty() {
            text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
        }
        text.push_str(&piece);
    }
    Ok(text)
}

/// The local path of a `file://` URI (percent-decoded), `None` for other schemes.
fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path` is not a local file; `file:///path` is.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    Some(PathBuf::from(percent_decode(path)))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|b| (*b as char).to_digit(16)),
                bytes.get(i + 2).and_then(|b| (*b as char).to_digit(16)),
            )
        {
            out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` as a file reference from `base`: relative (`../../src/x.rs`, `./x.rs`), with the
/// characters the reference grammar stops at percent-encoded.
fn file_reference(path: &Path, base: &Path) -> String {
    let relative = relative_path(path, base);
    let text = relative.to_string_lossy();
    let text = if text.starts_with("..") {
        text.into_owned()
    } else {
        format!("./{text}")
    };
    let mut encoded = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ' ' => encoded.push_str("%20"),
            ';' => encoded.push_str("%3B"),
            '%' => encoded.push_str("%25"),
            '\t' => encoded.push_str("%09"),
            _ => encoded.push(c),
        }
    }
    encoded
}

/// `path` relative to `base` (both absolute, lexically).
fn relative_path(path: &Path, base: &Path) -> PathBuf {
    let path: Vec<Component> = path.components().collect();
    let base: Vec<Component> = base.components().collect();
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..base.len() {
        out.push("..");
    }
    for component in &path[common..] {
        out.push(component.as_os_str());
    }
    out
}

/// A fence around `text` long enough that no line of it closes the fence early, naming `uri`.
fn fenced(uri: &str, text: &str) -> String {
    let longest = text
        .lines()
        .map(|line| line.trim_start().chars().take_while(|c| *c == '`').count())
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = if text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    };
    format!("{uri}:\n{fence}\n{body}{fence}")
}

/// The chat with `prompt` as the text of its trailing `@You:` (a trailing `@You:` with only
/// blank lines takes it; one with text gets it after a blank line; otherwise a new `@You:` is
/// added). No empty `@You:` is left behind. A fence the last message leaves open (a reply cut
/// off inside a code block) is closed first, so the prompt is a message of its own.
pub fn with_prompt(chat: &str, prompt: &str) -> String {
    let doc = flemma_syntax::parse(chat);
    let nl = doc.line_ending().as_str();
    let prompt = doc.in_line_ending(prompt.trim_end_matches(['\n', '\r']).to_owned());
    if let Some(last) = doc.messages().last()
        && last.role == Role::You
    {
        if doc.slice(last.content).trim().is_empty() {
            // `@You:` and blank lines: the prompt goes right under the role line.
            let head = chat[..last.role_line.end].trim_end_matches(['\n', '\r']);
            return format!("{head}{nl}{prompt}{nl}");
        }
        let head = chat[..last.content.end].trim_end_matches(['\n', '\r']);
        return format!("{head}{nl}{nl}{prompt}{nl}");
    }
    let head = chat.trim_end_matches(['\n', '\r']);
    let appended = |closer: &str| {
        let mut out = head.to_owned();
        if !out.is_empty() {
            out.push_str(nl);
            if !closer.is_empty() {
                out.push_str(closer);
                out.push_str(nl);
            }
            out.push_str(nl);
        }
        format!("{out}@You:{nl}{prompt}{nl}")
    };
    let plain = appended("");
    if ends_with_prompt(&plain, &prompt) {
        return plain;
    }
    // Close the open fence with the shortest closer that ends it.
    (3..=16)
        .map(|ticks| appended(&"`".repeat(ticks)))
        .find(|candidate| ends_with_prompt(candidate, &prompt))
        .unwrap_or(plain)
}

/// `chat`'s frontmatter and first `count` messages (a fork at a message). Refused when the
/// count is past the end, or when the last message kept is an answer with tool calls (their
/// results would be cut away and the calls run again).
pub fn first_messages(chat: &str, count: usize) -> Result<String, String> {
    let doc = flemma_syntax::parse(chat);
    let messages = doc.messages();
    if count > messages.len() {
        return Err(format!(
            "_meta.flemma.messages is {count}, but the chat has {} messages",
            messages.len()
        ));
    }
    if let Some(last) = count.checked_sub(1).and_then(|i| messages.get(i))
        && last.tool_uses().next().is_some()
    {
        return Err(format!(
            "message {count} asks for tool calls whose results would be cut away: fork after the message that holds their results"
        ));
    }
    let end = messages
        .get(count)
        .map_or(chat.len(), |next| next.range.start);
    Ok(chat[..end].to_owned())
}

/// Whether `text`'s last message is a `@You:` holding `prompt`.
fn ends_with_prompt(text: &str, prompt: &str) -> bool {
    let doc = flemma_syntax::parse(text);
    doc.messages().last().is_some_and(|last| {
        last.role == Role::You && doc.slice(last.content).trim() == prompt.trim()
    })
}

/// The chat with the `pending` results of `ids` marked `aborted` (a permission request the
/// user cancelled: the call did not run, and the next prompt sends the model the abort
/// message instead of asking again); `None` when none of them is pending any more.
pub fn with_calls_aborted(chat: &str, ids: &[String]) -> Option<String> {
    let doc = flemma_syntax::parse(chat.to_owned());
    let edits: Vec<_> = doc
        .placeholders(Some(flemma_syntax::Status::Pending))
        .into_iter()
        .map(|(_, _, result)| result.tool_use_id.clone())
        .filter(|id| ids.contains(id))
        .filter_map(|id| doc.set_tool_result_status(&id, Some(flemma_syntax::Status::Aborted)))
        .collect();
    if edits.is_empty() {
        return None;
    }
    flemma_syntax::apply_edits(chat, &edits).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EmbeddedResource, ResourceLink, TextContent, TextResourceContents,
    };

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextContent::new(t))
    }

    #[test]
    fn blocks_become_chat_text() {
        let chat = Path::new("/home/me/project/.flemma/sessions/s.chat");
        let blocks = vec![
            text("Explain this file:"),
            ContentBlock::ResourceLink(ResourceLink::new(
                "x.rs",
                "file:///home/me/project/src/my%20x.rs",
            )),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}\n```\n",
                    "file:///home/me/project/src/main.rs",
                )),
            )),
        ];
        assert_eq!(
            to_chat_text(&blocks, chat).unwrap(),
            "Explain this file:\n\n@../../src/my%20x.rs\n\nfile:///home/me/project/src/main.rs:\n````\nfn main() {}\n```\n````"
        );
    }

    #[test]
    fn an_empty_prompt_and_images_are_refused() {
        let chat = Path::new("/p/.flemma/sessions/s.chat");
        assert_eq!(to_chat_text(&[], chat), Err(PromptError::Empty));
        assert_eq!(to_chat_text(&[text("  \n")], chat), Err(PromptError::Empty));
    }

    #[test]
    fn a_link_in_the_chat_folder_starts_with_dot_slash() {
        let chat = Path::new("/p/s.chat");
        let link = ContentBlock::ResourceLink(ResourceLink::new("a", "file:///p/a;b.md"));
        assert_eq!(to_chat_text(&[link], chat).unwrap(), "@./a%3Bb.md");
        let web = ContentBlock::ResourceLink(ResourceLink::new("w", "https://example.com/x"));
        assert_eq!(
            to_chat_text(&[web], chat).unwrap(),
            "<https://example.com/x>"
        );
    }

    #[test]
    fn the_prompt_goes_under_the_trailing_you() {
        assert_eq!(with_prompt("@You:\n", "hi"), "@You:\nhi\n");
        assert_eq!(with_prompt("@You:\n\n\n", "hi"), "@You:\nhi\n");
        assert_eq!(with_prompt("@You:", "hi"), "@You:\nhi\n");
        assert_eq!(
            with_prompt("@You:\nfirst\n\n", "second"),
            "@You:\nfirst\n\nsecond\n"
        );
        assert_eq!(
            with_prompt("@You:\nq\n\n@Assistant:\na\n", "next"),
            "@You:\nq\n\n@Assistant:\na\n\n@You:\nnext\n"
        );
        assert_eq!(with_prompt("", "hi"), "@You:\nhi\n");
        assert_eq!(
            with_prompt("```json\n{}\n```\n", "hi"),
            "```json\n{}\n```\n\n@You:\nhi\n"
        );
        assert_eq!(with_prompt("@You:\r\n", "a\nb"), "@You:\r\na\r\nb\r\n");
    }

    #[test]
    fn the_result_parses_without_errors() {
        for chat in [
            "",
            "@You:\n",
            "@You:\nq\n\n@Assistant:\n```rust\nopen\n",
            "@You:\nq\n\n@Assistant:\n````\n```\nopen",
        ] {
            let out = with_prompt(chat, "hello");
            let doc = flemma_syntax::parse(out.clone());
            let last = doc.messages().last().unwrap();
            assert_eq!(last.role, Role::You, "{out}");
            assert_eq!(doc.slice(last.content).trim(), "hello", "{out}");
            let errors: Vec<_> = doc
                .diagnostics()
                .into_iter()
                .filter(|d| d.severity == flemma_syntax::Severity::Error)
                .collect();
            assert!(errors.is_empty(), "{errors:?}\n{out}");
        }
    }

    #[test]
    fn a_cancelled_permission_aborts_only_the_pending_calls_it_names() {
        let chat = "@Assistant:\nRunning.\n\n**Tool Use:** `a`\n```json\n{\"name\":\"bash\",\"input\":{\"label\":\"x\",\"command\":\"true\"}}\n```\n\n**Tool Use:** `b`\n```json\n{\"name\":\"bash\",\"input\":{\"label\":\"y\",\"command\":\"true\"}}\n```\n@You:\n**Tool Result:** `a` (pending)\n```\n```\n\n**Tool Result:** `b` (pending)\n```\n```\n";
        let aborted = with_calls_aborted(chat, &["a".to_owned()]).unwrap();
        assert!(
            aborted.contains("**Tool Result:** `a` (aborted)"),
            "{aborted}"
        );
        assert!(
            aborted.contains("**Tool Result:** `b` (pending)"),
            "{aborted}"
        );
        let before = flemma_syntax::parse(chat.to_owned()).diagnostics().len();
        let after = flemma_syntax::parse(aborted.clone()).diagnostics().len();
        assert_eq!(after, before, "no new diagnostics");
        assert_eq!(with_calls_aborted(&aborted, &["a".to_owned()]), None);
    }
}

#[cfg(test)]
mod fork_tests {
    use super::first_messages;

    #[test]
    fn a_fork_keeps_the_frontmatter_and_never_strands_tool_calls() {
        let chat = "```json\n{}\n```\n@You:\nq\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```\n\n@You:\n**Tool Result:** `t1`\n```\nx\n```\n\n@Assistant:\ndone\n";
        assert_eq!(
            first_messages(chat, 1).unwrap(),
            "```json\n{}\n```\n@You:\nq\n\n"
        );
        let refused = first_messages(chat, 2).unwrap_err();
        assert!(
            refused.contains("tool calls whose results would be cut away"),
            "{refused}"
        );
        assert!(first_messages(chat, 3).unwrap().ends_with("x\n```\n\n"));
        assert_eq!(first_messages(chat, 4).unwrap(), chat);
        assert!(first_messages(chat, 5).is_err());
    }
}
