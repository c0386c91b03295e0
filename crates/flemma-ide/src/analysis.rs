//! [`AnalysisHost`]: the documents a front end has open, changed incrementally, and the
//! [`Analysis`] of each (syntax tree, evaluation, resolved configuration, one list of
//! [`Diagnostic`]s), computed on demand and cached until the document or the configuration
//! changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use flemma_config::{
    CallHistory, ChatTrust, ConfigError, ConfigErrors, ConfigLayer, LayerKind, ResolvedConfig,
    TrustSettings,
};
use flemma_syntax::{DiagnosticCode, Document, Role, Severity, TextEdit, TextRange};
use flemma_template::{
    Category, EvalOptions, Evaluation, Host, PersonalityContext, ReadScope, TemplateCache,
    TemplateDiagnostic, TemplatingOptions,
};

use crate::diagnostic::{Diagnostic, Source};

/// A document the host holds, named by its absolute path (an unsaved buffer gets a path in
/// the directory its relative references should resolve against).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocumentId(PathBuf);

impl DocumentId {
    /// The document at `path` (the caller makes it absolute; the library does no IO).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The path the document is named by.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// The configuration below the frontmatter, given by the caller (the library never reads the
/// environment, the home directory or config files itself).
#[derive(Debug, Clone, Default)]
pub struct ConfigInput {
    /// The user configuration file, when one is used (for naming it in diagnostics).
    pub user_file: Option<PathBuf>,
    /// The layers below the frontmatter (user file, client settings, runtime changes).
    pub layers: Vec<ConfigLayer>,
    /// Problems reading the layers (an unreadable or invalid config file); they block sends.
    pub errors: Vec<ConfigError>,
    /// The home directory, for `~/` in `templating.modules` and `trust.paths`.
    pub home_dir: Option<PathBuf>,
    /// The folders trusted with `flemmad trust` (the binary reads them). With the `[trust]`
    /// settings of the layers they decide whether a chat's frontmatter is trusted
    /// ([`flemma_config::chat_trust`]); a chat they do not cover is untrusted, so its
    /// frontmatter cannot widen what it may do (`docs/security.md`).
    pub trusted_folders: Vec<PathBuf>,
    /// What flemmad saw of the chats' tool calls: with it, an untrusted chat's `(approved)`
    /// statuses and tool calls without a result that flemmad did not see get a warning
    /// (`None`: not known, no such warning).
    pub call_history: Option<Arc<dyn CallHistory>>,
}

impl ConfigInput {
    /// Adds the user config file at `path`, given what reading it produced
    /// (`ConfigLayer::from_toml_file(path, LayerKind::UserFile)`).
    pub fn with_user_file(
        mut self,
        path: PathBuf,
        read: Result<ConfigLayer, ConfigErrors>,
    ) -> Self {
        match read {
            Ok(layer) => self.layers.push(layer),
            Err(errors) => self.errors.extend(errors.0),
        }
        self.user_file = Some(path);
        self
    }

    /// Adds a layer given what reading it produced (client settings, a runtime change): its
    /// problems become diagnostics that block sends.
    pub fn with_layer(mut self, read: Result<ConfigLayer, ConfigErrors>) -> Self {
        match read {
            Ok(layer) => self.layers.push(layer),
            Err(errors) => self.errors.extend(errors.0),
        }
        self
    }
}

impl ConfigInput {
    /// The problems of the configuration alone (reading it, resolving it without a
    /// document), for commands that have no chat (`models`). All block.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        resolve_base(self)
            .errors
            .iter()
            .map(|e| from_config(e, self.user_file.as_deref(), 0))
            .collect()
    }
}

/// A change the host refused; the document is left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// No document with this id is open.
    #[error("no document {} is open; open it with its full text first", .0.display())]
    UnknownDocument(PathBuf),
    /// An edit does not fit the text it applies to.
    #[error(
        "edit {index} ({start}..{end}) does not fit the document ({len} bytes, or not on a character boundary); nothing was changed, send the full text instead"
    )]
    EditOutOfRange {
        /// Which edit of the batch (0-based).
        index: usize,
        /// Its byte range in the text the earlier edits produced.
        start: usize,
        /// End of that range.
        end: usize,
        /// The length of that text.
        len: usize,
    },
}

