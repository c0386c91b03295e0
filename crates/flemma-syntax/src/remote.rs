//! An edit sent to a copy of the text that someone else holds and changes (an editor's
//! buffer), and whether it landed there: told by the text, never by the other side's word or a
//! version number alone.
//!
//! An editor answers a `workspace/applyEdit` with `applied: true` or `false`, and reports every
//! change of its buffer (its own applying of the edit included) as changes of its copy. Some
//! editors answer `applied: true` for an edit they dropped (Neovim 0.7 to 0.11 skip an edit
//! naming an older version of the buffer, print `… newer than edits.`, and still say
//! `applied: true`); the user's next keystroke then arrives with a newer version and would pass
//! for the edit's echo. So the edit counts as landed only when one of the changes reported after
//! it was sent **makes the text the edit makes** ([`same_result`]: the same resulting text, however
//! the editor spells the change) at the place the edit has moved to through the changes before
//! it.
//!
//! The verdict ([`RemoteEdit::verdict`]):
//! * `applied: false` → [`EditFate::Refused`] (nothing was applied);
//! * `applied: true` and a change made the edit's text → [`EditFate::Landed`] (Helix reports the
//!   change before its answer, VS Code and Neovim after it);
//! * `applied: true` and the first batch of changes reported after the answer (one `didChange`)
//!   did not make it, or no change came within the caller's bounded wait ([`RemoteEdit::expire`])
//!   → [`EditFate::Dropped`]: the caller rebuilds the edit on the text as it is and sends it again,
//!   exactly as after a refusal.
//!
//! ```
//! use flemma_syntax::{RemoteEdit, TextEdit, EditFate};
//! // Neovim: the user typed `x` at 0 before the edit arrived; the edit is dropped, `applied: true`.
//! let mut sent = RemoteEdit::new(TextEdit::insert(5, " world"));
//! sent.answered(true);
//! sent.changed("hello", &TextEdit::insert(0, "x"));
//! sent.batch_ended();
//! assert_eq!(sent.fate(), EditFate::Dropped);
//! // Helix: the echo comes first, then `applied: true`.
//! let mut sent = RemoteEdit::new(TextEdit::insert(5, " world"));
//! sent.changed("hello", &TextEdit::insert(5, " world"));
//! sent.batch_ended();
//! sent.answered(true);
//! assert_eq!(sent.fate(), EditFate::Landed);
//! ```

use crate::{Assoc, TextEdit, map_offset, same_result};

/// What became of a [`RemoteEdit`] so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditFate {
    /// Not known yet: no answer, or `applied: true` and the changes that tell not seen yet.
    Waiting,
    /// Applied, and a reported change made the edit's text.
    Landed,
    /// The other side said it did not apply it.
    Refused,
    /// The other side said it applied it, but the text does not hold it.
    Dropped,
}

/// One edit in flight to a copy of the text. See the module documentation.
#[derive(Debug, Clone)]
pub struct RemoteEdit {
    /// The edit, in the coordinates of the copy's text as reported so far (moved through the
    /// changes seen before it landed).
    edit: TextEdit,
    landed: bool,
    answer: Option<bool>,
    /// The first batch of changes after an `applied: true` ended, or the wait for one ran out.
    settled: bool,
}

impl RemoteEdit {
    /// `edit` was sent, in the coordinates of the copy's text as last reported.
    pub fn new(edit: TextEdit) -> Self {
        Self {
            edit,
            landed: false,
            answer: None,
            settled: false,
        }
    }

    /// The edit as it would apply to the copy's text as reported so far.
    pub fn edit(&self) -> &TextEdit {
        &self.edit
    }

    /// The copy reported `change`, applying to `text` (the copy's text before it). Changes
    /// arrive in the order the other side made them.
    pub fn changed(&mut self, text: &str, change: &TextEdit) {
        if self.landed || self.settled {
            return;
        }
        if same_result(text, &self.edit, change) || self.shows_in(text, change) {
            self.landed = true;
            return;
        }
        // Someone else's change came first: the edit, if it is applied later, applies where
        // the text it replaces has moved. An insertion stays before what was typed at its
        // place (an editor applying it late applies it at the same line and column).
        let changes = std::slice::from_ref(change);
        let range = self.edit.range;
        let start_assoc = if range.is_empty() {
            Assoc::Before
        } else {
            Assoc::After
        };
        let start = map_offset(range.start, changes, start_assoc);
        let end = map_offset(range.end, changes, Assoc::Before).max(start);
        self.edit.range = crate::TextRange::new(start, end);
    }

    /// Whether `change` (applying to `text`) put the edit's text where the edit goes, without
    /// making exactly the edit's result: Neovim keeps its buffer's last line break, so an
    /// insertion at the very end of the text comes back with one more `\n` after it.
    fn shows_in(&self, text: &str, change: &TextEdit) -> bool {
        let wanted = self.edit.new_text.as_bytes();
        // Applied, the edit leaves the text before it alone: its text starts where it starts.
        let at = self.edit.range.start;
        let changed = change.range.start..change.range.start + change.new_text.len();
        // The change wrote into the region (the text was not there before it).
        if wanted.is_empty() || changed.end < at || at + wanted.len() < changed.start {
            return false;
        }
        let after_len = text.len() - change.range.len() + change.new_text.len();
        if at + wanted.len() > after_len || change.range.end > text.len() {
            return false;
        }
        let byte_after = |offset: usize| -> u8 {
            if offset < changed.start {
                text.as_bytes()[offset]
            } else if offset < changed.end {
                change.new_text.as_bytes()[offset - changed.start]
            } else {
                text.as_bytes()[offset - changed.end + change.range.end]
            }
        };
        (0..wanted.len()).all(|i| byte_after(at + i) == wanted[i])
    }

