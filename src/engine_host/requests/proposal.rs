//! `flemma/proposal` and `flemma/reviseProposal`: a pending `write` or `edit` call's change.

use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;

use crate::engine_host::state::Command;
use crate::engine_host::{DocumentRef, EngineHost};

impl EngineHost {
    /// The pending `write` or `edit` call `tool_id` of `document` (as the caller's buffer, else
    /// the writer's text, says) and its change against the file now.
    pub(in crate::engine_host) fn pending(
        &self,
        document: DocumentRef<'_>,
        tool_id: &str,
    ) -> Result<crate::proposals::Pending, RequestError> {
        let text = match document.buffer {
            Some(buffer) => buffer.text().to_owned(),
            None => self
                .shared
                .text_of(document.path)
                .map_err(RequestError::invalid_params)?,
        };
        crate::proposals::pending(document.path, text, tool_id, self.context())
            .map_err(RequestError::refused)
    }

    /// `flemma/reviseProposal`: the call's input rewritten in the chat so that it leaves its
    /// file as `content`, through the document's writer (a driver of its own, or the running
    /// one), so that what an editor types meanwhile is merged, not lost.
    pub(in crate::engine_host) fn revise(
        &self,
        document: DocumentRef<'_>,
        params: flemma_protocol::methods::ReviseParams,
    ) -> Result<Accepted, RequestError> {
        let pending = self.pending(document, &params.tool_id)?;
        let input = crate::proposals::revised_input(&pending, &params.content)
            .map_err(RequestError::refused)?;
        let path = document.path.to_owned();
        self.shared.state.ask(move |owned| {
            let accepted = Accepted {
                started: !owned.state.is_running(&path),
                tool_ids: vec![params.tool_id.clone()],
            };
            owned.command(Command::Revise {
                path,
                tool_id: params.tool_id,
                input,
            })?;
            Ok(accepted)
        })
    }
}