/// Everything known about one document at one revision. Plain data.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The document's id (its path).
    pub id: DocumentId,
    /// The syntax tree and text.
    pub document: Arc<Document>,
    /// The template evaluation: the conversation that would be sent, the frontmatter layer.
    pub evaluation: Evaluation,
    /// Every configuration layer, lowest first: the caller's, then the frontmatter's (marked
    /// untrusted when the chat is).
    pub layers: Vec<ConfigLayer>,
    /// Whether the chat's frontmatter is trusted, and why.
    pub trust: ChatTrust,
    /// The resolved configuration with its provenance; `None` when it does not resolve (the
    /// reasons are `Config` diagnostics).
    pub config: Option<ResolvedConfig>,
    /// Every problem, in document order per source (syntax, config, template).
    pub diagnostics: Vec<Diagnostic>,
}

impl Analysis {
    /// Everything that stops this document from being sent: the blocking diagnostics, and
    /// "nothing to send" when the chat does not end in something to answer. `send` and
    /// `count` refuse when this is not empty.
    pub fn send_blockers(&self) -> Vec<Diagnostic> {
        let mut blockers: Vec<Diagnostic> = self
            .diagnostics
            .iter()
            .filter(|d| d.blocking)
            .cloned()
            .collect();
        if blockers.is_empty()
            && let Some(nothing) = nothing_to_send(&self.document)
        {
            blockers.push(nothing);
        }
        blockers
    }

    /// Whether any diagnostic blocks a send (what `parse --eval` exits 1 for).
    pub fn has_blocking_diagnostics(&self) -> bool {
        self.diagnostics.iter().any(|d| d.blocking)
    }
}

/// The code of the "nothing to send" blocker.
pub const NOTHING_TO_SEND: &str = "nothing-to-send";

/// A chat can be sent when its last message is a `@You:` with content, or when its last
/// assistant turn was cut off (ends with the abort marker) and only an empty `@You:` (or
/// nothing) follows it: sending again continues the conversation.
fn nothing_to_send(doc: &Document) -> Option<Diagnostic> {
    let messages = doc.messages();
    let sendable = match messages {
        [.., last] if last.role == Role::You && !last.content.is_empty() => true,
        [.., last] if last.role == Role::Assistant => last.is_aborted(),
        [.., before, last] if last.role == Role::You => {
            before.role == Role::Assistant && before.is_aborted()
        }
        _ => false,
    };
    if sendable {
        return None;
    }
    let range = messages
        .last()
        .map_or(TextRange::empty(doc.text().len()), |m| m.role_line);
    Some(Diagnostic {
        range,
        file: None,
        line_in_file: None,
        severity: Severity::Error,
        source: Source::Send,
        code: NOTHING_TO_SEND.to_owned(),
        message: "nothing to send: the chat does not end with a `@You:` message that has text"
            .to_owned(),
        hint: Some("write your message under a final `@You:` line".to_owned()),
        include_stack: Vec::new(),
        blocking: true,
    })
}

/// The rule for parser findings: which ones stop a send, and the fix to name.
///
/// Frontmatter that cannot run (Lua, an unknown language, a fence that never closes) blocks:
/// sending would silently use other settings. An unclosed code fence outside an assistant
/// reply blocks: the reply would land inside the user's code block.
fn syntax_rule(doc: &Document, diagnostic: &flemma_syntax::Diagnostic) -> (bool, Option<String>) {
    match diagnostic.code {
        DiagnosticCode::LuaFrontmatter => (
            true,
            Some("convert it to Rhai (`flemma.opt.…` assignments) or JSON".to_owned()),
        ),
        DiagnosticCode::UnknownFrontmatterLanguage => (true, None),
        DiagnosticCode::UnclosedFrontmatter => (true, None),
        DiagnosticCode::UnclosedFence => {
            let in_reply = doc
                .message_index_at(diagnostic.range.start)
                .and_then(|i| doc.messages().get(i))
                .is_some_and(|m| m.role == Role::Assistant);
            if in_reply {
                (false, None)
            } else {
                (
                    true,
                    Some("close the fence with ``` on its own line".to_owned()),
                )
            }
        }
        _ => (false, None),
    }
}

