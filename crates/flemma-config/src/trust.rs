//! Which chats are trusted, and what flemmad saw of their tool calls (`docs/security.md`).
//!
//! A chat's frontmatter is trusted when the chat is: it lies in a folder the user trusted
//! (`flemmad trust DIR`) or matches the `[trust] paths` of the layers below the frontmatter,
//! and those layers do not say `trust.restricted` (VS Code in Restricted Mode). An untrusted
//! chat's frontmatter is an untrusted [`crate::ConfigLayer`]: it cannot set what widens power.
//!
//! In an untrusted chat an `(approved)` status, and a tool call without a result, count only
//! when flemmad itself saw them: the [`CallHistory`] the binary keeps answers that.

use std::path::{Path, PathBuf};

use flemma_protocol::document::normalize;

use serde_json::Value;

use crate::config::TrustSettings;

/// Whether a chat's frontmatter is trusted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTrust {
    /// Whether the chat is trusted.
    pub trusted: bool,
    /// Why, for messages and status: `it is in /home/me/notes, trusted with flemmad trust`.
    pub reason: String,
}

impl ChatTrust {
    /// A trusted chat.
    pub fn trusted(reason: impl Into<String>) -> Self {
        Self {
            trusted: true,
            reason: reason.into(),
        }
    }

    /// A chat that is not trusted.
    pub fn untrusted(reason: impl Into<String>) -> Self {
        Self {
            trusted: false,
            reason: reason.into(),
        }
    }
}

/// Decides whether the chat at `chat` (an absolute path) is trusted under `settings` (the
/// `[trust]` table of the layers below its frontmatter) and `folders` (the folders trusted
/// with `flemmad trust`). `home` expands `~/` in `trust.paths`.
///
/// The decision is on the path as given, made lexical (`.` and `..` removed): no file is
/// read. A relative `chat` is never trusted.
pub fn chat_trust(
    chat: &Path,
    settings: &TrustSettings,
    folders: &[PathBuf],
    home: Option<&Path>,
) -> ChatTrust {
    if settings.restricted {
        return ChatTrust::untrusted(
            "trust.restricted is set (the editor's workspace is in Restricted Mode: trust the workspace in the editor)",
        );
    }
    if !chat.is_absolute() {
        return ChatTrust::untrusted("its path is not absolute");
    }
    let chat = normalize(chat);
    for folder in folders {
        if folder.is_absolute() && chat.starts_with(normalize(folder)) {
            return ChatTrust::trusted(format!(
                "it is in {}, trusted with `flemmad trust`",
                folder.display()
            ));
        }
    }
    for pattern in &settings.paths {
        if path_matches(pattern, &chat, home) {
            return ChatTrust::trusted(format!("it matches trust.paths \"{pattern}\""));
        }
    }
    ChatTrust::untrusted(format!(
        "{} is not in a trusted folder",
        chat.parent().unwrap_or(&chat).display()
    ))
}

/// Whether a `trust.paths` entry is usable: an absolute path or one under `~/`.
pub fn is_trust_path(pattern: &str) -> bool {
    pattern.starts_with('/') || pattern.starts_with("~/") || pattern == "~"
}

/// Whether the `trust.paths` entry `pattern` covers `chat`: the folder (or file) it names and
/// everything below it; a glob (`crate::PathGlob`'s rules: `*` within a name, `**` any
/// folders) matching the chat's path or the path of a folder it is in. A pattern that is not
/// a valid glob covers nothing (the configuration says so).
fn path_matches(pattern: &str, chat: &Path, home: Option<&Path>) -> bool {
    let is_glob = crate::glob::is_glob(pattern);
    let expanded = match pattern.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => match home {
            // The home directory's own characters are literal.
            Some(home) if is_glob => {
                format!("{}{rest}", crate::glob::escape(&home.to_string_lossy()))
            }
            Some(home) => format!("{}{rest}", home.display()),
            None => return false,
        },
        _ => pattern.to_owned(),
    };
    if !expanded.starts_with('/') {
        return false;
    }
    if !is_glob {
        return chat.starts_with(normalize(Path::new(&expanded)));
    }
    let Ok(glob) = crate::glob::PathGlob::new(&expanded) else {
        return false;
    };
    // The chat or a folder it is in.
    chat.ancestors().any(|path| glob.matches(path))
}

