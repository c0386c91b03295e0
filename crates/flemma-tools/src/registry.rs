//! The registry: which tools exist, which are enabled for a config, and the one way to run a
//! call (validate, strip harness parameters, run, then `flemma.save_to`, truncation and the
//! store).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use flemma_config::Config;

use crate::builtin;
use crate::context::{Outcome, RunContext};
use crate::harness;
use crate::spec::ToolSpec;
use crate::store::ResultStore;
use crate::truncate::{self, Keep};
use crate::validate::{InputSchema, Mismatches};

/// A runner: input validated, harness parameters stripped. A closure, so custom tools (their
/// command line) and the engine (its job table) can register runners that carry data; built-ins
/// register their `run` function.
pub type Runner = Arc<dyn Fn(&RunContext, &Value) -> Outcome + Send + Sync>;

/// One registered tool.
#[derive(Clone)]
pub struct Registered {
    pub spec: ToolSpec,
    pub runner: Runner,
    /// Which end of an overflowing output is kept.
    pub keep: Keep,
    /// The input schema compiled on the tool's first call, shared by the registry's clones.
    schema: Arc<OnceLock<InputSchema>>,
}

impl Registered {
    /// The tool's input schema, compiled once.
    pub fn input_schema(&self) -> &InputSchema {
        self.schema.get_or_init(|| {
            let compiled = InputSchema::compile(&self.spec.input_schema);
            if let Some(reason) = compiled.unusable() {
                tracing::warn!(tool = %self.spec.name, %reason, "the input schema does not compile; inputs go to the tool unchecked");
            }
            compiled
        })
    }
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("spec", &self.spec)
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

/// The tools that can run in this process.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tools: Vec<Registered>,
}

/// Why a call could not be made (a bad invocation, not an error result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvocationError {
    #[error("unknown tool `{name}`{}", suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    UnknownTool {
        name: String,
        suggestion: Option<String>,
    },
    #[error("the input does not fit the schema of `{tool}`: {mismatches}")]
    Schema {
        tool: String,
        mismatches: Mismatches,
    },
}