/// What a host's analyses are for, which decides what may run while a chat is evaluated
/// (`docs/security.md`, invariant III).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Purpose {
    /// Looking at chats (an editor, `parse`, `status`): an untrusted chat's frontmatter
    /// parsers (`templating.frontmatter_parsers`) do not run, and a warning says that its
    /// frontmatter is evaluated when it is sent. Opening a chat starts nothing.
    #[default]
    Inspect,
    /// Sending them (the engine, `count`): every chat's frontmatter parsers run.
    Send,
}

/// The documents a front end has open and the configuration they are analysed under.
#[derive(Debug)]
pub struct AnalysisHost {
    io: Arc<dyn Host>,
    purpose: Purpose,
    template_cache: TemplateCache,
    config: Arc<Configuration>,
    documents: HashMap<DocumentId, DocumentState>,
    /// Counts every change (text or configuration): a document's revision is the count at its
    /// last change, so an analysis computed elsewhere is kept only if nothing changed since.
    changes: u64,
}

#[derive(Debug)]
struct DocumentState {
    document: Arc<Document>,
    analysis: Option<Arc<Analysis>>,
    revision: u64,
    /// The document's own configuration below its frontmatter, when it is not the host's
    /// ([`AnalysisHost::set_document_config`]).
    config: Option<Arc<Configuration>>,
}

/// A configuration below the frontmatter and what it resolves to before any frontmatter runs.
#[derive(Debug)]
struct Configuration {
    input: ConfigInput,
    base: BaseResolution,
}

impl Configuration {
    fn new(input: ConfigInput) -> Arc<Self> {
        let base = resolve_base(&input);
        Arc::new(Self { input, base })
    }
}

/// Everything one analysis needs, taken from the host: it runs on any thread while the host
/// takes more changes (the language server evaluates off its main loop, the engine outside the
/// lock of the process's host), and its result goes back with
/// [`AnalysisHost::store_analysis`], kept only if the document did not change since.
#[derive(Debug, Clone)]
pub struct AnalysisJob {
    id: DocumentId,
    revision: u64,
    document: Arc<Document>,
    io: Arc<dyn Host>,
    purpose: Purpose,
    template_cache: TemplateCache,
    config: Arc<Configuration>,
}

impl AnalysisJob {
    /// The document analysed.
    pub fn id(&self) -> &DocumentId {
        &self.id
    }

    /// The revision of the document this job analyses.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Computes the analysis. Setting `cancel` stops the evaluation early; the analysis is then
    /// incomplete (a blocking "cancelled" diagnostic) and only good for throwing away.
    pub fn run(&self, cancel: Option<Arc<AtomicBool>>) -> Analysis {
        analyze(self, cancel)
    }
}

/// What the caller's layers resolve to before any frontmatter runs.
#[derive(Debug, Default)]
struct BaseResolution {
    templating: TemplatingOptions,
    /// The `[trust]` settings (`None` when the layers do not resolve: no chat is trusted).
    trust: Option<TrustSettings>,
    errors: Vec<ConfigError>,
}

impl AnalysisHost {
    /// A host whose evaluations read files, the clock and run parsers through `io`, under the
    /// configuration `config`.
    pub fn new(io: Arc<dyn Host>, config: ConfigInput) -> Self {
        Self::with_template_cache(io, config, TemplateCache::new())
    }

    /// A host that shares `template_cache` (compiled templates and each message's result)
    /// with the other hosts of the process: a document the language server and the engine
    /// both analyse is evaluated once, and its conversation's parts are shared.
    pub fn with_template_cache(
        io: Arc<dyn Host>,
        config: ConfigInput,
        template_cache: TemplateCache,
    ) -> Self {
        Self {
            io,
            purpose: Purpose::default(),
            template_cache,
            config: Configuration::new(config),
            documents: HashMap::new(),
            changes: 0,
        }
    }

    /// This host's analyses are for `purpose` (a new host inspects: opening a chat starts
    /// nothing). Every analysis is recomputed.
    pub fn set_purpose(&mut self, purpose: Purpose) {
        self.purpose = purpose;
        let revision = self.next_revision();
        for state in self.documents.values_mut() {
            state.analysis = None;
            state.revision = revision;
        }
    }

    /// The next revision (every change gets a new one).
    fn next_revision(&mut self) -> u64 {
        self.changes += 1;
        self.changes
    }

    /// The compiled templates this host reuses across analyses (owned here, not process-wide).
    pub fn template_cache(&self) -> &TemplateCache {
        &self.template_cache
    }

