//! `flemma-config`: flemmad's layered configuration.
//!
//! Layers, lowest first: [`LayerKind::Defaults`] → [`LayerKind::UserFile`] →
//! [`LayerKind::Client`] → [`LayerKind::Runtime`] → [`LayerKind::Frontmatter`]. Scalars take the
//! highest layer that sets them; list-valued options accumulate op-prefix operations
//! (`+x` append, `^x` prepend, `!x` remove, `$preset` spread) across layers. One declarative
//! schema drives validation ("did you mean" included), the defaults, the JSON Schema and the
//! option reference in `docs/configuration.md`.
//!
//! ```
//! use flemma_config::{ConfigLayer, LayerKind, resolve};
//! use serde_json::json;
//!
//! let user = ConfigLayer::from_toml_str(
//!     "[tools]\nauto_approve = [\"$standard\", \"!write\", \"+bash\"]\n",
//!     LayerKind::UserFile,
//! )?;
//! let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
//! frontmatter.set(&flemma_config::opt_path("thinking")?, json!("medium"))?;
//! let resolved = resolve(&[ConfigLayer::defaults(), user, frontmatter])?;
//! assert_eq!(resolved.source_of("parameters.thinking"), Some(LayerKind::Frontmatter));
//! assert_eq!(resolved.auto_approve().approves("bash"), Some(true));
//! assert_eq!(resolved.auto_approve().approves("write"), Some(false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod error;
mod flemma_only;
mod generate;
mod glob;
mod layer;
mod model_string;
pub mod reach;
mod resolve;
mod schema;
mod trust;

pub use config::*;
pub use error::{ConfigError, ConfigErrors, Location};
pub use generate::{
    DOCS_BEGIN, DOCS_END, frontmatter_json_schema, json_schema, options_markdown, splice_docs,
};
pub use glob::{
    GlobError, PathGlob, check_tool_glob, first_match, glob_match, is_glob, literal_prefix,
};
pub use layer::{
    ConfigLayer, FunctionRef, LayerKind, ListOp, OptionShape, default_config_path, opt_path,
    option_shape,
};
pub use resolve::{AutoApprove, IgnoredOption, ResolvedConfig, resolve, resolve_with_tools};
pub use schema::{
    AGENT_PERMISSIONS, BACKGROUND_PARAMETER, BUILTIN_TOOLS, DEFAULT_IDLE_TIMEOUT, JOBS_STATUS_TOOL,
    MODES, SAVE_TO_PARAMETER, SEARCH_EXCLUDES, UNCONDITIONAL_TOOLS,
};
pub use trust::{CallHistory, CallRef, ChatTrust, Seen, chat_trust, is_trust_path};

/// What flemmad does instead of the Flemma option at `path` (an option of the Neovim plugin
/// that flemmad does not implement, such as `tools.mcporter`), or `None` when `path` is not
/// one. Setting such an option is a warning, never an error.
pub fn flemma_only_option(path: &str) -> Option<&'static str> {
    flemma_only::instead_of(path)
}

/// The option an alias Flemma's schema declares stands for (`thinking` →
/// `parameters.thinking`), or `None` when `path` is no alias.
pub fn alias_target(path: &str) -> Option<&'static str> {
    schema::ALIASES
        .iter()
        .find(|(alias, _)| *alias == path)
        .map(|(_, target)| *target)
}
