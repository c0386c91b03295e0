//! `flemma-syntax`: the `.chat` format as a lossless tree with byte ranges, its printer, queries
//! and text edits. No IO, no async, no panics on any input.
//!
//! ```
//! let doc = flemma_syntax::parse("@You:\nHello {{ name }}\n");
//! assert_eq!(doc.print(), "@You:\nHello {{ name }}\n");
//! assert_eq!(doc.messages()[0].segments.len(), 3);
//! ```

mod range;
pub mod suffix;
mod tree;
pub mod write;

pub use range::{Encoding, LineIndex, Position, TextRange};
pub use suffix::{Status, Suffix, SuffixValue};
pub use tree::*;

mod document;
mod dump;
mod edits;
mod lines;
mod merge;
mod parser;
mod remote;
mod scan;
mod text_edit;

pub use document::{Document, LineEnding, NodeAt};
pub use merge::{MergeConflict, three_way_base};
pub use remote::{EditFate, RemoteEdit};
pub use scan::scan_templated;
pub use text_edit::{
    Assoc, EditError, TextEdit, TextEdits, apply_edits, diff_to_edits, edits_fit, map_offset,
    same_result, single_edit,
};

/// Parses a `.chat` text. Never fails and never panics; problems are diagnostics.
pub fn parse(text: impl Into<String>) -> Document {
    Document::parse(text)
}
