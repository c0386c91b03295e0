//! The analysis host of the documents the engine works on, one per process.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use flemma_ide::{Analysis, AnalysisHost, ChangeError, ConfigInput, DocumentId, Purpose};
use flemma_template::{FsHost, TemplateCache};

/// The analysis host of the documents the engine works on, one per process: the drivers
/// (each request is evaluated there, incrementally) and `flemma/switch` share it, and it shares
/// its template cache (each message's result) with the language server's hosts, so a
/// document open in an editor and sent is evaluated once. A driver's document leaves it when
/// the driver ends. Its lock is held only to change documents and take or keep analyses, never
/// while one is evaluated ([`analysis`]): a hostile chat's evaluation (up to its time budget)
/// delays no other document.
pub type Analyses = Arc<Mutex<AnalysisHost>>;

/// The analysis host of a process's engine, reading files through `files` (the process
/// context's `file_host`), sharing `template_cache` with its other hosts.
/// Its analyses are for sending ([`Purpose::Send`]): an untrusted chat's frontmatter parser
/// runs here (in a neutral directory), never in a host that only shows a chat.
pub fn analyses(files: FsHost, template_cache: TemplateCache) -> Analyses {
    let mut host =
        AnalysisHost::with_template_cache(Arc::new(files), ConfigInput::default(), template_cache);
    host.set_purpose(Purpose::Send);
    Arc::new(Mutex::new(host))
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
    use std::path::{Path, PathBuf};
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::time::{Duration, SystemTime};

    use flemma_template::{Host, PersonalityContext};

    use super::*;

    /// The file system, except that reading a file named `gate.txt` says so and then waits
    /// until the test opens the gate: an evaluation held in the middle, for as long as needed.
    #[derive(Debug)]
    struct GatedHost {
        entered: Mutex<Sender<()>>,
        gate: Mutex<Receiver<()>>,
    }

    impl Host for GatedHost {
        fn read_file(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
            if path.file_name().is_some_and(|name| name == "gate.txt") {
                let _ = lock_std(&self.entered).send(());
                let _ = lock_std(&self.gate).recv();
            }
            FsHost::default().read_file(path, limit)
        }
        fn home_dir(&self) -> Option<PathBuf> {
            None
        }
        fn now(&self) -> SystemTime {
            SystemTime::now()
        }
        fn environment(&self) -> PersonalityContext {
            FsHost::default().environment()
        }
        fn is_readable(&self, path: &Path) -> bool {
            FsHost::default().is_readable(path)
        }
        fn run_filter(
            &self,
            argv: &[String],
            input: &[u8],
            timeout: Duration,
        ) -> std::io::Result<Vec<u8>> {
            FsHost::default().run_filter(argv, input, timeout)
        }
    }

    fn lock_std<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// While one chat's evaluation is held in the middle (reading a file that does not come),
    /// the host is not locked: another document is analysed meanwhile. (Evaluating under the
    /// lock, the second analysis waits until the gate opens, and the test fails after 20 s.)
    #[test]
    fn an_evaluation_holds_no_lock() {
        let dir = std::env::temp_dir().join(format!("flemma-analyses-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        std::fs::write(dir.join("gate.txt"), "through the gate").expect("a file");
        let (entered_tx, entered) = channel();
        let (open_gate, gate) = channel();
        let host = GatedHost {
            entered: Mutex::new(entered_tx),
            gate: Mutex::new(gate),
        };
        let analyses: Analyses = Arc::new(Mutex::new(AnalysisHost::new(
            Arc::new(host),
            ConfigInput::default(),
        )));
        let held = DocumentId::new(dir.join("held.chat"));
        let quick = DocumentId::new(dir.join("quick.chat"));
        let held_thread = std::thread::spawn({
            let (analyses, held) = (analyses.clone(), held.clone());
            move || {
                analysis(&analyses, &held, true, |host| {
                    host.set_text(held.clone(), "@You:\nread @./gate.txt\n")
                })
            }
        });
        entered
            .recv_timeout(Duration::from_secs(60))
            .expect("the held evaluation reads the gated file");
        let (done_tx, done) = channel();
        std::thread::spawn({
            let (analyses, quick) = (analyses.clone(), quick.clone());
            move || {
                let result = analysis(&analyses, &quick, true, |host| {
                    host.set_text(quick.clone(), "@You:\nhello\n")
                });
                let _ = done_tx.send(result.is_ok());
            }
        });
        let quick_done = done.recv_timeout(Duration::from_secs(20));
        let _ = open_gate.send(());
        assert_eq!(
            quick_done,
            Ok(true),
            "the quick analysis waited for the held one"
        );
        let held_analysis = held_thread
            .join()
            .expect("no panic")
            .expect("the held document is analysed");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            held_analysis.diagnostics.iter().all(|d| !d.blocking),
            "{:#?}",
            held_analysis.diagnostics
        );
        let host = lock(&analyses);
        assert!(host.cached_analysis(&held).is_some(), "the result is kept");
        assert!(host.cached_analysis(&quick).is_some(), "the result is kept");
    }
}
