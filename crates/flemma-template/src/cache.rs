//! [`TemplateCache`]: compiled templates and, per document, the result of every message, so that
//! evaluating a document again after an edit only evaluates the messages the edit changed (and
//! the later ones whose template variables it changed).
//!
//! Each message's entry is keyed by a hash of a *chain key* and the message's own text (and the
//! names of the tools its results answer). The chain key stands for the template variables the
//! message starts with: it begins as the frontmatter's outcome (its text, the template modules,
//! the variables it left, the options), passes unchanged over a message that runs no template
//! code, and after one that does becomes the fingerprint of the variables it left. So a message
//! is reused exactly when its text and the variables it sees are the same, wherever it stands:
//! its diagnostics are kept relative to its start (an entry with a diagnostic outside the message
//! is only reused at its own offset). A message whose evaluation touched the outside world (a
//! file, `include()`, the clock) is never reused: it is evaluated again each time.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use flemma_conversation::Parts;
use rhai::{AST, Engine, Scope};

use flemma_syntax::TextRange;

use crate::TemplateDiagnostic;

/// The hasher of the chain keys: every message's text is hashed on every evaluation, so it must
/// be fast on long input (several times SipHash's speed); the seed is fixed so that keys do not
/// depend on anything but their input.
pub(crate) type KeyHasher = foldhash::quality::FoldHasher<'static>;

/// A fresh [`KeyHasher`].
pub(crate) fn key_hasher() -> KeyHasher {
    foldhash::quality::FixedState::with_seed(0x666c_656d_6d61_6421).build_hasher()
}

/// How many compiled templates a cache keeps before it starts over.
const COMPILED_ENTRIES: usize = 8192;
/// How many documents' message results a cache keeps before it drops one.
const DOCUMENTS: usize = 64;

/// Compiled templates and per-message results, reused across evaluations.
///
/// Cloning shares the cache. Give every evaluation of a document the same cache (through
/// [`crate::EvalOptions::cache`]) and re-evaluating after an edit in the last message redoes
/// only that message. Documents are told apart by [`crate::EvalOptions::path`].
///
/// Memory: for each cached document, every message's parts (shared with the conversations
/// the evaluations returned, not copied) and, after each message
/// that runs template code, a copy of the template variables.
#[derive(Debug, Clone, Default)]
pub struct TemplateCache {
    inner: Arc<Mutex<CacheState>>,
}

#[derive(Debug, Default)]
struct CacheState {
    compiled: HashMap<String, Arc<AST>>,
    documents: HashMap<Option<PathBuf>, Vec<MessageEntry>>,
}

/// What one message evaluated to.
#[derive(Debug, Clone)]
pub(crate) struct MessageOutput {
    pub parts: Parts,
    /// Its diagnostics, with ranges relative to the message's start (unless the entry is
    /// pinned, see [`MessageEntry::pinned_at`]).
    diagnostics: Vec<TemplateDiagnostic>,
}

/// One message of a cached document.
#[derive(Debug, Clone)]
pub(crate) struct MessageEntry {
    /// The key of the message: the chain key before it, its text, the tools its results answer.
    pub input_key: u64,
    /// The chain key after it: the one before it when it ran no template code, else the
    /// variables it left (with the document's head).
    pub chain_key: u64,
    /// `None` when the message must be evaluated again each time.
    pub output: Option<MessageOutput>,
    /// The offset the message must stand at to be reused: set when a diagnostic lies outside
    /// the message, so that it cannot be moved with it.
    pub pinned_at: Option<usize>,
    /// The template variables after the message, when it ran template code.
    pub scope_after: Option<Arc<Scope<'static>>>,
}

impl MessageEntry {
    /// What is left where an entry was taken out for reuse (never reusable itself).
    pub(crate) fn taken() -> Self {
        Self {
            input_key: 0,
            chain_key: 0,
            output: None,
            pinned_at: None,
            scope_after: None,
        }
    }
}

impl MessageOutput {
    /// The output of the message at `message`, and whether it must stay pinned there (a
    /// diagnostic lies outside the message).
    pub(crate) fn new(
        parts: Parts,
        diagnostics: &[TemplateDiagnostic],
        message: TextRange,
    ) -> (Self, bool) {
        let inside = |range: TextRange| message.start <= range.start && range.end <= message.end;
        let pinned = !diagnostics.iter().all(|d| inside(d.range));
        let diagnostics = diagnostics
            .iter()
            .map(|d| {
                let mut relative = d.clone();
                if !pinned {
                    relative.range =
                        TextRange::new(d.range.start - message.start, d.range.end - message.start);
                }
                relative
            })
            .collect();
        (Self { parts, diagnostics }, pinned)
    }

    /// The diagnostics for the message standing at `start` (a pinned entry is only reused at
    /// its own offset, where the shift is zero).
    pub(crate) fn diagnostics_at(
        &self,
        start: usize,
        pinned: bool,
    ) -> impl Iterator<Item = TemplateDiagnostic> + '_ {
        self.diagnostics.iter().map(move |d| {
            let mut shifted = d.clone();
            if !pinned {
                shifted.range = TextRange::new(d.range.start + start, d.range.end + start);
            }
            shifted
        })
    }
}

