//! The edge between the command line and `flemma-ide`: read the chat and the user
//! configuration (the file the process context chose: `--config`, `$FLEMMA_CONFIG` or the
//! XDG default), analyse, and render diagnostics as `path:line:col: severity: message` (one
//! renderer for every command).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_config::{ConfigLayer, LayerKind};
use flemma_ide::{Analysis, AnalysisHost, ConfigInput, Diagnostic, DocumentId, Purpose};
use flemma_protocol::event::SetupDiagnostic;
use flemma_syntax::{Document, Encoding, LineIndex, Severity};

use crate::process_context::ProcessContext;

/// The configuration below the frontmatter: `--config` (which must exist), else
/// `$FLEMMA_CONFIG`, else `$XDG_CONFIG_HOME/flemma/config.toml` when it exists; with the
/// folders trusted with `flemmad trust` and flemmad's record of untrusted chats' calls.
pub fn config_input(context: &ProcessContext) -> ConfigInput {
    let home_dir = context.dirs.home.clone();
    let (trusted_folders, warning) = crate::trust::read_folders(&context.dirs);
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
    let input = ConfigInput {
        home_dir,
        trusted_folders,
        call_history: Some(Arc::new(crate::trust::CallRecords::for_dirs(&context.dirs))),
        ..ConfigInput::default()
    };
    let path = match &context.explicit_config {
        Some(path) => path.clone(),
        None => match context.default_config_file() {
            Some(path) if path.exists() => path,
            _ => return input,
        },
    };
    let read = ConfigLayer::from_toml_file(&path, LayerKind::UserFile);
    input.with_user_file(path, read)
}

/// A chat read from disk and analysed.
#[derive(Debug)]
pub struct LoadedChat {
    /// The path as the user gave it (for messages).
    pub path: PathBuf,
    pub analysis: Arc<Analysis>,
}

impl LoadedChat {
    /// Every diagnostic (and the send blockers when `for_send`), rendered for stderr: errors
    /// and warnings only, in the order found.
    pub fn report(&self, for_send: bool) -> String {
        let doc = &*self.analysis.document;
        let index = doc.line_index();
        let (mut shown, blockers) = reported(&self.analysis, for_send);
        shown.extend(blockers);
        render_all(&self.path, Some((doc, &index)), &shown)
    }
}

/// What [`LoadedChat::report`] shows of `analysis`: its errors and warnings in the order
/// found, and after them (when `for_send`) the send blockers that are not among them.
pub fn reported(analysis: &Analysis, for_send: bool) -> (Vec<Diagnostic>, Vec<Diagnostic>) {
    let shown: Vec<Diagnostic> = analysis
        .diagnostics
        .iter()
        .filter(|d| d.severity <= Severity::Warning)
        .cloned()
        .collect();
    let mut blockers: Vec<Diagnostic> = Vec::new();
    if for_send {
        for blocker in analysis.send_blockers() {
            if !shown.contains(&blocker) && !blockers.contains(&blocker) {
                blockers.push(blocker);
            }
        }
    }
    (shown, blockers)
}

/// Why a chat could not be loaded, for the command that asked (the command's `CliError` turns
/// it into its report and exit code).
#[derive(Debug)]
pub enum LoadError {
    /// The file cannot be read.
    Unreadable {
        command: String,
        error: anyhow::Error,
    },
    /// It cannot be analysed.
    Failed { command: String, message: String },
}

/// Reads and analyses the chat at `path` for `command`, whose `purpose` says what may run
/// (an untrusted chat's frontmatter parser only for [`Purpose::Send`]).
pub fn load(
    command: &str,
    purpose: Purpose,
    path: &Path,
    context: &ProcessContext,
) -> Result<LoadedChat, LoadError> {
    let text =
        crate::fsutil::read_chat(&context.dirs, path).map_err(|error| LoadError::Unreadable {
            command: command.to_owned(),
            error,
        })?;
    load_text(command, purpose, path, text, context)
}

/// [`load`] with the chat's text given (an editor's unsaved buffer): `path` still says where
/// the chat lives, for its references, templates and trust.
pub fn load_text(
    command: &str,
    purpose: Purpose,
    path: &Path,
    text: String,
    context: &ProcessContext,
) -> Result<LoadedChat, LoadError> {
    let id = DocumentId::new(context.absolute(path));
    let mut host = AnalysisHost::new(Arc::new(context.file_host()), config_input(context));
    host.set_purpose(purpose);
    host.set_text(id.clone(), text);
    let analysis = host.analysis(&id).map_err(|error| LoadError::Failed {
        command: command.to_owned(),
        message: error.to_string(),
    })?;
    Ok(LoadedChat {
        path: path.to_owned(),
        analysis,
    })
}

/// Renders diagnostics, one per line (`  hint: …` on the next). `document` is the chat the
/// ranges point into (`None` when there is none, as for `models`).
pub fn render_all(
    path: &Path,
    document: Option<(&Document, &LineIndex)>,
    diagnostics: &[Diagnostic],
) -> String {
    let mut out = String::new();
    for d in diagnostics {
        match document {
            Some(document) => render_one(&mut out, path, true, &diagnostic_data(document, d)),
            None => render_one(&mut out, path, false, &diagnostic_data_unplaced(d)),
        }
    }
    out
}

/// Renders diagnostics carried as data (`engine:setup`), as [`render_all`] renders them.
pub fn render_data(path: &Path, diagnostics: &[SetupDiagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        render_one(&mut out, path, true, d);
    }
    out
}

/// A diagnostic of `document` as data, placed as [`render_all`] places it.
pub fn diagnostic_data((doc, index): (&Document, &LineIndex), d: &Diagnostic) -> SetupDiagnostic {
    let p = index.position(doc.text(), d.range.start, Encoding::Utf8);
    SetupDiagnostic {
        line: u64::from(p.line) + 1,
        column: u64::from(p.character) + 1,
        ..diagnostic_data_unplaced(d)
    }
}

/// A diagnostic as data without its place in a chat (line and column 0).
fn diagnostic_data_unplaced(d: &Diagnostic) -> SetupDiagnostic {
    SetupDiagnostic {
        severity: d.severity.as_str().to_owned(),
        message: d.message.clone(),
        hint: d.hint.clone(),
        code: Some(d.code.clone()).filter(|code| !code.is_empty()),
        line: 0,
        column: 0,
        file: d.file.as_ref().map(|file| file.display().to_string()),
        line_in_file: d.line_in_file.map(|line| line as u64),
        outside_document: d.is_outside_document(),
    }
}

/// One diagnostic's line (and its hint's): at `path:line:col` when `placed`, else at `path`.
fn render_one(out: &mut String, path: &Path, placed: bool, d: &SetupDiagnostic) {
    let here = || {
        if placed {
            format!("{}:{}:{}", path.display(), d.line, d.column)
        } else {
            path.display().to_string()
        }
    };
    let place = match &d.file {
        Some(file) => {
            let mut place = file.clone();
            if let Some(line) = d.line_in_file {
                let _ = write!(place, ":{line}");
            }
            if !d.outside_document {
                let _ = write!(place, " (included from {})", here());
            }
            place
        }
        None => here(),
    };
    let _ = writeln!(out, "{place}: {}: {}", d.severity, d.message);
    if let Some(hint) = &d.hint {
        let _ = writeln!(out, "  hint: {hint}");
    }
}
