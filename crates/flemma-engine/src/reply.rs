//! The one place that uses the reply renderer (moving from `flemma-provider` to `flemma-wire`:
//! switch these imports).

pub use flemma_provider::render::{ReplyOutcome, ReplyRenderer};

/// A renderer for one reply. `verbatim_arguments`: write tool-call argument strings as the
/// provider sent them (OpenAI Responses, Chat Completions, Moonshot — prompt-cache stability).
pub fn renderer(compact_headers: bool, verbatim_arguments: bool) -> ReplyRenderer {
    if verbatim_arguments {
        ReplyRenderer::for_provider(flemma_provider::ProviderKind::OpenAi, compact_headers)
    } else {
        ReplyRenderer::new(compact_headers)
    }
}
