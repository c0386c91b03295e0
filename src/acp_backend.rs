//! The ACP agent's [`flemma_acp::Backend`] backed by the process's [`EngineHost`]: the one
//! place `flemmad acp` touches the engine host. A chat is read and written through its writer,
//! as the document session does: the buffer of an LSP editor that has it open, else the file;
//! the host's events of a chat become [`TurnEvent`]s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_acp::{Backend, McpServerSpec, TurnEvent};
use flemma_mcp::definition::{Hidden, Origin, ServerDef, Transport};

use flemma_engine::EngineEvent;
use flemma_protocol::error::RequestError;
use flemma_protocol::event::{ProgressUpdate, ToolStatus};
use flemma_protocol::methods::{CompactParams, FlemmaRequest, FlemmaResponse, SwitchParams};
use serde_json::{Value, json};

use crate::engine_host::{DocumentRef, EngineHost};
use crate::process_context::ProcessContext;

/// `flemmad acp`'s view of the engine host.
#[derive(Debug)]
pub struct AcpBackend {
    host: Arc<EngineHost>,
}

impl AcpBackend {
    pub fn new(host: Arc<EngineHost>) -> Self {
        Self { host }
    }

    /// The typed `flemma/*` request `request` makes of the chat's URI, through the host's one
    /// command surface (no JSON in between); a refusal's message.
    fn request(
        &self,
        path: &Path,
        request: impl FnOnce(String) -> FlemmaRequest,
    ) -> Result<FlemmaResponse, RequestError> {
        let uri = path.to_string_lossy().into_owned();
        Backend::call(self, path, request(uri))
    }

    /// `flemma/switch` to `model` on the chat: its one-line message, or the host's refusal
    /// (its code kept).
    fn switch(&self, path: &Path, model: &str) -> Result<String, RequestError> {
        let model = model.to_owned();
        match self.request(path, |uri| {
            FlemmaRequest::Switch(SwitchParams {
                uri,
                model: model.clone(),
            })
        })? {
            FlemmaResponse::Switch(result) => Ok(result.message),
            _ => Ok(format!("switched to {model}")),
        }
    }

    /// What the chat's model picker selects: the `$preset` its switch selected (unless its
    /// frontmatter sets the model), else `provider/model`.
    fn selected_model(&self, path: &Path, resolved: &flemma_config::ResolvedConfig) -> String {
        let config = &resolved.config;
        let preset = self
            .host
            .switched_model(path)
            .filter(|model| model.starts_with('$'))
            .filter(|_| resolved.source_of("model") == Some(flemma_config::LayerKind::Runtime))
            .map(|model| model.split(';').next().unwrap_or_default().to_owned());
        preset.unwrap_or_else(|| format!("{}/{}", config.provider.as_str(), config.model))
    }

    /// `/compact [focus]`: `flemma/compact` on the chat, answered once the compaction is
    /// written (or failed): what happened, in a sentence.
    fn slash_compact(&self, path: &Path, focus: &str) -> Result<String, String> {
        // Subscribed first: the driver may end before the call returns.
        let events = self.host.subscribe();
        let focus = Some(focus.to_owned()).filter(|focus| !focus.is_empty());
        self.request(path, |uri| {
            FlemmaRequest::Compact(CompactParams {
                uri,
                line: None,
                focus,
                keep: None,
            })
        })
        .map_err(|e| e.message)?;
        let deadline = std::time::Instant::now() + COMPACT_WAIT;
        let mut outcome = None;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let Ok(event) = events.recv_timeout(left) else {
                return Err(
                    "the compaction has not ended yet; the chat says when it has".to_owned(),
                );
            };
            if event.path != path {
                continue;
            }
            match &event.event {
                EngineEvent::ContextCompacted(data) => {
                    outcome = Some(Ok(crate::compaction::notice(data)));
                }
                EngineEvent::ContextCompactionFailed(failed) => {
                    outcome = Some(Err(failed.message.clone()));
                }
                EngineEvent::EngineStopped(stopped) => {
                    return outcome.unwrap_or_else(|| {
                        Err(stopped
                            .message
                            .clone()
                            .unwrap_or_else(|| "nothing was compacted".to_owned()))
                    });
                }
                _ => {}
            }
        }
    }
}

