//! Streaming a reply into a chat file on disk (when no editor owns the document).
//!
//! Every flush reads the file, finds the block this reply has written so far (by its exact
//! text, so edits elsewhere in the file and text appended after the block are kept), inserts the
//! new text at the end of that block, and writes the result atomically. If the block is gone
//! (the user deleted or changed it), the flush fails with [`ReplyFileError::BlockRemoved`] and
//! the caller cancels the stream.

use std::path::{Path, PathBuf};

use crate::fsutil;

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
        let current = fsutil::read_chat(&self.path)?;
        let (insert_at, prefix) = if self.written.is_empty() {
            // Start the block at the end of the file as it is now, so whatever the user added
            // to their message since the send started stays above the reply.
            let doc = flemma_syntax::parse(current.as_str());
            let start = doc.append_assistant_start();
            (current.len(), start.new_text)
        } else {
            (self.locate(&current)?, String::new())
        };
        let mut next = String::with_capacity(current.len() + prefix.len() + text.len());
        next.push_str(&current[..insert_at]);
        next.push_str(&prefix);
        next.push_str(text);
        next.push_str(&current[insert_at..]);
        fsutil::write_atomic(&self.path, &next)?;
        if self.written.is_empty() {
            self.block_start = insert_at;
        } else {
            self.block_start = insert_at - self.written.len();
        }
        self.written.push_str(&prefix);
        self.written.push_str(text);
        Ok(())
    }

    /// The end of the block in `current`.
    fn locate(&self, current: &str) -> Result<usize, ReplyFileError> {
        let end = self.block_start + self.written.len();
        if current.get(self.block_start..end) == Some(self.written.as_str()) {
            return Ok(end);
        }
        // Something before the block changed length: find the block by its text.
        current
            .rfind(self.written.as_str())
            .map(|start| start + self.written.len())
            .ok_or_else(|| ReplyFileError::BlockRemoved {
                path: self.path.display().to_string(),
            })
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
}
