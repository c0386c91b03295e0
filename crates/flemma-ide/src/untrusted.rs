//! The warnings of an untrusted chat (`docs/security.md`): the frontmatter options that were
//! ignored because they would widen what the chat may do, and the tool calls whose
//! `(approved)`, or whose lack of a result, flemmad did not see happen (the engine sends them
//! back to the user for approval).

use std::collections::HashSet;
use std::path::Path;

use flemma_config::{CallHistory, CallRef, ChatTrust, IgnoredOption, Seen};
use flemma_syntax::{Document, Severity, Status, TextRange};
use serde_json::Value;

use crate::diagnostic::{Diagnostic, Source};

/// The code of the warning on a frontmatter option an untrusted chat cannot set.
pub const UNTRUSTED_OPTION: &str = "untrusted-option";
/// The code of the warning on an `(approved)` flemmad did not see given.
pub const UNSEEN_APPROVAL: &str = "unseen-approval";
/// The code of the warning on a tool call without a result that flemmad did not see come
/// from the model.
pub const UNSEEN_TOOL_CALL: &str = "unseen-tool-call";

/// The code of the warning on the frontmatter of an untrusted chat whose parser
/// (`templating.frontmatter_parsers`) did not run because the chat was only opened.
pub const DEFERRED_PARSER: &str = "untrusted-frontmatter-deferred";

/// The command that trusts the folder of the chat at `chat`: `flemmad trust '/the dir'`.
pub fn trust_command(chat: &Path) -> String {
    let dir = chat.parent().unwrap_or(chat).display().to_string();
    format!("flemmad trust {}", shell_quote(&dir))
}

/// What is said of an option the untrusted chat at `chat` set and resolution ignored:
/// ``ignored in an untrusted chat: `sandbox.enabled = false` — `flemmad trust DIR` to allow``.
pub fn ignored_message(option: &IgnoredOption, chat: &Path) -> String {
    format!(
        "ignored in an untrusted chat: {option} — `{}` to allow",
        trust_command(chat)
    )
}

/// `text` as one shell word (single-quoted unless it is plain).
fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The warning on a frontmatter whose language has a configured parser that did not run (the
/// untrusted chat at `chat` is only being looked at): its frontmatter is evaluated when the
/// chat is sent. Nothing when the frontmatter's language has no parser.
pub(crate) fn deferred_parser(
    doc: &Document,
    chat: &Path,
    trust: &ChatTrust,
    parsers: &std::collections::BTreeMap<String, Vec<String>>,
) -> Option<Diagnostic> {
    let frontmatter = doc.frontmatter()?;
    let language = doc.slice(frontmatter.language_range).trim();
    let program = parsers.get(language)?.first()?;
    Some(Diagnostic {
        range: frontmatter.language_range,
        file: None,
        line_in_file: None,
        severity: Severity::Warning,
        source: Source::Config,
        code: DEFERRED_PARSER.to_owned(),
        message: format!(
            "the {language} frontmatter is evaluated when the chat is sent: its parser `{program}` does not run while an untrusted chat is only opened, so its variables and options are unknown here — `{}` to evaluate it now",
            trust_command(chat)
        ),
        hint: Some(format!(
            "opening a chat starts no program; the chat is untrusted because {}",
            trust.reason
        )),
        include_stack: Vec::new(),
        blocking: false,
    })
}

/// One warning per option the untrusted frontmatter set and resolution ignored, on the
/// frontmatter line that sets it (or the frontmatter's first line when it cannot be found).
pub(crate) fn ignored_options(
    doc: &Document,
    chat: &Path,
    trust: &ChatTrust,
    ignored: &[IgnoredOption],
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = ignored
        .iter()
        .map(|option| Diagnostic {
            range: option_line(doc, &option.path),
            file: None,
            line_in_file: None,
            severity: Severity::Warning,
            source: Source::Config,
            code: UNTRUSTED_OPTION.to_owned(),
            message: ignored_message(option, chat),
            hint: Some(format!(
                "{} ({}); the chat is untrusted because {}",
                option.allowed,
                if option.value.starts_with("a function") {
                    "the configured list decides"
                } else {
                    "the value of the layers below the frontmatter is used"
                },
                trust.reason
            )),
            include_stack: Vec::new(),
            blocking: false,
        })
        .collect();
    out.sort_by_key(|d| d.range.start);
    out
}

/// The line of the frontmatter that most likely sets the option at `path`: the first that
/// names the longest dotted tail of the path (`anthropic.base_url`), else the first naming its
/// last segment after a line naming the one before (JSON nesting), else the first naming the
/// last segment, else the frontmatter's opening line.
fn option_line(doc: &Document, path: &str) -> TextRange {
    let Some(frontmatter) = doc.frontmatter() else {
        return TextRange::empty(0);
    };
    let fallback = frontmatter.language_range;
    let code = frontmatter.code;
    let text = doc.slice(code);
    let mut lines: Vec<(TextRange, &str)> = Vec::new();
    let mut offset = code.start;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let start = offset + (body.len() - body.trim_start().len());
        lines.push((TextRange::new(start, offset + body.trim_end().len()), body));
        offset += line.len();
    }
    let segments: Vec<&str> = path.split('.').map(|s| s.trim_matches('"')).collect();
    let names = |line: &str, word: &str| {
        line.match_indices(word).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + word.len()..].chars().next();
            let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            boundary(before) && boundary(after)
        })
    };
    for take in (2..=segments.len()).rev() {
        let tail = segments[segments.len() - take..].join(".");
        if let Some((range, _)) = lines.iter().find(|(_, line)| names(line, &tail)) {
            return *range;
        }
    }
    let Some(last) = segments.last() else {
        return fallback;
    };
    if let [.., parent, _] = segments.as_slice()
        && let Some(opened) = lines.iter().position(|(_, line)| names(line, parent))
        && let Some((range, _)) = lines[opened..].iter().find(|(_, line)| names(line, last))
    {
        return *range;
    }
    lines
        .iter()
        .find(|(_, line)| names(line, last))
        .map_or(fallback, |(range, _)| *range)
}