    /// A batch of changes (one notification) ended: after `applied: true`, it was the batch
    /// that holds the edit's echo if anything does.
    pub fn batch_ended(&mut self) {
        if self.answer == Some(true) {
            self.settled = true;
        }
    }

    /// The other side answered: `applied` or not.
    pub fn answered(&mut self, applied: bool) {
        self.answer = Some(applied);
    }

    /// The bounded wait for changes after `applied: true` ran out: what the text shows now is
    /// the verdict.
    pub fn expire(&mut self) {
        if self.answer == Some(true) {
            self.settled = true;
        }
    }

    /// Whether the caller waits for changes after `applied: true` (and should call
    /// [`Self::expire`] when its bounded wait runs out).
    pub fn awaits_echo(&self) -> bool {
        self.fate() == EditFate::Waiting && self.answer == Some(true)
    }

    pub fn fate(&self) -> EditFate {
        match self.answer {
            None => EditFate::Waiting,
            Some(false) => EditFate::Refused,
            Some(true) if self.landed => EditFate::Landed,
            Some(true) if self.settled => EditFate::Dropped,
            Some(true) => EditFate::Waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TextRange;

    fn sent() -> RemoteEdit {
        RemoteEdit::new(TextEdit::insert(5, " world"))
    }

    #[test]
    fn the_echo_before_or_after_the_answer_lands_it() {
        let mut helix = sent();
        helix.changed("hello", &TextEdit::insert(5, " world"));
        assert_eq!(helix.fate(), EditFate::Waiting);
        helix.batch_ended();
        helix.answered(true);
        assert_eq!(helix.fate(), EditFate::Landed);

        let mut vscode = sent();
        vscode.answered(true);
        assert!(vscode.awaits_echo());
        vscode.changed("hello", &TextEdit::insert(5, " world"));
        vscode.changed("hello world", &TextEdit::insert(0, "typed "));
        vscode.batch_ended();
        assert_eq!(vscode.fate(), EditFate::Landed);
    }

    #[test]
    fn an_echo_spelled_differently_still_lands_it() {
        // Neovim reports the change it computed from the lines: trimmed by the common prefix.
        let mut neovim = RemoteEdit::new(TextEdit::insert(1, "b"));
        neovim.answered(true);
        neovim.changed("ab", &TextEdit::insert(2, "b"));
        neovim.batch_ended();
        assert_eq!(neovim.fate(), EditFate::Landed);
    }

    #[test]
    fn neovim_keeps_its_last_line_break_and_the_edit_still_lands() {
        // An insertion at the end of `…please\n` comes back as the last `\n` replaced by the
        // edit's text and one more line break.
        let mut neovim = RemoteEdit::new(TextEdit::insert(11, "\n@Assistant:\n"));
        neovim.answered(true);
        neovim.changed(
            "me, please\n",
            &TextEdit::replace(TextRange::new(10, 11), "\n\n@Assistant:\n\n"),
        );
        assert_eq!(neovim.fate(), EditFate::Landed);
        // A keystroke elsewhere does not show it.
        let mut dropped = RemoteEdit::new(TextEdit::insert(11, "\n@Assistant:\n"));
        dropped.answered(true);
        dropped.changed("me, please\n", &TextEdit::insert(0, "K"));
        dropped.batch_ended();
        assert_eq!(dropped.fate(), EditFate::Dropped);
    }

    #[test]
    fn applied_true_without_the_text_is_dropped() {
        // The user's keystroke with a newer version is not the echo.
        let mut neovim = sent();
        neovim.answered(true);
        neovim.changed("hello", &TextEdit::insert(5, "!"));
        assert_eq!(neovim.fate(), EditFate::Waiting);
        neovim.batch_ended();
        assert_eq!(neovim.fate(), EditFate::Dropped);
        // No change at all after the answer: the bounded wait decides.
        let mut silent = sent();
        silent.answered(true);
        assert_eq!(silent.fate(), EditFate::Waiting);
        silent.expire();
        assert_eq!(silent.fate(), EditFate::Dropped);
    }

    #[test]
    fn a_change_before_the_answer_moves_the_edit_and_a_later_echo_still_lands_it() {
        // Neovim applies an edit of version 0 whatever the buffer's version: after the user's
        // keystroke (reported first), at the place the edit moved to.
        let mut neovim = sent();
        neovim.changed("hello", &TextEdit::insert(0, "x"));
        neovim.batch_ended();
        assert_eq!(neovim.edit().range, TextRange::new(6, 6));
        neovim.answered(true);
        neovim.changed("xhello", &TextEdit::insert(6, " world"));
        neovim.batch_ended();
        assert_eq!(neovim.fate(), EditFate::Landed);
    }

    #[test]
    fn a_refusal_is_a_refusal() {
        let mut helix = sent();
        helix.changed("hello", &TextEdit::insert(0, "x"));
        helix.answered(false);
        assert_eq!(helix.fate(), EditFate::Refused);
        // Text typed at the start of the replaced range moves it; typed at an insertion's
        // place, it stays after the insertion.
        let mut typed = RemoteEdit::new(TextEdit::replace(TextRange::new(2, 4), "Z"));
        typed.changed("abcdef", &TextEdit::insert(2, "uv"));
        assert_eq!(typed.edit().range, TextRange::new(4, 6));
        let mut typed = RemoteEdit::new(TextEdit::insert(2, "Z"));
        typed.changed("abcdef", &TextEdit::insert(2, "uv"));
        assert_eq!(typed.edit().range, TextRange::new(2, 2));
    }
}
