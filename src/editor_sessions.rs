//! What an editor's session gives a chat besides its text, by chat path: the MCP servers of
//! an ACP session (`mcpServers`, tool sources beside the configuration's) and the editor's
//! view of files (ACP `fs/*`, through which `read`, `write` and `edit` go). Set by
//! `crate::acp_backend`, read when a chat's tools are set up (`crate::engine_setup`,
//! the drivers). One table per engine host (the daemon's, or `flemmad acp`'s), which owns it and
//! hands it to its drivers ([`crate::engine_driver::DriverServices`]); `flemmad send` has an
//! empty one. A client that went away answers no file calls (its `ClientFiles` knows), so the
//! tools of a driver that outlives it use the disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use flemma_acp::ClientFiles;
use flemma_mcp::ServerDef;
use flemma_tools::{Cancel, EditorFiles};

#[derive(Debug, Default)]
struct Given {
    mcp_servers: Vec<ServerDef>,
    files: Option<ClientFiles>,
}

/// What editors' sessions gave the chats, by chat path (cheap to clone: one table).
#[derive(Debug, Clone, Default)]
pub struct EditorSessions {
    table: Arc<Mutex<HashMap<PathBuf, Given>>>,
}

impl EditorSessions {
    fn with_table<T>(&self, f: impl FnOnce(&mut HashMap<PathBuf, Given>) -> T) -> T {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut table)
    }

    /// The chat at `chat` uses `servers` besides the ones its configuration defines (until
    /// the owner ends or a session sets others).
    pub fn set_mcp_servers(&self, chat: &Path, servers: Vec<ServerDef>) {
        self.with_table(|table| table.entry(chat.to_path_buf()).or_default().mcp_servers = servers);
    }

    /// The servers a session gave the chat at `chat`.
    pub fn mcp_servers(&self, chat: &Path) -> Vec<ServerDef> {
        self.with_table(|table| {
            table
                .get(chat)
                .map(|given| given.mcp_servers.clone())
                .unwrap_or_default()
        })
    }

    /// The chat's tools read and write files through `files` (an ACP client's).
    pub fn set_files(&self, chat: &Path, files: ClientFiles) {
        self.with_table(|table| table.entry(chat.to_path_buf()).or_default().files = Some(files));
    }

    /// The connection of `files` ended: the chat's tools use the disk again, unless another
    /// session gave its own files since.
    pub fn files_gone(&self, chat: &Path, files: &ClientFiles) {
        self.with_table(|table| {
            if let Some(given) = table.get_mut(chat)
                && given
                    .files
                    .as_ref()
                    .is_some_and(|current| current.is(files))
            {
                given.files = None;
            }
        });
    }

    /// The editor's view of files for the chat's tools, when a session gave one.
    pub fn editor_files(&self, chat: &Path) -> Option<Arc<dyn EditorFiles>> {
        self.editor_files_for(chat, None)
    }

    /// The editor's view of files for the call `tool_id` of the chat: its file requests wait
    /// until the client knows the call (ACP `tool_call` before the call's `fs/*`).
    pub fn editor_files_for(
        &self,
        chat: &Path,
        tool_id: Option<&str>,
    ) -> Option<Arc<dyn EditorFiles>> {
        let files =
            self.with_table(|table| table.get(chat).and_then(|given| given.files.clone()))?;
        Some(Arc::new(ClientEditorFiles {
            files,
            tool_id: tool_id.map(str::to_owned),
        }))
    }
}

/// An ACP client's files as the tools see them (as one call's, when `tool_id` is known).
#[derive(Debug)]
struct ClientEditorFiles {
    files: ClientFiles,
    tool_id: Option<String>,
}

impl ClientEditorFiles {
    fn wait_for_call(&self, cancel: &Cancel) {
        if let Some(id) = &self.tool_id {
            self.files.wait_for_call(id, &|| cancel.is_cancelled());
        }
    }
}

impl EditorFiles for ClientEditorFiles {
    fn reads(&self) -> bool {
        self.files.reads()
    }

    fn writes(&self) -> bool {
        self.files.writes()
    }

    fn read_text(&self, path: &Path, cancel: &Cancel) -> Result<String, String> {
        self.wait_for_call(cancel);
        self.files.read_text(path, &|| cancel.is_cancelled())
    }

    fn write_text(&self, path: &Path, text: &str, cancel: &Cancel) -> Result<(), String> {
        self.wait_for_call(cancel);
        self.files.write_text(path, text, &|| cancel.is_cancelled())
    }
}
