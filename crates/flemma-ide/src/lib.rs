//! The analysis core shared by every front end (the CLI, the language server, the daemon).
//!
//! Plain data in, plain data out: no LSP types, no IO except through the template `Host` the
//! caller gives. Positions are byte offsets; front ends convert them with
//! [`flemma_syntax::LineIndex`] when they print or send them.
//!
//! * [`AnalysisHost`] holds the open documents and the configuration below the frontmatter
//!   ([`ConfigInput`]); it applies changes (full text or [`flemma_syntax::TextEdit`]s) and
//!   answers [`AnalysisHost::analysis`].
//! * [`Analysis`] is the document, its evaluation, its resolved configuration with layers, and
//!   one list of [`Diagnostic`]s; [`Analysis::send_blockers`] is the one place that decides
//!   what stops a send.
//! * [`to_protocol`] turns analyses into the stable JSON types of `flemma-protocol`.

pub mod actions;
mod analysis;
mod diagnostic;
pub mod features;
pub mod to_protocol;
pub mod untrusted;

pub use analysis::{
    Analysis, AnalysisHost, AnalysisJob, CONFIG_WARNING, ChangeError, ConfigInput, DocumentId,
    NOTHING_TO_SEND, Purpose,
};
pub use diagnostic::{Diagnostic, Source};
