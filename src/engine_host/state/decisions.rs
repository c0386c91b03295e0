//! The host state's decisions on tool calls — the first decision on a call is the one that
//! counts, whichever front end sends it — and its refusals of what may not happen while a
//! driver works (cancel and background need one; compaction, undo, cut and rewind need none).

use std::path::Path;

use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;

use flemma_ide::actions::{ActionError, check_pending, pending_ids};

use super::HostState;
use crate::compaction::ByHand;

/// How a call was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decided {
    Approved,
    Rejected,
}

impl Decided {
    fn as_str(self) -> &'static str {
        match self {
            Decided::Approved => "approved",
            Decided::Rejected => "rejected",
        }
    }
}

/// What the calls to be decided are checked on when no driver runs (a running driver's pending
/// calls, the state's own, always decide). Read by the caller from a text, so that the state
/// never holds one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Checked {
    /// What a text (the caller's buffer, or the file) says: the calls pending in it, and
    /// whether the call named is pending (why not, when it is not).
    Text {
        pending: Vec<String>,
        named: Option<(String, Result<(), ActionError>)>,
    },
    /// Nothing known here (another editor's buffer): accepted, its driver decides.
    Unknown,
}

impl Checked {
    /// What `doc` says of the call `tool_id` (with `None`, of every pending call).
    pub fn text(doc: &flemma_syntax::Document, tool_id: Option<&str>) -> Self {
        Checked::Text {
            pending: pending_ids(doc),
            named: tool_id.map(|id| (id.to_owned(), check_pending(doc, id))),
        }
    }

    /// Whether the text says `id` is pending (`None`: no text).
    fn pending(&self, id: &str) -> Option<bool> {
        match self {
            Checked::Text {
                named: Some((named, check)),
                ..
            } if named == id => Some(check.is_ok()),
            Checked::Text { pending, .. } => Some(pending.iter().any(|p| p == id)),
            Checked::Unknown => None,
        }
    }

    /// Why the text says `id` is not pending, when it is the call named and not pending.
    fn why_not(&self, id: &str) -> Option<&ActionError> {
        match self {
            Checked::Text {
                named: Some((named, Err(error))),
                ..
            } if named == id => Some(error),
            _ => None,
        }
    }
}

/// The most decisions a document remembers (the oldest are long in the text).
pub(super) const DECIDED_KEPT: usize = 1024;

impl HostState {
    /// Whether the calls to decide on `path` are checked on the file when the caller holds no
    /// buffer — no driver runs, and no editor has it open — with the number of the last driver
    /// that ran for it (the file is read as that driver left it).
    pub fn decided_on_file(&self, path: &Path) -> Option<u64> {
        let doc = self.docs.get(path);
        let checked = !self.is_running(path) && !self.has_editor(path);
        checked.then(|| doc.map_or(0, |doc| doc.epoch))
    }

