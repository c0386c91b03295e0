//! The streaming writer: text the engine streams into a document a client owns, written through
//! versioned `workspace/applyEdit` requests (`editors.md` §5.4). Pure: no IO, no LSP types, no
//! clock. The session feeds it the client's changes and the answers to its edits, and asks it
//! for the next edit to send.
//!
//! # Rules
//!
//! * The **anchor** is the byte offset (in the server's mirror of the document) where the next
//!   streamed text goes: the end of the block being written. It maps through every change the
//!   client reports: text changed before it shifts it; text the *user* types exactly at the anchor
//!   stays after it (the anchor sticks to the end of what was streamed, so the user's words stay
//!   together after the block and the stream never splits them); the echo of *our own* insert
//!   moves it past the inserted text.
//! * **One edit in flight.** An edit is built against the version the server last saw, and the
//!   next one is only built once the client has both answered the edit and echoed it through
//!   `didChange` (Helix echoes before answering; the order does not matter here).
//! * A **refused** edit (`applied: false`: Helix's `failureHandling: abort`, VS Code's stale
//!   version) puts its text back at the front of the pending text; the next edit is rebuilt on
//!   the latest mirror. No streamed byte is lost and none is written twice.
//! * If a change **deletes the start of the block** being written (its role line), the stream
//!   is cancelled and the text not yet written is handed back.
//! * **Coalescing:** chunks accumulate in `pending`; [`StreamWriter::flush_now`] says when a
//!   line break or [`FLUSH_BYTES`] makes waiting for the coalescing window pointless.

use flemma_syntax::TextRange;

/// Pending text at which an edit is sent without waiting for the coalescing window.
pub const FLUSH_BYTES: usize = 2048;

/// An insertion the session must send as one versioned `workspace/applyEdit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEdit {
    /// Byte offset in the mirror at `version`.
    pub offset: usize,
    pub text: String,
    /// The document version the edit is built against.
    pub version: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inflight {
    edit: StreamEdit,
    /// Whether this edit carries the block header (the first edit of the stream).
    carries_header: bool,
    echoed: bool,
    answered: bool,
}

/// What happened to the stream after a change or an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamState {
    /// Still writing (or waiting for more text).
    Writing,
    /// Everything streamed is in the document and the stream was finished.
    Done,
    /// The user deleted the block; `unwritten` never reached the document.
    Cancelled { unwritten: String },
}

/// The writer of one stream into one open document.
#[derive(Debug, Clone)]
pub struct StreamWriter {
    anchor: usize,
    /// Start of the block (its role line) once it is in the document.
    block_start: Option<usize>,
    /// The header not yet in the document: sent alone, before any streamed text.
    header: Option<Header>,
    pending: String,
    inflight: Option<Inflight>,
    finishing: bool,
    state: StreamState,
    /// Bytes of streamed text (header excluded) that reached the document.
    written: usize,
}

#[derive(Debug, Clone)]
struct Header {
    /// The header followed by the tail.
    text: String,
    /// Where the block (its role line) starts inside the text.
    block_at: usize,
    /// The header's length without the tail: the anchor goes there.
    len: usize,
}

impl StreamWriter {
    /// A stream that first writes `header` then `tail` at `anchor`, then streams between them:
    /// e.g. header `"\n@Assistant:\n"`, tail `"\n"` keeps a line break between the streamed text
    /// and whatever the user types below (editors.md §5.3 pitfall 4). `block_at` is where the
    /// block (the role line) starts inside `header`.
    pub fn start(anchor: usize, header: &str, block_at: usize, tail: &str) -> Self {
        Self {
            anchor,
            block_start: None,
            header: Some(Header {
                text: format!("{header}{tail}"),
                block_at: block_at.min(header.len()),
                len: header.len(),
            }),
            pending: String::new(),
            inflight: None,
            finishing: false,
            state: StreamState::Writing,
            written: 0,
        }
    }

    /// A stream continuing an existing block `block_start..anchor`.
    pub fn resume(block_start: usize, anchor: usize) -> Self {
        Self {
            anchor,
            block_start: Some(block_start),
            header: None,
            pending: String::new(),
            inflight: None,
            finishing: false,
            state: StreamState::Writing,
            written: 0,
        }
    }

    pub fn anchor(&self) -> usize {
        self.anchor
    }

    pub fn state(&self) -> &StreamState {
        &self.state
    }

    /// Bytes of streamed text (the header excluded) the client has applied.
    pub fn written_bytes(&self) -> usize {
        self.written
    }

    pub fn pending(&self) -> &str {
        &self.pending
    }

    pub fn has_inflight(&self) -> bool {
        self.inflight.is_some()
    }

    /// Queues streamed text. Ignored once the stream is cancelled or done.
    pub fn push(&mut self, chunk: &str) {
        if self.state == StreamState::Writing && !self.finishing {
            self.pending.push_str(chunk);
        }
    }

