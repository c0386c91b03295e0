//! The language server's [`Backend`] backed by the process's [`EngineHost`]: every LSP
//! session (of `flemmad lsp`, or one per `lsp.sock` connection of `flemmad serve`) gets one.
//! Documents the session opens are attached to the host as [`Editor`]s (the most recently
//! active one writes them through its buffer); requests go to [`EngineHost::call`] and answer
//! at once. What the host tells an editor becomes a [`Task`] of the session: `flemma/event`
//! (and the `$/progress` the session derives from the events), `window/showMessage`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flemma_lsp::{Backend, ClientConfig, Outbox, RequestDocument, Task};
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

use flemma_lsp::{BufferAnswer, BufferSnapshot, Reply};
use tokio::sync::oneshot;

use crate::chat_store::{ChatStore, EDITOR_TIMEOUT, EditorGone, SharedText, Snapshot, StoreFuture};
use crate::engine_host::{DocumentRef, Editor, EditorHandle, EngineHost};

/// Session ids, unique in the process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// One LSP session's view of the engine host.
#[derive(Debug)]
pub struct LspBackend {
    host: Arc<EngineHost>,
    session: u64,
    client: String,
    /// The session's client settings (`initializationOptions`, `didChangeConfiguration`).
    client_config: Option<ClientConfig>,
    /// The documents this session has open (URI, path, and the text it shares with the
    /// engine).
    open: Vec<(String, PathBuf, SharedText)>,
    /// The context meter of each open document (its messages' counts kept between edits).
    meters: std::collections::HashMap<String, flemma_provider::Meter>,
    /// The code lenses' counts of each chat's changed files (kept while its checkpoints'
    /// tip is the same).
    changed_files: crate::checkpoints::ChangedFiles,
}

impl LspBackend {
    pub fn new(host: Arc<EngineHost>) -> Self {
        Self {
            host,
            session: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            client: "the editor".into(),
            client_config: None,
            open: Vec::new(),
            meters: std::collections::HashMap::new(),
            changed_files: crate::checkpoints::ChangedFiles::default(),
        }
    }

    /// The document of a request: an open document's path, else the URI's path.
    fn path_of(&self, method: &str, uri: &str) -> Result<PathBuf, RequestError> {
        if let Some((_, path, _)) = self.open.iter().find(|(u, _, _)| u == uri) {
            return Ok(path.clone());
        }
        flemma_lsp::uri_to_path(uri).ok_or_else(|| {
            RequestError::invalid_params(format!(
                "{method}: `{uri}` is not a file: flemmad runs the engine only for .chat files on disk; save the document first"
            ))
        })
    }

    /// The session was active on `path`: it becomes the document's writer (if it has it open).
    fn touch(&self, uri: &str, path: &std::path::Path, outbox: &Outbox) {
        if let Some((_, _, shared)) = self.open.iter().find(|(u, _, _)| u == uri) {
            self.host
                .attach_editor(path, self.editor(uri, shared.clone(), outbox));
        }
    }

    fn editor(&self, uri: &str, shared: SharedText, outbox: &Outbox) -> EditorHandle {
        let editor = SessionEditor {
            session: self.session,
            uri: uri.to_owned(),
            outbox: outbox.clone(),
            name: self.client.clone(),
            shared: shared.clone(),
        };
        EditorHandle {
            session: self.session,
            editor: Arc::new(editor),
            shared,
            client_config: self.client_config.clone(),
        }
    }
}

/// One document open in one LSP session, as the engine host's [`Editor`].
#[derive(Debug)]
struct SessionEditor {
    /// The LSP session (unique in the process).
    session: u64,
    uri: String,
    outbox: Outbox,
    /// The client's name, for messages.
    name: String,
    shared: SharedText,
}

impl Editor for SessionEditor {
    fn event(&self, event: &flemma_engine::EngineEvent) {
        self.outbox.send(Task::Event {
            uri: self.uri.clone(),
            event: event.clone(),
        });
    }

    fn notice(&self, message: &str) {
        self.outbox.send(Task::Notice {
            uri: self.uri.clone(),
            message: message.to_owned(),
        });
    }

    fn failed(&self, message: &str) {
        self.outbox.send(Task::Failed {
            uri: self.uri.clone(),
            message: message.to_owned(),
        });
    }

    fn store(&self) -> Box<dyn ChatStore> {
        Box::new(EditorStore {
            session: self.session,
            uri: self.uri.clone(),
            outbox: self.outbox.clone(),
            name: self.name.clone(),
            shared: self.shared.clone(),
        })
    }
}