/// Warnings on the calls of an untrusted chat that flemmad will not run as the text says: an
/// `(approved)` it did not see given, a tool call without a result it did not see come from
/// the model. Both wait for the user's approval when the chat is sent.
pub(crate) fn unseen_calls(
    doc: &Document,
    chat: &Path,
    history: &dyn CallHistory,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let warning = |range: TextRange, code: &str, message: String| Diagnostic {
        range,
        file: None,
        line_in_file: None,
        severity: Severity::Warning,
        source: Source::Send,
        code: code.to_owned(),
        message,
        hint: Some(format!(
            "approve it when it waits (the editor's Approve action, or `flemmad approve`), or trust the chat's folder: `{}`",
            trust_command(chat)
        )),
        include_stack: Vec::new(),
        blocking: false,
    };
    let input_of = |id: &str| -> Option<(String, Value)> {
        let (_, _, tool_use) = doc.tool_use(id)?;
        let raw = tool_use.fence.as_ref().map_or("", |f| doc.slice(f.content));
        let input = serde_json::from_str::<Value>(raw).ok()?;
        input.is_object().then(|| (tool_use.name.clone(), input))
    };
    for (_, _, result) in doc.placeholders(Some(Status::Approved)) {
        let typed = result
            .fence
            .as_ref()
            .is_some_and(|f| !doc.slice(f.content).trim().is_empty());
        if typed {
            continue;
        }
        let id = result.tool_use_id.as_str();
        let Some((name, input)) = input_of(id) else {
            continue;
        };
        let call = CallRef {
            tool_id: id,
            name: &name,
            input: &input,
        };
        if !history.saw(chat, Seen::Approved, call) {
            out.push(warning(
                result.header,
                UNSEEN_APPROVAL,
                format!(
                    "`{id}` ({name}) is marked `(approved)`, but not by you through flemmad: in an untrusted chat it goes back to pending when the chat is sent"
                ),
            ));
        }
    }
    let answered: HashSet<&str> = doc
        .messages()
        .iter()
        .flat_map(|m| m.tool_results().map(|(_, r)| r.tool_use_id.as_str()))
        .collect();
    for message in doc.messages() {
        if message.is_aborted() {
            continue;
        }
        for (_, tool_use) in message.tool_uses() {
            if answered.contains(tool_use.id.as_str()) {
                continue;
            }
            let Some((name, input)) = input_of(&tool_use.id) else {
                continue;
            };
            let call = CallRef {
                tool_id: &tool_use.id,
                name: &name,
                input: &input,
            };
            if !history.saw(chat, Seen::FromModel, call) {
                out.push(warning(
                    tool_use.header,
                    UNSEEN_TOOL_CALL,
                    format!(
                        "`{}` ({name}) has no result and did not come from the model through flemmad: in an untrusted chat it waits for your approval when the chat is sent",
                        tool_use.id
                    ),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_that_sets_an_option_is_found() {
        let text = "```json\n{\"flemma\": {\n  \"tools\": {\"autopilot\": {\"enabled\": true}},\n  \"sandbox\": {\n    \"enabled\": false\n  },\n  \"providers\": {\"anthropic\": {\"base_url\": \"http://x\"}}\n}}\n```\n@You:\nhi\n";
        let doc = flemma_syntax::parse(text);
        let line = |path: &str| doc.slice(option_line(&doc, path)).to_owned();
        assert_eq!(line("sandbox.enabled"), "\"enabled\": false");
        assert_eq!(
            line("providers.anthropic.base_url"),
            "\"providers\": {\"anthropic\": {\"base_url\": \"http://x\"}}"
        );
        let rhai = "```rhai\nflemma.opt.model = \"x\";\nflemma.opt.sandbox.enabled = false;\n```\n@You:\nhi\n";
        let doc = flemma_syntax::parse(rhai);
        assert_eq!(
            doc.slice(option_line(&doc, "sandbox.enabled")),
            "flemma.opt.sandbox.enabled = false;"
        );
        assert_eq!(doc.slice(option_line(&doc, "secrets.gcloud.path")), "rhai");
    }

    #[test]
    fn the_trust_command_quotes_its_folder() {
        assert_eq!(
            trust_command(Path::new("/home/me/notes/a.chat")),
            "flemmad trust /home/me/notes"
        );
        assert_eq!(
            trust_command(Path::new("/home/me/my notes/a.chat")),
            "flemmad trust '/home/me/my notes'"
        );
    }
}
