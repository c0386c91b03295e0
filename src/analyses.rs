//! The analysis host of the documents the engine works on, one per process.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use flemma_ide::{Analysis, AnalysisHost, ChangeError, ConfigInput, DocumentId};
use flemma_template::{FsHost, TemplateCache};

/// The analysis host of the documents the engine works on, one per process: the drivers
/// (each request is evaluated there, incrementally) and `flemma/switch` share it, and it shares
/// its template cache (each message's result) with the language server's hosts, so a
/// document open in an editor and sent is evaluated once. A driver's document leaves it when
/// the driver ends. Its lock is held only to change documents and take or keep analyses, never
/// while one is evaluated ([`analysis`]): a hostile chat's evaluation (up to its time budget)
/// delays no other document.
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

/// The analysis of the document `id` after `change` (run under the lock: its text, its
/// configuration), evaluated outside the lock as an [`flemma_ide::AnalysisJob`] (the same
/// mechanism the language server's worker uses) and kept when the document did not change
/// meanwhile. With `keep: false` the document leaves the host once its job is taken (a question
/// about a document no driver works on).
pub fn analysis(
    analyses: &Analyses,
    id: &DocumentId,
    keep: bool,
    change: impl FnOnce(&mut AnalysisHost),
) -> Result<Arc<Analysis>, ChangeError> {
    let job = {
        let mut host = lock(analyses);
        change(&mut host);
        let cached = host.cached_analysis(id);
        let job = host.analysis_job(id);
        if !keep {
            host.forget(id);
        }
        match (cached, job) {
            (Some(analysis), _) => return Ok(analysis),
            (None, Some(job)) => job,
            (None, None) => return Err(ChangeError::UnknownDocument(id.path().to_owned())),
        }
    };
    let analysis = Arc::new(job.run(None));
    if keep {
        lock(analyses).store_analysis(job.revision(), analysis.clone());
    }
    Ok(analysis)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chat whose templates spend the whole evaluation budget (3 s) does not hold the lock
    /// while it is evaluated: another document is analysed meanwhile (before the change, the
    /// second analysis waited for the first one's end).
    #[test]
    fn an_evaluation_holds_no_lock() {
        let analyses = analyses(TemplateCache::new());
        let dir = std::env::temp_dir().join("flemma-analyses-lock-test");
        let slow = DocumentId::new(dir.join("slow.chat"));
        let quick = DocumentId::new(dir.join("quick.chat"));
        let text = "@You:\n{% loop { } %}\n\n@Assistant:\nok\n\n".repeat(100);
        let slow_thread = std::thread::spawn({
            let analyses = analyses.clone();
            let slow = slow.clone();
            move || {
                analysis(&analyses, &slow, true, |host| {
                    host.set_text(slow.clone(), text)
                })
            }
        });
        // The slow document is in the host once its job was taken (under the same lock).
        while lock(&analyses).document(&slow).is_none() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let quick_analysis = analysis(&analyses, &quick, true, |host| {
            host.set_text(quick.clone(), "@You:\nhello\n")
        })
        .expect("the quick document is analysed");
        assert!(
            !slow_thread.is_finished(),
            "the quick analysis waited for the slow one"
        );
        assert!(quick_analysis.send_blockers().is_empty());
        let slow_analysis = slow_thread
            .join()
            .expect("no panic")
            .expect("the slow document is analysed");
        assert!(
            slow_analysis
                .diagnostics
                .iter()
                .any(|d| d.message.contains("were not evaluated")),
            "{:#?}",
            slow_analysis.diagnostics
        );
        let host = lock(&analyses);
        assert!(host.cached_analysis(&slow).is_some(), "the result is kept");
        assert!(host.cached_analysis(&quick).is_some(), "the result is kept");
    }
}