impl TemplateCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets everything (the next evaluation compiles and evaluates everything again).
    pub fn clear(&self) {
        let mut state = self.lock();
        state.compiled.clear();
        state.documents.clear();
    }

    /// Forgets the message results of the document at `path` (`None`: the unsaved buffer),
    /// for example when it is closed.
    pub fn forget_document(&self, path: Option<&std::path::Path>) {
        self.lock()
            .documents
            .remove(&path.map(std::path::Path::to_path_buf));
    }

    /// How many messages of the document at `path` have a reusable result.
    pub fn cached_messages(&self, path: Option<&std::path::Path>) -> usize {
        self.lock()
            .documents
            .get(&path.map(std::path::Path::to_path_buf))
            .map_or(0, |entries| {
                entries.iter().filter(|e| e.output.is_some()).count()
            })
    }

    /// How many compiled scripts the cache holds.
    pub fn compiled_scripts(&self) -> usize {
        self.lock().compiled.len()
    }

    /// Compiles `code`, reusing an earlier compilation of the same source.
    pub(crate) fn compile(
        &self,
        engine: &Engine,
        code: &str,
    ) -> Result<Arc<AST>, rhai::ParseError> {
        // The parse limits are part of the key: an AST accepted under larger limits must not be
        // reused by an engine with smaller ones. Every engine is otherwise configured the same
        // way for parsing, so an AST compiled by one is valid for all.
        let key = format!(
            "{}:{}\n{code}",
            engine.max_expr_depth(),
            engine.max_function_expr_depth()
        );
        if let Some(ast) = self.lock().compiled.get(&key) {
            return Ok(ast.clone());
        }
        let ast = Arc::new(engine.compile(code)?);
        let mut state = self.lock();
        if state.compiled.len() >= COMPILED_ENTRIES {
            state.compiled.clear();
        }
        state.compiled.insert(key, ast.clone());
        Ok(ast)
    }

    /// Takes the message entries of a document out of the cache (the evaluation puts the new
    /// ones back with [`Self::store_messages`]).
    pub(crate) fn take_messages(&self, path: Option<&std::path::Path>) -> Vec<MessageEntry> {
        self.lock()
            .documents
            .remove(&path.map(std::path::Path::to_path_buf))
            .unwrap_or_default()
    }

    pub(crate) fn store_messages(
        &self,
        path: Option<&std::path::Path>,
        entries: Vec<MessageEntry>,
    ) {
        let mut state = self.lock();
        if state.documents.len() >= DOCUMENTS
            && let Some(victim) = state.documents.keys().next().cloned()
        {
            state.documents.remove(&victim);
        }
        state
            .documents
            .insert(path.map(std::path::Path::to_path_buf), entries);
    }
}

/// A fingerprint of the template variables: their names, constness and values (through their
/// debug form, which shows the whole value).
pub(crate) fn scope_fingerprint(scope: &Scope<'_>) -> u64 {
    struct Feed<'h>(&'h mut KeyHasher);
    impl std::fmt::Write for Feed<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut hasher = key_hasher();
    for (name, constant, value) in scope.iter_raw() {
        name.hash(&mut hasher);
        constant.hash(&mut hasher);
        // Writing into a hasher cannot fail.
        let _ = write!(Feed(&mut hasher), "{value:?}");
        0xffu8.hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use flemma_syntax::Severity;

    use super::*;
    use crate::Category;

    fn diagnostic(start: usize, end: usize) -> TemplateDiagnostic {
        TemplateDiagnostic {
            range: TextRange::new(start, end),
            file: None,
            line_in_file: None,
            severity: Severity::Warning,
            category: Category::Expression,
            message: "undefined variable".to_owned(),
            include_stack: Vec::new(),
            blocking: false,
        }
    }

    #[test]
    fn diagnostics_inside_the_message_move_with_it() {
        let message = TextRange::new(100, 200);
        let (output, pinned) =
            MessageOutput::new(Parts::default(), &[diagnostic(110, 120)], message);
        assert!(!pinned);
        let moved: Vec<_> = output.diagnostics_at(1000, pinned).collect();
        assert_eq!(moved[0].range, TextRange::new(1010, 1020));
        let unmoved: Vec<_> = output.diagnostics_at(100, pinned).collect();
        assert_eq!(unmoved[0].range, TextRange::new(110, 120));
    }

    #[test]
    fn a_diagnostic_outside_the_message_pins_it_to_its_offset() {
        let message = TextRange::new(100, 200);
        let (output, pinned) = MessageOutput::new(
            Parts::default(),
            &[diagnostic(110, 120), diagnostic(0, 0)],
            message,
        );
        assert!(pinned);
        let kept: Vec<_> = output.diagnostics_at(100, pinned).collect();
        assert_eq!(kept[0].range, TextRange::new(110, 120));
        assert_eq!(kept[1].range, TextRange::new(0, 0));
    }
}
