//! The document walk: frontmatter, then every message into conversation parts.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use flemma_config::{ConfigLayer, LayerKind};
use flemma_conversation::{
    Conversation, Message, Part, Parts, Role, SourceSpan, ThinkingSignature,
};
use flemma_syntax::write::unescape_model_text;
use flemma_syntax::{
    Document, FileReference, Frontmatter, FrontmatterLanguage, Role as ChatRole, Segment,
    SegmentKind, Severity, Status, TextRange, ToolResult,
};
use rhai::{AST, Engine, ImmutableString, Scope};

use crate::cache::{KeyHasher, MessageEntry, MessageOutput, key_hasher, scope_fingerprint};
use crate::engine::{CANCELLED, RunClock, sandboxed_engine};
use crate::opt::{self, FlemmaHandle, SharedOpt};
use crate::origin::Origin;
use crate::render::{self, Blame, Environment, SharedState, lock, push_parts, push_text};
use crate::script::{self, Script};
use crate::{
    AutoApproveFunction, Category, EvalOptions, EvalStats, Evaluation, Host, Progress,
    ProgressCallback, TemplateCache, TemplatingOptions, files,
};

use flemma_syntax::write::{
    ABORTED_RESULT as ABORTED, DENIED_RESULT as DENIED, REJECTED_RESULT as REJECTED,
};
const NO_RESULT: &str = flemma_conversation::MISSING_TOOL_RESULT;

/// The tool uses and results of a document by id, built once per evaluation (looking each id
/// up in the document is a scan of every message, which made evaluation quadratic).
#[derive(Debug, Default)]
struct ToolIndex<'a> {
    /// The last tool use with each id: its name, header range and input fence content.
    uses: HashMap<&'a str, (&'a str, TextRange, Option<TextRange>), foldhash::fast::RandomState>,
    /// The ids that have a result somewhere.
    results: std::collections::HashSet<&'a str, foldhash::fast::RandomState>,
}

impl<'a> ToolIndex<'a> {
    fn new(doc: &'a Document) -> Self {
        let mut index = Self::default();
        for message in doc.messages() {
            for (_, tool_use) in message.tool_uses() {
                index.uses.insert(
                    tool_use.id.as_str(),
                    (
                        tool_use.name.as_str(),
                        tool_use.header,
                        tool_use.fence.as_ref().map(|fence| fence.content),
                    ),
                );
            }
            for (_, result) in message.tool_results() {
                index.results.insert(result.tool_use_id.as_str());
            }
        }
        index
    }

    fn name_of(&self, id: &str) -> Option<&'a str> {
        self.uses.get(id).map(|(name, _, _)| *name)
    }

    fn header_of(&self, id: &str) -> Option<TextRange> {
        self.uses.get(id).map(|(_, header, _)| *header)
    }

    /// The `path` the tool use `id` gave as input (what `read` read).
    fn input_path_of(&self, doc: &Document, id: &str) -> Option<String> {
        let (_, _, input) = self.uses.get(id)?;
        let input: serde_json::Value = serde_json::from_str(doc.slice((*input)?)).ok()?;
        input.get("path")?.as_str().map(str::to_owned)
    }

    fn has_result(&self, id: &str) -> bool {
        self.results.contains(id)
    }
}

/// Whether `name` is a tool of an MCP server (`SERVER.TOOL`; `flemma.*` are the harness's).
fn is_mcp_tool(name: &str) -> bool {
    name.contains('.') && !name.starts_with("flemma.")
}

pub(crate) struct Evaluator<'a> {
    doc: &'a Document,
    tools: ToolIndex<'a>,
    host: Arc<dyn Host>,
    engine: Engine,
    state: SharedState,
    opt: SharedOpt,
    origin: Arc<Origin>,
    scope: Scope<'static>,
    functions: Option<Arc<AST>>,
    home: Option<PathBuf>,
    clock: RunClock,
    cancel: Option<Arc<AtomicBool>>,
    /// What the evaluation may still read (shared with `include()` and personalities).
    reader: files::Reader,
    /// Whether the spent time budget was reported already.
    budget_spent_reported: AtomicBool,
    templating: TemplatingOptions,
    /// Compiled templates (and message results when `reuse_messages`).
    cache: TemplateCache,
    /// Whether message results are looked up in and stored to `cache`.
    reuse_messages: bool,
    /// Set by anything that reads the outside world while a template runs.
    impure: Arc<AtomicBool>,
    /// The document's path (the cache's document key).
    path: Option<PathBuf>,
    progress: Option<ProgressCallback>,
    /// Everything before the messages that their results depend on: the options, the
    /// template modules' text, the frontmatter (its variables are added after it ran).
    head: KeyHasher,
    stats: EvalStats,
}

impl<'a> Evaluator<'a> {
    pub(crate) fn new(doc: &'a Document, host: Arc<dyn Host>, options: &EvalOptions) -> Self {
        let now = host.now();
        let home = host.home_dir();
        let dir = match options.path.as_deref().and_then(Path::parent) {
            Some(dir) => dir.to_path_buf(),
            None => host.environment().cwd.unwrap_or_else(|| PathBuf::from(".")),
        };
        let filename = options
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let clock = RunClock::new(&options.limits);
        let impure = Arc::new(AtomicBool::new(false));
        let cache = options.cache.clone().unwrap_or_default();
        let mut engine = sandboxed_engine(
            &options.limits,
            clock.clone(),
            options.cancel.clone(),
            now,
            impure.clone(),
        );
        let state = SharedState::default();
        let opt = opt::new_state();
        let reader = files::Reader::new(&options.limits, &options.reads, &*host);
        let environment = Environment {
            reader: reader.clone(),
            host: host.clone(),
            home: home.clone(),
            now,
            chat_path: options.path.clone(),
            max_include_depth: options.limits.max_include_depth,
            personality_cache: Arc::new(Mutex::new(None)),
            opt: opt.clone(),
            config_layers: Arc::new(options.config_layers.clone()),
            cache: cache.clone(),
            impure: impure.clone(),
        };
        render::register(&mut engine, &state, &environment);
        opt::register(&mut engine);
        let origin = Arc::new(Origin {
            file: None,
            text: Arc::from(""),
            anchor: None,
            include_stack: options.path.iter().cloned().collect(),
            dir: dir.clone(),
            filename: filename.clone(),
        });
        let mut scope = Scope::new();
        scope.push_constant("__filename", ImmutableString::from(filename));
        scope.push_constant(
            "__dirname",
            ImmutableString::from(dir.display().to_string()),
        );
        let mut head = key_hasher();
        options.path.hash(&mut head);
        format!("{:?}|{:?}", options.limits, options.templating).hash(&mut head);
        Self {
            doc,
            tools: ToolIndex::new(doc),
            host,
            engine,
            state,
            opt,
            origin,
            scope,
            functions: None,
            home,
            clock,
            cancel: options.cancel.clone(),
            reader,
            budget_spent_reported: AtomicBool::new(false),
            templating: options.templating.clone(),
            cache,
            reuse_messages: options.cache.is_some(),
            impure,
            path: options.path.clone(),
            progress: options.progress.clone(),
            head,
            stats: EvalStats::default(),
        }
    }