    /// Decides `tool_id` (or, with `None`, every pending call) as `how`: **the first decision
    /// on a call is the one that counts**, whichever front end sends it and however close
    /// together. Each call is checked on what knows it best — a running driver's pending
    /// calls, else `text` — and against the decisions already taken; the decision is recorded
    /// with the driver that will handle it (the running one, else the next). A recorded
    /// decision is in flight until the text shows it; only a driver that failed may have
    /// dropped decisions, and then a new one may be taken. Returns what was accepted.
    pub fn decide(
        &mut self,
        path: &Path,
        tool_id: Option<&str>,
        how: Decided,
        text: Checked,
    ) -> Result<Accepted, RequestError> {
        let state = self.doc(path);
        let running = state.running();
        let handler = state.epoch + u64::from(!running);
        let waiting: Option<Vec<String>> = state
            .driver
            .as_ref()
            .filter(|_| running)
            .map(|driver| driver.pending.clone());
        let text = match (&waiting, text) {
            (Some(_), _) | (None, Checked::Unknown) => None,
            (None, text @ Checked::Text { .. }) => Some(text),
        };
        let refused = |error: ActionError| RequestError::invalid_params(error.to_string());
        let pending_now = |id: &str| match (&waiting, &text) {
            (Some(waiting), _) => waiting.iter().any(|w| w == id),
            (None, Some(text)) => text.pending(id) == Some(true),
            (None, None) => true,
        };
        let ids: Vec<String> = match tool_id {
            Some(id) => vec![id.to_owned()],
            None => match (&waiting, &text) {
                (Some(waiting), _) => waiting.clone(),
                (None, Some(Checked::Text { pending, .. })) => pending.clone(),
                (None, _) => Vec::new(),
            },
        };
        if tool_id.is_none() && ids.is_empty() && (waiting.is_some() || text.is_some()) {
            return Err(refused(ActionError::NothingPending));
        }
        let mut decided = Vec::new();
        let mut first_refusal = None;
        for id in &ids {
            let already = |was: &str| {
                RequestError::refused(format!(
                    "`{id}` was already {was}: the first decision on a call (approve, reject or cancel) is the one that counts; edit the chat yourself to change it"
                ))
            };
            let before = state
                .decided
                .get(id.as_str())
                .map(|&(how, by, _)| (how, by));
            let refusal = match (before, pending_now(id)) {
                // The text says it is decided: say what it says.
                (before, false) => Some(match (&text, &waiting, before) {
                    (Some(text), None, _) => match text.why_not(id) {
                        Some(error) => refused(error.clone()),
                        None => already(before.map_or("decided", |b| b.0.as_str())),
                    },
                    (_, _, Some((was, _))) => already(was.as_str()),
                    _ => RequestError::refused(format!(
                        "`{id}` is not waiting for approval (it was decided already, or it is not in the chat); pending: {}",
                        waiting
                            .as_ref()
                            .filter(|w| !w.is_empty())
                            .map_or_else(|| "none".to_owned(), |w| w.join(", "))
                    )),
                }),
                // Still pending, decided before: in flight (the host hands every decision to
                // the running driver, which applies what it got before it ends, or to the next
                // one), unless the driver failed before applying it.
                (Some((was, by)), true) => {
                    let lost = !running && state.last_failed && by <= state.epoch;
                    (!lost).then(|| already(was.as_str()))
                }
                (None, true) => None,
            };
            match refusal {
                Some(refusal) => {
                    first_refusal.get_or_insert(refusal);
                }
                None => decided.push(id.clone()),
            }
        }
        if let (true, Some(refusal)) = (decided.is_empty(), first_refusal) {
            return Err(refusal);
        }
        for id in &decided {
            state.decisions += 1;
            let order = state.decisions;
            state.decided.insert(id.clone(), (how, handler, order));
        }
        // An `approveAll` may add many at once: the oldest decisions go until the rest fit.
        while state.decided.len() > DECIDED_KEPT {
            let oldest = state
                .decided
                .iter()
                .min_by_key(|(_, (_, _, order))| *order)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => state.decided.remove(&id),
                None => break,
            };
        }
        Ok(Accepted {
            started: !running,
            tool_ids: decided,
        })
    }

    /// Refuses `action` (`cancel`, `move to the background`) of `what` when no driver runs for
    /// `path`.
    pub fn running_only(
        &self,
        path: &Path,
        what: &str,
        action: &str,
    ) -> Result<Accepted, RequestError> {
        match self.is_running(path) {
            true => Ok(Accepted::default()),
            false => Err(RequestError::refused(format!(
                "nothing runs for {}: there is no {what} to {action}",
                path.display()
            ))),
        }
    }

    /// Refuses a compaction, its undo or a cut by hand while a driver works on `path`
    /// (automatic compaction runs there).
    pub fn by_hand(&self, path: &Path, order: &ByHand) -> Result<Accepted, RequestError> {
        let what = match order {
            ByHand::Compact(_) => "compact",
            ByHand::Undo { .. } => "undo the compaction",
            ByHand::Rewind { .. } => "cut the chat back",
        };
        let hint = "during a send, `context.compact_at` compacts on its own";
        self.idle_for(path, what, hint)?;
        Ok(self.accepted(path))
    }

    /// Refuses a rewind while a driver works on `path`.
    pub fn rewind(&self, path: &Path) -> Result<(), RequestError> {
        self.idle_for(path, "rewind", "cancel it first")
    }

    /// Refuses `what` while a driver works on `path` (`hint`: what to do meanwhile).
    fn idle_for(&self, path: &Path, what: &str, hint: &str) -> Result<(), RequestError> {
        if !self.is_running(path) {
            return Ok(());
        }
        Err(RequestError::refused(format!(
            "flemmad works on {} (a send, tools or jobs): {what} once it stops ({hint})",
            path.display()
        )))
    }
}
