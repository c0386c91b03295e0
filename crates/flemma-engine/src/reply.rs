//! The one place that uses the reply renderer (moving from `flemma-provider` to `flemma-wire`:
//! switch this import).

pub use flemma_provider::render::{ReplyOutcome, ReplyRenderer};
