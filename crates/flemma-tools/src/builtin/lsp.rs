//! `lsp`: definition, references, hover, symbols, diagnostics and rename through the language
//! servers listed in `tools.lsp.servers` (seed `002`). A server is started on the first call for
//! one of its extensions, in the working directory, and kept in the [`LspPool`] until the pool
//! is dropped; one that died is started again on the next call. Positions are 1-based lines
//! and character columns at the tool's boundary and the negotiated encoding on the wire.

mod client;
pub mod text;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};
use client::{Client, ClientError};
use text::Encoding;

pub const NAME: &str = "lsp";

/// How long `diagnostics` waits for the server's publication.
const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(3);

/// At most this many occurrences of a symbol are tried.
const MAX_TRIES: usize = 12;

/// The extensions of well-known servers (the config's `tools.lsp.extensions` adds and overrides).
const KNOWN: &[(&str, &[&str])] = &[
    ("rust-analyzer", &["rs"]),
    ("gopls", &["go"]),
    ("pyright-langserver", &["py", "pyi"]),
    ("basedpyright-langserver", &["py", "pyi"]),
    ("pylsp", &["py"]),
    ("jedi-language-server", &["py"]),
    ("ruff", &["py"]),
    (
        "typescript-language-server",
        &["ts", "tsx", "js", "jsx", "mjs", "cjs"],
    ),
    ("deno", &["ts", "tsx", "js", "jsx"]),
    (
        "clangd",
        &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
    ),
    ("lua-language-server", &["lua"]),
    ("zls", &["zig"]),
    ("taplo", &["toml"]),
    ("marksman", &["md"]),
    ("bash-language-server", &["sh", "bash"]),
    ("yaml-language-server", &["yaml", "yml"]),
    ("vscode-json-language-server", &["json"]),
    ("jdtls", &["java"]),
    ("ruby-lsp", &["rb"]),
    ("solargraph", &["rb"]),
    ("elixir-ls", &["ex", "exs"]),
    ("haskell-language-server-wrapper", &["hs"]),
    ("ocamllsp", &["ml", "mli"]),
    ("nil", &["nix"]),
    ("flemmad", &["chat"]),
];

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The program's file name (`rust-analyzer`).
    pub name: String,
    /// Program and arguments (the config's command line split at whitespace).
    pub command: Vec<String>,
    /// Extensions without the dot.
    pub extensions: Vec<String>,
}

impl ServerConfig {
    /// The servers of `tools.lsp`: every command line with its extensions. A server whose
    /// extensions are unknown is kept with none (the description says so).
    pub fn from_config(lsp: &flemma_config::LspTool) -> Vec<Self> {
        lsp.servers
            .iter()
            .filter_map(|line| {
                let command: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
                let program = command.first()?;
                let name = Path::new(program)
                    .file_name()
                    .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
                let extensions = lsp
                    .extensions
                    .get(&name)
                    .map(|exts| {
                        exts.iter()
                            .map(|e| e.trim_start_matches('.').to_owned())
                            .collect()
                    })
                    .or_else(|| {
                        KNOWN
                            .iter()
                            .find(|(known, _)| *known == name)
                            .map(|(_, exts)| exts.iter().map(|e| (*e).to_owned()).collect())
                    })
                    .unwrap_or_default();
                Some(ServerConfig {
                    name,
                    command,
                    extensions,
                })
            })
            .collect()
    }

    /// Whether its program is on `PATH` (or, given with a `/`, is a file).
    pub fn available(&self) -> bool {
        self.command
            .first()
            .is_some_and(|program| crate::process::on_path(program))
    }

    /// `rust-analyzer (.rs)`.
    fn describe(&self) -> String {
        if self.extensions.is_empty() {
            return format!(
                "{} (no extensions: set tools.lsp.extensions.{})",
                self.name, self.name
            );
        }
        let exts: Vec<String> = self.extensions.iter().map(|e| format!(".{e}")).collect();
        format!("{} ({})", self.name, exts.join(", "))
    }
}

/// The running servers of one process, started on demand; dropping the pool shuts them down.
#[derive(Debug)]
pub struct LspPool {
    servers: Vec<ServerConfig>,
    /// Configured servers whose program is not on `PATH`.
    missing: Vec<ServerConfig>,
    running: Mutex<HashMap<usize, Arc<Client>>>,
}

