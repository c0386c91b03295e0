//! Running scripts: the output stack, the native functions templates call (`__t` text, `__v` value,
//! `emit`, `include`…) and the error mapping.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use flemma_conversation::Part;
use flemma_syntax::{Severity, TextRange};
use rhai::{
    AST, Dynamic, Engine, EvalAltResult, INT, ImmutableString, Map, NativeCallContext, Position,
    Scope,
};

use crate::engine::{Attachment, CANCELLED, Emitted, emitted};
pub(crate) use crate::environment::Environment;
use crate::files;
use crate::origin::Origin;
use crate::personality;
use crate::script::{self, Fragment, Script};
use crate::{Category, TemplateDiagnostic};

/// The termination token of an error that was already reported as a diagnostic.
pub(crate) const REPORTED: &str = "flemma:diagnostic-already-reported";

/// A template being rendered: its script, where it comes from, and what it wrote so far.
#[derive(Debug)]
struct Frame {
    script: Arc<Script>,
    origin: Arc<Origin>,
    output: Vec<Part>,
}

/// State shared between the evaluator and the native functions.
#[derive(Debug, Default)]
pub(crate) struct RenderState {
    frames: Vec<Frame>,
    pub diagnostics: Vec<TemplateDiagnostic>,
    /// Set when `include()` failed with a blocking diagnostic: the running templates stop even
    /// where a `try`/`catch` (or a function boundary) would hide the error.
    aborting: bool,
}

pub(crate) type SharedState = Arc<Mutex<RenderState>>;

pub(crate) fn lock(state: &SharedState) -> MutexGuard<'_, RenderState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Appends text to `output`, merging with a trailing text part.
pub(crate) fn push_text(output: &mut Vec<Part>, text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(Part::Text { text: last }) = output.last_mut() {
        last.push_str(text);
    } else {
        output.push(Part::text(text));
    }
}

pub(crate) fn push_parts(output: &mut Vec<Part>, parts: Vec<Part>) {
    for part in parts {
        match part {
            Part::Text { text } => push_text(output, &text),
            other => output.push(other),
        }
    }
}

fn with_top<R>(
    state: &SharedState,
    f: impl FnOnce(&mut Frame) -> R,
) -> Result<R, Box<EvalAltResult>> {
    let mut guard = lock(state);
    match guard.frames.last_mut() {
        Some(frame) => Ok(f(frame)),
        None => Err(Box::new(EvalAltResult::ErrorRuntime(
            Dynamic::from("template output used outside a template (internal error)".to_string()),
            Position::NONE,
        ))),
    }
}

/// Stops the running templates after a blocking diagnostic was recorded.
fn abort(state: &SharedState) -> Box<EvalAltResult> {
    lock(state).aborting = true;
    reported()
}

pub(crate) fn reported() -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorTerminated(
        Dynamic::from(REPORTED.to_string()),
        Position::NONE,
    ))
}

/// Registers the functions scripts call.
pub(crate) fn register(engine: &mut Engine, state: &SharedState, environment: &Environment) {
    let s = state.clone();
    engine.register_fn("__t", move |index: INT| {
        with_top(&s, |frame| {
            let Frame { script, output, .. } = frame;
            match usize::try_from(index)
                .ok()
                .and_then(|i| script.fragments.get(i))
            {
                Some(Fragment::Text(text)) => push_text(output, text),
                Some(Fragment::Parts(parts)) => push_parts(output, parts.clone()),
                None => {}
            }
        })
    });
    let s = state.clone();
    engine.register_fn("__v", move |value: Dynamic| {
        with_top(&s, |frame| emit_into(&mut frame.output, &value))
    });
    let s = state.clone();
    engine.register_fn("emit", move |value: Dynamic| {
        with_top(&s, |frame| emit_into(&mut frame.output, &value))
    });
    let s = state.clone();
    engine.register_fn("__x", move |index: INT, error: Dynamic| {
        expression_failed(&s, index, &error)
    });
    let (s, e) = (state.clone(), environment.clone());
    engine.register_fn("path_absolute", move |path: &str| {
        resolve_in_template(&s, &e, path).map(|resolved| resolved.to_string_lossy().into_owned())
    });
    let (s, e) = (state.clone(), environment.clone());
    engine.register_fn("file_readable", move |path: &str| {
        e.impure.store(true, Ordering::Relaxed);
        resolve_in_template(&s, &e, path).map(|resolved| {
            e.reader.refusal(&*e.host, &resolved).is_none() && e.host.is_readable(&resolved)
        })
    });
    let (s, e) = (state.clone(), environment.clone());
    engine.register_fn("include", move |context: NativeCallContext, path: &str| {
        include(&context, &s, &e, path, Map::new())
    });
    let (s, e) = (state.clone(), environment.clone());
    engine.register_fn(
        "include",
        move |context: NativeCallContext, path: &str, options: Map| {
            include(&context, &s, &e, path, options)
        },
    );
}

