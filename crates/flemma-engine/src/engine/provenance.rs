//! The engine: where an untrusted chat's tool calls come from (`docs/security.md`).
//!
//! In a trusted chat a status means what it says. In an untrusted one (a file from someone
//! else) the engine runs a call only when flemmad saw it happen: an `(approved)` counts when
//! flemmad saw the call pending and the user (or, for a call from the model, the policy)
//! approved it; the policy decides a call without a result only when flemmad streamed it
//! from the model. What earlier processes saw is the shell's [`CallHistory`] (an input);
//! what this engine sees it keeps and reports as [`Effect::Saw`] for the shell to record. A
//! call that does not count waits for approval, with a `tool:unconfirmed` event saying why.

use flemma_config::{CallHistory, CallRef, Seen};

use super::*;

/// The resolver named for a call held for approval by its provenance.
pub const PROVENANCE_RESOLVER: &str = "urn:flemma:approval:provenance";

/// The provenance state of an untrusted chat's engine.
#[derive(Clone)]
pub(super) struct Provenance {
    /// The chat, as the history knows it.
    chat: std::path::PathBuf,
    history: Arc<dyn CallHistory>,
    /// What this engine saw itself: (how, tool id, name, canonical input).
    learned: HashSet<(Seen, String, String, String)>,
    /// The calls waiting for approval because of where they came from, and why.
    held: HashMap<String, Held>,
}

/// Why a call of an untrusted chat waits for approval although its text said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// It arrived marked `(approved)`, an approval flemmad did not see given.
    ApprovedOnArrival,
    /// It has no result and did not come from the model through flemmad.
    NotFromModel,
}

impl Held {
    fn as_reason(self) -> Unconfirmed {
        match self {
            Held::ApprovedOnArrival => Unconfirmed::ApprovedOnArrival,
            Held::NotFromModel => Unconfirmed::NotFromModel,
        }
    }

    fn message(self, id: &str, name: &str) -> String {
        match self {
            Held::ApprovedOnArrival => format!(
                "`{id}` ({name}) arrived marked `(approved)` in an untrusted chat, but flemmad did not see it approved: it waits for your approval"
            ),
            Held::NotFromModel => format!(
                "`{id}` ({name}) has no result and did not come from the model through flemmad (it was in the file): in an untrusted chat it waits for your approval"
            ),
        }
    }
}

impl std::fmt::Debug for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provenance")
            .field("chat", &self.chat)
            .field("learned", &self.learned.len())
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl Provenance {
    pub(super) fn new(chat: std::path::PathBuf, history: Arc<dyn CallHistory>) -> Self {
        Self {
            chat,
            history,
            learned: HashSet::new(),
            held: HashMap::new(),
        }
    }

    /// Whether flemmad saw the call `id` (`name` with `input`) the way `seen` says: in this
    /// engine, or before (the history).
    pub(super) fn saw(&self, seen: Seen, id: &str, name: &str, input: &Value) -> bool {
        let key = (seen, id.to_owned(), name.to_owned(), canonical_json(input));
        self.learned.contains(&key)
            || self.history.saw(
                &self.chat,
                seen,
                CallRef {
                    tool_id: id,
                    name,
                    input,
                },
            )
    }
}

impl Engine {
    /// Makes this the engine of an untrusted chat: its calls run only as far as `history`
    /// (what flemmad saw of the chat at `chat` before) and this engine's own sight allow.
    /// Without it every status counts as written (a trusted chat).
    pub fn untrusted(mut self, chat: std::path::PathBuf, history: Arc<dyn CallHistory>) -> Self {
        self.provenance = Some(Provenance::new(chat, history));
        self
    }

    /// Whether the engine runs an untrusted chat.
    pub fn is_untrusted(&self) -> bool {
        self.provenance.is_some()
    }

    /// Records that flemmad saw the call `id` the way `seen` says (untrusted chats only): kept
    /// here, and told to the shell once.
    pub(super) fn learn(&mut self, seen: Seen, id: &str, out: &mut Vec<Effect>) {
        let Some((name, input)) = self.call(id) else {
            return;
        };
        let Some(provenance) = &mut self.provenance else {
            return;
        };
        let key = (seen, id.to_owned(), name.clone(), canonical_json(&input));
        if provenance.learned.insert(key) {
            provenance.held.remove(id);
            out.push(Effect::Saw {
                seen,
                tool_id: id.to_owned(),
                name,
                input,
            });
        }
    }

