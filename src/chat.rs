//! Loading a chat for sending: read, parse, evaluate templates, resolve configuration. Every
//! problem becomes a `path:line:col: severity: message` line; blocking ones stop the send.

use std::fmt::Write as _;
use std::path::Path;

use flemma_config::{ConfigLayer, LayerKind};
use flemma_conversation::Conversation;
use flemma_syntax::{Document, Encoding, Severity};
use flemma_template::{Category, EvalOptions, FsHost, TemplatingOptions};

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

/// The configuration below the frontmatter (the user file), and what evaluation needs from it.
#[derive(Debug, Default)]
pub struct BaseConfig {
    pub layers: Vec<ConfigLayer>,
    pub templating: TemplatingOptions,
    /// Configuration errors, formatted for stderr (blocking).
    pub errors: String,
}

/// Loads the user configuration and resolves what evaluation needs before the frontmatter
/// runs: template modules (`~` expanded) and custom frontmatter parsers.
pub fn base_config(config_path: Option<&Path>) -> Result<BaseConfig, LoadError> {
    let mut base = BaseConfig::default();
    match user_config_layer(config_path) {
        Ok(Some(layer)) => base.layers.push(layer),
        Ok(None) => {}
        Err(LoadError::Blocked(report)) => {
            base.errors = report;
            return Ok(base);
        }
        Err(other) => return Err(other),
    }
    match flemma_config::resolve(&base.layers) {
        Ok(resolved) => {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            base.templating = TemplatingOptions {
                modules: resolved
                    .config
                    .templating
                    .modules
                    .iter()
                    .map(|module| match (module.strip_prefix("~/"), &home) {
                        (Some(rest), Some(home)) => home.join(rest),
                        _ => std::path::PathBuf::from(module),
                    })
                    .collect(),
                frontmatter_parsers: resolved.config.templating.frontmatter_parsers.clone(),
                ..TemplatingOptions::default()
            };
        }
        Err(errors) => {
            for e in errors.errors() {
                let _ = writeln!(base.errors, "error: {e}");
            }
        }
    }
    Ok(base)
}

/// Evaluation options for the chat at `path` under `base`.
pub fn eval_options(path: &Path, base: &BaseConfig) -> EvalOptions {
    EvalOptions {
        path: Some(std::path::absolute(path).unwrap_or_else(|_| path.to_owned())),
        templating: base.templating.clone(),
        config_layers: base.layers.clone(),
        ..EvalOptions::default()
    }
}

/// Whether a syntax diagnostic is answered by the configuration: an unknown frontmatter language
/// that has a configured parser.
pub fn configured_away(
    doc: &Document,
    diagnostic: &flemma_syntax::Diagnostic,
    base: &BaseConfig,
) -> bool {
    diagnostic.code == flemma_syntax::DiagnosticCode::UnknownFrontmatterLanguage
        && doc.frontmatter().is_some_and(|f| {
            base.templating
                .frontmatter_parsers
                .contains_key(doc.slice(f.language_range).trim())
        })
}

pub fn load(path: &Path, config_path: Option<&Path>) -> Result<LoadedChat, LoadError> {
    let text = crate::fsutil::read_chat(path).map_err(LoadError::Unreadable)?;
    let doc = flemma_syntax::parse(text);
    let base = base_config(config_path)?;
    let index = doc.line_index();
    let location = |offset: usize| {
        let p = index.position(doc.text(), offset, Encoding::Utf8);
        format!("{}:{}:{}", path.display(), p.line + 1, p.character + 1)
    };
    let mut blocking = base.errors.clone();
    let mut warnings = String::new();
    for d in doc.diagnostics() {
        if configured_away(&doc, d, &base) {
            continue;
        }
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
        &eval_options(path, &base),
    );
    for d in &evaluation.diagnostics {
        let place = match (&d.file, d.line_in_file, d.category) {
            (Some(file), Some(line), Category::Module) => format!("{}:{line}", file.display()),
            (Some(file), None, Category::Module) => file.display().to_string(),
            (Some(file), Some(line), _) => format!(
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
    if evaluation.frontmatter_layer.get("templating").is_some() {
        let _ = writeln!(
            warnings,
            "{}: warning: `templating` settings in the frontmatter have no effect (modules and parsers load before the frontmatter runs); put them in config.toml",
            location(0)
        );
    }
    let mut layers = base.layers;
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