impl Registry {
    /// The built-ins this crate runs by itself. `flemma.jobs.status` is registered with a runner
    /// that knows no jobs; the engine, which has the job table, intercepts it.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        registry.register(builtin::bash::spec(), builtin::bash::run, Keep::Tail);
        registry.register(builtin::read::spec(), builtin::read::run, Keep::Head);
        registry.register(builtin::write::spec(), builtin::write::run, Keep::Head);
        registry.register(builtin::ls::spec(), builtin::ls::run, Keep::Head);
        registry.register(builtin::edit::spec(), builtin::edit::run, Keep::Head);
        registry.register(builtin::grep::spec(), builtin::grep::run, Keep::Head);
        registry.register(builtin::find::spec(), builtin::find::run, Keep::Head);
        registry.register(builtin::fetch::spec(), builtin::fetch::run, Keep::Head);
        registry.register(
            builtin::jobs::spec(),
            builtin::jobs::run_without_jobs,
            Keep::Head,
        );
        registry
    }

    /// The built-ins as `config` sets them up (search exclusions, the skills catalogue) plus
    /// the custom tools it defines.
    pub fn for_config(config: &Config) -> Self {
        let mut registry = Self::builtin();
        let grep = builtin::grep::GrepOptions {
            exclude: config.tools.grep.exclude.clone(),
        };
        registry.register(
            builtin::grep::spec(),
            move |ctx, input| builtin::grep::run_with(ctx, input, &grep),
            Keep::Head,
        );
        let find = builtin::find::FindOptions {
            exclude: config.tools.find.exclude.clone(),
        };
        registry.register(
            builtin::find::spec(),
            move |ctx, input| builtin::find::run_with(ctx, input, &find),
            Keep::Head,
        );
        if let Some(dir) = config.tools.skills_dir.as_deref() {
            let dir = std::path::PathBuf::from(dir);
            if let Some(spec) = builtin::skill::spec(&dir) {
                registry.register(
                    spec,
                    move |ctx, input| builtin::skill::run(ctx, input, &dir),
                    Keep::Head,
                );
            }
        }
        let servers = builtin::lsp::ServerConfig::from_config(&config.tools.lsp);
        if !servers.is_empty() {
            // Registered even when no server is on `PATH` (`flemmad tools run lsp` then says
            // so); offered to the model only when one is (`condition_holds`).
            let pool = Arc::new(builtin::lsp::LspPool::new(servers));
            registry.register(
                builtin::lsp::spec(&pool),
                move |ctx, input| builtin::lsp::run(&pool, ctx, input),
                Keep::Head,
            );
        }
        for tool in &config.tools.custom {
            let definition = tool.clone();
            registry.register(
                builtin::custom::spec(tool),
                move |ctx, input| builtin::custom::run(ctx, &definition, input),
                Keep::Tail,
            );
        }
        registry
    }

    /// Adds (or replaces) a tool.
    pub fn register(
        &mut self,
        spec: ToolSpec,
        runner: impl Fn(&RunContext, &Value) -> Outcome + Send + Sync + 'static,
        keep: Keep,
    ) {
        self.tools.retain(|t| t.spec.name != spec.name);
        self.tools.push(Registered {
            spec,
            runner: Arc::new(runner),
            keep,
            schema: Arc::default(),
        });
        self.tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    }

    /// The registered tool `name`.
    pub fn get(&self, name: &str) -> Option<&Registered> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    /// Every registered tool, sorted by name.
    pub fn all(&self) -> &[Registered] {
        &self.tools
    }

    /// The tools enabled by `config`, in `tools.enabled` order, keeping only those registered
    /// and, for the conditional ones, only when their condition holds.
    /// Custom tools are enabled by being defined.
    pub fn enabled<'a>(&'a self, config: &Config) -> Vec<&'a Registered> {
        let custom = config.tools.custom.iter().map(|tool| &tool.name);
        let mut names: Vec<&String> = config.tools.enabled.iter().collect();
        for name in custom {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
            .into_iter()
            .filter(|name| condition_holds(name, config))
            .filter_map(|name| self.get(name))
            .collect()
    }

    /// The closest registered name to `name`.
    pub fn suggest(&self, name: &str) -> Option<String> {
        self.tools
            .iter()
            .map(|t| (strsim::levenshtein(name, &t.spec.name), &t.spec.name))
            .filter(|(d, candidate)| *d <= 3.max(candidate.len() / 3))
            .min_by_key(|(d, _)| *d)
            .map(|(_, n)| n.clone())
    }

    /// Whether `input` fits the schema of the tool `name`, harness parameters aside: what
    /// [`Registry::execute`] checks first, asked before a call is put up for approval.
    pub fn check_input(&self, name: &str, input: &Value) -> Result<(), InvocationError> {
        let tool = self.tool_or_error(name)?;
        let mut input = input.clone();
        harness::strip(&mut input);
        fits(tool, name, &input)
    }

    fn tool_or_error(&self, name: &str) -> Result<&Registered, InvocationError> {
        self.get(name).ok_or_else(|| InvocationError::UnknownTool {
            name: name.to_string(),
            suggestion: self.suggest(name),
        })
    }

    /// Runs a call as the engine does: unknown tools and inputs that do not fit are invocation
    /// errors; anything else is an [`Outcome`] whose text is exactly the tool-result content.
    pub fn execute(
        &self,
        name: &str,
        mut input: Value,
        ctx: &RunContext,
        store: &ResultStore,
        call_id: &str,
    ) -> Result<Outcome, InvocationError> {
        let tool = self.tool_or_error(name)?;
        let mut parameters = harness::strip(&mut input);
        if tool.spec.has(crate::spec::Capability::DisablesSaveTo) {
            parameters.save_to = None;
        }
        fits(tool, name, &input)?;
        let outcome = (tool.runner)(ctx, &input);
        Ok(finish(
            outcome,
            tool,
            parameters.save_to.as_deref(),
            ctx,
            store,
            call_id,
        ))
    }
}

/// Whether `input` (harness parameters stripped) fits the tool's schema.
fn fits(tool: &Registered, name: &str, input: &Value) -> Result<(), InvocationError> {
    tool.input_schema()
        .check(input)
        .map_err(|mismatches| InvocationError::Schema {
            tool: name.to_string(),
            mismatches,
        })
}

/// Whether a conditional tool's condition holds (unconditional tools always hold).
pub fn condition_holds(name: &str, config: &Config) -> bool {
    match name {
        "read_skill" => config
            .tools
            .skills_dir
            .as_deref()
            .map(|dir| !builtin::skill::catalogue(Path::new(dir)).is_empty())
            .unwrap_or(false),
        "fetch_content" => config.tools.fetch_content,
        // Registered by the shell with the agents' description (flemma-acp's `ask`).
        "ask_agent" => config.agents.values().any(|agent| agent.enabled),
        "lsp" => config.tools.lsp.servers.iter().any(|line| {
            line.split_whitespace()
                .next()
                .map(crate::process::on_path)
                .unwrap_or(false)
        }),
        _ => true,
    }
}

