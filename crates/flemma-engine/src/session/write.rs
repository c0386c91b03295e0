//! The store operations, one in flight at a time ([`Op`]): a write (read the writer, merge what
//! changed there, replace its text with the engine's if it does not hold it yet; a store that
//! moved is read again, at once and then more slowly; a file changed by someone else is merged
//! once two reads agree), a writer switch (the writer handing over is read first; an editor
//! becomes the writer by a three-way merge with its base; a file takes the engine's text), an
//! editor gone (the file takes over), and the end of it all on a failure.

use flemma_syntax::{diff_to_edits, three_way_base};

use crate::{Input as EngineInput, Millis};

use super::phase::{Holds, Lifecycle, MERGE_ATTEMPTS, NextTry, Op, Rest, Writer, next_try};
use super::{Effect, ReadOutcome, ReplaceOutcome, Session, Snapshot, StoreId, StoreKind};

/// How long a file changed by someone else is left to settle before it is read again: the
/// change is merged only once two reads agree (a program that truncates and then writes the
/// file must not be read in between, as an empty file).
const SETTLE: Millis = 20;

impl Session {
    /// A new writer (between store operations). The writer handing over is read first, so
    /// what was changed on its side is merged before it goes (a file written by another
    /// program, a buffer typed in since the last read).
    pub(super) fn switch(
        &mut self,
        now: Millis,
        next: (StoreId, StoreKind),
        out: &mut Vec<Effect>,
    ) {
        let Op::Idle(rest) = self.op else {
            return;
        };
        let taking_over = self.writer.holds == Holds::FileTakingOver;
        if next.0 == self.writer.store && !taking_over {
            return;
        }
        if taking_over {
            // Nothing to read there: the file's text is not the engine's to merge.
            self.hand_over(now, next, rest.resume(), out);
        } else {
            self.switching = Some(next);
            let store = self.writer.store;
            self.reads += 1;
            self.op = Op::ReadingOld {
                store,
                resume: rest.resume(),
            };
            out.push(Effect::Read { store });
        }
    }

    /// The old writer is read (or could not be): the new one takes over. `resume`: the
    /// attempts of a write waiting to be tried again.
    fn hand_over(
        &mut self,
        now: Millis,
        (store, kind): (StoreId, StoreKind),
        resume: Option<usize>,
        out: &mut Vec<Effect>,
    ) {
        if let Some(text) = self.writer.editor_text() {
            out.push(Effect::Left {
                store: self.writer.store,
                text: text.to_owned(),
            });
        }
        self.write_at = Some(now);
        match kind {
            StoreKind::Editor { base } => {
                self.reads += 1;
                self.op = Op::ReadingIncoming {
                    store,
                    base,
                    resume,
                };
                out.push(Effect::Read { store });
            }
            StoreKind::File => {
                self.writer = Writer {
                    store,
                    holds: Holds::FileTakingOver,
                };
                self.op = Op::Idle(Rest::after_switch(resume));
            }
        }
    }

    pub(super) fn begin_write(&mut self, now: Millis, rest: Rest, out: &mut Vec<Effect>) {
        self.write_at = None;
        if let Some(since) = self.unwritten_since.take() {
            self.max_write_delay = self.max_write_delay.max(now.saturating_sub(since));
        }
        self.read_writer(rest.attempts(), out);
    }

    fn read_writer(&mut self, attempts: usize, out: &mut Vec<Effect>) {
        self.reads += 1;
        let store = self.writer.store;
        self.op = Op::Reading {
            store,
            read: self.reads,
            attempts,
        };
        out.push(Effect::Read { store });
    }

    pub(super) fn read_answered(
        &mut self,
        now: Millis,
        store: StoreId,
        outcome: ReadOutcome,
        out: &mut Vec<Effect>,
    ) {
        // Every way out of an answered operation says what it leaves.
        match std::mem::replace(&mut self.op, Op::Idle(Rest::Unsettled)) {
            Op::ReadingOld { store: old, resume } if old == store => {
                if let ReadOutcome::Text(current) = outcome
                    && self.merge(now, &current, out)
                    && let Some(stored) = self.writer.stored_mut()
                {
                    stored.version = current.version;
                }
                if self.life == Lifecycle::Failed {
                    return;
                }
                match self.switching.take() {
                    Some(next) => self.hand_over(now, next, resume, out),
                    None => self.op = Op::Idle(Rest::after_switch(resume)),
                }
            }
            Op::ReadingIncoming {
                store: incoming,
                base,
                resume,
            } if incoming == store => {
                match outcome {
                    ReadOutcome::Text(current) => self.take_incoming(store, &base, current, out),
                    // The incoming writer is gone already: the current one goes on.
                    ReadOutcome::Gone(_) | ReadOutcome::Failed(_) => {}
                }
                self.op = Op::Idle(Rest::after_switch(resume));
            }
            Op::Reading {
                store: writer,
                read,
                attempts,
            } if writer == store => match outcome {
                ReadOutcome::Text(current) => {
                    self.read_for_write(now, read, attempts, current, out)
                }
                ReadOutcome::Gone(_) => self.writer_gone(now, attempts, out),
                ReadOutcome::Failed(message) => self.fail(message, out),
            },
            other => {
                // An answer to nothing in flight (cannot happen with one runner): ignored.
                self.op = other;
            }
        }
    }

