//! What native functions need besides the render state ([`Environment`]), and the
//! personality's view of the project that it caches ([`Ambient`]): their own module, so that
//! `render` and `personality` import it and not each other.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::files;
use crate::host::PersonalityContext;

/// What native functions need besides the render state.
#[derive(Debug, Clone)]
pub(crate) struct Environment {
    pub host: Arc<dyn crate::Host>,
    /// What the evaluation may still read.
    pub reader: files::Reader,
    pub home: Option<PathBuf>,
    pub now: SystemTime,
    pub chat_path: Option<PathBuf>,
    pub max_include_depth: usize,
    /// The personality's project context and environment, computed once per evaluation.
    pub personality_cache: Arc<Mutex<Option<Ambient>>>,
    /// What the frontmatter configured (the personality falls back to its tool list).
    pub opt: crate::opt::SharedOpt,
    /// The configuration layers below the frontmatter.
    pub config_layers: Arc<Vec<flemma_config::ConfigLayer>>,
    /// Compiled templates.
    pub cache: crate::TemplateCache,
    /// Set when a template reads from the outside world (files, the clock): its result must
    /// not be reused by a later evaluation.
    pub impure: Arc<AtomicBool>,
}

/// What a personality describes, read once per evaluation (`personality.rs` gathers it).
#[derive(Debug, Clone)]
pub(crate) struct Ambient {
    pub context: PersonalityContext,
    pub project_files: Vec<(PathBuf, String)>,
}
