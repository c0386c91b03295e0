//! The phase of a document session, in types that cannot hold an illegal combination: where
//! it is in its life ([`Lifecycle`], and how it is to end, [`End`]), who writes the document
//! and what the session knows of its text ([`Writer`], [`Holds`]), and the store operation in
//! flight with the write it belongs to ([`Op`], and what a write left behind, [`Rest`]).
//!
//! The transitions that depend on nothing else are here, as plain functions with table tests:
//! an interrupt or a shutdown ([`End::interrupt`], [`End::leave`]), the reason the session
//! ends with ([`End::reason`]), and what a write does when the store moved ([`next_try`]).

use std::sync::Arc;

use crate::{Millis, StopReason};

use super::{Snapshot, StoreId, StoreKind};

/// How often a write re-reads and merges when the store moved under it, before giving up.
pub const MERGE_ATTEMPTS: usize = 20;

/// How many of those are tried at once (a user typing meets a streak of a few refused edits);
/// after them each waits longer (the user types faster than the editor's round trip, or a
/// program keeps rewriting the file), up to [`MAX_RETRY_DELAY`]: the attempts span nearly ten
/// seconds before the session gives up.
const QUICK_ATTEMPTS: usize = 6;
const MAX_RETRY_DELAY: Millis = 1000;

/// Where the session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Working for the document.
    Running,
    /// Everything is written and nothing runs: `Effect::Done` was said. A tick leaves it so;
    /// any other input makes it run again.
    Done,
    /// The session cannot go on (`Effect::Failed` was said): every input is ignored.
    Failed,
}

/// How the session is to end: what it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Once the cycle stops, with the reason it stopped for.
    WhenStopped,
    /// Ctrl-C came: once the cycle stops, `Cancelled`, whatever stopped it.
    Interrupted,
    /// The process shuts down: as soon as everything is written, whatever still runs;
    /// `interrupted`: Ctrl-C came too, and the end is `Cancelled`.
    Leaving { interrupted: bool },
}

impl End {
    /// After Ctrl-C.
    pub(super) fn interrupt(self) -> Self {
        match self {
            End::WhenStopped | End::Interrupted => End::Interrupted,
            End::Leaving { .. } => End::Leaving { interrupted: true },
        }
    }

    /// After the process was told to shut down.
    pub(super) fn leave(self) -> Self {
        End::Leaving {
            interrupted: matches!(self, End::Interrupted | End::Leaving { interrupted: true }),
        }
    }

    /// The session ends once written, without waiting for what runs.
    pub(super) fn is_leaving(self) -> bool {
        matches!(self, End::Leaving { .. })
    }

    /// The reason the session ends with, given the reason the cycle last stopped for.
    pub(super) fn reason(self, stopped: Option<&StopReason>) -> StopReason {
        match self {
            End::Interrupted | End::Leaving { interrupted: true } => StopReason::Cancelled,
            End::WhenStopped | End::Leaving { interrupted: false } => {
                stopped.cloned().unwrap_or(StopReason::Idle)
            }
        }
    }
}

/// The store that writes the document, and what the session knows of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Writer {
    pub(super) store: StoreId,
    pub(super) holds: Holds,
}

/// What the writer holds, as far as the session knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holds {
    /// The file, holding `stored` as the session last read or wrote it. `settling`: a change
    /// someone else made, read once and waiting for a second read that shows the same text
    /// before it is merged (a program that truncates and then writes the file must not be read
    /// in between, as an empty file).
    File {
        stored: Snapshot,
        settling: Option<String>,
    },
    /// The file, just taken over from an editor: it holds an older copy, whatever that is; its
    /// next read is the base the engine's text is written over, not a change to merge.
    FileTakingOver,
    /// An editor's buffer, holding `stored` as the session last read or wrote it.
    Editor { stored: Snapshot },
}

impl Writer {
    /// A writer of `kind` whose text was just read as `stored`.
    pub(super) fn read_as(store: StoreId, kind: &StoreKind, stored: Snapshot) -> Self {
        let holds = match kind {
            StoreKind::File => Holds::File {
                stored,
                settling: None,
            },
            StoreKind::Editor { .. } => Holds::Editor { stored },
        };
        Self { store, holds }
    }

    pub(super) fn is_file(&self) -> bool {
        matches!(self.holds, Holds::File { .. } | Holds::FileTakingOver)
    }

    /// What the writer held after the session's last read or write (`None`: a file just taken
    /// over, not read yet).
    pub(super) fn stored_mut(&mut self) -> Option<&mut Snapshot> {
        match &mut self.holds {
            Holds::File { stored, .. } | Holds::Editor { stored } => Some(stored),
            Holds::FileTakingOver => None,
        }
    }

