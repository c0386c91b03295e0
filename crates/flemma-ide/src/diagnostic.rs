//! The one diagnostic type every front end renders: syntax, template, configuration and send
//! problems, with byte ranges into the document and the `blocking` flag as data.

use std::path::PathBuf;

use flemma_syntax::{Severity, TextRange};

/// Which stage found a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The parser (`flemma_syntax`).
    Syntax,
    /// Frontmatter and template evaluation (`flemma_template`).
    Template,
    /// Reading or resolving the configuration (`flemma_config`).
    Config,
    /// The rules of sending itself (nothing to send).
    Send,
}

impl Source {
    /// The stable lower-case name (`syntax`, `template`, `config`, `send`).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Syntax => "syntax",
            Source::Template => "template",
            Source::Config => "config",
            Source::Send => "send",
        }
    }
}

/// One problem with a document.
///
/// Positions are byte offsets into the document's text; front ends convert them (with
/// [`flemma_syntax::LineIndex`]) only when they print or send them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where in this document. For a problem in another file ([`Self::file`]): the place in
    /// this document that brought the file in (an `include()` call), or the empty range at 0
    /// when the document does not refer to the file (the config file, a template module).
    pub range: TextRange,
    /// The other file the problem is in; `None`: this document.
    pub file: Option<PathBuf>,
    /// The 1-based line in [`Self::file`], when known.
    pub line_in_file: Option<usize>,
    /// How bad it is.
    pub severity: Severity,
    /// Which stage found it.
    pub source: Source,
    /// A stable identifier code actions and tests can match on (`unclosed-fence`,
    /// `template-code`, `config`, `nothing-to-send`, …).
    pub code: String,
    /// What happened and what to do.
    pub message: String,
    /// A further suggestion (the option the user probably meant, the edit that fixes it).
    pub hint: Option<String>,
    /// For problems in included files: the files being included, outermost first.
    pub include_stack: Vec<PathBuf>,
    /// Whether this problem stops a send. See [`crate::Analysis::send_blockers`].
    pub blocking: bool,
}

impl Diagnostic {
    /// Whether the problem is in another file that the document does not point at (its
    /// `range` carries no place in the document).
    pub fn is_outside_document(&self) -> bool {
        self.file.is_some() && self.range == TextRange::new(0, 0)
    }
}