    /// No more text will come: the stream is done once the pending text is written.
    pub fn finish(&mut self) {
        self.finishing = true;
        self.settle();
    }

    /// Whether the pending text should be sent without waiting for the coalescing window.
    pub fn flush_now(&self) -> bool {
        self.finishing
            || self.header.is_some()
            || self.pending.len() >= FLUSH_BYTES
            || self.pending.contains('\n')
    }

    /// The next edit to send, built on the mirror at `version` (whose text is `text_len` bytes
    /// long), or `None` while an edit is in flight, nothing is pending or the stream ended.
    pub fn next_edit(&mut self, version: i32, text_len: usize) -> Option<StreamEdit> {
        if self.state != StreamState::Writing || self.inflight.is_some() {
            return None;
        }
        let text = match &self.header {
            Some(header) => header.text.clone(),
            None if self.pending.is_empty() => return None,
            None => std::mem::take(&mut self.pending),
        };
        let edit = StreamEdit {
            offset: self.anchor.min(text_len),
            text,
            version,
        };
        self.inflight = Some(Inflight {
            edit: edit.clone(),
            carries_header: self.header.is_some(),
            echoed: false,
            answered: false,
        });
        Some(edit)
    }

    /// Maps the writer through one change the client reported: `range` (in the text before
    /// the change) replaced by `new_text`.
    pub fn on_change(&mut self, range: TextRange, new_text: &str) -> &StreamState {
        if self.state != StreamState::Writing {
            return &self.state;
        }
        if let Some(inflight) = &mut self.inflight {
            let ours = !inflight.echoed
                && range.is_empty()
                && range.start == inflight.edit.offset
                && new_text == inflight.edit.text;
            if ours {
                inflight.echoed = true;
                let at = range.start;
                let len = new_text.len();
                self.block_start = self.block_start.map(|b| map_after(b, range, len));
                if inflight.carries_header {
                    if let Some(header) = self.header.take() {
                        self.block_start = Some(at + header.block_at);
                        self.anchor = at + header.len;
                    }
                } else {
                    self.anchor = at + len;
                    self.written += len;
                }
                self.settle();
                return &self.state;
            }
        }
        if let Some(block) = self.block_start {
            if range.start <= block && block < range.end {
                let mut unwritten = String::new();
                if let Some(inflight) = self.inflight.take() {
                    if !inflight.echoed && !inflight.carries_header {
                        unwritten.push_str(&inflight.edit.text);
                    }
                }
                unwritten.push_str(&std::mem::take(&mut self.pending));
                self.state = StreamState::Cancelled { unwritten };
                return &self.state;
            }
            self.block_start = Some(map_after(block, range, new_text.len()));
        }
        self.anchor = map_before(self.anchor, range, new_text.len());
        // An edit in flight but not yet echoed was built on an older text: if the client
        // still applies it (it should not), its echo arrives at a shifted offset.
        if let Some(inflight) = &mut self.inflight {
            if !inflight.echoed {
                inflight.edit.offset = map_before(inflight.edit.offset, range, new_text.len());
            }
        }
        &self.state
    }

    /// The client's answer to the edit in flight.
    pub fn on_answer(&mut self, applied: bool) -> &StreamState {
        let Some(inflight) = &mut self.inflight else {
            return &self.state;
        };
        inflight.answered = true;
        if !applied && !inflight.echoed {
            // Refused: nothing reached the document; rebase on the latest mirror.
            let Some(inflight) = self.inflight.take() else {
                return &self.state;
            };
            if !inflight.carries_header {
                let mut text = inflight.edit.text;
                text.push_str(&self.pending);
                self.pending = text;
            }
        }
        self.settle();
        &self.state
    }

    fn settle(&mut self) {
        if let Some(inflight) = &self.inflight {
            if inflight.echoed && inflight.answered {
                self.inflight = None;
            }
        }
        if self.finishing
            && self.header.is_none()
            && self.inflight.is_none()
            && self.pending.is_empty()
            && self.state == StreamState::Writing
        {
            self.state = StreamState::Done;
        }
    }
}

/// Maps an offset that sticks to the text before it (an insertion exactly at it goes after it).
fn map_before(offset: usize, range: TextRange, inserted: usize) -> usize {
    if offset <= range.start {
        offset
    } else if offset >= range.end {
        offset - range.len() + inserted
    } else {
        range.start
    }
}

/// Maps an offset that sticks to the text after it (an insertion exactly at it goes before it).
fn map_after(offset: usize, range: TextRange, inserted: usize) -> usize {
    if offset < range.start {
        offset
    } else if offset >= range.end {
        offset - range.len() + inserted
    } else {
        range.start + inserted
    }
}

#[cfg(test)]
mod tests;