/// Where the full output is read from: the runner's file, or its text.
enum Full<'a> {
    File(&'a Path),
    Text(&'a str),
}

impl Full<'_> {
    fn copy_to(&self, out: &mut File) -> std::io::Result<()> {
        match self {
            Full::File(path) => {
                let mut source = File::open(path)?;
                std::io::copy(&mut source, out).map(|_| ())
            }
            Full::Text(text) => out.write_all(text.as_bytes()),
        }
    }
    /// (bytes, lines) without loading a file whole.
    fn measure(&self) -> std::io::Result<(u64, u64)> {
        match self {
            Full::Text(text) => Ok((text.len() as u64, text.lines().count() as u64)),
            Full::File(path) => {
                let mut reader = BufReader::with_capacity(1 << 16, File::open(path)?);
                let (mut bytes, mut newlines, mut last) = (0u64, 0u64, b'\n');
                loop {
                    let chunk = reader.fill_buf()?;
                    if chunk.is_empty() {
                        break;
                    }
                    bytes += chunk.len() as u64;
                    newlines += memchr::memchr_iter(b'\n', chunk).count() as u64;
                    if let Some(b) = chunk.last() {
                        last = *b;
                    }
                    let n = chunk.len();
                    reader.consume(n);
                }
                Ok((bytes, newlines + u64::from(last != b'\n')))
            }
        }
    }
    fn head(&self, max_bytes: usize) -> String {
        match self {
            Full::Text(text) => text
                .chars()
                .scan(0, |n, c| {
                    *n += c.len_utf8();
                    (*n <= max_bytes).then_some(c)
                })
                .collect(),
            Full::File(path) => {
                let mut bytes = Vec::new();
                if let Ok(file) = File::open(path) {
                    let _ = file.take(max_bytes as u64).read_to_end(&mut bytes);
                }
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
    }
}

fn finish(
    mut outcome: Outcome,
    tool: &Registered,
    save_to: Option<&str>,
    ctx: &RunContext,
    store: &ResultStore,
    call_id: &str,
) -> Outcome {
    let full_path = outcome.full_output.as_ref().map(|f| f.path().to_path_buf());
    let full = match &full_path {
        Some(path) => Full::File(path),
        None => Full::Text(&outcome.text),
    };
    if let Some(target) = save_to {
        let saved = save(&full, target, ctx, store);
        let text = match saved {
            Ok((path, bytes, lines)) => {
                let preview = preview(&full, store);
                format!(
                    "{preview}[Output saved: {} — {}, {lines} lines]",
                    path.display(),
                    truncate::human_size(bytes)
                )
            }
            Err(reason) => {
                let text = truncate_into_store(&full, &outcome.text, tool, store, call_id);
                let separator = if text.ends_with('\n') || text.is_empty() {
                    ""
                } else {
                    "\n"
                };
                format!(
                    "{text}{separator}[Output not saved: {reason}. Showing the full output instead.]"
                )
            }
        };
        outcome.text = text;
        return outcome;
    }
    let needs_store = full_path.is_some() || truncate::overflows(&outcome.text);
    if needs_store {
        outcome.text = truncate_into_store(&full, &outcome.text, tool, store, call_id);
    } else if store.materialize {
        let path = store.path_for("tool", &tool.spec.name, call_id);
        if let Err(error) = store.write_with(&path, &mut |f| full.copy_to(f)) {
            tracing::warn!(%error, "materializing a tool result failed");
        }
    }
    outcome
}

fn preview(full: &Full<'_>, store: &ResultStore) -> String {
    if store.preview_lines == 0 {
        return String::new();
    }
    let head = full.head(usize::try_from(store.preview_bytes).unwrap_or(2048));
    let mut out: String = head
        .split_inclusive('\n')
        .take(usize::try_from(store.preview_lines).unwrap_or(10))
        .collect();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn save(
    full: &Full<'_>,
    target: &str,
    ctx: &RunContext,
    store: &ResultStore,
) -> Result<(std::path::PathBuf, u64, u64), String> {
    let expanded = target.replace(
        "$FLEMMA_TOOLS_STORE_PATH",
        &store.dir().display().to_string(),
    );
    let path = ctx.guard.check_write(&ctx.resolve(&expanded)?)?;
    store
        .write_with(&path, &mut |f| full.copy_to(f))
        .map_err(|e| e.to_string())?;
    let (bytes, lines) = full.measure().map_err(|e| e.to_string())?;
    Ok((path, bytes, lines))
}

fn truncate_into_store(
    full: &Full<'_>,
    text: &str,
    tool: &Registered,
    store: &ResultStore,
    call_id: &str,
) -> String {
    if !truncate::overflows(text) && matches!(full, Full::Text(_)) {
        return text.to_string();
    }
    let path = store.path_for("tool", &tool.spec.name, call_id);
    let (bytes, lines) = full
        .measure()
        .unwrap_or((text.len() as u64, text.lines().count() as u64));
    match store.write_with(&path, &mut |f| full.copy_to(f)) {
        Ok(()) => truncate::truncated_with_notice(text, tool.keep, lines, bytes, &path),
        Err(error) => {
            let (kept, _) = truncate::keep(text, tool.keep);
            format!("{kept}\n[Output truncated; the full output could not be stored: {error}]")
        }
    }
}