    /// The disk as this host's evaluations see it (through its `io`), for the features that
    /// look at files (hover, definition and completion of references).
    pub fn file_system(&self) -> crate::features::HostFileSystem<'_> {
        crate::features::HostFileSystem(self.io.as_ref())
    }

    /// The configuration below the frontmatter.
    pub fn config(&self) -> &ConfigInput {
        &self.config.input
    }

    /// Replaces the configuration below the frontmatter; every analysis is recomputed.
    pub fn set_config(&mut self, config: ConfigInput) {
        self.config = Configuration::new(config);
        let revision = self.next_revision();
        for state in self.documents.values_mut() {
            state.analysis = None;
            state.revision = revision;
        }
    }

    /// Opens a document, or replaces its whole text.
    pub fn set_text(&mut self, id: DocumentId, text: impl Into<String>) {
        let document = Arc::new(flemma_syntax::parse(text));
        let revision = self.next_revision();
        let config = self.documents.remove(&id).and_then(|state| state.config);
        self.documents.insert(
            id,
            DocumentState {
                document,
                analysis: None,
                revision,
                config,
            },
        );
    }

    /// Moves the document `id` to `text` by the changes between them (an incremental re-parse,
    /// and the template cache re-evaluates only the messages they touch); opens it when it is
    /// not open.
    pub fn change_text(&mut self, id: &DocumentId, text: &str) {
        let edits = self.documents.get(id).map(|state| {
            // `apply_edits` takes each edit in the text the ones before it made: last first.
            let mut edits = flemma_syntax::diff_to_edits(state.document.text(), text);
            edits.reverse();
            edits
        });
        match edits {
            Some(edits) if edits.is_empty() || self.apply_edits(id, &edits).is_ok() => {}
            _ => self.set_text(id.clone(), text.to_owned()),
        }
    }

    /// Analyses the document `id` under `config` instead of the host's configuration (the
    /// engine's documents each have their own: the writing editor's settings, a runtime
    /// switch). Unknown documents are ignored; set the text first.
    pub fn set_document_config(&mut self, id: &DocumentId, config: ConfigInput) {
        let revision = self.next_revision();
        let Some(state) = self.documents.get_mut(id) else {
            return;
        };
        state.config = Some(Configuration::new(config));
        state.analysis = None;
        state.revision = revision;
    }

    /// Applies `edits` in order (each in the coordinates of the text the earlier ones produced),
    /// re-parsing incrementally. An edit that does not fit refuses the whole batch.
    pub fn apply_edits(&mut self, id: &DocumentId, edits: &[TextEdit]) -> Result<(), ChangeError> {
        let revision = self.next_revision();
        let state = self
            .documents
            .get_mut(id)
            .ok_or_else(|| ChangeError::UnknownDocument(id.path().to_owned()))?;
        let out_of_range =
            |doc: &Document, index: usize, edit: &TextEdit| ChangeError::EditOutOfRange {
                index,
                start: edit.range.start,
                end: edit.range.end,
                len: doc.text().len(),
            };
        // The cached analysis shares the document: drop it first, so that `make_mut` edits the
        // text in place instead of copying all of it (whoever else still holds an `Analysis`
        // of the old revision keeps its copy; then the text is copied once).
        state.analysis = None;
        // `Document::edit` refuses an edit that does not fit without changing anything; when
        // one of a batch does, the ones before it are undone (in reverse, each by the edit that
        // puts its old text back), which restores the text and, the re-parse being exact, the
        // tree.
        state.revision = revision;
        let document = Arc::make_mut(&mut state.document);
        let mut undo: Vec<TextEdit> = Vec::with_capacity(edits.len());
        for (index, edit) in edits.iter().enumerate() {
            let old_text = document
                .text()
                .get(edit.range.start..edit.range.end)
                .map(str::to_owned);
            match old_text {
                Some(old_text) if document.edit(edit).is_ok() => undo.push(TextEdit::replace(
                    TextRange {
                        start: edit.range.start,
                        end: edit.range.start + edit.new_text.len(),
                    },
                    old_text,
                )),
                _ => {
                    let refused = out_of_range(document, index, edit);
                    for inverse in undo.iter().rev() {
                        // The inverse of an applied edit always fits.
                        let _ = document.edit(inverse);
                    }
                    return Err(refused);
                }
            }
        }
        Ok(())
    }

    /// Closes a document.
    pub fn remove(&mut self, id: &DocumentId) {
        self.documents.remove(id);
        self.template_cache.forget_document(Some(id.path()));
    }

    /// Drops the document's text and analysis but leaves its messages' results in the
    /// template cache (another host of the process may have the same document open).
    pub fn forget(&mut self, id: &DocumentId) {
        self.documents.remove(id);
    }

    /// The current syntax tree of a document (cheap: no evaluation).
    pub fn document(&self, id: &DocumentId) -> Option<&Arc<Document>> {
        self.documents.get(id).map(|state| &state.document)
    }

    /// The analysis of a document at its current text, computed when first asked for (here, on
    /// the caller's thread; [`AnalysisHost::analysis_job`] computes it elsewhere).
    pub fn analysis(&mut self, id: &DocumentId) -> Result<Arc<Analysis>, ChangeError> {
        if let Some(analysis) = self.cached_analysis(id) {
            return Ok(analysis);
        }
        let job = self
            .analysis_job(id)
            .ok_or_else(|| ChangeError::UnknownDocument(id.path().to_owned()))?;
        let analysis = Arc::new(job.run(None));
        self.store_analysis(job.revision, analysis.clone());
        Ok(analysis)
    }

    /// The revision of a document: it changes with its text and with the configuration.
    pub fn revision(&self, id: &DocumentId) -> Option<u64> {
        self.documents.get(id).map(|state| state.revision)
    }

    /// The analysis of a document's current text when it is computed already (no evaluation).
    pub fn cached_analysis(&self, id: &DocumentId) -> Option<Arc<Analysis>> {
        self.documents.get(id)?.analysis.clone()
    }

    /// The job that computes a document's analysis at its current text, to run anywhere
    /// ([`AnalysisJob::run`]); `None` when the analysis is known already or the document is not
    /// open.
    pub fn analysis_job(&self, id: &DocumentId) -> Option<AnalysisJob> {
        let state = self.documents.get(id)?;
        if state.analysis.is_some() {
            return None;
        }
        Some(AnalysisJob {
            id: id.clone(),
            revision: state.revision,
            document: state.document.clone(),
            io: self.io.clone(),
            purpose: self.purpose,
            template_cache: self.template_cache.clone(),
            config: state.config.clone().unwrap_or_else(|| self.config.clone()),
        })
    }

    /// Keeps the analysis a job of `revision` computed, when its document is still at that
    /// revision; `false` (nothing kept) when it changed or closed since.
    pub fn store_analysis(&mut self, revision: u64, analysis: Arc<Analysis>) -> bool {
        match self.documents.get_mut(&analysis.id) {
            Some(state) if state.revision == revision => {
                state.analysis = Some(analysis);
                true
            }
            _ => false,
        }
    }
}