/// Runs the future `make` makes (an editor store's IO: async, not `Send`) to its end on a
/// thread of its own, on the process's runtime: the agent's calls to the backend are
/// synchronous, and may come from inside that runtime.
fn on_store_thread<T, F>(make: impl FnOnce() -> F + Send) -> Result<T, String>
where
    T: Send,
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let runtime = crate::runtime::handle().map_err(|e| format!("{e:#}"))?;
    std::thread::scope(|scope| scope.spawn(move || runtime.block_on(make())).join())
        .map_err(|_| "reading or writing the editor's buffer failed (a bug in flemmad)".to_owned())?
        .map_err(|e| format!("{e:#}"))
}

/// flemmad's own failure (the file system, an editor's buffer) as the client's JSON-RPC error.
fn failed(message: impl std::fmt::Display) -> RequestError {
    RequestError::new(
        flemma_protocol::error::codes::INTERNAL_ERROR,
        message.to_string(),
    )
}

/// How long `/compact` waits for its summary.
const COMPACT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// What a host event of the chat means to a prompt; `None` for events it does not follow.
pub fn turn_event(event: &EngineEvent) -> Option<TurnEvent> {
    Some(match event {
        EngineEvent::RequestText(streamed) => TurnEvent::Text(streamed.text.clone()),
        EngineEvent::RequestThinking(streamed) => TurnEvent::Thinking(streamed.text.clone()),
        EngineEvent::RequestComposed(call) => TurnEvent::ToolComposed {
            tool_id: call.tool_id.clone(),
            name: call.tool_name.clone(),
            input: call.input.clone()?,
        },
        EngineEvent::ToolExecuting(tool) => TurnEvent::ToolStarted {
            tool_id: tool.tool_id.clone(),
            name: tool.tool_name.clone(),
            input: tool.input.clone(),
        },
        EngineEvent::ToolCompleted(done) => TurnEvent::ToolFinished {
            tool_id: done.tool_id.clone(),
            name: done.tool_name.clone(),
            output: done.output.clone().unwrap_or_default(),
            failed: done.status == ToolStatus::Error,
        },
        EngineEvent::ToolDeclined(declined) => TurnEvent::ToolFinished {
            tool_id: declined.tool_id.clone(),
            name: declined.tool_name.clone(),
            output: declined.output.clone(),
            failed: true,
        },
        EngineEvent::JobSubmitted(job) => TurnEvent::ToolInBackground {
            tool_id: job.tool_id.clone(),
            name: job.tool_name.clone(),
            job_id: job.job_id.clone(),
        },
        EngineEvent::ToolApprovalRequired(required) => TurnEvent::ApprovalRequired(
            required
                .tools
                .iter()
                .map(|tool| flemma_acp::PendingCall {
                    tool_id: tool.tool_id.clone(),
                    name: tool.tool_name.clone(),
                    input: tool.input.clone(),
                })
                .collect(),
        ),
        EngineEvent::UsageUpdated(usage) => {
            let mut flemma = serde_json::Map::new();
            flemma.insert("usage".to_owned(), json!(usage.usage));
            if let Some(saved) = usage.cache_saved_usd {
                flemma.insert("cacheSavedUsd".to_owned(), json!(saved));
            }
            if let Some(limits) = &usage.rate_limits {
                flemma.insert("rateLimits".to_owned(), json!(limits));
            }
            TurnEvent::Usage {
                used: usage.context_tokens,
                // Told only when the model's context window is known.
                size: usage.context_window?,
                cost_usd: usage.cost_usd,
                meta: serde_json::Map::from_iter([("flemma".to_owned(), Value::Object(flemma))]),
            }
        }
        EngineEvent::ToolProgress(progress) => {
            let (kind, text, title, status, child_tool_id) = match &progress.data.update {
                ProgressUpdate::Text { text } => ("text", Some(text), None, None, None),
                ProgressUpdate::Thought { text } => ("thought", Some(text), None, None, None),
                ProgressUpdate::Plan { text } => ("plan", Some(text), None, None, None),
                ProgressUpdate::ToolCall {
                    child_tool_id,
                    title,
                    status,
                    ..
                } => (
                    "tool_call",
                    None,
                    Some(title),
                    Some(status),
                    Some(child_tool_id),
                ),
                ProgressUpdate::ToolCallUpdate {
                    child_tool_id,
                    title,
                    status,
                    text,
                } => (
                    "tool_call_update",
                    text.as_ref(),
                    title.as_ref(),
                    status.as_ref(),
                    Some(child_tool_id),
                ),
            };
            TurnEvent::AgentProgress(flemma_acp::delegation::Progress {
                tool_id: progress.tool_id.clone(),
                agent: progress.data.agent.clone(),
                kind: kind.to_owned(),
                text: text.cloned(),
                title: title.cloned(),
                status: status.cloned(),
                child_tool_id: child_tool_id.cloned(),
            })
        }
        EngineEvent::AgentPermissionRequired(asked) => {
            TurnEvent::AgentPermission(flemma_acp::delegation::Permission {
                tool_id: asked.tool_id.clone(),
                agent: asked.data.agent.clone(),
                permission_id: asked.data.permission_id.clone(),
                title: asked.data.title.clone(),
                input: asked.data.input.clone().filter(|v| !v.is_null()),
            })
        }
        EngineEvent::ContextCompacted(data) => {
            let mut facts = json!(data);
            // The summary goes as text of its own, not again in the facts.
            if let Some(facts) = facts.as_object_mut() {
                facts.remove("summary");
            }
            TurnEvent::Compacted {
                notice: crate::compaction::notice(data),
                summary: data.summary.clone(),
                meta: serde_json::Map::from_iter([("flemma".to_owned(), facts)]),
            }
        }
        EngineEvent::ContextCompactionFailed(failed) => {
            TurnEvent::CompactionFailed(failed.message.clone())
        }
        EngineEvent::EngineStopped(stopped) => TurnEvent::Stopped {
            reason: stopped.reason,
            message: stopped.message.clone(),
        },
        _ => return None,
    })
}

