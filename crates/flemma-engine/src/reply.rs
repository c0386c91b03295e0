//! The one place that uses the reply renderer (events → `.chat` text, from the pure
//! `flemma-wire` crate).

pub use flemma_wire::render::{ReplyOutcome, ReplyRenderer};

/// A renderer for one reply. `verbatim_arguments`: write tool-call argument strings as the
/// provider sent them (OpenAI Responses, Chat Completions, Moonshot — prompt-cache stability).
pub fn renderer(compact_headers: bool, verbatim_arguments: bool) -> ReplyRenderer {
    if verbatim_arguments {
        ReplyRenderer::for_provider(flemma_wire::ProviderKind::OpenAi, compact_headers)
    } else {
        ReplyRenderer::new(compact_headers)
    }
}