/// Resolves `path` like `include()` does: `~/…` against the home directory, relative paths
/// against the running template's directory (its `__dirname`), then lexically normalised.
fn resolve_in_template(
    state: &SharedState,
    environment: &Environment,
    path: &str,
) -> Result<PathBuf, Box<EvalAltResult>> {
    let dir = lock(state)
        .frames
        .last()
        .map(|frame| frame.origin.dir.clone())
        .ok_or_else(|| runtime_error("path functions can only be used in templates".into()))?;
    files::resolve_reference(path, &dir, environment.home.as_deref()).map_err(runtime_error)
}

fn runtime_error(message: String) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(
        Dynamic::from(message),
        Position::NONE,
    ))
}

fn emit_into(output: &mut Vec<Part>, value: &Dynamic) {
    match emitted(value) {
        Emitted::Text(text) => push_text(output, &text),
        Emitted::Parts(parts) => push_parts(output, parts),
    }
}

fn expression_failed(
    state: &SharedState,
    index: INT,
    error: &Dynamic,
) -> Result<(), Box<EvalAltResult>> {
    let map = error
        .read_lock::<Map>()
        .map(|m| m.clone())
        .unwrap_or_default();
    let text = |key: &str| map.get(key).map(|v| v.to_string());
    let message = text("message").unwrap_or_else(|| error.to_string());
    let mut guard = lock(state);
    if message.contains(REPORTED) || guard.aborting {
        return Err(reported());
    }
    let Some(frame) = guard.frames.last_mut() else {
        return Ok(());
    };
    let Some(tag) = usize::try_from(index)
        .ok()
        .and_then(|i| frame.script.tags.get(i).cloned())
    else {
        return Ok(());
    };
    push_text(&mut frame.output, &tag.literal);
    let line = map
        .get("line")
        .and_then(|v| v.as_int().ok())
        .and_then(|l| usize::try_from(l).ok());
    let column = map
        .get("position")
        .and_then(|v| v.as_int().ok())
        .and_then(|c| usize::try_from(c).ok());
    let position = match (line, column) {
        (Some(line), Some(column)) => match (u16::try_from(line), u16::try_from(column)) {
            (Ok(line), Ok(column)) => Position::new(line, column),
            _ => Position::NONE,
        },
        _ => Position::NONE,
    };
    let range = frame.script.locate(position, tag.range);
    let message = match (text("error").as_deref(), text("variable")) {
        (Some("ErrorVariableNotFound"), Some(variable)) => format!(
            "undefined variable `{variable}`: the literal `{}` is sent. Define it in the frontmatter (`let {variable} = …;`) or fix its name",
            tag.literal
        ),
        _ => format!(
            "the expression failed: {message}; the literal `{}` is sent",
            tag.literal
        ),
    };
    let diagnostic = frame.origin.diagnostic(
        range,
        Severity::Warning,
        Category::Expression,
        message,
        false,
    );
    guard.diagnostics.push(diagnostic);
    Ok(())
}

/// What a runtime error is blamed on: its category, and the range used when Rhai gives no
/// position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Blame {
    pub category: Category,
    pub fallback: TextRange,
}

/// Runs `ast` as the template `script` from `origin` with `scope`; returns what it wrote, or
/// `None` after recording a diagnostic.
pub(crate) fn run(
    engine: &Engine,
    state: &SharedState,
    ast: &AST,
    script: Arc<Script>,
    origin: Arc<Origin>,
    scope: &mut Scope<'_>,
    blame: Blame,
) -> Option<Vec<Part>> {
    lock(state).frames.push(Frame {
        script: script.clone(),
        origin: origin.clone(),
        output: Vec::new(),
    });
    let result = engine.run_ast_with_scope(scope, ast);
    let output = {
        let mut guard = lock(state);
        let output = guard.frames.pop().map(|frame| frame.output);
        if guard.frames.is_empty() {
            guard.aborting = false;
        }
        output.unwrap_or_default()
    };
    match result {
        Ok(()) => Some(output),
        Err(error) => {
            report_runtime_error(
                state,
                &script,
                &origin,
                *error,
                blame.category,
                blame.fallback,
            );
            None
        }
    }
}

