//! The analysis host of the documents the engine works on, one per process.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use flemma_ide::{AnalysisHost, ConfigInput};
use flemma_template::{FsHost, TemplateCache};

/// The analysis host of the documents the engine works on, one per process: the drivers
/// (each request is evaluated there, incrementally) and `flemma/switch` share it, and it shares
/// its template cache (each message's result) with the language server's hosts, so a
/// document open in an editor and sent is evaluated once. A driver's document leaves it when
/// the driver ends.
pub type Analyses = Arc<Mutex<AnalysisHost>>;

/// The analysis host of a process's engine, sharing `template_cache` with its other hosts.
pub fn analyses(template_cache: TemplateCache) -> Analyses {
    Arc::new(Mutex::new(AnalysisHost::with_template_cache(
        Arc::new(FsHost),
        ConfigInput::default(),
        template_cache,
    )))
}

pub fn lock(analyses: &Analyses) -> MutexGuard<'_, AnalysisHost> {
    analyses.lock().unwrap_or_else(PoisonError::into_inner)
}
