//! The permissions asked agents wait for, in their owner ([`Questions`]): an agent whose entry says
//! `permissions = "ask"` asks for one of its tool calls, and the user decides where they are.
//! Each question gets an id (`<ask_agent call id>.perm-<n>`) and an `agent:permission-required`
//! event of the chat that asked; it is answered like any pending call — `flemma/approve` or
//! `flemma/reject` with that id as `toolId` (the editor's command, `flemmad approve FILE ID`
//! through the daemon, the ACP client's permission dialog, the language server's message
//! request) — and the first answer counts. A question nobody can answer (the run ended, the
//! call was cancelled) is answered `cancelled` and leaves the table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use flemma_acp::client::{PermissionAnswer, PermissionQuestion};
use flemma_protocol::event::{CallNews, PermissionAsked, PermissionDecision, PermissionResolved};
use flemma_tools::ToolReporter;
type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;
use tokio::sync::oneshot;

/// A question waiting for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub chat: PathBuf,
    pub id: String,
    /// The `ask_agent` call that asked the agent.
    pub tool_id: String,
    pub agent: String,
    pub title: String,
    pub input: Option<serde_json::Value>,
}

struct Waiting {
    pending: Pending,
    answer: oneshot::Sender<PermissionAnswer>,
    reporter: Arc<dyn ToolReporter>,
}

#[derive(Default)]
struct Table {
    waiting: HashMap<(PathBuf, String), Waiting>,
    /// The number of the next question.
    next: u64,
}

/// The questions of the agents one owner asks (the engine host's, `flemmad send`'s; no
/// process-wide global: it travels with [`crate::agent_setup::AskedAgents`]). Clones share
/// the questions.
#[derive(Clone, Default)]
pub struct Questions(Arc<Mutex<Table>>);

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions")
            .field("waiting", &self.lock().waiting.len())
            .finish()
    }
}

