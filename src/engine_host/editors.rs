//! The editors that have a document open, as the host sees them: their handles (the store that
//! writes an editor's buffer, who is told what happens to the document). Who writes the
//! document (the most recently active editor, else the file) is the host state's decision
//! ([`HostState::attach`](crate::engine_host::state::HostState::attach) and `detach`); the
//! handles here are only looked up by it.

use std::path::Path;
use std::sync::Arc;

use flemma_engine::EngineEvent;
use flemma_protocol::event::EngineNotice;

use crate::chat_store::{ChatStore, FileStore, SharedText};
use crate::engine_host::state::Command;
use crate::engine_host::{EngineHost, Followed, HostEvent, Shared, lock};

/// An editor that has a document open, as the host sees it: it is told what happens to the
/// document and, as the document's writer, gives the store that writes its buffer. An LSP
/// session implements it for each document it opens (`lsp_backend`).
pub trait Editor: Send + Sync + std::fmt::Debug {
    /// A lifecycle event of the document (the editor shows it; the language server sends it
    /// as `flemma/event` and derives its `$/progress` from it).
    fn event(&self, event: &EngineEvent);
    /// A message for the user that is not an error (a retry, a refused input, a warning).
    fn notice(&self, message: &str);
    /// The engine's work on the document stopped on an error.
    fn failed(&self, message: &str);
    /// The store that writes the document through this editor.
    fn store(&self) -> Box<dyn ChatStore>;
}

/// The client settings of an editor session, as a configuration layer or what is wrong with
/// them.
pub type ClientSettings = Result<flemma_config::ConfigLayer, flemma_config::ConfigErrors>;

/// An editor session's hold on one open document.
#[derive(Debug, Clone)]
pub struct EditorHandle {
    /// The session (unique in the process).
    pub session: u64,
    pub editor: Arc<dyn Editor>,
    /// What the editor and the engine last agreed on (the merge base when it becomes the
    /// writer).
    pub shared: SharedText,
    /// The session's client settings (its `initializationOptions`): used by the sends the
    /// editor starts (it is the writer then).
    pub client_config: Option<ClientSettings>,
}

impl EngineHost {
    /// `editor` has `path` open (or was just active on it): it becomes the document's writer
    /// (decided by [`HostState::attach`](crate::engine_host::state::HostState::attach)).
    pub fn attach_editor(&self, path: &Path, editor: EditorHandle) {
        let session = editor.session;
        lock(&self.shared.editors)
            .entry(path.to_owned())
            .or_default()
            .insert(session, editor);
        let path = path.to_owned();
        // One job of the state's thread: writer changes reach the driver in order.
        let _ = self.shared.state.ask(move |owned| {
            if owned.state.attach(&path, session) {
                owned.command(Command::Writer { path })?;
            }
            Ok::<_, flemma_protocol::error::RequestError>(())
        });
    }

    /// `session`'s client settings changed: its editors carry the new ones (the writer stays).
    pub fn set_client_config(&self, session: u64, config: Option<ClientSettings>) {
        for handles in lock(&self.shared.editors).values_mut() {
            if let Some(editor) = handles.get_mut(&session) {
                editor.client_config = config.clone();
            }
        }
    }

    /// `session` closed `path` (or ended): the next most recent editor writes it, else the
    /// file on disk.
    pub fn detach_editor(&self, path: &Path, session: u64) {
        // The state first: the writer it names always has its handle (the handle goes after).
        let detached = path.to_owned();
        let _ = self.shared.state.ask(move |owned| {
            if owned.state.detach(&detached, session) {
                owned.command(Command::Writer { path: detached })?;
            }
            Ok::<_, flemma_protocol::error::RequestError>(())
        });
        let mut editors = lock(&self.shared.editors);
        if let Some(handles) = editors.get_mut(path) {
            handles.remove(&session);
            if handles.is_empty() {
                editors.remove(path);
            }
        }
    }
}

impl Shared {
    /// The editor that writes `path` now (`None`: the file), as the host's state decides.
    pub(in crate::engine_host) fn writer_editor(&self, path: &Path) -> Option<EditorHandle> {
        let session = self.writer_session(path)?;
        lock(&self.editors).get(path)?.get(&session).cloned()
    }

    /// The document's text now: the writer editor's buffer as last shared, else the file.
    pub(in crate::engine_host) fn text_of(&self, path: &Path) -> Result<String, String> {
        if let Some(editor) = self.writer_editor(path) {
            return Ok(editor.shared.get().to_string());
        }
        crate::fsutil::read_chat(&self.services.context.dirs, path)
            .map_err(|error| format!("{error:#}"))
    }

    /// The store that writes `path` now: the most recently active editor, else the file.
    pub(in crate::engine_host) fn writer(&self, path: &Path) -> Box<dyn ChatStore> {
        match self.writer_editor(path) {
            Some(editor) => editor.editor.store(),
            None => Box::new(FileStore {
                path: path.to_owned(),
                dirs: self.services.context.dirs.clone(),
            }),
        }
    }

    /// The session of the editor that writes `path` now (`None`: the file).
    pub(in crate::engine_host) fn writer_session(&self, path: &Path) -> Option<u64> {
        let path = path.to_owned();
        self.state.ask(move |owned| owned.state.writer(&path))
    }

    /// Tells every editor that has `path` open.
    pub(in crate::engine_host) fn tell_editors(&self, path: &Path, tell: impl Fn(&dyn Editor)) {
        let editors: Vec<EditorHandle> = lock(&self.editors)
            .get(path)
            .map(|handles| handles.values().cloned().collect())
            .unwrap_or_default();
        for editor in editors {
            tell(editor.editor.as_ref());
        }
    }

    /// A message for the user about `path` (a driver's notice, a refused request): the
    /// editors show it ([`Editor::notice`]), everyone else gets it as `engine:notice` — the
    /// `rpc.sock` subscribers and the followers in this process, so that `flemmad send` shows
    /// it through the daemon as in its own process. Not an event for the editors: the language
    /// server would show it twice.
    pub(in crate::engine_host) fn notice(&self, path: &Path, message: String) {
        self.tell_editors(path, |editor| editor.notice(&message));
        self.publish_to_subscribers(path, EngineEvent::EngineNotice(EngineNotice { message }));
    }

    pub(in crate::engine_host) fn publish(&self, path: &Path, event: EngineEvent) {
        self.tell_editors(path, |editor| editor.event(&event));
        self.publish_to_subscribers(path, event);
    }

    pub(in crate::engine_host) fn publish_to_subscribers(&self, path: &Path, event: EngineEvent) {
        self.tell_followers_with(path, || Followed::Event(event.clone()));
        let host_event = HostEvent {
            path: path.to_owned(),
            event,
        };
        lock(&self.subscribers).retain(|s| s.send(host_event.clone()).is_ok());
    }
}
