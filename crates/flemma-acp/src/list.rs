//! `session/list`: the chats of a project's sessions folder as sessions, newest first, a page
//! at a time. Pure: the backend lists the folder, this decides what is shown.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use flemma_syntax::Role;

/// Sessions in one answer; `nextCursor` gives the next page.
pub const PAGE: usize = 50;
/// Characters of a title at most.
const TITLE_CHARS: usize = 80;

/// A chat of the sessions folder, as the backend found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatEntry {
    pub path: PathBuf,
    pub modified: SystemTime,
}

/// One listed session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub path: PathBuf,
    pub title: String,
    pub updated_at: String,
}

/// The page of `entries` that starts at `cursor` (an offset, as the previous page's
/// `nextCursor` said), newest first, with `text` reading a chat; chats with no question yet
/// (an unused session) are left out. Returns the page and the next cursor.
pub fn page(
    mut entries: Vec<ChatEntry>,
    cursor: Option<&str>,
    text: impl Fn(&Path) -> Option<String>,
) -> (Vec<Listed>, Option<String>) {
    // Newest first; a tie (a coarse clock) by name, later first (names carry their start time).
    entries.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.path.cmp(&a.path)));
    let start = cursor.and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
    let mut listed = Vec::new();
    for (index, entry) in entries.iter().enumerate().skip(start) {
        if listed.len() == PAGE {
            return (listed, Some(index.to_string()));
        }
        let Some(title) = text(&entry.path).as_deref().and_then(title) else {
            continue;
        };
        listed.push(Listed {
            path: entry.path.clone(),
            title,
            updated_at: iso8601(entry.modified),
        });
    }
    (listed, None)
}

/// A chat's title: the first line of its first question, shortened (a compaction's summary is
/// not a question: the first one after it); `None` when no `@You:` holds text yet.
pub fn title(chat: &str) -> Option<String> {
    let doc = flemma_syntax::parse(chat.to_owned());
    let line = doc
        .messages()
        .iter()
        .filter(|message| {
            message.role == Role::You
                && !doc
                    .slice(message.content)
                    .trim_start()
                    .starts_with(flemma_syntax::write::COMPACTED_MARKER)
        })
        .flat_map(|message| doc.slice(message.content).lines())
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

/// `time` as ISO 8601 in UTC, to the second (`2026-12-02T14:05:09Z`).
pub fn iso8601(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use std::time::UNIX_EPOCH;

    #[test]
    fn times_are_iso8601_in_utc() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let at = UNIX_EPOCH + Duration::from_secs(1_796_220_309);
        assert_eq!(iso8601(at), "2026-12-02T14:05:09Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn the_title_is_the_first_line_of_the_first_question() {
        let chat =
            "```json\n{}\n```\n@You:\n\n  How many files?\nsecond line\n\n@Assistant:\nTwo.\n";
        assert_eq!(title(chat).as_deref(), Some("How many files?"));
        assert_eq!(title("```json\n{}\n```\n@You:\n"), None);
        let compacted = format!(
            "@You:\n{}archive=\"a\" -->\nThe 2 messages before this one were compacted.\n\n@You:\nNext?\n",
            flemma_syntax::write::COMPACTED_MARKER
        );
        assert_eq!(title(&compacted).as_deref(), Some("Next?"));
        let long = format!("@You:\n{}\n", "x".repeat(100));
        assert_eq!(title(&long).unwrap().chars().count(), TITLE_CHARS + 1);
    }

    #[test]
    fn pages_are_newest_first_and_skip_unused_sessions() {
        let entries: Vec<ChatEntry> = (0..PAGE + 3)
            .map(|n| ChatEntry {
                path: PathBuf::from(format!("/p/{n:03}.chat")),
                modified: UNIX_EPOCH + Duration::from_secs(n as u64),
            })
            .collect();
        let text = |path: &Path| {
            let unused = path.ends_with("052.chat");
            Some(if unused {
                "@You:\n".into()
            } else {
                format!("@You:\n{}\n", path.display())
            })
        };
        let (first, cursor) = page(entries.clone(), None, text);
        assert_eq!(first.len(), PAGE);
        assert_eq!(first[0].path, Path::new("/p/051.chat"), "052 is unused");
        assert_eq!(first[0].title, "/p/051.chat");
        let (rest, end) = page(entries, cursor.as_deref(), text);
        assert_eq!(end, None);
        let paths: Vec<_> = rest.iter().map(|l| l.path.display().to_string()).collect();
        assert_eq!(paths, ["/p/001.chat", "/p/000.chat"]);
    }
}