impl LspPool {
    /// A pool over the servers that are available; the others are skipped with a warning.
    pub fn new(servers: Vec<ServerConfig>) -> Self {
        let (servers, missing): (Vec<_>, Vec<_>) =
            servers.into_iter().partition(ServerConfig::available);
        for server in &missing {
            tracing::warn!(
                "lsp server {} ({}) not found on the PATH — skipped",
                server.name,
                server.command.join(" ")
            );
        }
        Self {
            servers,
            missing,
            running: Mutex::new(HashMap::new()),
        }
    }

    pub fn servers(&self) -> &[ServerConfig] {
        &self.servers
    }

    fn server_for(&self, path: &Path) -> Option<usize> {
        let ext = path.extension()?.to_str()?;
        self.servers
            .iter()
            .position(|s| s.extensions.iter().any(|e| e == ext))
    }

    /// The running client of server `index`, started (in `ctx.cwd`) when it is not running.
    fn client(&self, index: usize, ctx: &RunContext) -> Result<Arc<Client>, ClientError> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = running.get(&index) {
            if !client.exited() {
                return Ok(client.clone());
            }
            tracing::info!(server = %client.name, "the language server exited; starting it again");
            running.remove(&index);
        }
        let server = &self.servers[index];
        let client = Arc::new(Client::start(
            &server.command,
            &ctx.cwd,
            ctx.timeout,
            &ctx.cancel,
        )?);
        running.insert(index, client.clone());
        Ok(client)
    }
}

/// The tool's definition for the servers of `pool`.
pub fn spec(pool: &LspPool) -> ToolSpec {
    let servers: Vec<String> = pool.servers().iter().map(ServerConfig::describe).collect();
    let nullable_string =
        |description: &str| json!({"type": ["string", "null"], "description": description});
    let nullable_integer =
        |description: &str| json!({"type": ["integer", "null"], "description": description});
    ToolSpec {
        name: NAME.into(),
        description: format!(
            "Ask a language server about code. Servers available: {}. Actions: `definition` and \
`references` (locations as `path:line:column  source line`), `hover` (type and documentation), \
`symbols` (the file's outline), `diagnostics` (errors and warnings after syncing the file), \
`rename` (applies the server's edits to every file and reports them; use it instead of edit \
for renames). Name the symbol as written in the code (its occurrences are tried in order), or \
give a 1-based `line` and `column`.",
            if servers.is_empty() {
                "none (no configured server is on the PATH)".to_owned()
            } else {
                servers.join(", ")
            }
        ),
        input_schema: strict_object_schema(vec![
            (
                "action",
                json!({"type": "string", "enum": ["definition", "references", "hover", "symbols", "diagnostics", "rename"], "description": "What to ask."}),
            ),
            (
                "path",
                json!({"type": "string", "description": "File path, relative to the working directory. Its extension picks the server."}),
            ),
            (
                "symbol",
                nullable_string(
                    "The identifier as written in the code (for definition, references, hover, rename).",
                ),
            ),
            (
                "line",
                nullable_integer(
                    "1-based line: with `symbol`, only that line is searched; with `column`, the exact position.",
                ),
            ),
            (
                "column",
                nullable_integer(
                    "1-based column in characters, inside the identifier (only without `symbol`).",
                ),
            ),
            (
                "new_name",
                nullable_string("The new identifier, for `rename`."),
            ),
        ]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    }
}

/// The call, read from the input.
#[derive(Debug)]
struct Call<'a> {
    action: &'a str,
    path: &'a str,
    symbol: String,
    line: usize,
    column: usize,
    new_name: String,
}

fn fail(text: impl std::fmt::Display) -> Outcome {
    Outcome::error(format!("[lsp: {text}]"))
}

fn number(input: &Value, key: &str) -> usize {
    input
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
}

