//! Tools run on threads of their own, with the chat's checkpoints around the calls that change
//! files.

use std::sync::Arc;

use flemma_engine::Input as EngineInput;
use flemma_engine::session::Input;
use flemma_tools::Cancel;

use crate::engine_driver::{Driver, Message};

impl Driver {
    /// What a call gets besides the chat's context: where it tells what it does (events of
    /// the chat), and the chat's text when the tool reads the conversation.
    /// While the model still writes a call that can change files, the chat's first
    /// checkpoint is prepared on a thread of its own (the project's files hashed, their
    /// monitor started), so that the call does not wait for it (`crate::checkpoints`).
    pub(super) fn prepare_checkpoints(&self, tool_name: &str) {
        // The `lsp` tool changes files only for a rename, not known before its input.
        if tool_name == "lsp"
            || !crate::checkpoints::changes_files(tool_name, &serde_json::Value::Null)
        {
            return;
        }
        let Some(chat) = self.tools.ctx.chat_path.clone() else {
            return;
        };
        let tools = self.tools.clone();
        let _ = std::thread::Builder::new()
            .name("checkpoint ahead".into())
            .spawn(move || {
                if let Some(Err(error)) = tools.checkpoints(&chat).map(|c| c.prepare()) {
                    tracing::info!(%error, "no checkpoint prepared ahead");
                }
            });
    }

    pub(super) fn tool_context(
        &self,
        ctx: &mut flemma_tools::RunContext,
        tool_id: &str,
        name: &str,
    ) {
        let sender = self.sender.clone();
        ctx.reporter = Some(Arc::new(crate::tool_reporter::CallReporter::new(
            tool_id,
            name,
            move |event| {
                let _ = sender.send(Message::Event(event));
            },
        )));
        let reads = self
            .tools
            .registry
            .get(name)
            .is_some_and(|tool| tool.spec.has(flemma_tools::Capability::ReadsConversation));
        if reads {
            ctx.conversation = Some(self.session.engine().text().into());
        }
        // An ACP client's files, as this call's: its requests wait until the client knows it.
        if ctx.editor.is_some()
            && let Some(chat) = ctx.chat_path.clone()
        {
            ctx.editor = self.services.editors.editor_files_for(&chat, Some(tool_id));
        }
    }

    /// Runs a tool on its own thread (a killed tool's thread is never waited for).
    pub(super) fn start_tool(
        &mut self,
        tool_id: String,
        name: String,
        input: serde_json::Value,
        job_id: Option<String>,
    ) {
        if job_id.is_none() {
            // Killed while it runs, it must not run again unasked (`crate::interruptions`).
            self.services
                .interruptions
                .call_started(self.id.path(), &tool_id);
        }
        let cancel = Cancel::new();
        let mut ctx = self.tools.ctx.clone();
        ctx.cancel = cancel.clone();
        self.tool_context(&mut ctx, &tool_id, &name);
        self.tools_running.insert(tool_id.clone(), cancel);
        let tools = self.tools.clone();
        let sender = self.sender.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tool {name}"))
            .spawn(move || {
                // The project's files before and after a call that can change them
                // (`flemmad changes`, `flemmad rewind`).
                let checkpoints = ctx
                    .chat_path
                    .as_deref()
                    .filter(|_| crate::checkpoints::changes_files(&name, &input))
                    .and_then(|chat| tools.checkpoints(chat));
                let record = |phase| {
                    if let Some(checkpoints) = &checkpoints
                        && let Err(error) = checkpoints.record(phase, &tool_id, &name)
                    {
                        tracing::info!(%error, tool_id, "no checkpoint for this call");
                    }
                };
                // The file an approved `write`/`edit` changes is still the one reviewed.
                let reviewed = match ctx.chat_path.as_deref() {
                    Some(chat) => {
                        crate::reviewed::check(tools.dirs(), chat, &tool_id, &name, &input, &ctx)
                    }
                    None => Ok(crate::reviewed::Checked::AsWritten),
                };
                record(crate::checkpoints::Phase::Before);
                let run =
                    |input| match tools
                        .registry
                        .execute(&name, input, &ctx, &tools.store, &tool_id)
                    {
                        Ok(outcome) => (outcome.text, outcome.is_error),
                        Err(error) => (error.to_string(), true),
                    };
                let (text, is_error) = match reviewed {
                    Err(refusal) => (refusal, true),
                    Ok(crate::reviewed::Checked::AsWritten) => run(input),
                    // Some hunks only were approved: the call applies those, and its result
                    // tells the model which were rejected and why.
                    Ok(crate::reviewed::Checked::Narrowed { input, note }) => {
                        let (text, is_error) = run(input);
                        (format!("{}\n\n{note}", text.trim_end()), is_error)
                    }
                };
                record(crate::checkpoints::Phase::After);
                if let Some(Err(error)) = checkpoints.map(|c| c.prune()) {
                    tracing::info!(%error, "old checkpoints were not pruned");
                }
                let input = match job_id {
                    Some(job_id) => EngineInput::JobFinished {
                        job_id,
                        text,
                        is_error,
                    },
                    None => EngineInput::ToolFinished {
                        tool_id,
                        text,
                        is_error,
                    },
                };
                let _ = sender.send(Message::Session(Input::Engine(input)));
            });
        if let Err(error) = spawned {
            let _ = self.sender.send(Message::Notice(format!(
                "cannot start a thread for a tool: {error}"
            )));
        }
    }
}
