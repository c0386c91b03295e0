//! Shared helpers: a host over a temp dir with a fixed clock and environment.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flemma_conversation::{Part, Role};
use flemma_template::{
    EvalOptions, Evaluation, Host, PersonalityContext, TemplateDiagnostic, evaluate,
};

/// 2026-11-30T08:38:57Z, a Monday.
pub const NOW: u64 = 1_796_027_937;

/// Real files in a temp dir; fixed clock, home and environment.
#[derive(Debug, Clone)]
pub struct TestHost {
    pub dir: std::sync::Arc<tempfile::TempDir>,
    pub tools: Vec<String>,
}

impl TestHost {
    /// The host as evaluation takes it.
    pub fn shared(&self) -> std::sync::Arc<dyn flemma_template::Host> {
        std::sync::Arc::new(self.clone())
    }

    pub fn new() -> Self {
        Self {
            dir: std::sync::Arc::new(tempfile::tempdir().expect("temp dir")),
            tools: vec!["bash".into(), "read".into()],
        }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create dirs");
        }
        std::fs::write(&path, contents).expect("write file");
        path
    }

    /// Writes `chat.chat`, parses and evaluates it.
    pub fn eval(&self, text: &str) -> Evaluation {
        self.eval_with(text, EvalOptions::default())
    }

    pub fn eval_with(&self, text: &str, mut options: EvalOptions) -> Evaluation {
        let path = self.write("chat.chat", text);
        options.path = Some(path);
        let doc = flemma_syntax::parse(text);
        evaluate(&doc, self.shared(), &options)
    }
}

impl Host for TestHost {
    fn read_file(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
        flemma_template::read_regular_file(path, limit)
    }

    fn home_dir(&self) -> Option<PathBuf> {
        Some(self.path("home"))
    }

    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(NOW)
    }

    fn environment(&self) -> PersonalityContext {
        PersonalityContext {
            cwd: Some(self.dir.path().to_path_buf()),
            git_branch: Some("feature/templates".into()),
            enabled_tools: self.tools.clone(),
        }
    }

    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        fs_host().real_path(path)
    }

    fn run_filter(
        &self,
        argv: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> std::io::Result<Vec<u8>> {
        fs_host().run_filter(argv, input, timeout)
    }
}

/// The real file system with this test process's `PATH` (frontmatter parsers are found there).
pub fn fs_host() -> flemma_template::FsHost {
    flemma_template::FsHost {
        search_path: std::env::var_os("PATH"),
        ..flemma_template::FsHost::default()
    }
}

/// The joined text of the `index`-th conversation message.
pub fn text_of(evaluation: &Evaluation, index: usize) -> String {
    Part::joined_text(&evaluation.conversation.messages[index].parts)
}

pub fn system_text(evaluation: &Evaluation) -> String {
    Part::joined_text(&evaluation.conversation.system)
}

pub fn roles(evaluation: &Evaluation) -> Vec<Role> {
    evaluation
        .conversation
        .messages
        .iter()
        .map(|m| m.role)
        .collect()
}

pub fn blocking(evaluation: &Evaluation) -> Vec<&TemplateDiagnostic> {
    evaluation
        .diagnostics
        .iter()
        .filter(|d| d.blocking)
        .collect()
}

/// The text a diagnostic's range covers in `text`.
pub fn covered<'a>(text: &'a str, diagnostic: &TemplateDiagnostic) -> &'a str {
    &text[diagnostic.range.start..diagnostic.range.end]
}

#[track_caller]
pub fn assert_clean(evaluation: &Evaluation) {
    assert!(
        evaluation.diagnostics.is_empty(),
        "unexpected diagnostics: {:#?}",
        evaluation.diagnostics
    );
}
