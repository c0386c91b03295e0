//! Where a template comes from, for diagnostics: the chat file itself or an included file.

use std::path::PathBuf;
use std::sync::Arc;

use flemma_syntax::{Severity, TextRange};

use crate::{Category, TemplateDiagnostic};

/// The source of a running template.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// The included file; `None` for the chat file.
    pub file: Option<PathBuf>,
    /// The template's text (line numbers of included files are computed from it).
    pub text: Arc<str>,
    /// For included files: the range of the outermost `include()` call in the chat file.
    pub anchor: Option<TextRange>,
    /// The files being rendered, outermost first (the chat file when it has a path).
    pub include_stack: Vec<PathBuf>,
    /// The directory relative paths resolve against.
    pub dir: PathBuf,
    /// `__filename` of this template (the chat path or the included file; empty when unsaved).
    pub filename: String,
}

impl Origin {
    /// A diagnostic about `range` of this template's text.
    pub(crate) fn diagnostic(
        &self,
        range: TextRange,
        severity: Severity,
        category: Category,
        message: String,
        blocking: bool,
    ) -> TemplateDiagnostic {
        match &self.file {
            None => TemplateDiagnostic {
                range,
                file: None,
                line_in_file: None,
                severity,
                category,
                message,
                include_stack: Vec::new(),
                blocking,
            },
            Some(file) => {
                let before = self
                    .text
                    .get(..range.start.min(self.text.len()))
                    .unwrap_or("");
                let line = before.matches('\n').count() + 1;
                TemplateDiagnostic {
                    range: self.anchor.unwrap_or(range),
                    file: Some(file.clone()),
                    line_in_file: Some(u32::try_from(line).unwrap_or(u32::MAX)),
                    severity,
                    category,
                    message,
                    include_stack: self.include_stack.clone(),
                    blocking,
                }
            }
        }
    }
}