/// Runs one call through `pool`.
pub fn run(pool: &LspPool, ctx: &RunContext, input: &Value) -> Outcome {
    let (Some(action), Some(path)) = (
        input.get("action").and_then(Value::as_str),
        input.get("path").and_then(Value::as_str),
    ) else {
        return fail("lsp needs `action` and `path` strings");
    };
    let written_symbol = input.get("symbol").and_then(Value::as_str).unwrap_or("");
    let written_new = input.get("new_name").and_then(Value::as_str).unwrap_or("");
    let (symbol, new_name) = if action == "rename" {
        text::rename_words(written_symbol, written_new)
    } else {
        (text::clean_symbol(written_symbol), String::new())
    };
    let call = Call {
        action,
        path,
        symbol,
        line: number(input, "line"),
        column: number(input, "column"),
        new_name,
    };
    let absolute = match ctx.readable(path) {
        Ok(absolute) => absolute,
        Err(refused) => return fail(refused),
    };
    let absolute = std::fs::canonicalize(&absolute).unwrap_or(absolute);
    let Some(index) = pool.server_for(&absolute) else {
        let configured: Vec<String> = pool.servers().iter().map(ServerConfig::describe).collect();
        let missing: Vec<String> = pool.missing.iter().map(ServerConfig::describe).collect();
        return fail(format!(
            "no language server for {path:?} — configured: {}{}",
            if configured.is_empty() {
                "none on the PATH".to_owned()
            } else {
                configured.join(", ")
            },
            if missing.is_empty() {
                String::new()
            } else {
                format!("; not found on the PATH: {}", missing.join(", "))
            }
        ));
    };
    let content = match std::fs::read_to_string(&absolute) {
        Ok(content) => content,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return fail(format!(
                "{path} does not exist (paths are relative to {})",
                ctx.cwd.display()
            ));
        }
        Err(error) => return fail(format!("cannot read {path}: {error}")),
    };
    if call.action == "rename" && call.new_name.is_empty() {
        return fail(format!(
            "rename needs new_name — call lsp again with {{\"action\": \"rename\", \"path\": {path:?}, \"symbol\": {:?}, \"new_name\": \"<the new identifier>\"}}; do not use edit_file for a rename",
            call.symbol
        ));
    }
    let server = &pool.servers()[index];
    let client = match pool.client(index, ctx) {
        Ok(client) => client,
        Err(error) => return fail(format!("{}: {error}", server.name)),
    };
    let session = Session {
        client: &client,
        ctx,
        language: language_id(&absolute),
    };
    let before = client.publications();
    let changed = match client.sync(&absolute, &content, &session.language) {
        Ok(changed) => changed,
        Err(error) => return fail(format!("{}: {error}", client.name)),
    };
    let result = match call.action {
        "symbols" => session.symbols(&absolute, &call),
        "diagnostics" => Ok(session.diagnostics(&absolute, &call, changed, before)),
        "definition" | "references" | "hover" | "rename" => {
            session.at_symbol(&absolute, &content, &call)
        }
        other => {
            return fail(format!(
                "unknown action {other:?}; use definition, references, hover, symbols, diagnostics or rename"
            ));
        }
    };
    match result {
        Ok(outcome) => outcome,
        Err(error) => fail(format!("{}: {} failed: {error}", client.name, call.action)),
    }
}

/// The `languageId` of a file, from its extension.
fn language_id(path: &Path) -> String {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "ts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "sh" | "bash" => "shellscript",
        "md" => "markdown",
        "yml" => "yaml",
        "hs" => "haskell",
        "ml" | "mli" => "ocaml",
        "rb" => "ruby",
        "ex" | "exs" => "elixir",
        other => other,
    }
    .to_owned()
}

struct Session<'a> {
    client: &'a Client,
    ctx: &'a RunContext,
    language: String,
}

/// Source lines of files read while formatting one answer.
#[derive(Default)]
struct Sources(HashMap<PathBuf, Option<String>>);

impl Sources {
    fn text(&mut self, path: &Path) -> Option<&str> {
        self.0
            .entry(path.to_path_buf())
            .or_insert_with(|| std::fs::read_to_string(path).ok())
            .as_deref()
    }
}