    /// What an editor writer holds: the text to remember as its base when it stops writing.
    pub(super) fn editor_text(&self) -> Option<&str> {
        match &self.holds {
            Holds::Editor { stored } => Some(&stored.text),
            Holds::File { .. } | Holds::FileTakingOver => None,
        }
    }

    /// The writer says it holds `next` now (an editor's version moves on by one).
    pub(super) fn written(&mut self, next: String) {
        match &mut self.holds {
            Holds::File { stored, .. } | Holds::Editor { stored } => {
                *stored = Snapshot {
                    version: stored.version.map(|v| v + 1),
                    text: next,
                }
            }
            Holds::FileTakingOver => {
                self.holds = Holds::File {
                    stored: Snapshot::file(next),
                    settling: None,
                }
            }
        }
    }
}

/// The store operation in flight, and the write it belongs to. One at a time: inputs keep
/// arriving meanwhile, and what they change is written by the next write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    /// None.
    Idle(Rest),
    /// Reading the writer that is about to hand over (what its side changed is merged first).
    /// `resume`: the attempts of a write waiting to be tried again once the switch is over.
    ReadingOld {
        store: StoreId,
        resume: Option<usize>,
    },
    /// Reading the editor that is to become the writer (`base`: the text it and the engine
    /// last agreed on).
    ReadingIncoming {
        store: StoreId,
        base: Arc<str>,
        resume: Option<usize>,
    },
    /// Reading the writer for a write; `read` numbers it among the session's reads, `attempts`
    /// counts the times this write found the store moved or gone.
    Reading {
        store: StoreId,
        read: u64,
        attempts: usize,
    },
    /// Replacing the writer's text with `next`, which carries the first `carries` of the
    /// unwritten edits.
    Replacing {
        store: StoreId,
        next: String,
        carries: usize,
        attempts: usize,
    },
}

/// What the last write left, while no store operation is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rest {
    /// The store holds the engine's text (the last write found it so, or wrote it to a file)
    /// and nothing changed since: the session may end.
    Settled,
    /// The store may not hold the engine's text: a write (for an editor, at least a read: it
    /// may apply an edit with a difference of its own) comes before the session ends.
    Unsettled,
    /// A write found the store moved (or a file changed by someone else, not settled yet) and
    /// waits to be tried again, after `attempts`.
    Retrying { attempts: usize },
}

impl Rest {
    /// The attempts a write carries through a writer switch.
    pub(super) fn resume(self) -> Option<usize> {
        match self {
            Rest::Retrying { attempts } => Some(attempts),
            Rest::Settled | Rest::Unsettled => None,
        }
    }

    /// After a writer switch (the new writer has its text to take in).
    pub(super) fn after_switch(resume: Option<usize>) -> Self {
        resume.map_or(Rest::Unsettled, |attempts| Rest::Retrying { attempts })
    }

    /// The attempts the next write starts from.
    pub(super) fn attempts(self) -> usize {
        self.resume().unwrap_or(0)
    }
}

impl Op {
    pub(super) fn is_idle(&self) -> bool {
        matches!(self, Op::Idle(_))
    }

    /// Something changed that the store does not hold yet. An operation in flight decides its
    /// rest when it ends, from what its store answered.
    pub(super) fn unsettle(&mut self) {
        if let Op::Idle(rest @ Rest::Settled) = self {
            *rest = Rest::Unsettled;
        }
    }
}

/// What a write does when the store moved under it (`attempts` counting this one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NextTry {
    /// Read the store again at once and merge.
    Now,
    /// Wait this long first.
    After(Millis),
    /// Stop: the document keeps changing.
    GiveUp,
}

