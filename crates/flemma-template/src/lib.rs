//! `flemma-template`: turns a parsed `.chat` document into a provider-neutral
//! [`Conversation`](flemma_conversation::Conversation).
//!
//! It runs the Rhai (or reads the JSON) frontmatter, evaluates `{{ expr }}` and `{% code %}`
//! templates in `@System:` and `@You:` messages inside a sandboxed Rhai engine, renders
//! `include()`d files and personalities, attaches `@./file` references, and maps tool results,
//! job results, thinking and abort markers to conversation parts. Every problem becomes a
//! [`TemplateDiagnostic`] with a range in the `.chat` file; blocking ones must stop a send.
//!
//! All IO goes through a [`Host`] ([`FsHost`] for the real filesystem).
//!
//! ```
//! use flemma_template::{EvalOptions, FsHost, evaluate};
//!
//! let doc = flemma_syntax::parse(
//!     "```rhai\nlet who = \"QA\";\nflemma.opt.thinking = \"medium\";\n```\n@You:\nHello {{ who }}!\n",
//! );
//! let evaluation = evaluate(&doc, std::sync::Arc::new(FsHost::default()), &EvalOptions::default());
//! assert!(evaluation.diagnostics.is_empty());
//! let text = flemma_conversation::Part::joined_text(&evaluation.conversation.messages[0].parts);
//! assert_eq!(text, "Hello QA!");
//! assert_eq!(
//!     evaluation.frontmatter_layer.get("parameters.thinking"),
//!     Some(serde_json::json!("medium"))
//! );
//! ```

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use flemma_config::ConfigLayer;
use flemma_conversation::Conversation;
use flemma_syntax::{Document, Severity, TextRange};
use serde::Serialize;
use serde::ser::SerializeStruct;

mod bounded;
mod cache;
mod convert;
mod engine;
mod environment;
mod files;
mod host;
mod lua;
mod opt;
mod origin;
mod personality;
mod render;
mod script;

pub use cache::TemplateCache;
pub use engine::Attachment;
pub use host::{
    FileKind, FsHost, Host, PersonalityContext, git_branch_of, read_regular_file,
    read_regular_file_within,
};
pub use lua::lua_frontmatter_to_rhai;
pub use personality::PERSONALITIES;

/// Resource limits of the sandbox. Most apply to each script run (the frontmatter, each message
/// with the files it includes, each call of an auto-approve function); `evaluation_budget`,
/// `max_file_bytes` and `max_read_bytes` to a whole evaluation of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Rhai operations per script run.
    pub max_operations: u64,
    /// Longest string a script may build, in bytes.
    pub max_string_size: usize,
    /// Largest array (default 10,000: an operation over a whole array — a comparison, a copy,
    /// `to_string` — then takes milliseconds, which is what the time budget may be overrun by).
    pub max_array_size: usize,
    /// Largest object map (default 10,000, for the same reason).
    pub max_map_size: usize,
    /// Deepest function call nesting.
    pub max_call_levels: usize,
    /// Deepest expression nesting (also for expressions inside functions).
    pub max_expr_depth: usize,
    /// Deepest `include()` nesting.
    pub max_include_depth: usize,
    /// Wall-clock budget of one script run (default 90 ms, so that a runaway template and the
    /// work around it end within 100 ms).
    pub time_budget: Duration,
    /// Wall-clock budget of all the script runs of one evaluation together (default 3 s): a
    /// chat of many slow templates stops there (with a blocking diagnostic) instead of taking
    /// the per-run budget again for every message.
    pub evaluation_budget: Duration,
    /// Largest file one evaluation reads (a `@./file` reference, `include()`, a template
    /// module, a project context file), in bytes (default 32 MiB, the largest PDF a provider
    /// takes).
    pub max_file_bytes: u64,
    /// Bytes the files one evaluation reads may add up to (default 64 MiB).
    pub max_read_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_operations: 5_000_000,
            max_string_size: 4 * 1024 * 1024,
            max_array_size: 10_000,
            max_map_size: 10_000,
            max_call_levels: 48,
            max_expr_depth: 64,
            max_include_depth: 16,
            time_budget: Duration::from_millis(90),
            evaluation_budget: Duration::from_secs(3),
            max_file_bytes: 32 * 1024 * 1024,
            max_read_bytes: 64 * 1024 * 1024,
        }
    }
}

