//! The requests of [`super::EngineHost::call`]: [`EngineHost::answer`] dispatches each to its
//! function, one file per group (as the language server has one file per handler): each checks
//! what it can, then asks the host's state and hands it the command in one job of the state's
//! thread.

mod by_hand;
mod checks;
mod decide;
mod proposal;
mod run;
mod switch;

pub(super) use by_hand::checkpoint_refusal;
pub(super) use decide::agent_permission;

use flemma_engine::Input;
use flemma_protocol::engine::JobsResult;
use flemma_protocol::error::RequestError;
use flemma_protocol::methods::{FlemmaRequest, FlemmaResponse};

use crate::engine_host::state::{self, Decided};
use crate::engine_host::{CallOptions, DocumentRef, EngineHost};

impl EngineHost {
    /// Answers `request` on this thread.
    pub(super) fn answer(
        &self,
        document: DocumentRef<'_>,
        request: FlemmaRequest,
        options: CallOptions,
    ) -> Result<FlemmaResponse, RequestError> {
        use FlemmaRequest as R;
        let method = request.method();
        let path = document.path;
        let held = self.held(path);
        self.check_exists(method, document, held)?;
        if let Some(answered) =
            agent_permission(&self.shared.services.agents.questions, path, &request)
        {
            return answered;
        }
        if state::may_start_a_driver(&request) {
            self.check_driver(path, held.running)?;
        }
        Ok(match request {
            R::Send(_) => FlemmaResponse::Accepted(self.send(path, options)?),
            R::Cancel(_) => FlemmaResponse::Accepted(self.cancel(path)?),
            R::Approve(p) => {
                let input = Input::Approve {
                    tool_id: p.tool_id.clone(),
                };
                FlemmaResponse::Accepted(self.decide(
                    document,
                    Some(&p.tool_id),
                    Decided::Approved,
                    input,
                    options,
                )?)
            }
            R::Reject(p) => {
                let input = Input::Reject {
                    tool_id: p.tool_id.clone(),
                    reason: p.reason.filter(|reason| !reason.trim().is_empty()),
                };
                FlemmaResponse::Accepted(self.decide(
                    document,
                    Some(&p.tool_id),
                    Decided::Rejected,
                    input,
                    options,
                )?)
            }
            R::ApproveAll(_) => FlemmaResponse::Accepted(self.decide(
                document,
                None,
                Decided::Approved,
                Input::ApproveAll,
                options,
            )?),
            R::Background(p) => FlemmaResponse::Accepted(self.background(path, &p.tool_id)?),
            R::Execute(p) => FlemmaResponse::Accepted(self.execute(path, &p.tool_id, options)?),
            R::Status(_) => {
                // The questions asked agents wait for are answered as pending calls are.
                let questions = self
                    .shared
                    .services
                    .agents
                    .questions
                    .pending(path)
                    .into_iter()
                    .map(|question| question.id)
                    .collect();
                let path = path.to_owned();
                FlemmaResponse::Status(
                    self.shared
                        .state
                        .ask(move |owned| owned.state.status(&path, questions)),
                )
            }
            R::Jobs(_) => {
                let path = path.to_owned();
                FlemmaResponse::Jobs(JobsResult {
                    jobs: self.shared.state.ask(move |owned| owned.state.jobs(&path)),
                })
            }
            R::Usage(_) => {
                let path = path.to_owned();
                FlemmaResponse::Usage(self.shared.state.ask(move |owned| owned.state.usage(&path)))
            }
            R::Switch(p) => FlemmaResponse::Switch(self.switch(path, &p.model)?),
            R::Mode(p) => FlemmaResponse::Mode(self.set_mode(path, &p.mode)?),
            R::Compact(p) => FlemmaResponse::Accepted(self.compact(path, p)?),
            R::Proposal(p) => FlemmaResponse::Proposal(crate::proposals::result(
                &self.pending(document, &p.tool_id)?,
            )),
            R::ReviseProposal(p) => FlemmaResponse::Accepted(self.revise(document, p)?),
            R::ApproveHunks(p) => {
                FlemmaResponse::Accepted(self.approve_hunks(document, p, options)?)
            }
            R::CompactUndo(p) => FlemmaResponse::Accepted(self.compact_undo(document, &p)?),
            R::Changes(p) => FlemmaResponse::Changes(
                crate::checkpoints::changes_result(self.context(), path, p.tool_id.as_deref())
                    .map_err(checkpoint_refusal)?,
            ),
            R::Rewind(p) => FlemmaResponse::Rewind(self.rewind(document, &p)?),
        })
    }
}