impl Backend for AcpBackend {
    fn proposed_change(&self, path: &Path, tool_id: &str) -> Option<flemma_acp::ProposedFile> {
        // The chat as its writer holds it (an editor's unsaved buffer too): the call may be
        // written there only.
        let text = self.read_chat(path).ok()?;
        let loaded = crate::chat::load_text(
            "acp",
            flemma_ide::Purpose::Inspect,
            path,
            text,
            self.host.context(),
        )
        .ok()?;
        let doc = &*loaded.analysis.document;
        let (_, _, tool) = doc.tool_use(tool_id)?;
        let input = tool
            .fence
            .as_ref()
            .and_then(|fence| serde_json::from_str(doc.slice(fence.content)).ok())
            .unwrap_or(Value::Null);
        let mut setup =
            crate::tool_setup::ToolSetup::for_chat(self.host.context(), &loaded.analysis, path)
                .ok()?;
        // Against the disk: a read through the client from inside the agent's own turn would
        // wait on the connection that is asking.
        setup.ctx.editor = None;
        let change = flemma_tools::review::proposed_change(&tool.name, &input, &setup.ctx)?.ok()?;
        Some(flemma_acp::ProposedFile {
            path: flemma_protocol::document::normalize(&change.path),
            before: change.before,
            after: change.after,
        })
    }

    fn create_chat(&self, path: &Path, text: &str) -> Result<(), RequestError> {
        create_chat_file(path, text).map_err(RequestError::refused)
    }

    /// The chat as its writer holds it: the buffer of the editor that has it open (its unsaved
    /// text too), else the file.
    fn read_chat(&self, path: &Path) -> Result<String, RequestError> {
        let store = self.host.writer(path);
        if store.is_disk() {
            // The path names no chat flemmad can read.
            return crate::fsutil::read_chat(&self.host.context().dirs, path)
                .map_err(|e| RequestError::invalid_params(format!("{e:#}")));
        }
        on_store_thread(move || async move { store.read().await.map(|read| read.text) })
            .map_err(failed)
    }