fn resolve_base(config: &ConfigInput) -> BaseResolution {
    let mut base = BaseResolution {
        errors: config.errors.clone(),
        ..BaseResolution::default()
    };
    if !base.errors.is_empty() {
        return base;
    }
    match flemma_config::resolve(&config.layers) {
        Ok(resolved) => {
            let templating = &resolved.config.templating;
            base.templating = TemplatingOptions {
                modules: templating
                    .modules
                    .iter()
                    .map(
                        |module| match (module.strip_prefix("~/"), &config.home_dir) {
                            (Some(rest), Some(home)) => home.join(rest),
                            _ => PathBuf::from(module),
                        },
                    )
                    .collect(),
                frontmatter_parsers: templating.frontmatter_parsers.clone(),
                ..TemplatingOptions::default()
            };
            base.trust = Some(resolved.config.trust.clone());
        }
        Err(errors) => base.errors = errors.0,
    }
    base
}

/// The template host of one document: the caller's IO, with the document's directory as the
/// working directory personalities describe.
#[derive(Debug)]
struct DocumentHost {
    io: Arc<dyn Host>,
    dir: Option<PathBuf>,
}

impl Host for DocumentHost {
    fn read_file(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
        self.io.read_file(path, limit)
    }
    fn read_file_checked(
        &self,
        path: &Path,
        limit: u64,
        allow: &dyn Fn(&Path) -> Result<(), String>,
    ) -> std::io::Result<Vec<u8>> {
        self.io.read_file_checked(path, limit, allow)
    }
    fn home_dir(&self) -> Option<PathBuf> {
        self.io.home_dir()
    }
    fn now(&self) -> SystemTime {
        self.io.now()
    }
    fn environment(&self) -> PersonalityContext {
        let mut environment = self.io.environment();
        if let Some(dir) = &self.dir {
            environment.git_branch = flemma_template::git_branch_of(dir);
            environment.cwd = Some(dir.clone());
        }
        environment
    }
    fn is_readable(&self, path: &Path) -> bool {
        self.io.is_readable(path)
    }
    fn file_kind(&self, path: &Path) -> flemma_template::FileKind {
        self.io.file_kind(path)
    }
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        self.io.real_path(path)
    }
    fn run_filter(
        &self,
        argv: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> std::io::Result<Vec<u8>> {
        self.io.run_filter(argv, input, timeout)
    }
}