pub(super) fn next_try(attempts: usize) -> NextTry {
    if attempts >= MERGE_ATTEMPTS {
        NextTry::GiveUp
    } else if attempts < QUICK_ATTEMPTS {
        NextTry::Now
    } else {
        let shift = (attempts - QUICK_ATTEMPTS).min(10) as u32;
        NextTry::After((25 << shift).min(MAX_RETRY_DELAY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_and_a_shutdown_make_the_end() {
        use End::*;
        // (before, Ctrl-C, shutdown)
        let rows = [
            (WhenStopped, Interrupted, Leaving { interrupted: false }),
            (Interrupted, Interrupted, Leaving { interrupted: true }),
            (
                Leaving { interrupted: false },
                Leaving { interrupted: true },
                Leaving { interrupted: false },
            ),
            (
                Leaving { interrupted: true },
                Leaving { interrupted: true },
                Leaving { interrupted: true },
            ),
        ];
        for (before, interrupted, left) in rows {
            assert_eq!(before.interrupt(), interrupted, "{before:?} + Ctrl-C");
            assert_eq!(before.leave(), left, "{before:?} + shutdown");
        }
    }

    #[test]
    fn the_end_says_why_the_session_ended() {
        use End::*;
        let failed = StopReason::Error {
            message: "boom".into(),
        };
        // (end, the reason the cycle stopped for, the reason the session ends with)
        let rows = [
            (WhenStopped, None, StopReason::Idle),
            (WhenStopped, Some(&failed), failed.clone()),
            (Interrupted, Some(&failed), StopReason::Cancelled),
            (Interrupted, None, StopReason::Cancelled),
            (Leaving { interrupted: false }, None, StopReason::Idle),
            (
                Leaving { interrupted: false },
                Some(&failed),
                failed.clone(),
            ),
            (
                Leaving { interrupted: true },
                Some(&failed),
                StopReason::Cancelled,
            ),
        ];
        for (end, stopped, reason) in rows {
            assert_eq!(end.reason(stopped), reason, "{end:?} after {stopped:?}");
        }
    }

    #[test]
    fn a_store_that_moved_is_tried_again_at_once_then_more_slowly_then_given_up() {
        let rows = [
            (1, NextTry::Now),
            (5, NextTry::Now),
            (6, NextTry::After(25)),
            (7, NextTry::After(50)),
            (11, NextTry::After(800)),
            (12, NextTry::After(1000)),
            (19, NextTry::After(1000)),
            (20, NextTry::GiveUp),
            (21, NextTry::GiveUp),
        ];
        for (attempts, next) in rows {
            assert_eq!(next_try(attempts), next, "attempt {attempts}");
        }
    }

    #[test]
    fn a_rest_carries_a_retry_through_a_switch_and_is_unsettled_by_a_change() {
        // (rest, after a change, attempts carried through a switch, the rest after it)
        let rows = [
            (Rest::Settled, Rest::Unsettled, None, Rest::Unsettled),
            (Rest::Unsettled, Rest::Unsettled, None, Rest::Unsettled),
            (
                Rest::Retrying { attempts: 7 },
                Rest::Retrying { attempts: 7 },
                Some(7),
                Rest::Retrying { attempts: 7 },
            ),
        ];
        for (rest, changed, resume, switched) in rows {
            let mut op = Op::Idle(rest);
            op.unsettle();
            assert_eq!(op, Op::Idle(changed), "{rest:?} changed");
            assert_eq!(rest.resume(), resume, "{rest:?}");
            assert_eq!(Rest::after_switch(resume), switched, "{rest:?} switched");
        }
        // An operation in flight decides its rest when it ends.
        let mut reading = Op::Reading {
            store: 0,
            read: 1,
            attempts: 0,
        };
        let before = reading.clone();
        reading.unsettle();
        assert_eq!(reading, before);
    }

    #[test]
    fn a_writer_knows_what_it_holds_by_what_it_is() {
        let text = Snapshot {
            text: "a".into(),
            version: Some(3),
        };
        // (writer, is a file, stored text, editor's base, after writing "b")
        let rows = [
            (
                Writer::read_as(
                    1,
                    &StoreKind::Editor {
                        base: Arc::from("a"),
                    },
                    text.clone(),
                ),
                false,
                Some("a"),
                Some("a"),
                Holds::Editor {
                    stored: Snapshot {
                        text: "b".into(),
                        version: Some(4),
                    },
                },
            ),
            (
                Writer::read_as(0, &StoreKind::File, Snapshot::file("a")),
                true,
                Some("a"),
                None,
                Holds::File {
                    stored: Snapshot::file("b"),
                    settling: None,
                },
            ),
            (
                Writer {
                    store: 0,
                    holds: Holds::FileTakingOver,
                },
                true,
                None,
                None,
                Holds::File {
                    stored: Snapshot::file("b"),
                    settling: None,
                },
            ),
        ];
        for (mut writer, file, stored, base, written) in rows {
            assert_eq!(writer.is_file(), file, "{writer:?}");
            assert_eq!(
                writer.stored_mut().map(|s| s.text.clone()).as_deref(),
                stored,
                "{:?}",
                writer.holds
            );
            assert_eq!(writer.editor_text(), base, "{writer:?}");
            writer.written("b".into());
            assert_eq!(writer.holds, written);
        }
    }
}
