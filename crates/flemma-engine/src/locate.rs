//! Finding the reply block in a file that changed on disk, and merging a stale save — the pure
//! form of `src/reply_file.rs`. The shell reads the file, asks [`ReplyBlock::merge`] for the
//! next text, writes it with compare-and-swap, and on success calls [`ReplyBlock::commit`].

/// The reply block being written into one text: the exact text written so far (starting with
/// the blank line and `@Assistant:` role line) and where it started at the last write.
#[derive(Debug, Clone, Default)]
pub struct ReplyBlock {
    written: String,
    block_start: usize,
}

/// The block this reply wrote is gone (the user deleted or rewrote it): stop the stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the reply being written was changed or deleted in the file; the stream was stopped so no text lands in the wrong place"
)]
pub struct BlockRemoved;

/// The next text of the file, and what the block became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    /// The whole new text to write.
    pub next: String,
    block_start: usize,
    appended: String,
}

impl ReplyBlock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether anything has been written.
    pub fn started(&self) -> bool {
        !self.written.is_empty()
    }

    /// The text written so far.
    pub fn written(&self) -> &str {
        &self.written
    }

    /// The next text of `current` with `text` appended to the block; the first append starts
    /// the block with `@Assistant:` at the end of `current` (so whatever the user added to their
    /// message meanwhile stays above the reply).
    pub fn merge(&self, current: &str, text: &str) -> Result<Merge, BlockRemoved> {
        let (insert_at, prefix) = if self.written.is_empty() {
            let doc = flemma_syntax::parse(current);
            (current.len(), doc.append_assistant_start().new_text)
        } else {
            self.locate(current)?
        };
        let mut next = String::with_capacity(current.len() + prefix.len() + text.len());
        next.push_str(&current[..insert_at]);
        next.push_str(&prefix);
        next.push_str(text);
        next.push_str(&current[insert_at..]);
        let mut appended = prefix;
        appended.push_str(text);
        let written_len = self.written.len() + appended.len();
        Ok(Merge {
            next,
            block_start: insert_at + appended.len() - written_len,
            appended,
        })
    }

    /// Records a merge whose text was written.
    pub fn commit(&mut self, merge: Merge) {
        self.written.push_str(&merge.appended);
        self.block_start = merge.block_start;
    }

    /// Where the next text goes in `current`, and what must be written before it.
    ///
    /// The block is found whole where it was, or by its text when something before it changed
    /// length. When a program wrote back a stale copy, the block's start is there but its end is
    /// not: the lost end is written again (text already received is never lost). When even the
    /// role line is gone, the reply was deleted.
    pub fn locate(&self, current: &str) -> Result<(usize, String), BlockRemoved> {
        let end = self.block_start + self.written.len();
        if current.get(self.block_start..end) == Some(self.written.as_str()) {
            return Ok((end, String::new()));
        }
        if let Some(start) = current.rfind(self.written.as_str()) {
            return Ok((start + self.written.len(), String::new()));
        }
        let role_line_end = self
            .written
            .find("@Assistant:")
            .map_or(0, |i| i + "@Assistant:".len());
        if role_line_end == 0 {
            return Err(BlockRemoved);
        }
        let mut boundaries: Vec<usize> = self
            .written
            .char_indices()
            .map(|(i, _)| i)
            .filter(|i| *i >= role_line_end)
            .collect();
        boundaries.push(self.written.len());
        let found = |len: usize| current.rfind(&self.written[..len]).map(|at| at + len);
        // The longest present prefix (every prefix of a present prefix is present).
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
            Some((at, len)) => Ok((at, self.written[len..].to_owned())),
            None => Err(BlockRemoved),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(block: &mut ReplyBlock, current: &str, text: &str) -> Result<String, BlockRemoved> {
        let merge = block.merge(current, text)?;
        let next = merge.next.clone();
        block.commit(merge);
        Ok(next)
    }

    #[test]
    fn text_added_after_the_block_is_kept() {
        let mut b = ReplyBlock::new();
        let t = append(&mut b, "@You:\nhi\n", "Hel").unwrap();
        assert_eq!(t, "@You:\nhi\n\n@Assistant:\nHel");
        let t = append(&mut b, &format!("{t}\nTYPED"), "lo\n").unwrap();
        let t = append(&mut b, &t, "\n@You:\n\n").unwrap();
        assert_eq!(t, "@You:\nhi\n\n@Assistant:\nHello\n\n@You:\n\n\nTYPED");
    }

    #[test]
    fn edits_before_the_block_are_kept() {
        let mut b = ReplyBlock::new();
        let t = append(&mut b, "@You:\nhi\n", "A").unwrap();
        let t = append(&mut b, &t.replace("hi", "hello there"), "B").unwrap();
        assert_eq!(t, "@You:\nhello there\n\n@Assistant:\nAB");
    }

    #[test]
    fn a_deleted_block_is_reported() {
        let mut b = ReplyBlock::new();
        append(&mut b, "@You:\nhi\n", "partial").unwrap();
        assert_eq!(b.merge("@You:\nhi\n", "more"), Err(BlockRemoved));
    }

    #[test]
    fn a_stale_save_is_repaired() {
        let mut b = ReplyBlock::new();
        let stale = append(&mut b, "@You:\nhi\n", "A").unwrap();
        append(&mut b, &stale, "B").unwrap();
        let t = append(&mut b, &format!("{stale}\n\nTYPED\n"), "C").unwrap();
        assert_eq!(t, "@You:\nhi\n\n@Assistant:\nABC\n\nTYPED\n");
    }

    #[test]
    fn an_uncommitted_merge_changes_nothing() {
        let mut b = ReplyBlock::new();
        let t = append(&mut b, "@You:\nhi\n", "A").unwrap();
        let _lost = b.merge(&t, "B").unwrap();
        assert_eq!(b.written(), "\n@Assistant:\nA");
        assert!(b.started());
    }
}
