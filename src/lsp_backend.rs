//! The language server's [`Backend`] backed by the process's [`EngineHost`]: every LSP
//! session (of `flemmad lsp`, or one per `lsp.sock` connection of `flemmad serve`) gets one.
//! Documents the session opens are attached to the host as editors (the most recently active
//! one writes them through its buffer); commands become host calls and answer at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flemma_lsp::{Backend, BackendError, ClientConfig, EngineCommand, Outbox, ToolDecision};
use serde_json::Value;

use crate::chat_store::SharedText;
use crate::engine_host::{EditorHandle, EngineHost, HostError};

/// Session ids, unique in the process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// One LSP session's view of the engine host.
#[derive(Debug)]
pub struct HostBackend {
    host: Arc<EngineHost>,
    session: u64,
    client: String,
    /// The session's client settings (`initializationOptions`, `didChangeConfiguration`).
    client_config: Option<ClientConfig>,
    /// The documents this session has open (URI, path, and the text it shares with the
    /// engine).
    open: Vec<(String, PathBuf, SharedText)>,
}

impl HostBackend {
    pub fn new(host: Arc<EngineHost>) -> Self {
        Self {
            host,
            session: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            client: "the editor".into(),
            client_config: None,
            open: Vec::new(),
        }
    }

    /// The document of a command: an open document's path, else the URI's path.
    fn path_of(&self, uri: &str) -> Result<PathBuf, BackendError> {
        if let Some((_, path, _)) = self.open.iter().find(|(u, _, _)| u == uri) {
            return Ok(path.clone());
        }
        flemma_lsp::uri_to_path(uri).ok_or_else(|| {
            BackendError::Refused(format!(
                "`{uri}` is not a file: flemmad runs the engine only for .chat files on disk; save the document first"
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
        EditorHandle {
            session: self.session,
            uri: uri.to_owned(),
            outbox: outbox.clone(),
            name: self.client.clone(),
            shared,
            client_config: self.client_config.clone(),
        }
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

fn refused(error: HostError) -> BackendError {
    BackendError::Refused(error.to_string())
}

fn json(value: impl serde::Serialize) -> Result<Value, BackendError> {
    serde_json::to_value(value).map_err(|e| BackendError::Refused(e.to_string()))
}

impl Backend for HostBackend {
    fn discovered_tools(&self) -> Vec<(String, String)> {
        crate::mcp_setup::hub().known_tools()
    }

    fn command(&mut self, command: EngineCommand, outbox: &Outbox) -> Result<Value, BackendError> {
        let uri = command.uri().to_owned();
        let path = self.path_of(&uri)?;
        self.touch(&uri, &path, outbox);
        let host = &self.host;
        match command {
            EngineCommand::Send { .. } => json(host.send(&path).map_err(refused)?),
            EngineCommand::Cancel { .. } => json(host.cancel(&path).map_err(refused)?),
            EngineCommand::Background { tool_id, .. } => {
                json(host.background(&path, &tool_id).map_err(refused)?)
            }
            EngineCommand::Execute { tool_id, .. } => {
                json(host.execute(&path, &tool_id).map_err(refused)?)
            }
            EngineCommand::Status { .. } => json(host.status(&path)),
            EngineCommand::Jobs { .. } => json(host.jobs(&path)),
            EngineCommand::Usage { .. } => json(host.usage(&path)),
            EngineCommand::Switch { model, .. } => {
                json(host.switch(&path, &model).map_err(refused)?)
            }
        }
    }

    fn tool_decision(
        &mut self,
        decision: ToolDecision,
        outbox: &Outbox,
    ) -> Option<Result<Value, BackendError>> {
        let uri = match &decision {
            ToolDecision::Approve { uri, .. }
            | ToolDecision::Reject { uri, .. }
            | ToolDecision::ApproveAll { uri } => uri.clone(),
        };
        let path = match self.path_of(&uri) {
            Ok(path) => path,
            Err(error) => return Some(Err(error)),
        };
        self.touch(&uri, &path, outbox);
        let host = &self.host;
        let outcome = match decision {
            ToolDecision::Approve { tool_id, .. } => host.approve(&path, &tool_id),
            ToolDecision::Reject {
                tool_id, reason, ..
            } => host.reject(&path, &tool_id, reason),
            ToolDecision::ApproveAll { .. } => host.approve_all(&path),
        };
        Some(outcome.map_err(refused).and_then(json))
    }

    fn approval(
        &mut self,
        uri: &str,
        analysis: &flemma_ide::Analysis,
        tool: &str,
        input: &Value,
    ) -> Option<flemma_ide::features::ApprovalDecision> {
        use flemma_ide::features::{ApprovalDecision, Verdict};
        let path = flemma_lsp::uri_to_path(uri)?;
        let setup = crate::tool_setup::ToolSetup::for_chat(analysis, &path).ok()?;
        let decision = setup.decide(tool, input)?;
        Some(ApprovalDecision {
            verdict: match decision.verdict {
                flemma_tools::Verdict::Approve => Verdict::Approve,
                flemma_tools::Verdict::RequireApproval => Verdict::Ask,
                flemma_tools::Verdict::Deny { .. } => Verdict::Deny,
            },
            resolver: decision.resolver,
        })
    }

    fn trust_folder(&mut self, uri: &str) -> Result<Vec<PathBuf>, BackendError> {
        let path = self.path_of(uri)?;
        let dir = path.parent().ok_or_else(|| {
            BackendError::Refused(format!("{} has no folder to trust", path.display()))
        })?;
        let added = crate::trust::trust_folder(dir)
            .map_err(|error| BackendError::Refused(format!("{error:#}")))?;
        tracing::info!(folder = %dir.display(), ?added, "trusted from the editor");
        Ok(crate::trust::read_folders().0)
    }

    fn trusted_folders(&mut self) -> Option<Vec<PathBuf>> {
        Some(crate::trust::read_folders().0)
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
        let Some(index) = self.open.iter().position(|(u, _, _)| u == uri) else {
            return;
        };
        let (_, path, shared) = self.open.remove(index);
        shared.close();
        self.host.detach_editor(&path, self.session);
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        for (_, path, shared) in self.open.drain(..) {
            shared.close();
            self.host.detach_editor(&path, self.session);
        }
    }
}