    fn chats_in(&self, dir: &Path) -> Vec<flemma_acp::list::ChatEntry> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "chat"))
            .filter_map(|entry| {
                let meta = entry.metadata().ok().filter(std::fs::Metadata::is_file)?;
                Some(flemma_acp::list::ChatEntry {
                    path: entry.path(),
                    modified: meta.modified().ok()?,
                })
            })
            .collect()
    }

    fn remove_chat_if_unchanged(&self, path: &Path, expected: &str) -> Result<bool, RequestError> {
        if self.read_chat(path)? != expected {
            return Ok(false);
        }
        std::fs::remove_file(path).map(|()| true).map_err(|e| {
            failed(format!(
                "cannot remove the unused chat {}: {e}",
                path.display()
            ))
        })
    }

    /// Through the chat's writer, as the document session writes it: an editor that has the
    /// chat open receives the change as an edit of its buffer (the file under it is not
    /// written); else the file.
    fn replace_chat(&self, path: &Path, expected: &str, text: &str) -> Result<bool, RequestError> {
        let store = self.host.writer(path);
        if store.is_disk() {
            return crate::fsutil::replace_chat_if_unchanged(
                &self.host.context().dirs,
                path,
                expected,
                text,
            )
            .map_err(|e| failed(format!("{e:#}")));
        }
        on_store_thread(move || async move {
            let current = store.read().await?;
            if current.text != expected {
                return Ok(false);
            }
            store.replace_if_unchanged(&current, text).await
        })
        .map_err(failed)
    }

    fn events(&self, path: &Path) -> tokio::sync::mpsc::UnboundedReceiver<TurnEvent> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let events = self.host.subscribe();
        let path = path.to_owned();
        // Ends within a second of the session's follower letting go (a session closed, or
        // loaded again), even while no event comes; then the host drops its subscriber.
        let _ = std::thread::Builder::new()
            .name("acp-events".into())
            .spawn(move || {
                loop {
                    let event = match events.recv_timeout(std::time::Duration::from_secs(1)) {
                        Ok(event) => event,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            if sender.is_closed() {
                                break;
                            }
                            continue;
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    };
                    if sender.is_closed() {
                        break;
                    }
                    if event.path != path {
                        continue;
                    }
                    let Some(turn) = turn_event(&event.event) else {
                        continue;
                    };
                    if sender.send(turn).is_err() {
                        break;
                    }
                }
            });
        receiver
    }

    fn call(&self, path: &Path, request: FlemmaRequest) -> Result<FlemmaResponse, RequestError> {
        self.host.call(DocumentRef::path(path), request)
    }

    fn mcp_servers(&self, path: &Path, servers: Vec<McpServerSpec>) -> Vec<String> {
        let mut refused = Vec::new();
        let defs = servers
            .into_iter()
            .filter_map(|server| match server_def(server) {
                Ok(def) => Some(def),
                Err(reason) => {
                    refused.push(format!("the editor's MCP server is not used: {reason}"));
                    None
                }
            })
            .collect();
        self.host.editor_sessions().set_mcp_servers(path, defs);
        refused
    }

    fn client_files(&self, path: &Path, files: flemma_acp::ClientFiles) {
        self.host.editor_sessions().set_files(path, files);
    }

    fn client_gone(&self, path: &Path, files: &flemma_acp::ClientFiles) {
        self.host.editor_sessions().files_gone(path, files);
    }

    fn mode(&self, path: &Path) -> Result<flemma_config::Mode, RequestError> {
        self.host
            .resolved_mode(path, None)
            .map_err(|e| RequestError::refused(e.to_string()))
    }

    fn settings(&self, path: &Path) -> Result<flemma_acp::Settings, RequestError> {
        let resolved = self
            .host
            .resolved_config(path)
            .map_err(|e| RequestError::refused(e.to_string()))?;
        let current = self.selected_model(path, &resolved);
        Ok(flemma_acp::Settings {
            mode: resolved.config.mode,
            model: Some(model_picker(&resolved.config, current)),
            thought_level: thought_picker(&resolved.config),
        })
    }

    fn set_model(&self, path: &Path, model: &str) -> Result<String, RequestError> {
        self.switch(path, model)
    }

    fn set_thought_level(&self, path: &Path, level: &str) -> Result<String, RequestError> {
        let resolved = self
            .host
            .resolved_config(path)
            .map_err(|e| RequestError::refused(e.to_string()))?;
        let thinking = match level {
            "off" => "false",
            level => level,
        };
        // The model selected now, with the level as its parameter (a preset keeps the rest of
        // what it sets).
        let model = self.selected_model(path, &resolved);
        self.switch(path, &format!("{model};thinking={thinking}"))
    }

    fn slash_command(
        &self,
        path: &Path,
        command: &str,
        argument: &str,
    ) -> Result<String, RequestError> {
        match command {
            "status" => slash_status(self.host.context(), path),
            "rewind" => slash_rewind(self.host.context(), path, argument),
            "compact" => self.slash_compact(path, argument),
            other => {
                return Err(RequestError::invalid_params(format!(
                    "/{other} is not a command of flemmad"
                )));
            }
        }
        .map_err(RequestError::refused)
    }

    fn trash_chat(&self, path: &Path) -> Result<PathBuf, RequestError> {
        let trash = self
            .host
            .context()
            .dirs
            .flemma_state()
            .ok_or_else(|| {
                RequestError::refused("no folder for flemmad's state: set HOME or XDG_STATE_HOME")
            })?
            .join("trash");
        crate::fsutil::move_to_trash(path, &trash).map_err(|error| failed(format!("{error:#}")))
    }
}

