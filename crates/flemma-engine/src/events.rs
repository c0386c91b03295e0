//! Lifecycle events (`harness.md` §9, seed `004`): the engine says what happens as
//! [`EngineEvent`]s, whose names and data are `flemma_protocol::event`'s (one closed list).

use crate::types::{Effect, EngineEvent};

pub fn emit(out: &mut Vec<Effect>, event: EngineEvent) {
    out.push(Effect::Emit(event));
}