/// Records a diagnostic for a runtime error (unless it was already reported).
pub(crate) fn report_runtime_error(
    state: &SharedState,
    script: &Script,
    origin: &Origin,
    mut error: EvalAltResult,
    category: Category,
    fallback: TextRange,
) {
    let position = error.position();
    let message = match error.unwrap_inner() {
        EvalAltResult::ErrorTerminated(token, _) => {
            let token = token.to_string();
            if token == REPORTED {
                return;
            }
            if token == CANCELLED {
                format!("{token}; send again to evaluate")
            } else {
                format!("stopped: {token}; fix the template")
            }
        }
        // Raised by our own functions (`flemma.opt`, `include`…): the value says it all.
        EvalAltResult::ErrorRuntime(value, _) => format!("{value}; this blocks sending"),
        EvalAltResult::ErrorVariableNotFound(variable, _) => format!(
            "undefined variable `{variable}` in template code: define it in the frontmatter (`let {variable} = …;`) or assign it in an earlier tag; this blocks sending"
        ),
        EvalAltResult::ErrorTooManyOperations(_) => {
            "the template ran too many operations (an endless loop?); fix it, this blocks sending"
                .to_string()
        }
        EvalAltResult::ErrorStackOverflow(_) => {
            "the template recursed too deeply; fix the recursion, this blocks sending".to_string()
        }
        EvalAltResult::ErrorDataTooLarge(what, _) => {
            format!("the template built a value that is too large ({what}); this blocks sending")
        }
        _ => {
            let _ = error.take_position();
            format!("template code failed: {error}; fix it, this blocks sending")
        }
    };
    let whole_statement = matches!(error.unwrap_inner(), EvalAltResult::ErrorRuntime(..));
    let range = if whole_statement {
        script.line_range(position, fallback)
    } else {
        script.locate(position, fallback)
    };
    let diagnostic = origin.diagnostic(range, Severity::Error, category, message, true);
    lock(state).diagnostics.push(diagnostic);
}