/// How to evaluate a document.
#[derive(Debug, Clone, Default)]
pub struct EvalOptions {
    /// The `.chat` file's path (relative paths resolve against its directory); `None` for an
    /// unsaved buffer (then the host's working directory is used).
    pub path: Option<PathBuf>,
    /// Sandbox limits.
    pub limits: Limits,
    /// Set to `true` to stop a running evaluation (it ends with a blocking diagnostic).
    pub cancel: Option<Arc<AtomicBool>>,
    /// The user's template extensions (`templating.*` in the configuration).
    pub templating: TemplatingOptions,
    /// The configuration layers below the frontmatter (user file, client, runtime), so that
    /// what templates show of the configuration (the personality's tool list) is the document's
    /// resolved configuration. Empty: defaults only.
    pub config_layers: Vec<ConfigLayer>,
    /// Compiled templates and message results to reuse. `None`: a private cache for this one
    /// evaluation (right for a command that evaluates once). A long-lived owner (the language
    /// server's analysis host) keeps one [`TemplateCache`] and passes it to every evaluation,
    /// so that after an edit only the messages it changed (and the later ones whose template
    /// variables it changed) are evaluated again.
    pub cache: Option<TemplateCache>,
    /// Called as the evaluation advances through the messages (for a progress line on a
    /// terminal; a long chat takes a while).
    pub progress: Option<ProgressCallback>,
    /// Where the files the chat names may be read (its file references, `include()`, template
    /// modules named relative to it, the result of `read`). Whatever it says, `/proc`, `/sys`,
    /// `/dev` and the credentials in the home directory are never read
    /// (`flemma_config::reach::never_read`).
    pub reads: ReadScope,
}

/// Where an evaluation reads the files a chat names (`docs/security.md`, invariant II).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadScope {
    /// `None`: any file the user can read (a trusted chat). `Some`: only files whose real path
    /// (links followed) lies in one of these folders (an untrusted chat: its project and its
    /// folder); they are resolved through the host first.
    pub within: Option<Vec<PathBuf>>,
    /// Why a file elsewhere is not read, and how to allow it: the end of the warning that
    /// names it (`it is outside …`).
    pub why: String,
}

impl ReadScope {
    /// Only inside `folders`, for the reason `why` (said when a file elsewhere is named).
    pub fn within(folders: Vec<PathBuf>, why: impl Into<String>) -> Self {
        Self {
            within: Some(folders),
            why: why.into(),
        }
    }
}

/// How far an evaluation has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Messages evaluated so far.
    pub messages_done: usize,
    /// Messages in the document.
    pub messages_total: usize,
    /// Bytes of the document up to the end of the last evaluated message.
    pub bytes_done: usize,
    /// Bytes of the document.
    pub bytes_total: usize,
}

/// A progress callback: called at most every [`ProgressCallback::EVERY`] messages, and once
/// with `messages_done == messages_total` at the end (not at all for a document without
/// messages). It runs on the evaluating thread: keep it quick (print and return).
#[derive(Clone)]
pub struct ProgressCallback(pub Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressCallback {
    /// How many messages pass between two calls.
    pub const EVERY: usize = 1024;

    /// Wraps a closure.
    pub fn new(callback: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(callback))
    }
}

impl std::fmt::Debug for ProgressCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressCallback(..)")
    }
}

/// The user's template extensions, from the `templating` table of the resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplatingOptions {
    /// Rhai files of `fn` definitions and `const`s, loaded in order before the frontmatter;
    /// their functions are available to the frontmatter, every message and every included
    /// file (a later module overrides an earlier one's function of the same name and arity;
    /// the frontmatter's own functions override both). Relative paths resolve against the
    /// chat file's directory; `~` is not expanded here (the caller expands it).
    pub modules: Vec<PathBuf>,
    /// Frontmatter languages (the fence's info string, such as `yaml`) mapped to the command
    /// (program and arguments) that reads the frontmatter code on stdin and prints one JSON
    /// object on stdout, then treated exactly like JSON frontmatter.
    pub frontmatter_parsers: BTreeMap<String, Vec<String>>,
    /// How long a frontmatter parser may run before it is killed (default 5 s).
    pub parser_timeout: Duration,
    /// Whether the frontmatter parsers run in this evaluation (default `true`). Off, a
    /// frontmatter in a parser's language sets nothing and runs nothing (the analysis of an
    /// untrusted chat that is only opened: `docs/security.md`).
    pub run_parsers: bool,
}