    fn diagnose(
        &self,
        range: TextRange,
        severity: Severity,
        category: Category,
        message: String,
        blocking: bool,
    ) {
        let diagnostic = self
            .origin
            .diagnostic(range, severity, category, message, blocking);
        lock(&self.state).diagnostics.push(diagnostic);
    }

    // ---- template modules ----------------------------------------------------------------

    /// Loads `templating.modules` in order: their functions become globals of every script
    /// (later modules win), their top-level `const`s and `let`s become variables.
    pub(crate) fn modules(&mut self) {
        for path in self.templating.modules.clone() {
            if self.cancelled() {
                return;
            }
            self.module(&path);
        }
    }

    fn module(&mut self, path: &Path) {
        let resolved = files::normalize(&self.origin.dir.join(path));
        let origin = Arc::new(Origin {
            file: Some(resolved.clone()),
            text: Arc::from(""),
            // Modules are not in the chat file: their diagnostics point at its start.
            anchor: Some(TextRange::default()),
            include_stack: Vec::new(),
            dir: self.origin.dir.clone(),
            filename: self.origin.filename.clone(),
        });
        let fail = |origin: &Origin, range: Option<TextRange>, message: String| {
            let mut diagnostic = origin.diagnostic(
                range.unwrap_or_default(),
                Severity::Error,
                Category::Module,
                message,
                true,
            );
            if range.is_none() {
                // The whole file is at fault (unreadable), not one line of it.
                diagnostic.line_in_file = None;
            }
            lock(&self.state).diagnostics.push(diagnostic);
        };
        // A module the user's configuration names by an absolute (or `~/`) path is the user's
        // own file, read for any chat; one named relative to the chat is found through the
        // chat's folder, and read only where the chat may read.
        let reader = if path.is_absolute() {
            self.reader.anywhere()
        } else {
            self.reader.clone()
        };
        let text = match reader.read(&*self.host, &resolved).map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Err(files::ReadError::Refused(why)) => {
                let mut diagnostic = origin.diagnostic(
                    TextRange::default(),
                    Severity::Warning,
                    Category::Module,
                    format!(
                        "the template module {} was not loaded: {why}",
                        resolved.display()
                    ),
                    false,
                );
                diagnostic.line_in_file = None;
                lock(&self.state).diagnostics.push(diagnostic);
                return;
            }
            Ok(Err(_)) => {
                return fail(
                    &origin,
                    None,
                    format!(
                        "the template module {} is not UTF-8 text; fix the file or remove it from `templating.modules`, this blocks sending",
                        resolved.display()
                    ),
                );
            }
            Err(error) => {
                return fail(
                    &origin,
                    None,
                    format!(
                        "cannot read the template module {} ({error}); fix the path in `templating.modules`, this blocks sending",
                        resolved.display()
                    ),
                );
            }
        };
        text.hash(&mut self.head);
        let origin = Arc::new(Origin {
            text: Arc::from(text.as_str()),
            ..(*origin).clone()
        });
        let whole = TextRange::new(0, text.len());
        let mut script = Script::default();
        script.push_code(&text, 0, whole);
        let compiling = std::time::Instant::now();
        let compiled = self.cache.compile(&self.engine, &script.code);
        self.clock.charge(compiling.elapsed());
        let ast = match compiled {
            Ok(ast) => ast,
            Err(error) => {
                let range = script.locate(error.position(), TextRange::default());
                return fail(
                    &origin,
                    Some(range),
                    format!(
                        "the template module {} does not parse as Rhai: {}; fix it, this blocks sending",
                        resolved.display(),
                        error.err_type()
                    ),
                );
            }
        };
        let functions = ast.clone_functions_only();
        if functions.iter_functions().next().is_some() {
            // Registered later, so preferred over earlier modules' functions.
            self.engine.register_global_module(
                AsRef::<rhai::Shared<rhai::Module>>::as_ref(&functions).clone(),
            );
            let library = match self.functions.take() {
                Some(library) => library.merge(&functions),
                None => functions,
            };
            self.functions = Some(Arc::new(library));
        }
        if !self.clock.start_run() {
            return self.time_budget_spent(TextRange::default());
        }
        let _ = render::run(
            &self.engine,
            &self.state,
            &ast,
            Arc::new(script),
            origin,
            &mut self.scope,
            Blame {
                category: Category::Module,
                fallback: TextRange::default(),
            },
        );
        self.clock.end_run();
    }

    // ---- frontmatter ---------------------------------------------------------------------

    pub(crate) fn frontmatter(&mut self) {
        let Some(frontmatter) = self.doc.frontmatter() else {
            return;
        };
        self.doc.slice(frontmatter.range).hash(&mut self.head);
        match frontmatter.language {
            FrontmatterLanguage::Rhai => self.rhai_frontmatter(frontmatter),
            FrontmatterLanguage::Json => self.json_frontmatter(frontmatter),
            FrontmatterLanguage::Other => self.custom_frontmatter(frontmatter),
            // The parser reports Lua (with the conversion code action).
            FrontmatterLanguage::Lua => {}
        }
    }

    fn rhai_frontmatter(&mut self, frontmatter: &Frontmatter) {
        let code = self.doc.slice(frontmatter.code);
        let mut script = Script::default();
        script.push_code(code, frontmatter.code.start, frontmatter.code);
        let compiling = std::time::Instant::now();
        let compiled = self.engine.compile(&script.code);
        self.clock.charge(compiling.elapsed());
        let ast = match compiled {
            Ok(ast) => ast,
            Err(error) => {
                let range = script.locate(error.position(), frontmatter.code);
                self.diagnose(
                    range,
                    Severity::Error,
                    Category::Frontmatter,
                    format!(
                        "the frontmatter does not parse as Rhai: {}; fix it, this blocks sending",
                        error.err_type()
                    ),
                    true,
                );
                return;
            }
        };
        let functions = ast.clone_functions_only();
        if functions.iter_functions().next().is_some() {
            // Messages call the frontmatter's functions as globals (preferred over modules').
            self.engine.register_global_module(
                AsRef::<rhai::Shared<rhai::Module>>::as_ref(&functions).clone(),
            );
            let library = match self.functions.take() {
                Some(modules) => modules.merge(&functions),
                None => functions,
            };
            self.functions = Some(Arc::new(library));
        }
        if !self.clock.start_run() {
            return self.time_budget_spent(frontmatter.range);
        }
        let mut scope = self.scope.clone();
        scope.push("flemma", FlemmaHandle::new(self.opt.clone()));
        let _ = render::run(
            &self.engine,
            &self.state,
            &ast,
            Arc::new(script),
            self.origin.clone(),
            &mut scope,
            Blame {
                category: Category::Frontmatter,
                fallback: frontmatter.code,
            },
        );
        self.clock.end_run();
        let mut variables = Scope::new();
        for (name, constant, value) in scope.iter() {
            if name == "flemma" && value.is::<FlemmaHandle>() {
                continue;
            }
            if constant {
                variables.push_constant_dynamic(name.to_string(), value);
            } else {
                variables.push_dynamic(name.to_string(), value);
            }
        }
        self.scope = variables;
    }

    fn json_frontmatter(&mut self, frontmatter: &Frontmatter) {
        let code = self.doc.slice(frontmatter.code);
        let value: serde_json::Value = match serde_json::from_str(code) {
            Ok(value) => value,
            Err(error) => {
                let range = offset_of_line_column(code, error.line(), error.column()).map_or(
                    frontmatter.code,
                    |offset| {
                        TextRange::new(
                            frontmatter.code.start + offset,
                            frontmatter.code.start + offset,
                        )
                    },
                );
                self.diagnose(
                    range,
                    Severity::Error,
                    Category::Frontmatter,
                    format!("invalid JSON frontmatter: {error}; fix the JSON, this blocks sending"),
                    true,
                );
                return;
            }
        };
        let serde_json::Value::Object(map) = value else {
            self.diagnose(
                frontmatter.code,
                Severity::Error,
                Category::Frontmatter,
                "JSON frontmatter must be an object (`{\"name\": \"value\", \"flemma\": {…}}`); wrap the values in braces".into(),
                true,
            );
            return;
        };
        self.apply_json_object(map, code, frontmatter);
    }

    /// A frontmatter in a language of `templating.frontmatter_parsers`: the configured command
    /// turns it into a JSON object, then it is applied like JSON frontmatter. Without a
    /// configured parser, or with `run_parsers` off, nothing happens here (the syntax parser
    /// reports the language; the caller says why the parser did not run).
    fn custom_frontmatter(&mut self, frontmatter: &Frontmatter) {
        let language = self.doc.slice(frontmatter.language_range).trim();
        let Some(argv) = self.templating.frontmatter_parsers.get(language).cloned() else {
            return;
        };
        if !self.templating.run_parsers {
            // Deferred (an untrusted chat only being looked at): nothing runs, no variable is
            // set, and the messages' cached results are not those of the parsed frontmatter.
            "frontmatter parser deferred".hash(&mut self.head);
            return;
        }
        let setting = format!("templating.frontmatter_parsers.{language}");
        let fail = |range: TextRange, message: String| {
            self.diagnose(range, Severity::Error, Category::Frontmatter, message, true);
        };
        let Some(program) = argv.first() else {
            return fail(
                frontmatter.language_range,
                format!(
                    "the frontmatter parser `{setting}` is an empty command; set it to a program and its arguments (such as [\"yq\", \"-o\", \"json\"]), this blocks sending"
                ),
            );
        };
        let code = self.doc.slice(frontmatter.code);
        let output = match self.host.run_filter(
            &argv,
            code.as_bytes(),
            self.templating.parser_timeout,
        ) {
            Ok(output) => output,
            Err(error) => {
                let advice = match error.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("install `{program}` or change `{setting}` in the configuration")
                    }
                    std::io::ErrorKind::TimedOut => format!(
                        "make the frontmatter simpler or check that `{program}` reads stdin and exits"
                    ),
                    _ => format!("fix the frontmatter or the command in `{setting}`"),
                };
                return fail(
                    frontmatter.language_range,
                    format!(
                        "the {language} frontmatter parser `{program}` failed: {error}; {advice}, this blocks sending"
                    ),
                );
            }
        };
        let value: serde_json::Value = match serde_json::from_slice(&output) {
            Ok(value) => value,
            Err(error) => {
                return fail(
                    frontmatter.code,
                    format!(
                        "the {language} frontmatter parser `{program}` did not print JSON ({error}); it must print one JSON object on stdout (yq: `-o json`), fix `{setting}`, this blocks sending"
                    ),
                );
            }
        };
        let serde_json::Value::Object(map) = value else {
            return fail(
                frontmatter.code,
                format!(
                    "the {language} frontmatter parser `{program}` printed JSON that is not an object; the frontmatter must describe a table of variables (and an optional `flemma` table); fix the frontmatter or `{setting}`, this blocks sending"
                ),
            );
        };
        self.apply_json_object(map, code, frontmatter);
    }

    /// Applies a JSON frontmatter object: the `flemma` key becomes the frontmatter layer, every
    /// other key a template variable. `code` is searched for keys to place diagnostics.
    fn apply_json_object(
        &mut self,
        map: serde_json::Map<String, serde_json::Value>,
        code: &str,
        frontmatter: &Frontmatter,
    ) {
        for (key, value) in map {
            if key == "flemma" {
                match ConfigLayer::from_json(&value, LayerKind::Frontmatter) {
                    Ok(layer) => {
                        opt_lock(&self.opt).layer = layer;
                    }
                    Err(errors) => {
                        for error in errors.errors() {
                            let last = error.path.rsplit('.').next().unwrap_or("");
                            let range =
                                find_key(code, last).map_or(frontmatter.code, |(start, end)| {
                                    TextRange::new(
                                        frontmatter.code.start + start,
                                        frontmatter.code.start + end,
                                    )
                                });
                            self.diagnose(
                                range,
                                Severity::Error,
                                Category::Frontmatter,
                                format!("flemma: {error}"),
                                true,
                            );
                        }
                    }
                }
                continue;
            }
            match rhai::serde::to_dynamic(&value) {
                Ok(dynamic) => {
                    self.scope.push_dynamic(key, dynamic);
                }
                Err(error) => self.diagnose(
                    frontmatter.code,
                    Severity::Error,
                    Category::Frontmatter,
                    format!("the JSON value of '{key}' cannot become a template variable: {error}"),
                    true,
                ),
            };
        }
    }

    // ---- messages ------------------------------------------------------------------------

    pub(crate) fn conversation(mut self) -> Evaluation {
        let mut conversation = Conversation::default();
        let doc = self.doc;
        let mut previous = if self.reuse_messages {
            self.cache.take_messages(self.path.as_deref())
        } else {
            Vec::new()
        };
        // Entries are looked up at the same position (taken out of the old list), or, when the
        // edit added or removed messages, by key (copied: two messages may share one).
        let aligned = previous.len()
            == doc
                .messages()
                .iter()
                .filter(|m| !matches!(m.role, ChatRole::Other(_)))
                .count();
        let mut previous_by_key: Option<HashMap<u64, usize, foldhash::fast::RandomState>> = None;
        let mut entries: Vec<MessageEntry> = if self.reuse_messages {
            Vec::with_capacity(doc.messages().len())
        } else {
            Vec::new()
        };
        conversation.messages.reserve(doc.messages().len());
        // The chain key: the head and the variables the frontmatter left. It changes only where
        // template code leaves different variables, so that an edit that leaves them as they
        // were keeps every later message reusable.
        let head_key = if self.reuse_messages {
            let mut head = self.head.clone();
            scope_fingerprint(&self.scope).hash(&mut head);
            head.finish()
        } else {
            0
        };
        let mut key = head_key;
        // The entry whose variables `self.scope` must be set to before the next evaluated
        // message (reused messages leave them in their entry, copied only when needed).
        let mut pending_scope: Option<usize> = None;
        let messages = doc.messages();
        for (index, message) in messages.iter().enumerate() {
            if self.cancelled() {
                break;
            }
            if index > 0 && index % ProgressCallback::EVERY == 0 {
                self.report_progress(index, message.range.start);
            }
            let span = Some(SourceSpan {
                start: message.range.start,
                end: message.range.end,
            });
            // `None`: the system prompt.
            let role = match &message.role {
                ChatRole::System => None,
                ChatRole::You => Some(Role::User),
                ChatRole::Assistant => Some(Role::Assistant),
                ChatRole::Other(_) => continue,
            };
            let output = if self.reuse_messages {
                let input_key = self.message_key(key, message);
                let at = message.range.start;
                let fits = |entry: &MessageEntry| {
                    entry.input_key == input_key
                        && entry.output.is_some()
                        && entry.pinned_at.is_none_or(|pinned| pinned == at)
                };
                // Entries are kept for the messages that are evaluated (not `@Note:` and such).
                let reusable = match previous.get_mut(entries.len()) {
                    Some(entry) if fits(entry) => {
                        Some(std::mem::replace(entry, MessageEntry::taken()))
                    }
                    _ if aligned => None,
                    _ => previous_by_key
                        .get_or_insert_with(|| {
                            previous
                                .iter()
                                .enumerate()
                                .map(|(i, entry)| (entry.input_key, i))
                                .collect()
                        })
                        .get(&input_key)
                        .and_then(|&i| previous.get(i))
                        .filter(|entry| fits(entry))
                        .cloned(),
                };
                if let Some(entry) = reusable {
                    self.stats.messages_reused += 1;
                    key = entry.chain_key;
                    // `fits` checked that the entry has an output.
                    let parts = match &entry.output {
                        Some(output) => {
                            lock(&self.state)
                                .diagnostics
                                .extend(output.diagnostics_at(at, entry.pinned_at.is_some()));
                            output.parts.clone()
                        }
                        None => Parts::default(),
                    };
                    if entry.scope_after.is_some() {
                        pending_scope = Some(entries.len());
                    }
                    entries.push(entry);
                    parts
                } else {
                    if let Some(scope) = pending_scope
                        .take()
                        .and_then(|at| entries.get(at))
                        .and_then(|entry| entry.scope_after.as_deref())
                    {
                        self.scope = scope.clone();
                    }
                    let diagnostics_before = lock(&self.state).diagnostics.len();
                    self.impure.store(false, Ordering::Relaxed);
                    let (parts, ran_script) = self.message_parts(message);
                    let parts = Parts::from(parts);
                    let impure = self.impure.load(Ordering::Relaxed);
                    // Template code is the only thing that carries state from one message to
                    // the next: its variables.
                    let chain_key = if ran_script {
                        let mut hasher = key_hasher();
                        head_key.hash(&mut hasher);
                        scope_fingerprint(&self.scope).hash(&mut hasher);
                        hasher.finish()
                    } else {
                        key
                    };
                    key = chain_key;
                    let (output, pinned_at) = if impure {
                        (None, None)
                    } else {
                        let diagnostics = &lock(&self.state).diagnostics[diagnostics_before..];
                        let (output, pinned) =
                            MessageOutput::new(parts.clone(), diagnostics, message.range);
                        (Some(output), pinned.then_some(at))
                    };
                    entries.push(MessageEntry {
                        input_key,
                        chain_key,
                        output,
                        pinned_at,
                        scope_after: ran_script.then(|| Arc::new(self.scope.clone())),
                    });
                    parts
                }
            } else {
                Parts::from(self.message_parts(message).0)
            };
            match role {
                None => conversation.system = output.into_vec(),
                Some(_) if output.is_empty() => {}
                Some(role) => conversation.messages.push(Message {
                    role,
                    parts: output,
                    span,
                }),
            }
        }
        if let Some(last) = messages.last() {
            self.report_progress(messages.len(), last.range.end);
        }
        if self.reuse_messages {
            if self.cancelled() {
                // Stopped early (the next change is coming): the results of the messages not
                // reached yet stay reusable for the next evaluation.
                let reached = entries.len();
                entries.extend(previous.into_iter().skip(reached));
            }
            self.cache.store_messages(self.path.as_deref(), entries);
        }
        self.add_missing_results(&mut conversation);
        self.finish(conversation)
    }

    /// The key of `message` after the chain key `previous`: its text and the names of the tools
    /// its results answer (a `read` result is rendered differently, by the `path` it read). Not
    /// its offset: a message evaluates the same wherever it stands (its diagnostics are kept
    /// relative to it).
    fn message_key(&self, previous: u64, message: &flemma_syntax::Message) -> u64 {
        let mut hasher = key_hasher();
        previous.hash(&mut hasher);
        self.doc.slice(message.range).hash(&mut hasher);
        for (_, result) in message.tool_results() {
            let name = self.tools.name_of(&result.tool_use_id);
            name.hash(&mut hasher);
            if name == Some("read") {
                self.tools
                    .input_path_of(self.doc, &result.tool_use_id)
                    .hash(&mut hasher);
            }
        }
        hasher.finish()
    }

    /// The parts of one message, and whether it ran template code.
    fn message_parts(&mut self, message: &flemma_syntax::Message) -> (Vec<Part>, bool) {
        self.stats.messages_evaluated += 1;
        match message.role {
            ChatRole::Assistant => (self.assistant_parts(message), false),
            _ => self.render_message(message),
        }
    }

    fn report_progress(&self, messages_done: usize, bytes_done: usize) {
        if let Some(progress) = &self.progress {
            (progress.0)(Progress {
                messages_done,
                messages_total: self.doc.messages().len(),
                bytes_done,
                bytes_total: self.doc.text().len(),
            });
        }
    }

    /// Records (once per evaluation) that the templates' time budget is spent, at the first
    /// script that could not run.
    fn time_budget_spent(&self, range: TextRange) {
        if self.budget_spent_reported.swap(true, Ordering::Relaxed) {
            return;
        }
        self.diagnose(
            range,
            Severity::Error,
            Category::Code,
            format!(
                "the templates of this chat ran for more than {} ms together (the time budget of one evaluation): this one and the ones after it were not evaluated; make the slow templates faster, this blocks sending",
                self.clock.total().as_millis()
            ),
            true,
        );
    }

    /// Whether the evaluation was cancelled; records one blocking diagnostic the first time.
    fn cancelled(&self) -> bool {
        if !self
            .cancel
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
        {
            return false;
        }
        let mut state = lock(&self.state);
        if !state
            .diagnostics
            .iter()
            .any(|d| d.message.starts_with(CANCELLED))
        {
            state.diagnostics.push(self.origin.diagnostic(
                TextRange::default(),
                Severity::Error,
                Category::Code,
                format!("{CANCELLED}; send again to evaluate"),
                true,
            ));
        }
        true
    }

    pub(crate) fn finish(self, conversation: Conversation) -> Evaluation {
        let diagnostics = std::mem::take(&mut lock(&self.state).diagnostics);
        let (layer, functions) = {
            let mut state = opt_lock(&self.opt);
            (
                std::mem::replace(&mut state.layer, ConfigLayer::new(LayerKind::Frontmatter)),
                std::mem::take(&mut state.functions),
            )
        };
        let library = self.functions.clone().unwrap_or_default();
        let auto_approve_functions: BTreeMap<u64, AutoApproveFunction> = functions
            .into_iter()
            .map(|(id, function)| {
                (
                    id,
                    AutoApproveFunction {
                        function,
                        functions: library.clone(),
                    },
                )
            })
            .collect();
        Evaluation {
            conversation,
            frontmatter_layer: layer,
            auto_approve_functions,
            diagnostics,
            stats: self.stats,
        }
    }

    /// The segments of a message's content (trailing blank lines cut off).
    fn content_segments(message: &flemma_syntax::Message) -> Vec<Segment> {
        let content = message.content;
        message
            .segments
            .iter()
            .filter(|s| s.range.end > content.start && s.range.start < content.end)
            .map(|s| {
                let mut s = s.clone();
                if matches!(s.kind, SegmentKind::Text) {
                    s.range = TextRange::new(
                        s.range.start.max(content.start),
                        s.range.end.min(content.end),
                    );
                }
                s
            })
            .collect()
    }

    /// Evaluates a `@You:`/`@System:` message into parts; says whether it ran template code.
    fn render_message(&mut self, message: &flemma_syntax::Message) -> (Vec<Part>, bool) {
        let doc = self.doc;
        let segments = Self::content_segments(message);
        let mut prepared: HashMap<usize, Vec<Part>> = HashMap::new();
        for segment in &segments {
            let parts = match &segment.kind {
                SegmentKind::FileReference(reference) => {
                    Some(self.file_reference(segment, reference))
                }
                SegmentKind::ToolResult(result) => Some(self.tool_result(result)),
                SegmentKind::JobResult(job) => Some(job_result(doc, job)),
                _ => None,
            };
            if let Some(parts) = parts {
                prepared.insert(segment.range.start, parts);
            }
        }
        let templated = segments
            .iter()
            .any(|s| matches!(s.kind, SegmentKind::Expression(_) | SegmentKind::Code(_)));
        if !templated {
            // No tags: no script to run.
            let mut parts = Vec::new();
            for segment in &segments {
                match prepared.remove(&segment.range.start) {
                    Some(prepared) => push_parts(&mut parts, prepared),
                    None => push_text(&mut parts, doc.slice(segment.range)),
                }
            }
            return (tidy(parts), false);
        }
        let mut diagnostics = Vec::new();
        let compiling = std::time::Instant::now();
        let (script, compiled) = script::build_and_compile(
            &self.engine,
            doc.text(),
            &segments,
            &mut |segment| prepared.get(&segment.range.start).cloned(),
            &self.origin,
            &self.cache,
            &mut diagnostics,
        );
        // Compiling is template work too: it counts against the evaluation's budget.
        self.clock.charge(compiling.elapsed());
        lock(&self.state).diagnostics.extend(diagnostics);
        let literal = || tidy(vec![Part::text(doc.slice(message.content))]);
        let ast = match compiled {
            Ok(ast) => ast,
            Err(error) => {
                let diagnostic = render::compile_error(
                    &script,
                    &self.origin,
                    &error,
                    Category::Code,
                    message.content,
                );
                lock(&self.state).diagnostics.push(diagnostic);
                return (literal(), false);
            }
        };
        if !self.clock.start_run() {
            // Not evaluated: never reused by a later evaluation, which may have time for it.
            self.impure.store(true, Ordering::Relaxed);
            self.time_budget_spent(message.content);
            return (literal(), false);
        }
        render::predeclare(&mut self.scope, &script);
        let length = self.scope.len();
        let result = render::run(
            &self.engine,
            &self.state,
            &ast,
            Arc::new(script),
            self.origin.clone(),
            &mut self.scope,
            Blame {
                category: Category::Code,
                fallback: message.content,
            },
        );
        self.clock.end_run();
        self.scope.rewind(length);
        match result {
            Some(parts) => (tidy(parts), true),
            None => (literal(), true),
        }
    }

    fn file_reference(&self, segment: &Segment, reference: &FileReference) -> Vec<Part> {
        self.impure.store(true, Ordering::Relaxed);
        let written = self.doc.slice(segment.range);
        let warn = |message: String| {
            self.diagnose(
                segment.range,
                Severity::Warning,
                Category::FileReference,
                message,
                false,
            );
            vec![Part::text(written)]
        };
        let path =
            match files::resolve_reference(&reference.path, &self.origin.dir, self.home.as_deref())
            {
                Ok(path) => path,
                Err(message) => return warn(format!("{message}; the literal text is sent")),
            };
        let bytes = match self.reader.read(&*self.host, &path) {
            Ok(bytes) => bytes,
            Err(files::ReadError::Refused(why)) => {
                return warn(format!(
                    "{} was not read: {why}; the literal text is sent",
                    path.display()
                ));
            }
            Err(files::ReadError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {
                return warn(format!(
                    "cannot read {} ({error}); the literal text is sent. Check the path (relative to the chat file)",
                    path.display()
                ));
            }
            Err(error) => {
                return warn(format!(
                    "cannot read {} ({error}); the literal text is sent",
                    path.display()
                ));
            }
        };
        let mime = reference
            .option("type")
            .map_or_else(|| files::detect_mime(&path, &bytes), str::to_string);
        match files::attachment(self.doc.slice(reference.raw_path), &mime, bytes) {
            Ok(part) => vec![part],
            Err(message) => warn(format!("{message}; the literal text is sent")),
        }
    }

    fn tool_result(&self, result: &ToolResult) -> Vec<Part> {
        let doc = self.doc;
        let Some(fence) = &result.fence else {
            return Vec::new(); // the parser reports the missing fence
        };
        let content = strip_line_break(doc.slice(fence.content));
        let status = result.suffix.as_ref().and_then(|suffix| suffix.status());
        let id = &result.tool_use_id;
        let make = |content: Vec<Part>, is_error: bool| {
            vec![Part::ToolResult {
                tool_use_id: id.clone(),
                content: content.into_iter().map(with_lf_line_ends).collect(),
                is_error,
            }]
        };
        let text_or = |default: &str| {
            if content.trim().is_empty() {
                vec![Part::text(default)]
            } else {
                vec![Part::text(content)]
            }
        };
        match status {
            None | Some(Status::Error) => {
                let name = self.tools.name_of(id);
                let parts = if name == Some("read") {
                    self.read_result(id, fence.content)
                } else if name.is_some_and(is_mcp_tool) {
                    self.stored_images_result(fence.content)
                } else {
                    vec![Part::text(content)]
                };
                make(parts, status == Some(Status::Error))
            }
            Some(Status::Denied) => make(text_or(DENIED), true),
            Some(Status::Rejected) => make(text_or(REJECTED), true),
            Some(Status::Aborted) => make(text_or(ABORTED), true),
            Some(Status::Pending) if !content.trim().is_empty() => {
                make(vec![Part::text(content)], false)
            }
            Some(Status::Pending) if content.trim().is_empty() => {
                // A call waiting for the user is the flow, not a mistake: a hint (it still
                // blocks a send).
                self.diagnose(
                    result.header,
                    Severity::Hint,
                    Category::Tool,
                    format!("tool `{id}` is waiting for approval: approve or reject it"),
                    true,
                );
                Vec::new()
            }
            Some(Status::Approved) if content.trim().is_empty() => {
                self.diagnose(
                    result.header,
                    Severity::Hint,
                    Category::Tool,
                    format!(
                        "tool `{id}` is approved but has not run yet: it runs once no call waits for approval (or paste its output into the fence and remove `approved`)"
                    ),
                    true,
                );
                Vec::new()
            }
            Some(_) => {
                self.diagnose(
                    result.header,
                    Severity::Error,
                    Category::Tool,
                    format!(
                        "tool `{id}` is approved but its result already holds text: clear the text to run the tool, or remove `approved` to send the text"
                    ),
                    true,
                );
                Vec::new()
            }
        }
    }

    /// A tool result's text with its file references turned into parts by `reference` (`None`
    /// leaves a reference as literal text); `{{ }}`/`{% %}` always stay literal (a file being
    /// read, or a server's output, may contain template syntax).
    fn result_with_references(
        &self,
        range: TextRange,
        reference: impl Fn(&Segment, &FileReference) -> Option<Vec<Part>>,
    ) -> Vec<Part> {
        let doc = self.doc;
        let range = TextRange::new(
            range.start,
            range.start + strip_line_break(doc.slice(range)).len(),
        );
        let mut parts = Vec::new();
        for segment in flemma_syntax::scan_templated(doc.text(), range) {
            let converted = match &segment.kind {
                SegmentKind::FileReference(file) => reference(&segment, file),
                _ => None,
            };
            match converted {
                Some(converted) => push_parts(&mut parts, converted),
                None => push_text(&mut parts, doc.slice(segment.range)),
            }
        }
        parts
    }

    /// The result of `read`: for a binary file (an image, a PDF) `read` writes one file
    /// reference (`flemma_syntax::write::file_reference`) naming the file it read, which
    /// becomes the attachment; that alone. Any other reference stays text: a text file `read`
    /// returns may hold `@~/.ssh/id_rsa` (a repository's README, written by anyone), and so may
    /// a result whose reference names another file than the call's `path`.
    fn read_result(&self, id: &str, range: TextRange) -> Vec<Part> {
        let read = self.tools.input_path_of(self.doc, id);
        let text = strip_line_break(self.doc.slice(range));
        let range = TextRange::new(range.start, range.start + text.len());
        let segments = flemma_syntax::scan_templated(self.doc.text(), range);
        let mut references = segments
            .iter()
            .filter(|segment| !self.doc.slice(segment.range).trim().is_empty());
        let own = match (references.next(), references.next()) {
            (Some(segment), None) => match &segment.kind {
                SegmentKind::FileReference(reference)
                    if read
                        .as_deref()
                        .is_some_and(|read| self.names_read_file(&reference.path, read)) =>
                {
                    Some((segment, reference))
                }
                _ => None,
            },
            _ => None,
        };
        match own {
            Some((segment, reference)) => self.file_reference(segment, reference),
            None => vec![Part::text(text)],
        }
    }

    /// Whether the reference path `written` (as `read` writes it) names the file of the `read`
    /// call's `path` input `read`: the same path, resolved the way each is (`~/` the home
    /// directory, a relative reference against the chat's folder, a relative input against the
    /// working directory, which is the chat's folder unless `read` wrote the absolute path: then
    /// that path ends with the input; `$FLEMMA_TOOLS_STORE_PATH/x` likewise ends with `x`).
    fn names_read_file(&self, written: &str, read: &str) -> bool {
        let home = self.home.as_deref();
        let Ok(reference) = files::resolve_reference(written, &self.origin.dir, home) else {
            return false;
        };
        if read.starts_with('/') || read == "~" || read.starts_with("~/") {
            let read = if read == "~" { "~/" } else { read };
            return files::resolve_reference(read, &self.origin.dir, home)
                .is_ok_and(|read| read == reference);
        }
        let relative = match read.strip_prefix('$') {
            // `$VAR/rest` and `${VAR}/rest`: the store's path, which the chat does not know.
            Some(variable) => match variable.split_once('/') {
                Some((_, rest)) => rest,
                None => return false,
            },
            None => read,
        };
        let relative = files::normalize(Path::new(relative));
        if relative.as_os_str().is_empty() {
            return false;
        }
        reference == files::normalize(&self.origin.dir.join(&relative))
            || (written.starts_with('/') && reference.ends_with(&relative))
    }

    /// The result of an MCP tool: the text, with each reference to an image the tool saved in
    /// the chat's store (`@//…/.flemma/…/mcp-x-1.png;type=image/png`, written by flemmad's MCP
    /// client) sent as an image part. Only a file whose real path lies under the chat's
    /// `.flemma/` and whose bytes are a PNG, JPEG, GIF or WebP image is attached; any other
    /// reference (a server can write any text) stays literal text.
    fn stored_images_result(&self, range: TextRange) -> Vec<Part> {
        self.result_with_references(range, |_, reference| {
            self.stored_image(reference).map(|part| vec![part])
        })
    }

    fn stored_image(&self, reference: &FileReference) -> Option<Part> {
        self.impure.store(true, Ordering::Relaxed);
        let path = files::resolve_reference(&reference.path, &self.origin.dir, None).ok()?;
        let store = self.host.real_path(&self.origin.dir.join(".flemma"))?;
        let real = self.host.real_path(&path)?;
        if !real.starts_with(&store) {
            return None;
        }
        let bytes = self.reader.read(&*self.host, &real).ok()?;
        // The bytes decide, not the name: an empty path leaves the type to the magic numbers.
        let mime = files::detect_mime(Path::new(""), &bytes);
        if !matches!(
            mime.as_str(),
            "image/png" | "image/jpeg" | "image/gif" | "image/webp"
        ) {
            return None;
        }
        files::attachment(self.doc.slice(reference.raw_path), &mime, bytes).ok()
    }

    fn assistant_parts(&self, message: &flemma_syntax::Message) -> Vec<Part> {
        let doc = self.doc;
        let has_tool_uses = message.tool_uses().next().is_some();
        let mut parts = Vec::new();
        for segment in Self::content_segments(message) {
            match &segment.kind {
                SegmentKind::ToolUse(tool_use) => {
                    let raw_input = tool_use
                        .fence
                        .as_ref()
                        .map(|fence| strip_line_break(doc.slice(fence.content)).to_string())
                        .unwrap_or_default();
                    let input = serde_json::from_str::<serde_json::Value>(&raw_input)
                        .ok()
                        .filter(serde_json::Value::is_object)
                        .unwrap_or_else(|| serde_json::json!({}));
                    parts.push(Part::ToolUse {
                        id: tool_use.id.clone(),
                        name: tool_use.name.replace(':', "."),
                        input,
                        raw_input,
                    });
                }
                SegmentKind::Thinking(thinking) => {
                    let signature = match (&thinking.provider, &thinking.signature) {
                        (Some(provider), Some(value)) => Some(ThinkingSignature {
                            provider: provider.clone(),
                            value: value.clone(),
                        }),
                        _ => None,
                    };
                    // The model's own bytes: the writer's escaping is undone (signatures
                    // cover the text exactly as the model sent it).
                    let text = strip_line_break(doc.slice(thinking.content));
                    parts.push(Part::Thinking {
                        text: unescape_model_text(text).into_owned(),
                        signature,
                        redacted: thinking.redacted,
                    });
                }
                SegmentKind::Aborted(aborted) => {
                    if !has_tool_uses {
                        push_text(
                            &mut parts,
                            &flemma_syntax::write::abort_marker(&aborted.message),
                        );
                    }
                }
                _ => push_text(&mut parts, &unescape_model_text(doc.slice(segment.range))),
            }
        }
        tidy(parts)
    }

    /// A tool use without a result anywhere gets a synthetic error result (and a warning).
    fn add_missing_results(&self, conversation: &mut Conversation) {
        let mut index = 0;
        while index < conversation.messages.len() {
            if conversation.messages[index].role != Role::Assistant {
                index += 1;
                continue;
            }
            let missing: Vec<String> = conversation.messages[index]
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::ToolUse { id, .. } if !self.tools.has_result(id) => Some(id.clone()),
                    _ => None,
                })
                .collect();
            if missing.is_empty() {
                index += 1;
                continue;
            }
            let results: Vec<Part> = missing
                .iter()
                .map(|id| {
                    let range = self.tools.header_of(id).unwrap_or_default();
                    self.diagnose(
                        range,
                        Severity::Warning,
                        Category::Tool,
                        format!(
                            "tool use `{id}` has no result: the request carries the error result \"{NO_RESULT}\"; run, reject or delete the tool use"
                        ),
                        false,
                    );
                    Part::ToolResult {
                        tool_use_id: id.clone(),
                        content: vec![Part::text(NO_RESULT)],
                        is_error: true,
                    }
                })
                .collect();
            match conversation.messages.get_mut(index + 1) {
                Some(next) if next.role == Role::User => {
                    let at = next
                        .parts
                        .iter()
                        .take_while(|part| matches!(part, Part::ToolResult { .. }))
                        .count();
                    next.parts.splice(at..at, results);
                }
                _ => conversation.messages.insert(
                    index + 1,
                    Message {
                        role: Role::User,
                        parts: results.into(),
                        span: None,
                    },
                ),
            }
            index += 1;
        }
    }
}

