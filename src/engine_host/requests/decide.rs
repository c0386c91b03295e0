//! `flemma/approve`, `flemma/reject`, `flemma/approveAll` and `flemma/approveHunks`: the
//! decision is the host's state's; this runs it.

use std::path::Path;

use flemma_engine::Input;
use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

use crate::engine_host::state::{Checked, Decided};
use crate::engine_host::{CallOptions, DocumentRef, EngineHost, lock};

impl EngineHost {
    /// Decides `tool_id` (or, with `None`, every pending call) as `how`, as the host's state
    /// says ([`HostState::decide`]). Under the state's lock each call is checked on what knows
    /// it best — a running driver's pending calls, else the caller's buffer, else the file
    /// (read under the lock, so a driver that ended has written it) — and the decision goes to
    /// the host's thread before the lock is released, so decisions reach the drivers in the
    /// order they were taken.
    pub(in crate::engine_host) fn decide(
        &self,
        document: DocumentRef<'_>,
        tool_id: Option<&str>,
        how: Decided,
        input: Input,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        let path = document.path;
        let another_editor = document.buffer.is_none() && self.has_editor(path);
        let mut state = lock(&self.shared.state);
        let parsed;
        let checked = match document.buffer {
            Some(buffer) => Checked::Text(buffer),
            None if state.decided_on_file(path, another_editor) => {
                let read = crate::fsutil::read_chat(&self.context().dirs, path)
                    .map_err(|error| RequestError::invalid_params(format!("{error:#}")))?;
                parsed = flemma_syntax::Document::parse(read);
                Checked::Text(&parsed)
            }
            None => Checked::Unknown,
        };
        let accepted = state.decide(path, tool_id, how, checked)?;
        self.feed(path, input, options)?;
        drop(state);
        Ok(accepted)
    }

    /// `flemma/approveHunks`: the call is recorded as approved in part (it will run the
    /// narrowed input, its result naming the hunks rejected and why), then approved as
    /// `flemma/approve` does; a refused approval forgets the record.
    pub(in crate::engine_host) fn approve_hunks(
        &self,
        document: DocumentRef<'_>,
        params: flemma_protocol::methods::ApproveHunksParams,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        let pending = self.pending(document, &params.tool_id)?;
        crate::proposals::record_in_part(
            &self.context().dirs,
            document.path,
            &params.tool_id,
            &pending,
            &params.hunks,
            params.reason.as_deref(),
        )
        .map_err(RequestError::refused)?;
        let input = Input::Approve {
            tool_id: params.tool_id.clone(),
        };
        self.decide(
            document,
            Some(&params.tool_id),
            Decided::Approved,
            input,
            options,
        )
        .inspect_err(|_| {
            crate::reviewed::forget_partial(&self.context().dirs, document.path, &params.tool_id)
        })
    }
}

/// `approve` or `reject` of a permission an asked agent waits for (its id is no tool call's:
/// [`crate::agent_permissions`]); `None` for every other request.
pub(in crate::engine_host) fn agent_permission(
    questions: &crate::agent_permissions::Questions,
    path: &Path,
    request: &FlemmaRequest,
) -> Option<Result<FlemmaResponse, RequestError>> {
    let (id, allow) = match request {
        FlemmaRequest::Approve(p) => (&p.tool_id, true),
        FlemmaRequest::Reject(p) => (&p.tool_id, false),
        _ => return None,
    };
    if !crate::agent_permissions::is_permission_id(id) {
        return None;
    }
    Some(match questions.answer(path, id, allow) {
        Some(()) => Ok(FlemmaResponse::Accepted(Accepted {
            started: false,
            tool_ids: vec![id.clone()],
        })),
        None => Err(RequestError::refused(format!(
            "`{id}` is not waiting for an answer: it was answered already, or the asked agent's run it belonged to ended"
        ))),
    })
}
