//! Streaming a reply into a chat file on disk (when no editor owns the document).
//!
//! Every flush reads the file, finds the block this reply has written so far (by its exact
//! text, so edits elsewhere in the file and text appended after the block are kept), inserts the
//! new text at the end of that block, and writes the result atomically. If the block is gone
//! (the user deleted or changed it), the flush fails with [`ReplyFileError::BlockRemoved`] and
//! the caller cancels the stream.

use std::path::{Path, PathBuf};

use crate::fsutil;

/// How often a flush re-reads and merges when the file changed under it.
const MERGE_ATTEMPTS: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum ReplyFileError {
    #[error(
        "the reply being written to {path} was changed or deleted in the file; the stream was stopped so no text lands in the wrong place"
    )]
    BlockRemoved { path: String },
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

/// The reply block being written into one file.
#[derive(Debug)]
pub struct ReplyFile {
    path: PathBuf,
    /// The exact text written so far, starting with the `@Assistant:` role line (and the blank
    /// line before it). Empty until the first flush.
    written: String,
    /// Where `written` started in the file at the last flush.
    block_start: usize,
}

impl ReplyFile {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            written: String::new(),
            block_start: 0,
        }
    }

    /// Whether anything has been written.
    pub fn started(&self) -> bool {
        !self.written.is_empty()
    }

    /// Appends `text` to the reply block (starting the block with `@Assistant:` on first use).
    pub fn append(&mut self, text: &str) -> Result<(), ReplyFileError> {
        if text.is_empty() {
            return Ok(());
        }
        // Someone may write the file between our read and our rename: then read and merge again.
        for _ in 0..MERGE_ATTEMPTS {
            let current = fsutil::read_chat(&self.path)?;
            let (insert_at, prefix) = if self.written.is_empty() {
                // Start the block at the end of the file as it is now, so whatever the user
                // added to their message since the send started stays above the reply.
                let doc = flemma_syntax::parse(current.as_str());
                (current.len(), doc.append_assistant_start().new_text)
            } else {
                self.locate(&current)?
            };
            let mut next = String::with_capacity(current.len() + prefix.len() + text.len());
            next.push_str(&current[..insert_at]);
            next.push_str(&prefix);
            next.push_str(text);
            next.push_str(&current[insert_at..]);
            if !fsutil::replace_if_unchanged(&self.path, &current, &next)? {
                continue;
            }
            if self.written.is_empty() {
                self.written.push_str(&prefix);
            }
            self.written.push_str(text);
            // The block (all of `written`) now ends right after the new text.
            self.block_start = insert_at + prefix.len() + text.len() - self.written.len();
            return Ok(());
        }
        Err(ReplyFileError::Io(anyhow::anyhow!(
            "{} keeps changing while the reply is written; stopped after {MERGE_ATTEMPTS} attempts",
            self.path.display()
        )))
    }

    /// Where the next text goes in `current`, and what must be written before it.
    ///
    /// Normally the block is found whole (where it was, or by its text when something before it
    /// changed length) and nothing precedes the new text. When a program wrote back a stale copy
    /// of the file, the block's start is there but its end is not: the lost end is written again
    /// (text already received is never lost). When even the role line is gone, the user deleted
    /// the reply, and the stream stops.
    fn locate(&self, current: &str) -> Result<(usize, String), ReplyFileError> {
        let end = self.block_start + self.written.len();
        if current.get(self.block_start..end) == Some(self.written.as_str()) {
            return Ok((end, String::new()));
        }
        if let Some(start) = current.rfind(self.written.as_str()) {
            return Ok((start + self.written.len(), String::new()));
        }
        // The longest start of the block still in the file, at least its role line.
        let role_line_end = self
            .written
            .find("@Assistant:")
            .map_or(0, |i| i + "@Assistant:".len());
        let mut boundaries: Vec<usize> = self
            .written
            .char_indices()
            .map(|(i, _)| i)
            .filter(|i| *i >= role_line_end)
            .collect();
        boundaries.push(self.written.len());
        let found = |len: usize| current.rfind(&self.written[..len]).map(|at| at + len);
        // Binary search the longest prefix present (a present prefix's prefixes are present).
        let (mut low, mut high) = (0usize, boundaries.len());
        let mut best = None;
        while low < high {
            let mid = (low + high) / 2;
            match found(boundaries[mid]) {
                Some(at) => {
                    best = Some((at, boundaries[mid]));
                    low = mid + 1;
                }
                None => high = mid,
            }
        }
        match best {
            Some((at, len)) if role_line_end > 0 => Ok((at, self.written[len..].to_owned())),
            _ => Err(ReplyFileError::BlockRemoved {
                path: self.path.display().to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_keep_text_added_after_the_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.chat");
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        let mut reply = ReplyFile::new(&path);
        reply.append("Hel").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "@You:\nhi\n\n@Assistant:\nHel"
        );
        // The user appends text while the reply streams.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("\nTYPED");
        std::fs::write(&path, &text).unwrap();
        reply.append("lo\n").unwrap();
        reply.append("\n@You:\n\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "@You:\nhi\n\n@Assistant:\nHello\n\n@You:\n\n\nTYPED"
        );
    }

    #[test]
    fn edits_before_the_block_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.chat");
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        let mut reply = ReplyFile::new(&path);
        reply.append("A").unwrap();
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("hi", "hello there");
        std::fs::write(&path, text).unwrap();
        reply.append("B").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "@You:\nhello there\n\n@Assistant:\nAB"
        );
    }

    #[test]
    fn a_deleted_block_stops_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.chat");
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        let mut reply = ReplyFile::new(&path);
        reply.append("partial").unwrap();
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        assert!(matches!(
            reply.append("more"),
            Err(ReplyFileError::BlockRemoved { .. })
        ));
    }

    #[test]
    fn a_concurrent_writer_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.chat");
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        let mut reply = ReplyFile::new(&path);
        reply.append("start ").unwrap();
        let other = path.clone();
        // Another program keeps saving the file (read, add a line, atomic rename) while the
        // reply streams; its copy is often stale, without our latest text.
        let writer = std::thread::spawn(move || {
            for i in 0..200 {
                let mut text = std::fs::read_to_string(&other).unwrap();
                std::thread::sleep(std::time::Duration::from_micros(300));
                text.push_str(&format!("typed {i}\n"));
                crate::fsutil::write_atomic(&other, &text).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        for i in 0..199 {
            reply.append(&format!("r{i} ")).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        writer.join().unwrap();
        // The next flush after the stale saves restores whatever they dropped.
        reply.append("r199 ").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let reply_text: String = (0..200).map(|i| format!("r{i} ")).collect();
        assert!(text.contains(&format!("start {reply_text}")), "{text}");
        // Our writes check that the file did not change since it was read, so the other
        // program's lines survive them too, but for a race of microseconds between that check
        // and the rename (measured here, not asserted: 187–198 of 200 in this tight loop).
        let typed = (0..200)
            .filter(|i| text.contains(&format!("typed {i}\n")))
            .count();
        eprintln!("{typed} of 200 lines typed meanwhile survived");
    }

    #[test]
    fn a_stale_save_is_repaired_by_the_next_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.chat");
        std::fs::write(&path, "@You:\nhi\n").unwrap();
        let mut reply = ReplyFile::new(&path);
        reply.append("A").unwrap();
        let editor_copy = std::fs::read_to_string(&path).unwrap();
        reply.append("B").unwrap();
        // An editor saves the copy it loaded before "B", plus a line the user typed.
        std::fs::write(&path, format!("{editor_copy}\n\nTYPED\n")).unwrap();
        reply.append("C").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "@You:\nhi\n\n@Assistant:\nABC\n\nTYPED\n"
        );
    }

    #[test]
    fn a_write_is_refused_when_the_file_changed_since_it_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.chat");
        std::fs::write(&path, "new").unwrap();
        assert!(!crate::fsutil::replace_if_unchanged(&path, "old", "ours").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert!(crate::fsutil::replace_if_unchanged(&path, "new", "ours").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ours");
    }
}