/// Creates the chat `path` holding `text` (`Backend::create_chat`).
fn create_chat_file(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write as _;
    let dir = path.parent().ok_or("a chat needs a folder")?;
    let name = path.file_name().ok_or("a chat needs a name")?;
    // The sessions folder is made, and the chat created, following no link below the
    // project: a repository that ships `.flemma/sessions` as a link (to `/tmp`, say) would
    // put the chat, and the working directory it records as `../..`, somewhere else.
    let (base, below) = match (dir.ancestors().nth(2), dir.ancestors().nth(3)) {
        (Some(project), _) if dir.ends_with(".flemma/sessions") => {
            (project, Path::new(".flemma/sessions"))
        }
        // An asked agent's chat, in the asking chat's `.flemma/<chat>/agents/`.
        (_, Some(folder)) if flemma_acp::ask::is_agent_chat(path) => {
            (folder, dir.strip_prefix(folder).unwrap_or(Path::new("")))
        }
        _ => (dir, Path::new("")),
    };
    let refused = |e: std::io::Error| {
        format!(
            "cannot create the sessions folder {}: {e} (a `.flemma` or `sessions` that is a symbolic link is refused; remove the link)",
            dir.display()
        )
    };
    let folder =
        flemma_tools::nofollow::Dir::open_beneath(base, below, Some(0o755)).map_err(refused)?;
    if folder.contains(name) {
        return Err(format!("the chat {} already exists", path.display()));
    }
    let mut file = folder
        .open_for_write(name, 0o644, true)
        .map_err(|e| format!("cannot create the chat {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the chat {}: {e}", path.display()))
}

/// The model picker of a chat configured as `config`: the catalogue's models of its provider,
/// then the user's model presets, `current` selected (added first when neither lists it: a
/// model the catalogue does not know).
fn model_picker(config: &flemma_config::Config, current: String) -> flemma_acp::Picker {
    let kind = flemma_provider::ProviderKind::from(config.provider);
    let catalogue = crate::provider_setup::catalogue_of(config);
    let provider = config.provider.as_str();
    let mut choices: Vec<flemma_acp::Choice> = catalogue
        .models()
        .iter()
        .filter(|spec| {
            catalogue
                .lookup(kind, &spec.id)
                .is_some_and(|found| found.id == spec.id)
        })
        .map(|spec| flemma_acp::Choice {
            value: format!("{provider}/{}", spec.id),
            name: spec.id.clone(),
            description: Some(format!(
                "{}k context{}",
                spec.context_window / 1000,
                if spec.thinking { ", thinks" } else { "" }
            )),
        })
        .collect();
    choices.extend(
        config
            .presets
            .iter()
            .filter(|(_, preset)| preset.model.is_some() || preset.provider.is_some())
            .map(|(name, preset)| flemma_acp::Choice {
                value: name.clone(),
                name: name.clone(),
                description: Some(format!(
                    "preset: {}",
                    match (&preset.provider, &preset.model) {
                        (Some(provider), Some(model)) => format!("{}/{model}", provider.as_str()),
                        (Some(provider), None) => provider.as_str().to_owned(),
                        (None, model) => model.clone().unwrap_or_default(),
                    }
                )),
            }),
    );
    if !choices.iter().any(|choice| choice.value == current) {
        choices.insert(
            0,
            flemma_acp::Choice {
                value: current.clone(),
                name: current.clone(),
                description: Some("not in flemmad's catalogue".to_owned()),
            },
        );
    }
    flemma_acp::Picker { current, choices }
}