/// `include(path, #{vars…, binary, mime})`.
fn include(
    context: &NativeCallContext,
    state: &SharedState,
    environment: &Environment,
    path: &str,
    mut options: Map,
) -> Result<Dynamic, Box<EvalAltResult>> {
    environment.impure.store(true, Ordering::Relaxed);
    let (origin, call_range) = {
        let guard = lock(state);
        let Some(frame) = guard.frames.last() else {
            return Err(abort(state));
        };
        let fallback = TextRange::default();
        (
            frame.origin.clone(),
            frame.script.locate_call(context.call_position(), fallback),
        )
    };
    let fail = |message: String| -> Box<EvalAltResult> {
        let diagnostic = origin.diagnostic(
            call_range,
            Severity::Error,
            Category::Include,
            message,
            true,
        );
        lock(state).diagnostics.push(diagnostic);
        abort(state)
    };
    if let Some(name) = path.strip_prefix(personality::URN_PREFIX) {
        return personality::render(name, environment, &origin)
            .map(Dynamic::from)
            .map_err(fail);
    }
    let binary = options
        .remove("binary")
        .is_some_and(|value| value.as_bool().unwrap_or(false));
    let mime = options.remove("mime").map(|value| value.to_string());
    let resolved =
        files::resolve_reference(path, &origin.dir, environment.home.as_deref()).map_err(fail)?;
    let bytes = match environment.reader.read(&*environment.host, &resolved) {
        Ok(bytes) => bytes,
        Err(files::ReadError::Refused(why)) => {
            // Said, and nothing included: the rest of the template still runs.
            let diagnostic = origin.diagnostic(
                call_range,
                Severity::Warning,
                Category::Include,
                format!(
                    "'{path}' ({}) was not included: {why}; nothing was included in its place",
                    resolved.display()
                ),
                false,
            );
            lock(state).diagnostics.push(diagnostic);
            return Ok(Dynamic::from(ImmutableString::new()));
        }
        Err(files::ReadError::Io(error)) => {
            return Err(fail(format!(
                "cannot include '{path}' ({}): {error}; check the path (relative paths start at {})",
                resolved.display(),
                origin.dir.display()
            )));
        }
    };
    if binary {
        let mime = mime.unwrap_or_else(|| files::detect_mime(&resolved, &bytes));
        let part = files::attachment(path, &mime, bytes).map_err(fail)?;
        return Ok(Dynamic::from(Attachment { parts: vec![part] }));
    }
    if origin.include_stack.iter().any(|p| p == &resolved) {
        let requester = if origin.filename.is_empty() {
            "<unsaved chat>".to_string()
        } else {
            origin.filename.clone()
        };
        let mut stack = origin.include_stack.clone();
        stack.push(resolved.clone());
        let mut diagnostic = origin.diagnostic(
            call_range,
            Severity::Error,
            Category::Include,
            format!("Circular include detected (requested by '{requester}')"),
            true,
        );
        diagnostic.include_stack = stack;
        lock(state).diagnostics.push(diagnostic);
        return Err(abort(state));
    }
    if origin.include_stack.len() > environment.max_include_depth {
        return Err(fail(format!(
            "includes are nested more than {} levels deep; flatten them",
            environment.max_include_depth
        )));
    }
    // What a template writes is a string of at most `Limits::max_string_size`: a larger one
    // is refused before it is compiled (compiling is not interrupted by the time budget).
    crate::bounded::string_fits(context, bytes.len()).map_err(|_| {
        fail(format!(
            "'{path}' is larger than {}, the most a template may write; include a part of it, or attach it with include(\"{path}\", #{{binary: true}})",
            crate::host::human_bytes(context.engine().max_string_size() as u64)
        ))
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        fail(format!(
            "'{path}' is not UTF-8 text; attach it with include(\"{path}\", #{{binary: true}})"
        ))
    })?;
    let text: Arc<str> = Arc::from(text);
    let mut include_stack = origin.include_stack.clone();
    include_stack.push(resolved.clone());
    let child = Arc::new(Origin {
        file: Some(resolved.clone()),
        text: text.clone(),
        anchor: origin.anchor.or(Some(call_range)),
        include_stack,
        dir: resolved.parent().map(Path::to_path_buf).unwrap_or_default(),
        filename: resolved.display().to_string(),
    });
    let segments = flemma_syntax::scan_templated(&text, TextRange::new(0, text.len()));
    let mut diagnostics = Vec::new();
    let engine = context.engine();
    let (script, compiled) = script::build_and_compile(
        engine,
        &text,
        &segments,
        &mut |_| None,
        &child,
        &environment.cache,
        &mut diagnostics,
    );
    lock(state).diagnostics.extend(diagnostics);
    let ast = match compiled {
        Ok(ast) => ast,
        Err(error) => {
            let range = script.locate(error.position(), TextRange::default());
            let diagnostic = child.diagnostic(
                range,
                Severity::Error,
                Category::Include,
                format!(
                    "the included template does not parse ({}); fix it",
                    error.err_type()
                ),
                true,
            );
            lock(state).diagnostics.push(diagnostic);
            return Err(abort(state));
        }
    };
    let mut scope = Scope::new();
    for (name, value) in options {
        scope.push_dynamic(name.to_string(), value);
    }
    scope.push_constant("__filename", ImmutableString::from(child.filename.as_str()));
    scope.push_constant(
        "__dirname",
        ImmutableString::from(child.dir.display().to_string()),
    );
    predeclare(&mut scope, &script);
    let parts = run(
        engine,
        state,
        &ast,
        Arc::new(script),
        child,
        &mut scope,
        Blame {
            category: Category::Include,
            fallback: TextRange::default(),
        },
    )
    .ok_or_else(|| abort(state))?;
    if parts.iter().all(|part| matches!(part, Part::Text { .. })) {
        Ok(Dynamic::from(Part::joined_text(&parts)))
    } else {
        Ok(Dynamic::from(Attachment { parts }))
    }
}

/// Declares (as `()`) the identifiers a script assigns without `let`, so the assignment works
/// and the value stays in `scope` after the script.
pub(crate) fn predeclare(scope: &mut Scope<'_>, script: &Script) {
    for name in &script.assigned {
        if !script.declared.contains(name) && !scope.contains(name) {
            scope.push_dynamic(name.clone(), Dynamic::UNIT);
        }
    }
}

/// The compile error of a whole script, as a blocking diagnostic.
pub(crate) fn compile_error(
    script: &Script,
    origin: &Origin,
    error: &rhai::ParseError,
    category: Category,
    fallback: TextRange,
) -> TemplateDiagnostic {
    let range = script.locate(error.position(), fallback);
    let problem = error.err_type().to_string();
    // The glue between tags (the `;` ending a tag's statement) is ours: an error on it means
    // the tag's code stopped too early, not that the user wrote a `;`.
    let problem = if script.is_generated(error.position()) && problem.contains("';'") {
        "the code in this tag ends too early (something is missing before `%}`, such as the condition of an `if` or the value of an assignment)".to_string()
    } else {
        problem
    };
    let hint = if problem.contains("to start a statement block") {
        " (Rhai blocks use braces across tags: `{% if cond { %}…{% } else { %}…{% } %}`, not `endif`/`endfor`)"
    } else {
        ""
    };
    origin.diagnostic(
        range,
        Severity::Error,
        category,
        format!("template code does not parse: {problem}{hint}; fix the {{% %}} code, this blocks sending"),
        true,
    )
}
