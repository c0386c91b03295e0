//! `flemma/send`, `flemma/cancel`, `flemma/background` and `flemma/execute`: inputs for the
//! document's driver.

use std::path::Path;

use flemma_engine::{CancelScope, Input};
use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;

use crate::engine_host::state::Command;
use crate::engine_host::{CallOptions, EngineHost};

impl EngineHost {
    /// `flemma/send`: advance the cycle (stream a reply, run approved tools) with autopilot (one
    /// step with `options.no_autopilot`, when it starts the driver).
    pub(in crate::engine_host) fn send(
        &self,
        path: &Path,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        self.feed_accepted(path, Input::Advance, true, options)
    }

    /// `flemma/cancel`: the request, the foreground tools and the resume timer (background
    /// jobs keep running); what ran is marked aborted as the format says.
    pub(in crate::engine_host) fn cancel(&self, path: &Path) -> Result<Accepted, RequestError> {
        self.running_only(
            path,
            Input::Cancel {
                scope: CancelScope::All,
            },
            "request",
            "cancel",
        )
    }

    /// `flemma/background`: a running foreground tool becomes a background job.
    pub(in crate::engine_host) fn background(
        &self,
        path: &Path,
        tool_id: &str,
    ) -> Result<Accepted, RequestError> {
        self.running_only(
            path,
            Input::Background {
                tool_id: tool_id.to_owned(),
            },
            "running tool",
            "move to the background",
        )
    }

    /// `flemma/execute`: run or resolve one tool call now (a driver it starts runs as
    /// `options` say).
    pub(in crate::engine_host) fn execute(
        &self,
        path: &Path,
        tool_id: &str,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        let input = Input::Execute {
            tool_id: tool_id.to_owned(),
        };
        self.feed_accepted(path, input, false, options)
    }

    /// Hands `input` to the document's driver, or starts one for it (which runs as `options`
    /// say; `send`: `Advance` refuses to start one when there is nothing to send), and says
    /// whether it started one: both in one job of the state's thread, so that the answer is
    /// true of this command.
    fn feed_accepted(
        &self,
        path: &Path,
        input: Input,
        send: bool,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        let path = path.to_owned();
        self.shared.state.ask(move |owned| {
            let accepted = owned.state.accepted(&path);
            owned.command(Command::Input {
                path,
                input,
                send,
                options,
            })?;
            Ok(accepted)
        })
    }

    fn running_only(
        &self,
        path: &Path,
        input: Input,
        what: &str,
        action: &str,
    ) -> Result<Accepted, RequestError> {
        let (path, what, action) = (path.to_owned(), what.to_owned(), action.to_owned());
        self.shared.state.ask(move |owned| {
            let accepted = owned.state.running_only(&path, &what, &action)?;
            owned.command(Command::IfRunning { path, input })?;
            Ok(accepted)
        })
    }
}