    /// The approval of `id` counts: a trusted chat, or flemmad saw it given.
    pub(super) fn approval_counts(&self, id: &str) -> bool {
        let Some(provenance) = &self.provenance else {
            return true;
        };
        match self.call(id) {
            Some((name, input)) => provenance.saw(Seen::Approved, id, &name, &input),
            None => true,
        }
    }

    /// Whether the policy may decide the call `id` (`name` with `input`) without a result: a
    /// trusted chat, or flemmad streamed it from the model.
    pub(super) fn came_from_model(&self, id: &str, name: &str, input: &Value) -> bool {
        self.provenance
            .as_ref()
            .is_none_or(|p| p.saw(Seen::FromModel, id, name, input))
    }

    /// Holds the call `id` for approval for `why`, telling so once.
    pub(super) fn hold(&mut self, id: &str, why: Held, out: &mut Vec<Effect>) {
        let name = self.call(id).map(|(name, _)| name).unwrap_or_default();
        let Some(provenance) = &mut self.provenance else {
            return;
        };
        if provenance.held.insert(id.to_owned(), why) != Some(why) {
            let message = why.message(id, &name);
            emit(
                out,
                EngineEvent::ToolUnconfirmed(ToolUnconfirmed {
                    tool_id: id.to_owned(),
                    tool_name: name,
                    reason: why.as_reason(),
                    message,
                }),
            );
        }
    }

    /// The resolver to name for a pending call held by its provenance.
    pub(super) fn held_resolver(&self, id: &str) -> Option<&'static str> {
        self.provenance
            .as_ref()
            .and_then(|p| p.held.get(id))
            .map(|_| PROVENANCE_RESOLVER)
    }

    /// The calls of a reply the engine streamed came from the model.
    pub(super) fn learn_reply_calls(&mut self, block_start: usize, out: &mut Vec<Effect>) {
        if self.provenance.is_none() {
            return;
        }
        let ids: Vec<String> = self
            .doc
            .messages()
            .iter()
            .filter(|m| m.role == Role::Assistant && m.range.start >= block_start)
            .flat_map(|m| m.tool_uses().map(|(_, t)| t.id.clone()))
            .collect();
        for id in ids {
            self.learn(Seen::FromModel, &id, out);
        }
    }

    /// The pending calls (id, name, input) before a change someone else made: the ones it
    /// marks `(approved)` unchanged were approved while flemmad watched.
    pub(super) fn pending_before_change(&self) -> Vec<(String, String, Value)> {
        self.placeholders(Some(Status::Pending))
            .into_iter()
            .filter_map(|(_, _, result)| {
                let id = result.tool_use_id.clone();
                self.call(&id).map(|(name, input)| (id, name, input))
            })
            .collect()
    }

    /// After a change: the calls of `before` it approved, unchanged, were approved by whoever
    /// edits the chat while flemmad watches it (the user in the editor, or on disk) — unless a
    /// tool of this chat ran since the last such change (`tool_may_have_written`): an approval
    /// is a user's act, never text a tool wrote, so such a call goes back to pending and waits
    /// for an approval flemmad sees given (the editor's Approve action, `flemmad approve`).
    pub(super) fn learn_approved_in_change(
        &mut self,
        before: Vec<(String, String, Value)>,
        tool_may_have_written: bool,
        out: &mut Vec<Effect>,
    ) {
        for (id, name, input) in before {
            let approved = self.doc.tool_result(&id).is_some_and(|(_, _, r)| {
                r.suffix.as_ref().and_then(|s| s.status()) == Some(Status::Approved)
            });
            if !approved || self.call(&id) != Some((name.clone(), input)) {
                continue;
            }
            if tool_may_have_written {
                if let Some(edit) = self.doc.set_tool_result_status(&id, Some(Status::Pending)) {
                    self.apply(vec![edit], out);
                }
                let message = format!(
                    "`{id}` ({name}) was marked `(approved)` in the chat while a tool of this chat ran, so flemmad cannot tell it from a tool's write: it waits for your approval (the editor's Approve action, or `flemmad approve`)"
                );
                emit(
                    out,
                    EngineEvent::ToolUnconfirmed(ToolUnconfirmed {
                        tool_id: id,
                        tool_name: name,
                        reason: Unconfirmed::ApprovedWhileAToolRan,
                        message,
                    }),
                );
            } else if self.provenance.is_some() {
                self.learn(Seen::Approved, &id, out);
            }
        }
    }
}
