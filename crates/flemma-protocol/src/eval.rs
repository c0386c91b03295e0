//! The JSON form of an evaluated `.chat` document (`flemmad parse FILE --eval --json`,
//! protocol/eval.md).
//!
//! Stable: fields are only ever added. Positions as in [`crate::parse_tree`].

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::parse_tree::Range;

/// The whole output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EvaluatedDocument {
    /// The provider-neutral conversation that would be sent (`system`, `messages` with typed
    /// parts; see protocol/eval.md).
    pub conversation: Value,
    /// What the frontmatter set, per top-level table, in the layer form (op-prefixed lists).
    pub config_layer: Value,
    /// Every problem with the document: syntax, configuration and template diagnostics, the
    /// same list every command reports.
    pub diagnostics: Vec<EvalDiagnostic>,
    /// The resolved configuration (defaults, config file, frontmatter); null when it does not
    /// resolve.
    pub config: Option<Value>,
    /// For every value not left at its default, the layer that set it (`config file`,
    /// `frontmatter`, …).
    pub config_sources: Map<String, Value>,
    /// One message per configuration error (also among `diagnostics`, with code `config`).
    pub config_errors: Vec<String>,
    /// Whether a diagnostic blocks sending (`flemmad send` would refuse).
    pub blocked: bool,
}

/// Byte offsets into the `.chat` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Offsets {
    pub start: u64,
    pub end: u64,
}

/// One diagnostic.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EvalDiagnostic {
    /// Where in the `.chat` file (for problems in other files: the place that brought the file
    /// in, or the start of the document).
    pub range: Range,
    /// The same range in bytes.
    pub offsets: Offsets,
    /// The other file the problem is in (an included file, a module, the config file).
    pub file: Option<String>,
    /// The 1-based line in `file`.
    pub line_in_file: Option<u64>,
    /// `error`, `warning`, `information` or `hint`.
    pub severity: String,
    /// `syntax`, `template`, `config` or `send`.
    pub source: String,
    /// A stable identifier (`unclosed-fence`, `template-code`, `config`, …).
    pub code: String,
    /// For template diagnostics, what it is about (`frontmatter`, `expression`, `code`,
    /// `include`, `file_reference`, `tool`, `module`); null otherwise.
    pub category: Option<String>,
    pub message: String,
    /// A further suggestion (the option probably meant, the edit that fixes it).
    pub hint: Option<String>,
    /// For include problems: the files being included, outermost first.
    pub include_stack: Vec<String>,
    /// Whether it stops a send.
    pub blocking: bool,
}
