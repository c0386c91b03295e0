//! What a running driver is told and tells: its [`DriverHandle`] (from any thread) and the
//! [`DriverState`] it reports.

use flemma_engine::session::Input;
use flemma_engine::{Engine, Input as EngineInput};
use tokio::sync::mpsc;

use crate::chat_store::ChatStore;
use crate::engine_driver::Message;

/// What a driver's engine is doing, for `flemma/status`, `jobs` and `usage`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriverState {
    /// A request streams.
    pub streaming: bool,
    /// Foreground tools running (tool use ids).
    pub running_tools: Vec<String>,
    /// Their tool names, in the same order (for progress messages).
    pub running_tool_names: Vec<String>,
    /// Tool calls waiting for approval (tool use ids).
    pub pending: Vec<String>,
    /// Background jobs the engine knows.
    pub jobs: Vec<flemma_protocol::engine::EngineJob>,
    pub usage: flemma_conversation::Usage,
    pub cost: Option<f64>,
    pub cache_saved: Option<f64>,
    pub rate_limits: Option<flemma_conversation::RateLimits>,
    /// The context meter of the last request sent.
    pub context: Option<flemma_protocol::status::ContextStatus>,
}

impl DriverState {
    pub(super) fn of(engine: &Engine, streaming: bool) -> Self {
        let owned = |names: Vec<&str>| names.into_iter().map(str::to_owned).collect();
        Self {
            streaming,
            running_tools: owned(engine.running_tools()),
            running_tool_names: owned(engine.running_tool_names()),
            pending: engine
                .document()
                .placeholders(Some(flemma_syntax::Status::Pending))
                .into_iter()
                .map(|(_, _, result)| result.tool_use_id.clone())
                .collect(),
            jobs: engine
                .jobs()
                .map(|job| flemma_protocol::engine::EngineJob {
                    job_id: job.job_id.clone(),
                    tool_id: job.tool_id.clone(),
                    tool_name: job.tool_name.clone(),
                    state: job.state,
                })
                .collect(),
            usage: engine.usage(),
            cost: engine.cost(),
            cache_saved: engine.cache_saved(),
            rate_limits: engine.rate_limits().cloned(),
            context: None,
        }
    }
}

/// Feeds a running driver from anywhere (any thread): commands, and the store to write to.
#[derive(Clone)]
pub struct DriverHandle {
    pub(super) sender: mpsc::UnboundedSender<Message>,
}

impl std::fmt::Debug for DriverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriverHandle")
    }
}

impl DriverHandle {
    /// Feeds `input` to the engine; `false` when the driver has ended.
    pub fn input(&self, input: EngineInput) -> bool {
        self.sender
            .send(Message::Session(Input::Engine(input)))
            .is_ok()
    }

    /// The process is shutting down: cancel the request and the foreground tools (what ran is
    /// marked aborted), write, and end. Background jobs are left as the file says: the next
    /// start's orphan recovery marks them lost.
    pub fn leave(&self) -> bool {
        self.sender.send(Message::Session(Input::Leave)).is_ok()
    }

    /// Rewrites the input of the pending call `tool_id` as `input` (`flemma/reviseProposal`).
    pub fn revise(&self, tool_id: String, input: serde_json::Value) -> bool {
        self.sender.send(Message::Revise(tool_id, input)).is_ok()
    }

    /// Writes through `store` from now on (an editor opened or closed the document).
    pub fn set_store(&self, store: Box<dyn ChatStore>) -> bool {
        self.sender.send(Message::Writer(store)).is_ok()
    }
}
