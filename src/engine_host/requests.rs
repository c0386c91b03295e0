//! The requests of [`super::EngineHost::call`], one file per group (as the language server has
//! one file per handler): each checks what it can, asks the host's state, and hands the
//! command to the host's thread.

mod by_hand;
mod checks;
mod decide;
mod proposal;
mod run;
mod switch;

pub(super) use by_hand::checkpoint_refusal;
pub(super) use decide::agent_permission;