/// How flemmad saw a tool call of a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seen {
    /// The model asked for it, in a reply flemmad streamed into the chat: the approval policy
    /// may decide it.
    FromModel,
    /// flemmad saw it pending, and the user (or the policy, for a call from the model)
    /// approved it: its `(approved)` counts.
    Approved,
}

impl Seen {
    /// The name in records and messages: `from-model`, `approved`.
    pub fn as_str(self) -> &'static str {
        match self {
            Seen::FromModel => "from-model",
            Seen::Approved => "approved",
        }
    }

    /// Parses [`Seen::as_str`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "from-model" => Some(Seen::FromModel),
            "approved" => Some(Seen::Approved),
            _ => None,
        }
    }
}

/// One tool call as a chat holds it.
#[derive(Debug, Clone, Copy)]
pub struct CallRef<'a> {
    /// The tool use id (`toolu_…`).
    pub tool_id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// Its input.
    pub input: &'a Value,
}

/// What flemmad itself saw of chats' tool calls, kept where the chats' authors cannot write
/// (the binary keeps it in the user's state directory). In an untrusted chat, an
/// `(approved)` counts only for a call seen [`Seen::Approved`], and the approval policy
/// decides a call without a result only when it was seen [`Seen::FromModel`].
pub trait CallHistory: Send + Sync + std::fmt::Debug {
    /// Whether flemmad saw `call` of the chat at `chat` the way `seen` says (the same id,
    /// name and input).
    fn saw(&self, chat: &Path, seen: Seen, call: CallRef<'_>) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(paths: &[&str], restricted: bool) -> TrustSettings {
        TrustSettings {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            restricted,
        }
    }

    #[test]
    fn folders_trust_everything_below_them_and_nothing_beside() {
        let folders = [PathBuf::from("/home/me/notes")];
        let none = settings(&[], false);
        let trust = |path: &str| chat_trust(Path::new(path), &none, &folders, None).trusted;
        assert!(trust("/home/me/notes/a.chat"));
        assert!(trust("/home/me/notes/deep/er/a.chat"));
        assert!(!trust("/home/me/notes-evil/a.chat"));
        assert!(!trust("/home/me/notes/../Downloads/a.chat"));
        assert!(trust("/home/me/Downloads/../notes/./a.chat"));
        assert!(!trust("notes/a.chat"));
    }

    #[test]
    fn trust_paths_take_globs_and_home() {
        let home = Path::new("/home/me");
        let s = settings(&["~/notes/**", "/srv/*/prompts", "/data/x?.chat"], false);
        let trust = |path: &str| chat_trust(Path::new(path), &s, &[], Some(home)).trusted;
        assert!(trust("/home/me/notes/a.chat"));
        assert!(trust("/home/me/notes/x/y/a.chat"));
        assert!(!trust("/home/me/notesx/a.chat"));
        assert!(
            trust("/srv/team/prompts/a.chat"),
            "a folder without wildcards covers below"
        );
        assert!(!trust("/srv/team/x/prompts2/a.chat"));
        assert!(trust("/data/x1.chat"));
        assert!(!trust("/data/x/1.chat"));
        assert!(!trust("/elsewhere/a.chat"));
        let no_home = chat_trust(Path::new("/home/me/notes/a.chat"), &s, &[], None);
        assert!(
            !no_home.trusted,
            "~ without a home directory matches nothing"
        );
    }

    #[test]
    fn restricted_mode_wins_over_every_rule() {
        let s = settings(&["/**"], true);
        let trust = chat_trust(Path::new("/a.chat"), &s, &[PathBuf::from("/")], None);
        assert!(!trust.trusted);
        assert!(trust.reason.contains("Restricted Mode"), "{}", trust.reason);
    }
}
