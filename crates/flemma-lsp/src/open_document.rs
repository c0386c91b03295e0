//! An open document as the session keeps it: the client's side of a document the analysis
//! host holds, the engine's activity on it, and the engine's edit in flight. Its own file so
//! that what renders it (`to_proto`) need not name the session.

use std::time::Instant;

use flemma_ide::DocumentId;
use flemma_protocol::activity::Activity;
use flemma_syntax::LineIndex;

/// One open document: the client's side of a document the [`AnalysisHost`] holds (the text
/// and syntax tree live there, under [`Self::id`]).
#[derive(Debug)]
pub(crate) struct OpenDocument {
    pub uri: lsp_types::Uri,
    pub id: DocumentId,
    pub version: i32,
    /// The line index of the host's current text.
    pub index: LineIndex,
    /// When the diagnostics of the latest change are due.
    pub diagnostics_at: Option<Instant>,
    /// What the engine does for the document, as its events tell it (and its `$/progress`).
    pub engine: EngineActivity,
    /// The engine's edit in flight (`Task::ReplaceBuffer`).
    pub buffer_edit: Option<BufferEdit>,
    /// The diagnostics the client was last sent for this document (`None` before the first
    /// publish, which goes out even when empty: the document was analysed). A list equal to
    /// it, ranges included, is not sent again: Neovim reads every line of the buffer for each
    /// publish (tens of milliseconds on a 10 MB chat, while keys wait).
    pub published: Option<Vec<lsp_types::Diagnostic>>,
}

/// An engine edit sent to the client: answered once its fate shows in the text (the client's
/// word alone is not enough: Neovim answers `applied: true` for an edit it dropped).
#[derive(Debug)]
pub(crate) struct BufferEdit {
    /// Whether it landed, told by the changes the client reports (`flemma_syntax::RemoteEdit`).
    pub check: flemma_syntax::RemoteEdit,
    /// When the wait for the changes after `applied: true` runs out ([`ECHO_WAIT`]).
    pub echo_deadline: Option<Instant>,
    pub reply: Option<crate::backend::Reply<crate::backend::BufferAnswer>>,
}

/// What the engine does for an open document, as its events tell it.
#[derive(Debug, Default)]
pub(crate) struct EngineActivity {
    /// What the engine does.
    pub activity: Activity,
    /// The work-done progress shown for it.
    pub progress: Option<lsp_types::ProgressToken>,
    /// The last message reported (a report is sent only when it changes).
    pub shown: String,
}

impl EngineActivity {
    /// A reply streams or tools run (diagnostics wait longer, `Cancel the request` is offered).
    pub fn busy(&self) -> bool {
        self.activity.busy()
    }

    pub(crate) fn message(&self) -> String {
        let activity = &self.activity;
        if activity.requesting && activity.composing {
            "Composing a tool call".to_owned()
        } else if activity.requesting {
            "streaming the reply".to_owned()
        } else if let Some(agent) = &activity.agent {
            agent.clone()
        } else {
            let names: Vec<&str> = activity.tool_names().collect();
            format!("running {}", names.join(", "))
        }
    }
}