/// The client's name as messages show it: Helix calls itself `helix`, VS Code `Visual Studio
/// Code`; the first letter is made upper case.
fn display_name(client: &str) -> String {
    let client = client.trim();
    let mut chars = client.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => "the editor".into(),
    }
}

impl Backend for LspBackend {
    fn discovered_tools(&self) -> Vec<(String, String)> {
        self.host.mcp_hub().known_tools()
    }

    fn call(
        &mut self,
        document: RequestDocument<'_>,
        request: FlemmaRequest,
        outbox: &Outbox,
    ) -> Result<FlemmaResponse, RequestError> {
        let path = self.path_of(request.method(), document.uri)?;
        self.touch(document.uri, &path, outbox);
        let document = DocumentRef {
            path: &path,
            buffer: document.buffer,
        };
        self.host.call(document, request)
    }

    fn call_later(
        &mut self,
        document: RequestDocument<'_>,
        request: FlemmaRequest,
        outbox: &Outbox,
        answer: flemma_lsp::Answer,
    ) {
        let path = match self.path_of(request.method(), document.uri) {
            Ok(path) => path,
            Err(refused) => return answer(Err(refused)),
        };
        self.touch(document.uri, &path, outbox);
        let document = DocumentRef {
            path: &path,
            buffer: document.buffer,
        };
        self.host.call_later(document, request, answer);
    }

    fn approval(
        &mut self,
        uri: &str,
        analysis: &flemma_ide::Analysis,
        tool: &str,
        input: &serde_json::Value,
    ) -> Option<flemma_ide::features::ApprovalDecision> {
        let decision = tool_setup(self.host.context(), uri, analysis)?.decide(tool, input)?;
        Some(flemma_ide::features::ApprovalDecision::new(
            decision.verdict,
            decision.resolver,
        ))
    }

    fn proposed_change(
        &mut self,
        uri: &str,
        analysis: &flemma_ide::Analysis,
        tool: &str,
        input: &serde_json::Value,
    ) -> Option<Result<String, String>> {
        let mut setup = tool_setup(self.host.context(), uri, analysis)?;
        // Against the file on disk: a hover never waits for another editor (an ACP client
        // holding the chat) to answer a read.
        setup.ctx.editor = None;
        let change = flemma_tools::review::proposed_change(tool, input, &setup.ctx)?;
        Some(change.map(|change| change.unified_diff()))
    }

    fn changed_files(&mut self, uri: &str) -> Option<std::collections::HashMap<String, usize>> {
        let path = self.path_of("textDocument/codeLens", uri).ok()?;
        self.changed_files.of(self.host.context(), &path)
    }

    fn context(
        &mut self,
        uri: &str,
        analysis: &flemma_ide::Analysis,
    ) -> Option<flemma_lsp::ContextMeter> {
        let path = flemma_lsp::uri_to_path(uri)?;
        // The built-in and configured tools (an MCP server's are known once a send starts it).
        let tools = crate::tool_setup::ToolSetup::for_chat(self.host.context(), analysis, &path)
            .map(|tools| tools.definitions())
            .unwrap_or_default();
        let meter = self.meters.entry(uri.to_owned()).or_default();
        let status = crate::context::estimate(meter, analysis, &path, &tools, self.host.context())?;
        Some(flemma_lsp::ContextMeter {
            line: crate::context::line(&status),
            advice: crate::context::advice_while_typing(&status)
                .map(|advice| (advice, status.state == "full")),
        })
    }

    fn trust_folder(&mut self, uri: &str) -> Result<Vec<PathBuf>, RequestError> {
        let path = self.path_of("flemma.trustFolder", uri)?;
        let dir = path.parent().ok_or_else(|| {
            RequestError::invalid_params(format!("{} has no folder to trust", path.display()))
        })?;
        let dirs = &self.host.context().dirs;
        let added = crate::trust::trust_folder(dirs, dir)
            .map_err(|error| RequestError::refused(format!("{error:#}")))?;
        tracing::info!(folder = %dir.display(), ?added, "trusted from the editor");
        Ok(crate::trust::read_folders(dirs).0)
    }

    fn trusted_folders(&mut self) -> Option<Vec<PathBuf>> {
        Some(crate::trust::read_folders(&self.host.context().dirs).0)
    }

    fn client_name(&mut self, name: &str) {
        self.client = display_name(name);
    }

    fn client_config(&mut self, settings: Option<ClientConfig>) {
        self.host.set_client_config(self.session, settings.clone());
        self.client_config = settings;
    }