impl Default for TemplatingOptions {
    fn default() -> Self {
        Self {
            modules: Vec::new(),
            frontmatter_parsers: BTreeMap::new(),
            parser_timeout: Duration::from_secs(5),
            run_parsers: true,
        }
    }
}

/// What a template diagnostic is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The frontmatter (syntax, runtime, `flemma.opt` and `flemma` config errors).
    Frontmatter,
    /// A `{{ }}` expression (non-blocking: the literal text is sent).
    Expression,
    /// `{% %}` code or the message script as a whole (blocking).
    Code,
    /// `include()` (missing files, cycles, errors inside included templates).
    Include,
    /// `@./file` references (non-blocking: the literal text is sent).
    FileReference,
    /// Tool uses and results (missing results, unresolved placeholders).
    Tool,
    /// A template module of `templating.modules` (unreadable, does not parse, fails to run).
    Module,
}

/// A problem found while evaluating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateDiagnostic {
    /// Where in the `.chat` file; for problems inside included files, the outermost
    /// `include()` call.
    pub range: TextRange,
    /// The included file the problem is in (`None`: the `.chat` file itself).
    pub file: Option<PathBuf>,
    /// The 1-based line in [`Self::file`].
    pub line_in_file: Option<u32>,
    /// How bad it is.
    pub severity: Severity,
    /// What it is about.
    pub category: Category,
    /// What happened and what to do.
    pub message: String,
    /// For include problems: the files being included, outermost first.
    pub include_stack: Vec<PathBuf>,
    /// Whether the conversation must not be sent.
    pub blocking: bool,
}

impl Serialize for TemplateDiagnostic {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("TemplateDiagnostic", 8)?;
        s.serialize_field(
            "range",
            &serde_json::json!({"start": self.range.start, "end": self.range.end}),
        )?;
        s.serialize_field("file", &self.file)?;
        s.serialize_field("line_in_file", &self.line_in_file)?;
        s.serialize_field("severity", self.severity.as_str())?;
        s.serialize_field("category", &self.category)?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("include_stack", &self.include_stack)?;
        s.serialize_field("blocking", &self.blocking)?;
        s.end()
    }
}

/// Why an auto-approve function could not decide (its message says what to fix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AutoApproveError(pub String);

/// What an auto-approve function answered for one call (seed `000`, "Function form").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoApproveAnswer {
    /// `true`.
    Approve,
    /// `false`.
    RequireApproval,
    /// `"deny"`, or `"deny: <reason>"` (the reason goes to the model).
    Deny {
        /// The text after `deny:`, when given.
        reason: Option<String>,
    },
    /// `()`: the next resolver decides.
    Pass,
}

/// A Rhai function the frontmatter assigned to `flemma.opt.tools.auto_approve`.
#[derive(Debug, Clone)]
pub struct AutoApproveFunction {
    function: rhai::FnPtr,
    functions: Arc<rhai::AST>,
}

impl AutoApproveFunction {
    /// Calls the function with `(tool_name, input, context)` in a fresh sandbox. `Some(true)`
    /// approves, `Some(false)` requires approval, `None` (the function returned `()`) defers to
    /// the rest of the configuration.
    pub fn call(
        &self,
        tool_name: &str,
        input: &serde_json::Value,
        context: &serde_json::Value,
        limits: &Limits,
    ) -> Result<Option<bool>, AutoApproveError> {
        match self.decide(tool_name, input, context, limits)? {
            AutoApproveAnswer::Approve => Ok(Some(true)),
            AutoApproveAnswer::RequireApproval => Ok(Some(false)),
            AutoApproveAnswer::Pass => Ok(None),
            AutoApproveAnswer::Deny { .. } => Err(AutoApproveError(
                "the frontmatter's auto_approve function returned \"deny\" where only true, false or () is accepted".into(),
            )),
        }
    }