impl Session<'_> {
    fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.client
            .request(method, params, self.ctx.timeout, &self.ctx.cancel)
    }

    fn shown(&self, path: &Path) -> String {
        shown(self.ctx, path)
    }

    /// The 0-based (line, character column) positions to try.
    fn positions(&self, content: &str, call: &Call<'_>) -> Result<Vec<(usize, usize)>, String> {
        if call.symbol.is_empty() {
            if call.line == 0 || call.column == 0 {
                return Err(format!(
                    "{} needs a `symbol`, or a `line` and `column`",
                    call.action
                ));
            }
            text::check_position(content, call.line, call.column)?;
            return Ok(vec![(call.line - 1, call.column - 1)]);
        }
        if call.line > 0 {
            text::check_position(content, call.line, 1)?;
        }
        let found = text::occurrences(content, &call.symbol, (call.line > 0).then_some(call.line));
        if found.is_empty() {
            return Err(match call.line {
                0 => format!("{:?} not found in {}", call.symbol, call.path),
                line => format!(
                    "{:?} not found on line {line} of {}",
                    call.symbol, call.path
                ),
            });
        }
        Ok(found)
    }

    fn at_symbol(
        &self,
        path: &Path,
        content: &str,
        call: &Call<'_>,
    ) -> Result<Outcome, ClientError> {
        let positions = match self.positions(content, call) {
            Ok(positions) => positions,
            Err(problem) => return Ok(fail(problem)),
        };
        let lines = text::lines(content);
        let uri = text::path_to_uri(path);
        let encoding = self.client.encoding;
        let mut refused = None;
        for &(line, column) in positions.iter().take(MAX_TRIES) {
            let character = text::to_wire(lines.get(line).copied().unwrap_or(""), column, encoding);
            let mut params = json!({
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": character},
            });
            let method = match call.action {
                "definition" => "textDocument/definition",
                "references" => {
                    params["context"] = json!({"includeDeclaration": true});
                    "textDocument/references"
                }
                "hover" => "textDocument/hover",
                _ => {
                    params["newName"] = json!(call.new_name);
                    "textDocument/rename"
                }
            };
            // A server that refuses one occurrence ("no symbol at the given location") may
            // answer the next; a timeout or an exit ends the search.
            let answer = match self.request(method, params) {
                Ok(answer) => answer,
                Err(error @ ClientError::Server { .. }) => {
                    refused = Some(error);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let outcome = match call.action {
                "definition" | "references" => self.locations(&answer, call.action == "references"),
                "hover" => hover_text(&answer).map(Outcome::ok),
                _ => self.rename(&answer, &call.new_name),
            };
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
        if let Some(error) = refused {
            return Err(error);
        }
        let what = match call.action {
            "hover" => "hover information",
            "rename" => "rename edits",
            other => other,
        };
        let place = match (call.symbol.is_empty(), positions.first()) {
            (true, Some((line, column))) => {
                format!("the symbol at {}:{}:{}", call.path, line + 1, column + 1)
            }
            _ => format!(
                "{:?} in {} ({} occurrence{} tried)",
                call.symbol,
                call.path,
                positions.len().min(MAX_TRIES),
                if positions.len() == 1 { "" } else { "s" }
            ),
        };
        Ok(fail(format!("no {what} found for {place}")))
    }

    /// `path:line:column  source` per location, sorted, deduplicated; `None` when empty.
    fn locations(&self, answer: &Value, references: bool) -> Option<Outcome> {
        let items: Vec<&Value> = match answer {
            Value::Array(items) => items.iter().collect(),
            Value::Object(_) => vec![answer],
            _ => Vec::new(),
        };
        let mut found: Vec<(PathBuf, u32, u32)> = items
            .into_iter()
            .filter_map(|item| {
                // Location {uri, range} or LocationLink {targetUri, targetSelectionRange}.
                let uri = item
                    .get("uri")
                    .or_else(|| item.get("targetUri"))?
                    .as_str()?;
                let range = item
                    .get("range")
                    .or_else(|| item.get("targetSelectionRange"))?;
                let line = u32::try_from(range["start"]["line"].as_u64()?).ok()?;
                let character = u32::try_from(range["start"]["character"].as_u64()?).ok()?;
                Some((text::uri_to_path(uri)?, line, character))
            })
            .collect();
        if found.is_empty() {
            return None;
        }
        found.sort();
        found.dedup();
        let mut sources = Sources::default();
        let mut out = String::new();
        if references {
            let _ = writeln!(out, "{} reference(s):", found.len());
        }
        for (path, line, character) in &found {
            let source = sources
                .text(path)
                .and_then(|t| text::lines(t).get(*line as usize).map(|l| (*l).to_owned()))
                .unwrap_or_default();
            let column = text::from_wire(&source, *character, self.client.encoding) + 1;
            let _ = writeln!(
                out,
                "{}:{}:{column}  {}",
                self.shown(path),
                line + 1,
                source.trim()
            );
        }
        Some(Outcome::ok(out))
    }

    fn symbols(&self, path: &Path, call: &Call<'_>) -> Result<Outcome, ClientError> {
        let answer = self.request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": text::path_to_uri(path)}}),
        )?;
        let mut out = String::new();
        if let Some(items) = answer.as_array() {
            for item in items {
                write_symbol(&mut out, item, 0);
            }
        }
        if out.is_empty() {
            return Ok(Outcome::ok(format!("no symbols in {}", call.path)));
        }
        Ok(Outcome::ok(out))
    }

    fn diagnostics(&self, path: &Path, call: &Call<'_>, changed: bool, before: u64) -> Outcome {
        let (published, note) = match self.client.published(path) {
            Some(published) if !changed => (Some(published), " (as last published)"),
            _ => (
                self.client
                    .wait_for_diagnostics(path, before, DIAGNOSTICS_WAIT, &self.ctx.cancel),
                "",
            ),
        };
        let Some(published) = published else {
            return Outcome::ok(format!(
                "no diagnostics received for {} within {}s ({} did not publish any; it may still be indexing — call again)",
                call.path,
                DIAGNOSTICS_WAIT.as_secs(),
                self.client.name
            ));
        };
        if published.diagnostics.is_empty() {
            return Outcome::ok(format!("no diagnostics: {} is clean{note}", call.path));
        }
        let content = std::fs::read_to_string(path).unwrap_or_default();
        let lines = text::lines(&content);
        let mut diagnostics = published.diagnostics;
        diagnostics.sort_by_key(|d| (d.range.start.line, d.range.start.character));
        let mut out = format!(
            "{} diagnostic(s) in {}{note}:\n",
            diagnostics.len(),
            call.path
        );
        for diagnostic in &diagnostics {
            let start = diagnostic.range.start;
            let line = lines.get(start.line as usize).copied().unwrap_or("");
            let column = text::from_wire(line, start.character, self.client.encoding) + 1;
            let severity = match diagnostic.severity {
                Some(lsp_types::DiagnosticSeverity::WARNING) => "warning",
                Some(lsp_types::DiagnosticSeverity::INFORMATION) => "info",
                Some(lsp_types::DiagnosticSeverity::HINT) => "hint",
                _ => "error",
            };
            let message = diagnostic
                .message
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let source = diagnostic
                .source
                .as_ref()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{severity} {}:{}:{column} {message}{source}",
                call.path,
                start.line + 1
            );
        }
        Outcome::ok(out)
    }

    /// Applies a rename's workspace edit; `None` when the server answered with no edit.
    fn rename(&self, answer: &Value, new_name: &str) -> Option<Outcome> {
        if answer.is_null() {
            return None;
        }
        let edits = match workspace_edits(answer) {
            Ok(edits) => edits,
            Err(problem) => return Some(fail(problem)),
        };
        if edits.values().all(Vec::is_empty) {
            return None;
        }
        Some(match self.apply(&edits) {
            Ok(()) => {
                let total: usize = edits.values().map(Vec::len).sum();
                let mut out = format!(
                    "renamed to {new_name}: {total} edit(s) in {} file(s)\n",
                    edits.len()
                );
                for (path, file_edits) in &edits {
                    let _ = writeln!(out, "{}: {} edit(s)", self.shown(path), file_edits.len());
                }
                Outcome::ok(out)
            }
            Err(problem) => fail(problem),
        })
    }

    /// Writes the edits (see [`write_workspace_edits`]), then tells the server the new text.
    fn apply(&self, edits: &BTreeMap<PathBuf, Vec<WireEdit>>) -> Result<(), String> {
        let written = write_workspace_edits(self.ctx, edits, self.client.encoding)?;
        for (target, after) in &written {
            if let Err(error) = self.client.sync(target, after, &language_id(target)) {
                tracing::warn!(%error, "telling the server about a renamed file failed");
            }
        }
        Ok(())
    }
}