/// The thinking levels a chat configured as `config` may choose (what `thinking` takes:
/// `off` and the levels, those the model takes when the catalogue names them; no `off` for a
/// model that always thinks), the current one selected; `None` for a model that does not
/// think.
fn thought_picker(config: &flemma_config::Config) -> Option<flemma_acp::Picker> {
    let kind = flemma_provider::ProviderKind::from(config.provider);
    let catalogue = crate::provider_setup::catalogue_of(config);
    if !catalogue.supports_thinking(kind, &config.model) {
        return None;
    }
    let spec = catalogue.lookup(kind, &config.model);
    let efforts = spec.map(|spec| spec.reasoning_efforts).unwrap_or_default();
    let forced = spec.is_some_and(|spec| spec.thinking_off == flemma_provider::ThinkingOff::Forced);
    let choice = |value: String, name: String| flemma_acp::Choice {
        value,
        name,
        description: None,
    };
    let mut choices = Vec::new();
    if !forced {
        choices.push(choice("off".to_owned(), "Off".to_owned()));
    }
    for level in flemma_config::ThinkingLevel::VALUES {
        if efforts.is_empty() || efforts.contains(&level.as_str()) {
            let name = level.as_str();
            choices.push(choice(name.to_owned(), name.to_owned()));
        }
    }
    let current = match config.parameters.thinking {
        flemma_config::Thinking::Off | flemma_config::Thinking::Budget(0) => "off".to_owned(),
        flemma_config::Thinking::Level(level) => level.as_str().to_owned(),
        flemma_config::Thinking::Budget(tokens) => tokens.to_string(),
    };
    if !choices.iter().any(|c| c.value == current) {
        let name = match config.parameters.thinking {
            flemma_config::Thinking::Budget(tokens) => format!("{tokens} tokens"),
            _ => current.clone(),
        };
        choices.push(choice(current.clone(), name));
    }
    Some(flemma_acp::Picker { current, choices })
}

/// An editor's MCP server as a tool source of the session's chat: the editor's own servers,
/// outside the tool sandbox, as the editor would run them, but in the neutral directory, not
/// the session's project (which would choose the code `npx x` or `python -m x` runs; the
/// project is what the session works on, through the tools). Refused when its name is
/// reserved (`flemma`) or not a tool-name prefix.
fn server_def(server: McpServerSpec) -> Result<ServerDef, String> {
    let hide = |pairs: Vec<(String, String)>| -> Vec<(String, Hidden)> {
        pairs
            .into_iter()
            .map(|(k, v)| (k, Hidden::new(v)))
            .collect()
    };
    let (name, transport) = match server {
        McpServerSpec::Stdio {
            name,
            command,
            args,
            env,
        } => (
            name,
            Transport::Stdio {
                command: command.display().to_string(),
                args,
                env: hide(env),
                cwd: PathBuf::from(flemma_tools::launch::NEUTRAL_DIR),
                sandbox: false,
            },
        ),
        McpServerSpec::Http { name, url, headers } => (
            name,
            Transport::Http {
                url,
                headers: hide(headers),
            },
        ),
    };
    Ok(ServerDef {
        name: flemma_config::check_mcp_server_name(&name)?,
        transport,
        origin: Origin::Session("acp".into()),
    })
}

/// `/status`: the context meter of the next request and the calls waiting for approval.
fn slash_status(context: &ProcessContext, path: &Path) -> Result<String, String> {
    let loaded = crate::chat::load("status", flemma_ide::Purpose::Inspect, path, context).map_err(
        |error| match error {
            crate::chat::LoadError::Unreadable { error, .. } => format!("{error:#}"),
            crate::chat::LoadError::Failed { message, .. } => message,
        },
    )?;
    let tools = crate::tool_setup::ToolSetup::for_chat(context, &loaded.analysis, path)
        .map(|tools| tools.definitions())
        .unwrap_or_default();
    let mut meter = flemma_provider::Meter::new();
    let mut out = String::new();
    match crate::context::estimate(&mut meter, &loaded.analysis, path, &tools, context) {
        Some(status) => {
            out.push_str(&format!("context: {}\n", crate::context::line(&status)));
            if let Some(advice) = crate::context::advice(&status) {
                out.push_str(&format!("{advice}\n"));
            }
        }
        None => out.push_str("context: unknown (the configuration does not resolve)\n"),
    }
    let doc = &*loaded.analysis.document;
    let waiting: Vec<String> = doc
        .placeholders(Some(flemma_syntax::Status::Pending))
        .into_iter()
        .map(|(_, _, result)| {
            let name = doc
                .tool_use(&result.tool_use_id)
                .map_or_else(String::new, |(_, _, tool)| tool.name.clone());
            format!("`{name}` ({})", result.tool_use_id)
        })
        .collect();
    if waiting.is_empty() {
        out.push_str("no call waits for approval");
    } else {
        out.push_str(&format!("waiting for approval: {}", waiting.join(", ")));
    }
    Ok(out)
}