    /// Calls the function like [`Self::call`], also accepting `"deny"` (or `"deny: reason"`).
    pub fn decide(
        &self,
        tool_name: &str,
        input: &serde_json::Value,
        context: &serde_json::Value,
        limits: &Limits,
    ) -> Result<AutoApproveAnswer, AutoApproveError> {
        let clock = engine::RunClock::new(limits);
        clock.start_run();
        let engine =
            engine::sandboxed_engine(limits, clock, None, SystemTime::now(), Arc::default());
        let to_dynamic = |value: &serde_json::Value| {
            rhai::serde::to_dynamic(value).map_err(|error| {
                AutoApproveError(format!(
                    "cannot pass the tool input to the auto_approve function: {error}"
                ))
            })
        };
        let args = (
            rhai::ImmutableString::from(tool_name),
            to_dynamic(input)?,
            to_dynamic(context)?,
        );
        let result: rhai::Dynamic =
            self.function
                .call(&engine, &self.functions, args)
                .map_err(|error| {
                    AutoApproveError(format!(
                        "the frontmatter's auto_approve function failed: {error}; fix it"
                    ))
                })?;
        if result.is_unit() {
            return Ok(AutoApproveAnswer::Pass);
        }
        if let Ok(text) = result.clone().into_immutable_string() {
            let text = text.trim();
            if text == "deny" {
                return Ok(AutoApproveAnswer::Deny { reason: None });
            }
            if let Some(reason) = text.strip_prefix("deny:") {
                return Ok(AutoApproveAnswer::Deny {
                    reason: Some(reason.trim().to_owned()).filter(|r| !r.is_empty()),
                });
            }
            return Err(AutoApproveError(format!(
                "the frontmatter's auto_approve function returned the string {text:?}; return true, false, \"deny\" (or \"deny: reason\") or ()"
            )));
        }
        match result.as_bool() {
            Ok(true) => Ok(AutoApproveAnswer::Approve),
            Ok(false) => Ok(AutoApproveAnswer::RequireApproval),
            Err(type_name) => Err(AutoApproveError(format!(
                "the frontmatter's auto_approve function returned {type_name}; return true, false, \"deny\" or ()"
            ))),
        }
    }
}

/// Everything an evaluation produces.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The conversation to send.
    pub conversation: Conversation,
    /// What `flemma.opt` (Rhai) or the `flemma` key (JSON) set.
    pub frontmatter_layer: ConfigLayer,
    /// Rhai closures assigned to `flemma.opt.tools.auto_approve`, keyed by the
    /// [`flemma_config::FunctionRef`] id stored in the layer.
    pub auto_approve_functions: BTreeMap<u64, AutoApproveFunction>,
    /// Every problem found, in discovery order.
    pub diagnostics: Vec<TemplateDiagnostic>,
    /// How much work the evaluation did and how much it reused.
    pub stats: EvalStats,
}

/// How much work an evaluation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvalStats {
    /// Messages evaluated.
    pub messages_evaluated: usize,
    /// Messages whose result was taken from [`EvalOptions::cache`] instead.
    pub messages_reused: usize,
}

impl Evaluation {
    /// Whether a blocking diagnostic forbids sending.
    pub fn is_blocked(&self) -> bool {
        self.diagnostics.iter().any(|d| d.blocking)
    }
}

/// The layer as JSON: each top-level table this layer touches, in the form of
/// [`ConfigLayer::get`] (op-prefix lists, `{"function": …}` for closures).
pub fn layer_to_json(layer: &ConfigLayer) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if let Some(serde_json::Value::Object(properties)) =
        flemma_config::json_schema().get("properties")
    {
        // The options, not Flemma's aliases of them (a layer stores an alias as its option).
        for key in properties
            .keys()
            .filter(|key| flemma_config::alias_target(key).is_none())
        {
            if let Some(value) = layer.get(key) {
                out.insert(key.clone(), value);
            }
        }
    }
    serde_json::Value::Object(out)
}

impl Serialize for Evaluation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Evaluation", 3)?;
        s.serialize_field("conversation", &self.conversation)?;
        s.serialize_field("config_layer", &layer_to_json(&self.frontmatter_layer))?;
        s.serialize_field("diagnostics", &self.diagnostics)?;
        s.end()
    }
}

/// Evaluates the whole document: frontmatter, every message, file references, tool results.
pub fn evaluate(doc: &Document, host: Arc<dyn Host>, options: &EvalOptions) -> Evaluation {
    let mut evaluator = convert::Evaluator::new(doc, host, options);
    evaluator.modules();
    evaluator.frontmatter();
    evaluator.conversation()
}

/// Runs only the frontmatter (the cheap path for status lines and the language server).
pub fn evaluate_frontmatter(
    doc: &Document,
    host: Arc<dyn Host>,
    options: &EvalOptions,
) -> (ConfigLayer, Vec<TemplateDiagnostic>) {
    let mut evaluator = convert::Evaluator::new(doc, host, options);
    evaluator.modules();
    evaluator.frontmatter();
    let evaluation = evaluator.finish(Conversation::default());
    (evaluation.frontmatter_layer, evaluation.diagnostics)
}