    /// Makes the incoming editor the writer when its text and the engine's merge: base = the
    /// text they last shared, ours = the engine's text, theirs = its buffer now. On a conflict
    /// (both changed the same place) the writer stays what it was and the user is told.
    fn take_incoming(
        &mut self,
        store: StoreId,
        base: &str,
        current: Snapshot,
        out: &mut Vec<Effect>,
    ) {
        match three_way_base(base, self.engine.text(), &current.text) {
            Ok(agreed) => {
                self.unwritten = vec![diff_to_edits(&agreed, self.engine.text())];
                self.writer = Writer {
                    store,
                    holds: Holds::Editor {
                        stored: Snapshot {
                            text: agreed,
                            version: current.version,
                        },
                    },
                };
            }
            Err(conflict) => out.push(Effect::Conflict {
                incoming: store,
                writer: self.writer.store,
                line: conflict.line,
            }),
        }
    }

    /// The writer was read for a write (the `read`th read): merge what changed there, then
    /// replace it with the engine's text unless it holds it already.
    fn read_for_write(
        &mut self,
        now: Millis,
        read: u64,
        attempts: usize,
        current: Snapshot,
        out: &mut Vec<Effect>,
    ) {
        // The store was just read: the next poll is a whole interval away.
        self.next_poll = 0;
        if let Holds::File { stored, settling } = &mut self.writer.holds
            && current.text != stored.text
        {
            if settling.as_ref() != Some(&current.text) {
                // Read it again a moment later: merged once two reads agree. Not settled
                // meanwhile: a session whose last write was followed by someone else's must
                // not end before it has taken that change in.
                *settling = Some(current.text);
                self.op = Op::Idle(Rest::Retrying { attempts });
                self.write_at = Some(now + SETTLE);
                return;
            }
            *settling = None;
        }
        if self.writer.holds == Holds::FileTakingOver {
            // The file's text is the base the engine's text is written over.
            self.unwritten = vec![diff_to_edits(&current.text, self.engine.text())];
            self.writer.holds = Holds::File {
                stored: current.clone(),
                settling: None,
            };
        } else if !self.merge(now, &current, out) {
            return;
        }
        if let Some(stored) = self.writer.stored_mut() {
            stored.version = current.version;
        }
        if self.sync_after_read.is_some_and(|after| read >= after) {
            self.sync_after_read = None;
            out.push(Effect::Synced);
        }
        if let Some(sends) = self.sends
            && read >= sends.after_read
        {
            // The text holds what the user typed before sending: send it.
            self.sends = None;
            for _ in 0..sends.count {
                self.feed(now, EngineInput::Advance, out);
            }
        }
        if self.engine.text() == current.text {
            if let Some(stored) = self.writer.stored_mut() {
                *stored = current;
            }
            self.unwritten.clear();
            self.op = Op::Idle(Rest::Settled);
            return;
        }
        let next = self.engine.text().to_owned();
        let store = self.writer.store;
        self.op = Op::Replacing {
            store,
            next: next.clone(),
            carries: self.unwritten.len(),
            attempts,
        };
        out.push(Effect::Replace {
            store,
            current,
            next,
        });
    }

    pub(super) fn replace_answered(
        &mut self,
        now: Millis,
        store: StoreId,
        outcome: ReplaceOutcome,
        out: &mut Vec<Effect>,
    ) {
        let (next, carries, attempts) =
            match std::mem::replace(&mut self.op, Op::Idle(Rest::Unsettled)) {
                Op::Replacing {
                    store: writer,
                    next,
                    carries,
                    attempts,
                } if writer == store => (next, carries, attempts),
                other => {
                    // An answer to nothing in flight (cannot happen with one runner): ignored.
                    self.op = other;
                    return;
                }
            };
        match outcome {
            ReplaceOutcome::Written => {
                self.writer.written(next);
                // What the engine did while the replacement was in flight is still to write.
                self.unwritten.drain(..carries.min(self.unwritten.len()));
                // A file holds exactly what was written; an editor's buffer holds the edit as
                // the editor applied it (Neovim adds a line break after an insertion at the
                // very end): the session ends only after a read shows what it holds.
                self.op = Op::Idle(if self.unwritten.is_empty() && self.writer.is_file() {
                    Rest::Settled
                } else {
                    Rest::Unsettled
                });
                if !self.unwritten.is_empty() && self.write_at.is_none() {
                    self.write_at = Some(now);
                }
            }
            ReplaceOutcome::Moved => {
                let attempts = attempts + 1;
                match next_try(attempts) {
                    NextTry::Now => self.read_writer(attempts, out),
                    NextTry::After(delay) => {
                        self.op = Op::Idle(Rest::Retrying { attempts });
                        self.write_at =
                            Some(self.write_at.map_or(now + delay, |at| at.max(now + delay)));
                    }
                    NextTry::GiveUp => self.fail(
                        format!(
                            "the document keeps changing while flemmad writes it; stopped after {MERGE_ATTEMPTS} attempts (everything written before is in it)"
                        ),
                        out,
                    ),
                }
            }
            ReplaceOutcome::Gone(_) => self.writer_gone(now, attempts, out),
            ReplaceOutcome::Failed(message) => self.fail(message, out),
        }
    }

    /// The writing editor went away between the host's switch and this write: the file takes
    /// over with the engine's text. The gone editor cannot be read: it hands over at once (a
    /// switch the host asked for meanwhile still follows).
    fn writer_gone(&mut self, now: Millis, attempts: usize, out: &mut Vec<Effect>) {
        let file = self.config.file;
        if self.writer.store == file {
            return self.fail("the file cannot be written".into(), out);
        }
        self.hand_over(now, (file, StoreKind::File), None, out);
        self.write_at = None;
        self.read_writer(attempts + 1, out);
    }

    pub(super) fn fail(&mut self, message: String, out: &mut Vec<Effect>) {
        self.life = Lifecycle::Failed;
        self.op = Op::Idle(Rest::Unsettled);
        out.push(Effect::Failed(message));
    }
}
