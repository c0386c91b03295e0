//! `flemma/send`, `flemma/cancel`, `flemma/background` and `flemma/execute`: inputs for the
//! document's driver.

use std::path::Path;

use flemma_engine::{CancelScope, Input};
use flemma_protocol::engine::Accepted;
use flemma_protocol::error::RequestError;

use crate::engine_host::state::Command;
use crate::engine_host::{CallOptions, EngineHost, lock};

impl EngineHost {
    /// `flemma/send`: advance the cycle (stream a reply, run approved tools) with autopilot (one
    /// step with `options.no_autopilot`, when it starts the driver).
    pub(in crate::engine_host) fn send(
        &self,
        path: &Path,
        options: CallOptions,
    ) -> Result<Accepted, RequestError> {
        let accepted = self.accepted(path);
        self.command(Command::Input {
            path: path.to_owned(),
            input: Input::Advance,
            send: true,
            options,
        })?;
        Ok(accepted)
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
        // What is answered and the command it sends are taken under the state's lock, so that
        // the answer says whether this command starts the driver.
        let state = lock(&self.shared.state);
        let accepted = state.accepted(path);
        self.feed(path, input, options)?;
        drop(state);
        Ok(accepted)
    }

    /// Hands `input` to the document's driver, or starts one for it (which runs as `options`
    /// say, and does not send by itself). Called with the state's lock held, so that the
    /// answer decided under it and the command reach the host's thread in order.
    pub(in crate::engine_host) fn feed(
        &self,
        path: &Path,
        input: Input,
        options: CallOptions,
    ) -> Result<(), RequestError> {
        self.command(Command::Input {
            path: path.to_owned(),
            input,
            send: false,
            options,
        })
    }

    fn running_only(
        &self,
        path: &Path,
        input: Input,
        what: &str,
        action: &str,
    ) -> Result<Accepted, RequestError> {
        lock(&self.shared.state).running_only(path, what, action)?;
        self.command(Command::IfRunning {
            path: path.to_owned(),
            input,
        })?;
        Ok(Accepted::default())
    }
}
