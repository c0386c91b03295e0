//! `flemma/approve`, `flemma/reject`, `flemma/approveAll` and `flemma/approveHunks`: the
//! decision is the host's state's; this runs it.

use std::path::Path;

use flemma_engine::Input;
use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

use crate::engine_host::state::{Checked, Command, Decided};
use crate::engine_host::{CallOptions, DocumentRef, EngineHost};

/// How many times the file is read for a decision while drivers start and stop for it.
const FILE_READS: usize = 8;

impl EngineHost {
    /// Decides `tool_id` (or, with `None`, every pending call) as `how`, as the host's state
    /// says ([`HostState::decide`]), and hands `input` to the document's driver (or starts one),
    /// both in one job of the state's thread, so that decisions reach the drivers in the order
    /// they were taken. Each call is checked on what knows it best — a running driver's pending
    /// calls, else the caller's buffer, else the file. The file is read here, off the state's
    /// thread, and counts only if no driver ran meanwhile (else it is read again).
    pub(in crate::engine_host) fn decide(
        &self,
        document: DocumentRef<'_>,
        tool_id: Option<&str>,
        how: Decided,
        input: Input,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        let path = document.path.to_owned();
        let tool_id = tool_id.map(str::to_owned);
        if let Some(buffer) = document.buffer {
            let checked = Checked::text(buffer, tool_id.as_deref());
            return self.shared.state.ask(move |owned| {
                let accepted = owned
                    .state
                    .decide(&path, tool_id.as_deref(), how, checked)?;
                owned.command(Command::fed(path, input, options))?;
                Ok(accepted)
            });
        }
        for _ in 0..FILE_READS {
            let on_file = {
                let path = path.clone();
                self.shared
                    .state
                    .ask(move |owned| owned.state.decided_on_file(&path))
            };
            let checked = match on_file {
                Some(_) => {
                    let read = crate::fsutil::read_chat(&self.context().dirs, &path)
                        .map_err(|error| RequestError::invalid_params(format!("{error:#}")))?;
                    Checked::text(&flemma_syntax::Document::parse(read), tool_id.as_deref())
                }
                None => Checked::Unknown,
            };
            let (path, tool_id, input) = (path.clone(), tool_id.clone(), input.clone());
            let decided = self.shared.state.ask(move |owned| {
                if owned.state.decided_on_file(&path) != on_file {
                    return None;
                }
                let decided = owned
                    .state
                    .decide(&path, tool_id.as_deref(), how, checked)
                    .and_then(|accepted| {
                        owned.command(Command::fed(path, input, options))?;
                        Ok(accepted)
                    });
                Some(decided)
            });
            if let Some(decided) = decided {
                return decided;
            }
        }
        Err(RequestError::refused(format!(
            "{} kept changing (drivers started and stopped) while the decision was checked: nothing was decided; decide again",
            path.display()
        )))
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