/// The largest file a rename changes.
const MAX_RENAMED_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Writes every file of `edits`, each checked against the sandbox policy (`ctx.guard`, as for
/// `write` and `edit`) and edited in memory first: nothing is written unless every file can be.
/// Returns each written file with its new text.
pub fn write_workspace_edits(
    ctx: &RunContext,
    edits: &BTreeMap<PathBuf, Vec<WireEdit>>,
    encoding: Encoding,
) -> Result<Vec<(PathBuf, String)>, String> {
    let shown = |path: &Path| shown(ctx, path);
    let mut planned = Vec::new();
    for (path, file_edits) in edits {
        let target = ctx
            .guard
            .check_write(path)
            .map_err(|reason| format!("rename refused: cannot write {}: {reason}", shown(path)))?;
        let before = crate::nofollow::read_file(&target, MAX_RENAMED_FILE_BYTES)
            .and_then(|bytes| {
                let bytes =
                    bytes.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
                String::from_utf8(bytes)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|e| format!("rename stopped: cannot read {}: {e}", shown(path)))?;
        let after = apply_edits(&before, file_edits, encoding)
            .map_err(|problem| format!("rename stopped: {}: {problem}", shown(path)))?;
        planned.push((target, after));
    }
    for (index, (target, after)) in planned.iter().enumerate() {
        if let Err(error) = crate::nofollow::replace_file(target, after.as_bytes()) {
            let done: Vec<String> = planned[..index].iter().map(|(t, _)| shown(t)).collect();
            return Err(format!(
                "rename stopped while writing {}: {error}{}",
                shown(target),
                if done.is_empty() {
                    String::new()
                } else {
                    format!(" (already renamed: {})", done.join(", "))
                }
            ));
        }
    }
    Ok(planned)
}

/// `path` relative to the working directory (as given, or resolved) when inside it.
fn shown(ctx: &RunContext, path: &Path) -> String {
    if !path.starts_with(&ctx.cwd)
        && let Ok(cwd) = std::fs::canonicalize(&ctx.cwd)
        && path.starts_with(&cwd)
    {
        return text::shown_path(path, &cwd);
    }
    text::shown_path(path, &ctx.cwd)
}

/// One text edit as the server sent it (wire positions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEdit {
    pub start: (u32, u32),
    pub end: (u32, u32),
    pub new_text: String,
}

fn wire_edit(value: &Value) -> Option<WireEdit> {
    let position = |p: &Value| -> Option<(u32, u32)> {
        Some((
            u32::try_from(p["line"].as_u64()?).ok()?,
            u32::try_from(p["character"].as_u64()?).ok()?,
        ))
    };
    Some(WireEdit {
        start: position(&value["range"]["start"])?,
        end: position(&value["range"]["end"])?,
        new_text: value["newText"].as_str()?.to_owned(),
    })
}

/// The text edits of a `WorkspaceEdit` per file (`changes` or `documentChanges`); file
/// creations, renames and deletions are refused.
pub fn workspace_edits(edit: &Value) -> Result<BTreeMap<PathBuf, Vec<WireEdit>>, String> {
    let mut out: BTreeMap<PathBuf, Vec<WireEdit>> = BTreeMap::new();
    let mut add = |uri: &str, edits: &Value| -> Result<(), String> {
        let path = text::uri_to_path(uri)
            .ok_or_else(|| format!("the server's rename edits {uri}, which is not a file"))?;
        let list = edits.as_array().map(Vec::as_slice).unwrap_or_default();
        let parsed: Option<Vec<WireEdit>> = list.iter().map(wire_edit).collect();
        let parsed = parsed.ok_or_else(|| format!("the server sent a malformed edit for {uri}"))?;
        out.entry(path).or_default().extend(parsed);
        Ok(())
    };
    if let Some(changes) = edit.get("documentChanges").and_then(Value::as_array) {
        for change in changes {
            if let Some(kind) = change.get("kind").and_then(Value::as_str) {
                return Err(format!(
                    "the server's rename also wants to {kind} a file, which this tool does not do; rename that file yourself"
                ));
            }
            let uri = change["textDocument"]["uri"].as_str().unwrap_or("");
            add(uri, &change["edits"])?;
        }
    } else if let Some(changes) = edit.get("changes").and_then(Value::as_object) {
        for (uri, edits) in changes {
            add(uri, edits)?;
        }
    }
    Ok(out)
}

/// `text` with `edits` applied (positions in `encoding`); overlapping edits are refused.
pub fn apply_edits(text: &str, edits: &[WireEdit], encoding: Encoding) -> Result<String, String> {
    let mut ranges = Vec::with_capacity(edits.len());
    for edit in edits {
        let start = text::byte_offset(text, edit.start.0, edit.start.1, encoding);
        let end = text::byte_offset(text, edit.end.0, edit.end.1, encoding);
        let (Some(start), Some(end)) = (start, end) else {
            return Err(format!(
                "an edit at line {} is past the end of the file",
                edit.start.0 + 1
            ));
        };
        if end < start {
            return Err(format!(
                "an edit at line {} ends before it starts",
                edit.start.0 + 1
            ));
        }
        ranges.push((start, end, edit.new_text.as_str()));
    }
    ranges.sort_by_key(|(start, end, _)| (*start, *end));
    if ranges.windows(2).any(|pair| pair[1].0 < pair[0].1) {
        return Err("the server sent overlapping edits; nothing was changed".into());
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, new_text) in ranges {
        out.push_str(&text[at..start]);
        out.push_str(new_text);
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// The text of a hover answer, as the server sent it.
fn hover_text(answer: &Value) -> Option<String> {
    fn part(value: &Value) -> Option<String> {
        match value {
            Value::String(text) => Some(text.clone()),
            Value::Object(object) => {
                let text = object.get("value")?.as_str()?;
                match object.get("language").and_then(Value::as_str) {
                    Some(language) => Some(format!("```{language}\n{text}\n```")),
                    None => Some(text.to_owned()),
                }
            }
            Value::Array(items) => {
                let parts: Vec<String> = items.iter().filter_map(part).collect();
                (!parts.is_empty()).then(|| parts.join("\n\n"))
            }
            _ => None,
        }
    }
    part(answer.get("contents")?).filter(|text| !text.trim().is_empty())
}

/// The word of an LSP `SymbolKind`.
pub fn symbol_kind(kind: u64) -> &'static str {
    const KINDS: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum-member",
        "struct",
        "event",
        "operator",
        "type-parameter",
    ];
    usize::try_from(kind)
        .ok()
        .and_then(|k| k.checked_sub(1))
        .and_then(|k| KINDS.get(k))
        .copied()
        .unwrap_or("symbol")
}

/// `<kind> <name>  [<detail>]  line N`, children indented two spaces (a `DocumentSymbol`, or a
/// flat `SymbolInformation`).
fn write_symbol(out: &mut String, symbol: &Value, depth: usize) {
    let name = symbol["name"].as_str().unwrap_or("?");
    let kind = symbol_kind(symbol["kind"].as_u64().unwrap_or(0));
    let range = symbol
        .get("selectionRange")
        .or_else(|| symbol.get("range"))
        .or_else(|| symbol.get("location").and_then(|l| l.get("range")));
    let line = range
        .and_then(|r| r["start"]["line"].as_u64())
        .map_or(0, |l| l + 1);
    let detail = symbol
        .get("detail")
        .and_then(Value::as_str)
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .map(|d| format!("  [{d}]"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{:indent$}{kind} {name}{detail}  line {line}",
        "",
        indent = depth * 2
    );
    if let Some(children) = symbol.get("children").and_then(Value::as_array) {
        for child in children {
            write_symbol(out, child, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_utf16_and_overlaps_are_refused() {
        let before = "let π = 1;\nprint(π);\n";
        let edit = |line, start, end, new: &str| WireEdit {
            start: (line, start),
            end: (line, end),
            new_text: new.into(),
        };
        let edits = [edit(1, 6, 7, "pi"), edit(0, 4, 5, "pi")];
        assert_eq!(
            apply_edits(before, &edits, Encoding::Utf16).unwrap(),
            "let pi = 1;\nprint(pi);\n"
        );
        // In UTF-8, π is two units wide.
        let edits = [edit(0, 4, 6, "pi")];
        assert_eq!(
            apply_edits(before, &edits, Encoding::Utf8).unwrap(),
            "let pi = 1;\nprint(π);\n"
        );
        let overlapping = [edit(0, 0, 5, "x"), edit(0, 4, 6, "y")];
        assert!(apply_edits(before, &overlapping, Encoding::Utf16).is_err());
        assert!(apply_edits(before, &[edit(9, 0, 1, "x")], Encoding::Utf16).is_err());
    }

    #[test]
    fn rename_edits_go_through_the_sandbox_policy_all_or_nothing() {
        let inside = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = inside.path().canonicalize().expect("canonical");
        let policy = crate::sandbox::PathPolicy::new([root.clone()]);
        let ctx = RunContext::new(&root, std::sync::Arc::new(policy));
        let a = root.join("a.rs");
        let b = outside
            .path()
            .canonicalize()
            .expect("canonical")
            .join("b.rs");
        std::fs::write(&a, "fn greet() {}\n").expect("a");
        std::fs::write(&b, "greet();\n").expect("b");
        let edit = |start, end| WireEdit {
            start: (0, start),
            end: (0, end),
            new_text: "hello".into(),
        };
        let mut edits =
            BTreeMap::from([(a.clone(), vec![edit(3, 8)]), (b.clone(), vec![edit(0, 5)])]);
        let refused = write_workspace_edits(&ctx, &edits, Encoding::Utf16).unwrap_err();
        assert!(
            refused.starts_with("rename refused: cannot write /"),
            "{refused}"
        );
        assert_eq!(
            std::fs::read_to_string(&a).expect("a"),
            "fn greet() {}\n",
            "nothing written"
        );
        assert_eq!(std::fs::read_to_string(&b).expect("b"), "greet();\n");
        edits.remove(&b);
        let written = write_workspace_edits(&ctx, &edits, Encoding::Utf16).expect("inside");
        assert_eq!(written, vec![(a.clone(), "fn hello() {}\n".to_owned())]);
        assert_eq!(std::fs::read_to_string(&a).expect("a"), "fn hello() {}\n");
    }

    #[test]
    fn workspace_edits_from_both_forms_and_file_operations_refused() {
        let range =
            json!({"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 2}});
        let changes = json!({"changes": {"file:///w/a.rs": [{"range": range, "newText": "b"}]}});
        let edits = workspace_edits(&changes).unwrap();
        assert_eq!(edits[Path::new("/w/a.rs")].len(), 1);
        let document = json!({"documentChanges": [
            {"textDocument": {"uri": "file:///w/b.rs", "version": 1}, "edits": [{"range": range, "newText": "c"}]}
        ]});
        assert_eq!(
            workspace_edits(&document).unwrap()[Path::new("/w/b.rs")][0].new_text,
            "c"
        );
        let with_rename = json!({"documentChanges": [{"kind": "rename", "oldUri": "file:///a", "newUri": "file:///b"}]});
        assert!(
            workspace_edits(&with_rename)
                .unwrap_err()
                .contains("rename a file")
        );
    }

    #[test]
    fn hover_and_symbols_format() {
        assert_eq!(
            hover_text(&json!({"contents": {"kind": "markdown", "value": "**fn** greet"}})),
            Some("**fn** greet".into())
        );
        assert_eq!(
            hover_text(
                &json!({"contents": [{"language": "rust", "value": "fn greet()"}, "Says hi."]})
            ),
            Some("```rust\nfn greet()\n```\n\nSays hi.".into())
        );
        assert_eq!(hover_text(&json!({"contents": ""})), None);
        let symbol = json!({
            "name": "Person", "kind": 23, "detail": "struct Person",
            "range": {"start": {"line": 2, "character": 0}, "end": {"line": 5, "character": 1}},
            "selectionRange": {"start": {"line": 2, "character": 7}, "end": {"line": 2, "character": 13}},
            "children": [{"name": "greet", "kind": 6,
                "range": {"start": {"line": 3, "character": 4}, "end": {"line": 3, "character": 9}}}]
        });
        let mut out = String::new();
        write_symbol(&mut out, &symbol, 0);
        assert_eq!(
            out,
            "struct Person  [struct Person]  line 3\n  method greet  line 4\n"
        );
        assert_eq!(symbol_kind(0), "symbol");
    }

    #[test]
    fn servers_get_their_extensions_from_the_table_or_the_config() {
        let lsp = flemma_config::LspTool {
            servers: vec![
                "/opt/bin/rust-analyzer".into(),
                "flemmad lsp --no-daemon".into(),
                "mystery-ls --stdio".into(),
            ],
            extensions: BTreeMap::from([(
                "flemmad".to_owned(),
                vec![".chat".to_owned(), "md".to_owned()],
            )]),
        };
        let servers = ServerConfig::from_config(&lsp);
        assert_eq!(servers[0].name, "rust-analyzer");
        assert_eq!(servers[0].extensions, ["rs"]);
        assert_eq!(servers[1].command, ["flemmad", "lsp", "--no-daemon"]);
        assert_eq!(servers[1].extensions, ["chat", "md"]);
        assert!(servers[2].extensions.is_empty());
        assert!(
            servers[2]
                .describe()
                .contains("set tools.lsp.extensions.mystery-ls")
        );
    }
}
