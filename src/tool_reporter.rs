//! A running tool call's [`ToolReporter`]: what the call tells while it works (an asked
//! agent's progress, a permission it asks for) becomes a lifecycle event of its chat, with the
//! call's id and tool name, handed to the driver that runs the call.

use flemma_engine::EngineEvent;
use flemma_protocol::event::CallNews;
use flemma_tools::ToolReporter;

/// The reporter of one call: events go to `emit` (the driver's channel).
pub struct CallReporter {
    tool_id: String,
    tool_name: String,
    emit: Box<dyn Fn(EngineEvent) + Send + Sync>,
}

impl std::fmt::Debug for CallReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallReporter")
            .field("tool_id", &self.tool_id)
            .field("tool_name", &self.tool_name)
            .finish_non_exhaustive()
    }
}

impl CallReporter {
    pub fn new(
        tool_id: &str,
        tool_name: &str,
        emit: impl Fn(EngineEvent) + Send + Sync + 'static,
    ) -> Self {
        Self {
            tool_id: tool_id.to_owned(),
            tool_name: tool_name.to_owned(),
            emit: Box::new(emit),
        }
    }
}

impl ToolReporter for CallReporter {
    fn tool_id(&self) -> &str {
        &self.tool_id
    }

    fn event(&self, news: CallNews) {
        (self.emit)(news.of_call(&self.tool_id, &self.tool_name));
    }
}