impl Questions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `question` of `agent` (asked by the `ask_agent` call `reporter` tells of, in the
    /// chat at `chat`) to the user: the answer when it comes; `Cancel` when the returned
    /// future is dropped first (the run ended) or nobody can answer.
    pub fn ask(
        &self,
        chat: &Path,
        agent: &str,
        question: PermissionQuestion,
        reporter: Arc<dyn ToolReporter>,
    ) -> BoxFuture<PermissionAnswer> {
        let tool_id = reporter.tool_id().to_owned();
        let (sender, receiver) = oneshot::channel();
        let id = {
            let mut table = self.lock();
            table.next += 1;
            let pending = Pending {
                chat: chat.to_owned(),
                id: format!("{tool_id}.perm-{}", table.next),
                tool_id,
                agent: agent.to_owned(),
                title: question.title.clone(),
                input: question.input.clone(),
            };
            table.waiting.insert(
                (chat.to_owned(), pending.id.clone()),
                Waiting {
                    pending: pending.clone(),
                    answer: sender,
                    reporter: reporter.clone(),
                },
            );
            pending.id
        };
        reporter.event(CallNews::PermissionAsked(PermissionAsked {
            agent: agent.to_owned(),
            permission_id: id.clone(),
            title: question.title,
            kind: question.kind,
            input: question.input,
        }));
        let guard = Forget {
            questions: self.clone(),
            key: (chat.to_owned(), id),
        };
        Box::pin(async move {
            let answer = receiver.await.unwrap_or(PermissionAnswer::Cancel);
            drop(guard);
            answer
        })
    }

    /// Answers the question `id` of the chat at `chat` (`allow`: allowed once, else
    /// rejected); `None` when no such question waits here.
    pub fn answer(&self, chat: &Path, id: &str, allow: bool) -> Option<()> {
        let waiting = self
            .lock()
            .waiting
            .remove(&(chat.to_owned(), id.to_owned()))?;
        let decision = if allow {
            PermissionDecision::Allowed
        } else {
            PermissionDecision::Rejected
        };
        waiting
            .reporter
            .event(CallNews::PermissionResolved(PermissionResolved {
                agent: waiting.pending.agent.clone(),
                permission_id: id.to_owned(),
                decision,
            }));
        let answer = if allow {
            PermissionAnswer::Allow
        } else {
            PermissionAnswer::Reject
        };
        let _ = waiting.answer.send(answer);
        Some(())
    }

    /// The questions waiting in the chat at `chat`.
    pub fn pending(&self, chat: &Path) -> Vec<Pending> {
        let mut out: Vec<Pending> = self
            .lock()
            .waiting
            .values()
            .filter(|waiting| waiting.pending.chat == chat)
            .map(|waiting| waiting.pending.clone())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}

/// Removes a question whose run stopped waiting for it.
struct Forget {
    questions: Questions,
    key: (PathBuf, String),
}

impl Drop for Forget {
    fn drop(&mut self) {
        let gone = self.questions.lock().waiting.remove(&self.key);
        if let Some(gone) = gone {
            gone.reporter
                .event(CallNews::PermissionResolved(PermissionResolved {
                    agent: gone.pending.agent,
                    permission_id: gone.pending.id,
                    decision: PermissionDecision::Cancelled,
                }));
        }
    }
}

/// Whether `id` names a question of an asked agent (`<call id>.perm-<n>`), whether or not it
/// still waits.
pub fn is_permission_id(id: &str) -> bool {
    id.rsplit_once(".perm-")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_protocol::event::EngineEvent;

    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<(&'static str, serde_json::Value)>>);

    impl ToolReporter for Recorder {
        fn tool_id(&self) -> &str {
            "toolu_9"
        }
        fn event(&self, news: CallNews) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(news.of_call("toolu_9", "ask_agent").to_parts());
        }
    }

    fn question() -> PermissionQuestion {
        PermissionQuestion {
            tool_call_id: "c1".into(),
            title: "Run ls".into(),
            kind: Some("execute".into()),
            input: None,
        }
    }

    #[tokio::test]
    async fn a_question_is_answered_once_and_leaves_the_table() {
        let chat = Path::new("/tmp/permissions-test/a.chat");
        let recorder = Arc::new(Recorder::default());
        let questions = Questions::default();
        let waiting = questions.ask(chat, "reviewer", question(), recorder.clone());
        let listed = questions.pending(chat);
        assert_eq!(listed.len(), 1);
        let id = listed[0].id.clone();
        assert!(is_permission_id(&id), "{id}");
        assert!(!is_permission_id("toolu_9"));
        assert_eq!(questions.answer(chat, &id, true), Some(()));
        assert_eq!(
            questions.answer(chat, &id, false),
            None,
            "the first answer counts"
        );
        assert_eq!(waiting.await, PermissionAnswer::Allow);
        assert!(questions.pending(chat).is_empty());
        assert!(
            Questions::default().pending(chat).is_empty(),
            "another owner's questions are its own"
        );
        let told: Vec<Option<EngineEvent>> = recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, data)| EngineEvent::from_parts(name, data.clone()))
            .collect();
        assert!(
            matches!(
                told.as_slice(),
                [
                    Some(EngineEvent::AgentPermissionRequired(_)),
                    Some(EngineEvent::AgentPermissionResolved(_))
                ]
            ),
            "{told:?}"
        );
    }

    #[tokio::test]
    async fn a_run_that_stops_waiting_cancels_its_question() {
        let chat = Path::new("/tmp/permissions-test/b.chat");
        let recorder = Arc::new(Recorder::default());
        let questions = Questions::default();
        let waiting = questions.ask(chat, "reviewer", question(), recorder.clone());
        drop(waiting);
        assert!(questions.pending(chat).is_empty());
        let last = recorder
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .cloned();
        assert_eq!(
            last.map(|(_, data)| data["decision"].clone()),
            Some(serde_json::json!("cancelled"))
        );
    }
}
