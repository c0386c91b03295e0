//! What `flemmad send` says when an agent `ask_agent` asked wants permission for one of its
//! tool calls (its entry says `permissions = "ask"`): the send stops with exit 3, listing the
//! question and the commands that answer it. Through the daemon the question waits there for
//! `flemmad approve FILE ID` (or `reject`), which answers it and follows the chat as `send`
//! does. In this process nothing can wait once the send exits: the run is cancelled (the call
//! is marked aborted) and the listing says how to let such questions wait.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use super::progress::shell_quote;
use crate::agent_permissions::Pending;

/// The questions an in-process send met (it stops at the first).
#[derive(Debug, Clone, Default)]
pub struct Asked(Arc<Mutex<Vec<Pending>>>);

impl Asked {
    /// Stops this process's send at the first question: it is kept for the listing, and
    /// `interrupt` stops the cycle.
    pub fn stop_at_first(
        questions: &crate::agent_permissions::Questions,
        interrupt: CancellationToken,
    ) -> Self {
        let asked = Self::default();
        let kept = asked.0.clone();
        questions.set_unattended(Box::new(move |pending| {
            kept.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(pending.clone());
            interrupt.cancel();
        }));
        asked
    }

    /// The listing of the questions met, `None` when there were none.
    pub fn listing(&self, path: &Path, summary: &str) -> Option<String> {
        let asked = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (!asked.is_empty()).then(|| listing(path, &asked, summary, false))
    }
}

/// A question from an `agent:permission-required` event's data.
pub fn pending_of(
    chat: &Path,
    question: &flemma_protocol::event::OfCall<flemma_protocol::event::PermissionAsked>,
) -> Pending {
    Pending {
        chat: chat.to_owned(),
        id: question.data.permission_id.clone(),
        tool_id: question.tool_id.clone(),
        agent: question.data.agent.clone(),
        title: question.data.title.clone(),
        input: question.data.input.clone().filter(|v| !v.is_null()),
    }
}

/// The stderr listing of asked agents' questions with the commands that answer them
/// (`waits`: a daemon keeps the question waiting; else it could not wait).
pub fn listing(path: &Path, asked: &[Pending], summary: &str, waits: bool) -> String {
    let file = shell_quote(&path.display().to_string());
    let mut out = format!(
        "flemmad send: waiting for approval ({summary}); {} asked agent{} want{} permission:\n",
        asked.len(),
        if asked.len() == 1 { "" } else { "s" },
        if asked.len() == 1 { "s" } else { "" },
    );
    for question in asked {
        out.push_str(&format!(
            "  {} (asked by `ask_agent`, {}) wants to: {}\n",
            question.agent, question.tool_id, question.title
        ));
        if waits {
            let id = shell_quote(&question.id);
            out.push_str(&format!(
                "    approve: flemmad approve {file} {id}\n    reject:  flemmad reject {file} {id}\n"
            ));
        }
    }
    if waits {
        out.push_str(
            "the agent waits in the daemon; `flemmad approve` or `reject` answers it and follows the chat until it stops\n",
        );
    } else {
        out.push_str(&format!(
            "without a daemon nothing can wait for your answer once `flemmad send` exits: the call was stopped and marked `aborted`. Start the daemon (`flemmad serve`) and run `flemmad send {file}` again — it then stops here with the `flemmad approve {file} <id>` that answers the agent — or answer in an editor, or set `permissions = \"run\"` (or `\"refuse\"`) for the agent in your configuration\n"
        ));
    }
    out
}