/// `/rewind [ID]`: the project's files as they were before the call `ID` (default: the last
/// call recorded), as `flemmad rewind` does; a file changed since by someone else is not
/// overwritten (then nothing is).
fn slash_rewind(context: &ProcessContext, path: &Path, argument: &str) -> Result<String, String> {
    let limits = crate::checkpoints::limits_of_chat(context, path);
    let checkpoints = crate::checkpoints::of(context, path)
        .map(|checkpoints| checkpoints.with_limits(limits))
        .map_err(|error| error.to_string())?;
    let target = match argument.split_whitespace().next() {
        Some(id) => id.to_owned(),
        None => checkpoints
            .points()
            .map_err(|error| error.to_string())?
            .into_iter()
            .rev()
            .find(|point| point.phase == crate::checkpoints::Phase::Before)
            .map(|point| point.tool_id)
            .ok_or("no call of this conversation has a checkpoint yet: nothing to rewind")?,
    };
    let plan = checkpoints
        .rewind(&target, false, false)
        .map_err(|error| error.to_string())?;
    if !plan.changed_since.is_empty() {
        return Err(format!(
            "nothing was changed: {} changed since the conversation's last call; look at them, then run `flemmad rewind {} --to {target} --force`",
            plan.changed_since.join(", "),
            path.display()
        ));
    }
    if plan.restored.is_empty() && plan.removed.is_empty() {
        return Ok(format!(
            "the files are already as they were before `{target}`"
        ));
    }
    let mut out = format!("the files are as they were before `{target}` (the chat is unchanged):");
    for file in &plan.restored {
        out.push_str(&format!("\nrestored {file}"));
    }
    for file in &plan.removed {
        out.push_str(&format!("\nremoved {file}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event a JSON line names, as the front ends read it.
    fn told(name: &str, data: Value) -> Option<TurnEvent> {
        turn_event(&EngineEvent::from_parts(name, data).expect("a known event"))
    }

    #[test]
    fn host_events_become_turn_events() {
        assert_eq!(
            told("request:text", json!({"text": "hi"})),
            Some(TurnEvent::Text("hi".into()))
        );
        assert_eq!(
            told(
                "tool:executing",
                json!({"toolId": "t1", "toolName": "bash"})
            ),
            Some(TurnEvent::ToolStarted {
                tool_id: "t1".into(),
                name: "bash".into(),
                input: None,
            })
        );
        assert_eq!(
            told(
                "engine:stopped",
                json!({"reason": "error", "message": "boom"})
            ),
            Some(TurnEvent::Stopped {
                reason: flemma_protocol::event::StopLabel::Error,
                message: Some("boom".into())
            })
        );
        let usage = |window: Value| {
            json!({"usage": {"input_tokens": 2000, "output_tokens": 225, "thinking_tokens": 0,
                             "cache_read_tokens": 0, "cache_write_tokens": 0},
                   "requests": 1, "costUsd": null, "cacheSavedUsd": null,
                   "rateLimits": {"windows": [{"name": "primary", "usedPercent": 42.0}]},
                   "contextTokens": 2225, "contextWindow": window})
        };
        // What a driver's setup found is the CLI's to show, not a turn's.
        assert_eq!(
            told(
                "engine:setup",
                json!({"provider": "anthropic", "model": "m", "warnings": ["w"], "diagnostics": []})
            ),
            None
        );
        // Without the model's context window there is nothing to tell ACP.
        assert_eq!(told("usage:updated", usage(Value::Null)), None);
        let usage = told("usage:updated", usage(json!(272000)));
        let Some(TurnEvent::Usage {
            used,
            size,
            cost_usd,
            meta,
        }) = usage
        else {
            panic!("{usage:?}");
        };
        assert_eq!((used, size, cost_usd), (2225, 272000, None));
        assert_eq!(
            meta["flemma"]["rateLimits"]["windows"][0]["usedPercent"],
            42.0
        );
    }
}
