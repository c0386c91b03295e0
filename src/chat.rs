//! Loading a chat for sending: read, parse, evaluate templates, resolve configuration. Every
//! problem becomes a `path:line:col: severity: message` line; blocking ones stop the send.

use std::fmt::Write as _;
use std::path::Path;

use flemma_config::{ConfigLayer, LayerKind};
use flemma_conversation::Conversation;
use flemma_syntax::{Document, Encoding, Severity};
use flemma_template::{EvalOptions, FsHost};

#[derive(Debug)]
pub struct LoadedChat {
    pub doc: Document,
    pub conversation: Conversation,
    pub config: flemma_config::Config,
    /// Non-blocking diagnostics, formatted for stderr (empty when none).
    pub warnings: String,
}

#[derive(Debug)]
pub enum LoadError {
    /// The file (or the config file) cannot be read.
    Unreadable(anyhow::Error),
    /// Blocking diagnostics, formatted for stderr.
    Blocked(String),
}

/// The user configuration layer: `--config`, else `$FLEMMA_CONFIG`, else
/// `$XDG_CONFIG_HOME/flemma/config.toml` when it exists.
pub fn user_config_layer(explicit: Option<&Path>) -> Result<Option<ConfigLayer>, LoadError> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => match flemma_config::default_config_path(&|key| std::env::var(key).ok()) {
            Some(path) if path.exists() => path,
            _ => return Ok(None),
        },
    };
    ConfigLayer::from_toml_file(&path, LayerKind::UserFile)
        .map(Some)
        .map_err(|errors| {
            LoadError::Blocked(
                errors
                    .errors()
                    .iter()
                    .map(|e| format!("{e}\n"))
                    .collect::<String>(),
            )
        })
}

pub fn load(path: &Path, config_path: Option<&Path>) -> Result<LoadedChat, LoadError> {
    let text = crate::fsutil::read_chat(path).map_err(LoadError::Unreadable)?;
    let doc = flemma_syntax::parse(text);
    let index = doc.line_index();
    let location = |offset: usize| {
        let p = index.position(doc.text(), offset, Encoding::Utf8);
        format!("{}:{}:{}", path.display(), p.line + 1, p.character + 1)
    };
    let mut blocking = String::new();
    let mut warnings = String::new();
    for d in doc.diagnostics() {
        let line = format!(
            "{}: {}: {}\n",
            location(d.range.start),
            d.severity.as_str(),
            d.message
        );
        // Frontmatter that cannot run blocks the send; other syntax problems are reported.
        let blocks = matches!(
            d.code,
            flemma_syntax::DiagnosticCode::LuaFrontmatter
                | flemma_syntax::DiagnosticCode::UnknownFrontmatterLanguage
        );
        if blocks {
            blocking.push_str(&line);
        } else if d.severity <= Severity::Warning {
            warnings.push_str(&line);
        }
    }
    let evaluation = flemma_template::evaluate(
        &doc,
        std::sync::Arc::new(FsHost),
        &EvalOptions {
            path: Some(path.to_owned()),
            ..EvalOptions::default()
        },
    );
    for d in &evaluation.diagnostics {
        let place = match (&d.file, d.line_in_file) {
            (Some(file), Some(line)) => format!(
                "{}:{line} (included from {})",
                file.display(),
                location(d.range.start)
            ),
            _ => location(d.range.start),
        };
        let line = format!("{place}: {}: {}\n", d.severity.as_str(), d.message);
        if d.blocking {
            blocking.push_str(&line);
        } else if d.severity <= Severity::Warning {
            warnings.push_str(&line);
        }
    }
    let mut layers = Vec::new();
    match user_config_layer(config_path) {
        Ok(Some(layer)) => layers.push(layer),
        Ok(None) => {}
        Err(LoadError::Blocked(report)) => blocking.push_str(&report),
        Err(other) => return Err(other),
    }
    layers.push(evaluation.frontmatter_layer);
    let config = match flemma_config::resolve(&layers) {
        Ok(resolved) => Some(resolved.config),
        Err(errors) => {
            for e in errors.errors() {
                let _ = writeln!(blocking, "{}: error: {e}", path.display());
            }
            None
        }
    };
    match config {
        Some(config) if blocking.is_empty() => Ok(LoadedChat {
            doc,
            conversation: evaluation.conversation,
            config,
            warnings,
        }),
        _ => Err(LoadError::Blocked(format!("{warnings}{blocking}"))),
    }
}