fn analyze(job: &AnalysisJob, cancel: Option<Arc<AtomicBool>>) -> Analysis {
    let AnalysisJob {
        id,
        document,
        io,
        template_cache,
        purpose,
        ..
    } = job;
    let (config, base) = (&job.config.input, &job.config.base);
    let document = document.clone();
    let doc = &*document;
    let mut diagnostics = Vec::new();
    for d in doc.diagnostics() {
        let configured_away = d.code == DiagnosticCode::UnknownFrontmatterLanguage
            && doc.frontmatter().is_some_and(|f| {
                base.templating
                    .frontmatter_parsers
                    .contains_key(doc.slice(f.language_range).trim())
            });
        if configured_away {
            continue;
        }
        let (blocking, hint) = syntax_rule(doc, d);
        diagnostics.push(Diagnostic {
            range: d.range,
            file: None,
            line_in_file: None,
            severity: d.severity,
            source: Source::Syntax,
            code: d.code.as_str().to_owned(),
            message: d.message.clone(),
            hint,
            include_stack: Vec::new(),
            blocking,
        });
    }
    let mut config_errors = base.errors.clone();

    // Trust is decided by the chat's path and the layers below its frontmatter, before the
    // frontmatter runs.
    let trust = match &base.trust {
        Some(settings) => flemma_config::chat_trust(
            id.path(),
            settings,
            &config.trusted_folders,
            config.home_dir.as_deref(),
        ),
        None => ChatTrust::untrusted("the configuration below its frontmatter does not resolve"),
    };
    let mut templating = base.templating.clone();
    // An untrusted chat that is only looked at starts nothing: its frontmatter parser waits
    // for a send.
    templating.run_parsers = trust.trusted || *purpose == Purpose::Send;
    let options = EvalOptions {
        path: Some(id.path().to_owned()),
        templating,
        config_layers: config.layers.clone(),
        cache: Some(template_cache.clone()),
        cancel,
        reads: read_scope(id.path(), &trust, config.home_dir.as_deref(), io.as_ref()),
        ..EvalOptions::default()
    };
    let host = Arc::new(DocumentHost {
        io: io.clone(),
        dir: id.path().parent().map(Path::to_owned),
    });
    let evaluation = flemma_template::evaluate(doc, host, &options);
    let mut template_diagnostics: Vec<Diagnostic> =
        evaluation.diagnostics.iter().map(from_template).collect();
    if !options.templating.run_parsers {
        template_diagnostics.extend(crate::untrusted::deferred_parser(
            doc,
            id.path(),
            &trust,
            &options.templating.frontmatter_parsers,
        ));
    }
    if trust.trusted && evaluation.frontmatter_layer.get("templating").is_some() {
        template_diagnostics.push(Diagnostic {
            range: doc.frontmatter().map_or(TextRange::empty(0), |f| f.language_range),
            file: None,
            line_in_file: None,
            severity: Severity::Warning,
            source: Source::Config,
            code: "templating-in-frontmatter".to_owned(),
            message: "`templating` settings in the frontmatter have no effect (modules and parsers load before the frontmatter runs)".to_owned(),
            hint: Some("put them in config.toml".to_owned()),
            include_stack: Vec::new(),
            blocking: false,
        });
    }

    let mut layers = config.layers.clone();
    let mut frontmatter = evaluation.frontmatter_layer.clone();
    frontmatter.set_trusted(trust.trusted);
    layers.push(frontmatter);
    let resolved = if base.errors.is_empty() {
        match flemma_config::resolve(&layers) {
            Ok(resolved) => Some(resolved),
            Err(errors) => {
                config_errors.extend(errors.0);
                None
            }
        }
    } else {
        None
    };
    let frontmatter_start = doc.frontmatter().map_or(0, |f| f.range.start);
    diagnostics.extend(
        config_errors
            .iter()
            .map(|e| from_config(e, config.user_file.as_deref(), frontmatter_start)),
    );
    // What a layer sets that flemmad ignores or reads differently (Flemma-only options, the
    // pre-0.12 `:` separator): said, never blocking.
    diagnostics.extend(layers.iter().flat_map(|layer| {
        layer.warnings().iter().map(|w| Diagnostic {
            severity: Severity::Warning,
            code: CONFIG_WARNING.to_owned(),
            blocking: false,
            ..from_config(w, config.user_file.as_deref(), frontmatter_start)
        })
    }));
    diagnostics.extend(template_diagnostics);
    if !trust.trusted {
        if let Some(resolved) = &resolved {
            diagnostics.extend(crate::untrusted::ignored_options(
                doc,
                id.path(),
                &trust,
                resolved.ignored(),
            ));
        }
        if let Some(history) = &config.call_history {
            diagnostics.extend(crate::untrusted::unseen_calls(
                doc,
                id.path(),
                history.as_ref(),
            ));
        }
    }
    Analysis {
        id: id.clone(),
        document,
        evaluation,
        layers,
        trust,
        config: resolved,
        diagnostics,
    }
}

