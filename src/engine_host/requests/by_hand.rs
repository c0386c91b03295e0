//! `flemma/compact`, `flemma/compactUndo` and `flemma/rewind`: what is known before is
//! checked here, the rest is done through a driver of its own.

use std::path::Path;

use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;

use crate::engine_host::state::Command;
use crate::engine_host::{DocumentRef, EngineHost};

impl EngineHost {
    /// `flemma/compact`: compacted through a driver of its own, so that the new text is written
    /// by the document's writer like every other write (an editor typing meanwhile loses
    /// nothing); refused while a driver works on the chat (automatic compaction runs there).
    pub(in crate::engine_host) fn compact(
        &self,
        path: &Path,
        params: flemma_protocol::methods::CompactParams,
    ) -> Result<Accepted, RequestError> {
        self.by_hand(
            path,
            crate::compaction::ByHand::Compact(crate::compaction::Order {
                line: params.line.map(|line| line as usize),
                focus: params.focus.filter(|focus| !focus.trim().is_empty()),
                keep: params.keep.map(|keep| (keep as usize).max(1)),
            }),
        )
    }

    /// `flemma/compactUndo`: the turns a compaction replaced put back exactly, through a driver
    /// of its own as `flemma/compact` is. What can be known before is refused at once (no
    /// summary there, an archive that is not this chat's or changed since it was written) on
    /// the caller's buffer, else the file when no editor has it open; the driver checks again
    /// on the text it writes.
    pub(in crate::engine_host) fn compact_undo(
        &self,
        document: DocumentRef<'_>,
        params: &flemma_protocol::methods::CompactUndoParams,
    ) -> Result<Accepted, RequestError> {
        let path = document.path;
        let line = params.line.map(|line| line as usize);
        let text = match document.buffer {
            Some(buffer) => Some(buffer.text().to_owned()),
            // Another editor's buffer is not known here: the driver's text says.
            None if self.held(path).editor => None,
            None => Some(
                crate::fsutil::read_chat(&self.context().dirs, path)
                    .map_err(|error| RequestError::invalid_params(format!("{error:#}")))?,
            ),
        };
        if let Some(text) = text {
            crate::compaction::plan_undo(&self.context().dirs, path, &text, line)
                .map_err(|refused| RequestError::refused(refused.to_string()))?;
        }
        self.by_hand(path, crate::compaction::ByHand::Undo { line })
    }

    /// `flemma/rewind`: the files put back here (refused while a driver works on the chat),
    /// then the chat cut through a driver of its own as a compaction is, so that an editor
    /// with the chat open gets the cut as an edit. The cut is checked on the caller's buffer
    /// (else the writer's text) first, so that `chat` with `files` changes nothing when the
    /// call is not in the chat.
    pub(in crate::engine_host) fn rewind(
        &self,
        document: DocumentRef<'_>,
        params: &flemma_protocol::methods::RewindParams,
    ) -> Result<flemma_protocol::engine::RewindResult, RequestError> {
        let path = document.path;
        let tool_id = &params.tool_id;
        let dry_run = params.dry_run == Some(true);
        {
            let path = path.to_owned();
            self.shared
                .state
                .ask(move |owned| owned.state.rewind(&path))?;
        }
        // Refused above while a driver of this host runs.
        self.check_driver(path, false)?;
        let cut = if params.cuts_chat() {
            let text = match document.buffer {
                Some(buffer) => buffer.text().to_owned(),
                None => self
                    .shared
                    .text_of(path)
                    .map_err(RequestError::invalid_params)?,
            };
            let cut =
                crate::rewind_chat::cut_point(&text, tool_id).map_err(RequestError::refused)?;
            Some(flemma_protocol::engine::ChatCut {
                line: cut.line as u64,
                messages: cut.messages as u64,
            })
        } else {
            None
        };
        let mut result = flemma_protocol::engine::RewindResult {
            dry_run,
            restored: Vec::new(),
            removed: Vec::new(),
            changed_since: Vec::new(),
            refused: false,
            chat: None,
            message: String::new(),
        };
        if params.rewinds_files() {
            let plan = crate::checkpoints::of_chat(self.context(), path)
                .and_then(|checkpoints| {
                    checkpoints.rewind(tool_id, params.force == Some(true), dry_run)
                })
                .map_err(checkpoint_refusal)?;
            result.refused = params.force != Some(true) && !plan.changed_since.is_empty();
            result.restored = plan.restored;
            result.removed = plan.removed;
            result.changed_since = plan.changed_since;
        }
        result.message = crate::rewind_chat::summary(tool_id, &result, cut.as_ref());
        if result.refused {
            return Ok(result);
        }
        result.chat = cut;
        if result.chat.is_some() && !dry_run {
            self.by_hand(
                path,
                crate::compaction::ByHand::Rewind {
                    tool_id: tool_id.clone(),
                },
            )?;
        }
        Ok(result)
    }

    fn by_hand(
        &self,
        path: &Path,
        order: crate::compaction::ByHand,
    ) -> Result<Accepted, RequestError> {
        let path = path.to_owned();
        self.shared.state.ask(move |owned| {
            let accepted = owned.state.by_hand(&path, &order)?;
            owned.command(Command::Compact { path, order })?;
            Ok(accepted)
        })
    }
}

/// A checkpoint's failure as the answer of `flemma/changes` or `flemma/rewind`: a call with no
/// checkpoint is the caller's mistake, the rest flemmad's.
pub(in crate::engine_host) fn checkpoint_refusal(
    error: crate::checkpoints::CheckpointError,
) -> RequestError {
    match error {
        crate::checkpoints::CheckpointError::UnknownCall(_) => {
            RequestError::invalid_params(error.to_string())
        }
        other => RequestError::refused(other.to_string()),
    }
}