    fn opened(&mut self, uri: &str, text: &str, outbox: &Outbox) {
        let Some(path) = flemma_lsp::uri_to_path(uri) else {
            return;
        };
        let shared = SharedText::new(text);
        self.open
            .push((uri.to_owned(), path.clone(), shared.clone()));
        self.host
            .attach_editor(&path, self.editor(uri, shared, outbox));
    }

    fn closed(&mut self, uri: &str) {
        self.meters.remove(uri);
        let Some(index) = self.open.iter().position(|(u, _, _)| u == uri) else {
            return;
        };
        let (_, path, shared) = self.open.remove(index);
        shared.close();
        self.host.detach_editor(&path, self.session);
    }
}

impl Drop for LspBackend {
    fn drop(&mut self) {
        for (_, path, shared) in self.open.drain(..) {
            shared.close();
            self.host.detach_editor(&path, self.session);
        }
    }
}

/// The tools of the chat `uri` as `analysis` configures them (`None`: not a file, or the
/// setup failed).
fn tool_setup(
    context: &crate::process_context::ProcessContext,
    uri: &str,
    analysis: &flemma_ide::Analysis,
) -> Option<crate::tool_setup::ToolSetup> {
    let path = flemma_lsp::uri_to_path(uri)?;
    crate::tool_setup::ToolSetup::for_chat(context, analysis, &path).ok()
}

/// The buffer of an LSP client: reads are the session's mirror (text and version); a
/// replacement is one versioned `workspace/applyEdit` of the single diff, answered `true` only
/// once the client applied it and echoed it through `didChange`.
#[derive(Debug, Clone)]
pub struct EditorStore {
    /// The LSP session (unique in the process).
    pub session: u64,
    pub uri: String,
    pub outbox: Outbox,
    /// For messages.
    pub name: String,
    /// What the editor and the engine last agreed on.
    pub shared: SharedText,
}

impl EditorStore {
    async fn ask<T>(&self, task: impl FnOnce(Reply<T>) -> Task) -> anyhow::Result<T>
    where
        T: Send + 'static,
    {
        // A document closed and opened again is another buffer, with another store.
        if self.shared.is_closed() {
            return Err(EditorGone::Closed(self.uri.clone()).into());
        }
        let (sender, receiver) = oneshot::channel();
        let reply = Reply::new(move |answer| {
            let _ = sender.send(answer);
        });
        if !self.outbox.send(task(reply)) {
            return Err(EditorGone::Closed(self.uri.clone()).into());
        }
        match tokio::time::timeout(EDITOR_TIMEOUT, receiver).await {
            Ok(Ok(answer)) => Ok(answer),
            // The session dropped the reply: it ended.
            Ok(Err(_)) => Err(EditorGone::Closed(self.uri.clone()).into()),
            Err(_) => Err(EditorGone::Timeout(self.uri.clone()).into()),
        }
    }
}

impl ChatStore for EditorStore {
    fn read(&self) -> StoreFuture<'_, Snapshot> {
        Box::pin(async move {
            let uri = self.uri.clone();
            let snapshot: Option<BufferSnapshot> =
                self.ask(|reply| Task::ReadBuffer { uri, reply }).await?;
            let snapshot = snapshot.ok_or_else(|| EditorGone::Closed(self.uri.clone()))?;
            Ok(Snapshot {
                text: snapshot.text,
                version: Some(snapshot.version),
            })
        })
    }

    fn replace_if_unchanged<'a>(
        &'a self,
        current: &'a Snapshot,
        next: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let Some(version) = current.version else {
                anyhow::bail!("an editor snapshot without a version (a bug in flemmad)");
            };
            let edit = flemma_syntax::single_edit(&current.text, next);
            let uri = self.uri.clone();
            let answer = self
                .ask(|reply| Task::ReplaceBuffer {
                    uri,
                    version,
                    range: edit.range,
                    text: edit.new_text,
                    reply,
                })
                .await?;
            match answer {
                BufferAnswer::Applied => Ok(true),
                BufferAnswer::Moved | BufferAnswer::Refused | BufferAnswer::Dropped => Ok(false),
                BufferAnswer::Closed => Err(EditorGone::Closed(self.uri.clone()).into()),
            }
        })
    }

    fn describe(&self) -> String {
        format!("{}'s buffer of {}", self.name, self.uri)
    }

    fn key(&self) -> String {
        format!(
            "editor {} {} {}",
            self.session,
            self.uri,
            self.shared.instance()
        )
    }

    fn shared_base(&self) -> Option<Arc<str>> {
        Some(self.shared.get())
    }

    fn left(&self, text: &str) {
        self.shared.set(text);
    }
}