fn opt_lock(state: &SharedOpt) -> std::sync::MutexGuard<'_, opt::OptState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn job_result(doc: &Document, job: &flemma_syntax::JobResult) -> Vec<Part> {
    let content = job
        .fence
        .as_ref()
        .map(|fence| strip_line_break(doc.slice(fence.content)))
        .unwrap_or("");
    let failed = job
        .suffix
        .as_ref()
        .and_then(|suffix| suffix.status())
        .is_some_and(|status| status == Status::Error);
    let label = if failed { " (failed)" } else { "" };
    vec![Part::text(format!(
        "Job result for {}{label}:\n{content}\n",
        job.job_id
    ))]
}

/// A text part with `\n` line ends (providers never see a CRLF file's `\r`).
fn with_lf_line_ends(part: Part) -> Part {
    match part {
        Part::Text { text } if text.contains("\r\n") => Part::Text {
            text: text.replace("\r\n", "\n"),
        },
        other => other,
    }
}

/// Drops one trailing line break (fence content includes the last line's break).
fn strip_line_break(text: &str) -> &str {
    text.strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(text)
}

/// Drops whitespace-only text parts and trims text at the message's edges and next to tool
/// results (the blank lines between blocks); text next to attachments keeps its spaces.
fn tidy(parts: Vec<Part>) -> Vec<Part> {
    let parts: Vec<Part> = parts
        .into_iter()
        .filter(|part| !matches!(part, Part::Text { text } if text.trim().is_empty()))
        .collect();
    let is_boundary = |part: Option<&Part>| {
        matches!(
            part,
            None | Some(Part::ToolResult { .. } | Part::ToolUse { .. } | Part::Thinking { .. })
        )
    };
    let mut out = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        match part {
            Part::Text { text } => {
                let previous = index.checked_sub(1).and_then(|i| parts.get(i));
                let mut trimmed = text.as_str();
                if is_boundary(previous) {
                    trimmed = trimmed.trim_start();
                }
                if is_boundary(parts.get(index + 1)) {
                    trimmed = trimmed.trim_end();
                }
                // Providers get `\n` line ends whatever the file's convention (a CRLF file
                // keeps its CRLF on disk; the model never sees the `\r`).
                if trimmed.contains("\r\n") {
                    out.push(Part::text(trimmed.replace("\r\n", "\n")));
                } else {
                    out.push(Part::text(trimmed));
                }
            }
            other => out.push(other.clone()),
        }
    }
    out
}

/// The byte offset of a 1-based line and column (serde_json's columns count bytes).
fn offset_of_line_column(text: &str, line: usize, column: usize) -> Option<usize> {
    let mut offset = 0;
    for _ in 1..line {
        offset += text[offset..].find('\n')? + 1;
    }
    Some((offset + column.saturating_sub(1)).min(text.len()))
}

/// The range of `"key"` in JSON text.
fn find_key(code: &str, key: &str) -> Option<(usize, usize)> {
    if key.is_empty() {
        return None;
    }
    let needle = format!("\"{key}\"");
    code.find(&needle)
        .map(|start| (start, start + needle.len()))
}