/// Where the chat at `chat` reads the files it names (`docs/security.md`, invariant II): a
/// trusted chat anywhere, an untrusted one only in its project and its folder
/// (`flemma_config::reach::chat_project`; a folder is a git work tree when it holds a `.git`).
fn read_scope(chat: &Path, trust: &ChatTrust, home: Option<&Path>, io: &dyn Host) -> ReadScope {
    if trust.trusted {
        return ReadScope::default();
    }
    let project = flemma_config::reach::chat_project(chat, home, |dir| {
        io.file_kind(&dir.join(".git")) != flemma_template::FileKind::Missing
    });
    let folder = chat.parent().unwrap_or(chat).to_path_buf();
    let why = format!(
        "it is outside this chat's project ({}), and the chat is untrusted ({}): an untrusted chat reads files only in its project; `{}` to allow",
        project.display(),
        trust.reason,
        crate::untrusted::trust_command(chat),
    );
    ReadScope::within(vec![project, folder], why)
}

fn from_template(d: &TemplateDiagnostic) -> Diagnostic {
    let category = serde_json::to_value(d.category)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let outside = d.file.is_some() && d.category == Category::Module;
    Diagnostic {
        range: if outside {
            TextRange::empty(0)
        } else {
            d.range
        },
        file: d.file.clone(),
        line_in_file: d.line_in_file.map(|line| line as usize),
        severity: d.severity,
        source: Source::Template,
        code: format!("template-{}", category.replace('_', "-")),
        message: d.message.clone(),
        hint: None,
        include_stack: d.include_stack.clone(),
        blocking: d.blocking,
    }
}

/// The code of configuration warnings (settings flemmad ignores or reads differently).
pub const CONFIG_WARNING: &str = "config-warning";

/// Configuration problems always block: the send would use settings the user did not mean.
fn from_config(e: &ConfigError, user_file: Option<&Path>, frontmatter_start: usize) -> Diagnostic {
    let file = e.file.as_ref().map(PathBuf::from).or_else(|| {
        (e.layer == Some(LayerKind::UserFile))
            .then(|| user_file.map(Path::to_owned))
            .flatten()
    });
    Diagnostic {
        range: TextRange::empty(if file.is_some() { 0 } else { frontmatter_start }),
        line_in_file: file
            .as_ref()
            .and(e.location)
            .map(|location| location.line as usize),
        file,
        severity: Severity::Error,
        source: Source::Config,
        code: "config".to_owned(),
        // Settings the editor sent have no file to point at: the message names them.
        message: match e.layer {
            Some(LayerKind::Client) => format!(
                "in the client settings (the editor's flemmad settings, sent as initializationOptions): {}",
                e.message
            ),
            _ => e.message.clone(),
        },
        hint: e
            .suggestion
            .as_ref()
            .map(|suggestion| format!("did you mean '{suggestion}'?")),
        include_stack: Vec::new(),
        blocking: true,
    }
}
