//! What an asked agent does, told to the ACP client of the chat that asked (`ask_agent`): its
//! text, thoughts and tool calls as updates of the `ask_agent` tool call (its content is the
//! agent's work so far, tool calls titled `<agent> · <title>`), and the permissions it asks
//! for as `session/request_permission` about that call, answered through the backend
//! (`approve`/`reject` with the permission's id).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, SessionUpdate, TextContent, ToolCallContent, ToolCallUpdate,
    ToolCallUpdateFields,
};
use agent_client_protocol::{Client, Error};

/// An asked agent's progress, as the backend tells it (`tool:progress`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The `ask_agent` call's id.
    pub tool_id: String,
    pub agent: String,
    /// `text`, `thought`, `tool_call`, `tool_call_update` or `plan`.
    pub kind: String,
    pub text: Option<String>,
    pub title: Option<String>,
    pub status: Option<String>,
    /// The agent's own id of its tool call.
    pub child_tool_id: Option<String>,
}

/// A permission an asked agent asks for (`agent:permission-required`).
#[derive(Debug, Clone, PartialEq)]
pub struct Permission {
    pub tool_id: String,
    pub agent: String,
    /// What approves or rejects it (`flemma/approve` with this as `toolId`).
    pub permission_id: String,
    pub title: String,
    pub input: Option<serde_json::Value>,
}

/// How often the content of an `ask_agent` call is sent again while only text streams.
const TEXT_EVERY: Duration = Duration::from_millis(200);

/// The asked agents' work so far, by `ask_agent` call.
#[derive(Debug, Default)]
pub struct Delegations {
    work: HashMap<String, Work>,
}

#[derive(Debug)]
struct Work {
    /// The agent's text and one line per tool call, in order.
    lines: String,
    /// Its tool calls' titles by their id (an update may change only the status).
    titles: HashMap<String, String>,
    sent: Instant,
}

impl Delegations {
    /// The update of the `ask_agent` call that tells `progress`, when one is due now (text is
    /// sent at most every 200 ms; tool calls at once).
    pub fn update(&mut self, progress: &Progress) -> Option<SessionUpdate> {
        let work = self
            .work
            .entry(progress.tool_id.clone())
            .or_insert_with(|| Work {
                lines: String::new(),
                titles: HashMap::new(),
                sent: Instant::now() - TEXT_EVERY,
            });
        let mut at_once = true;
        match progress.kind.as_str() {
            "text" => {
                work.lines
                    .push_str(progress.text.as_deref().unwrap_or_default());
                at_once = false;
            }
            "tool_call" | "tool_call_update" => {
                let id = progress.child_tool_id.clone().unwrap_or_default();
                if let Some(title) = &progress.title {
                    work.titles.insert(id.clone(), title.clone());
                }
                let title = work.titles.get(&id).cloned().unwrap_or(id);
                let Some(status) = &progress.status else {
                    return None;
                };
                if !work.lines.is_empty() && !work.lines.ends_with('\n') {
                    work.lines.push('\n');
                }
                work.lines
                    .push_str(&format!("{} · {title} — {status}\n", progress.agent));
            }
            _ => return None,
        }
        if !at_once && work.sent.elapsed() < TEXT_EVERY {
            return None;
        }
        work.sent = Instant::now();
        let content = vec![ToolCallContent::from(ContentBlock::Text(TextContent::new(
            work.lines.clone(),
        )))];
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            progress.tool_id.clone(),
            ToolCallUpdateFields::new().content(content),
        )))
    }
}

/// Asks the client about `permission` (on the `ask_agent` call, titled `<agent> · <title>`):
/// `Some(true)` allowed, `Some(false)` rejected, `None` when the client cancelled.
pub async fn ask(
    cx: &ConnectionTo<Client>,
    session: &str,
    permission: &Permission,
) -> Result<Option<bool>, Error> {
    let fields = ToolCallUpdateFields::new()
        .title(format!("{} · {}", permission.agent, permission.title))
        .raw_input(permission.input.clone());
    let request = RequestPermissionRequest::new(
        session.to_owned(),
        ToolCallUpdate::new(permission.tool_id.clone(), fields),
        vec![
            PermissionOption::new("allow_once", "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ],
    );
    let answer = cx.send_request(request).block_task().await?;
    Ok(match answer.outcome {
        RequestPermissionOutcome::Selected(selected) => {
            Some(&*selected.option_id.0 == "allow_once")
        }
        _ => None,
    })
}

/// The chat a `session/new` from another flemmad's `ask_agent` asks for (`_meta.flemma.chat`:
/// where the asking chat keeps its agents' conversations), `None` for an ordinary session. A
/// path that is not such a place is refused.
pub fn asked_by(
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Option<std::path::PathBuf>, String> {
    let Some(chat) = meta
        .and_then(|meta| meta.get("flemma"))
        .and_then(|flemma| flemma.get("chat"))
    else {
        return Ok(None);
    };
    let path = chat
        .as_str()
        .map(std::path::PathBuf::from)
        .filter(|path| crate::ask::is_agent_chat(path))
        .ok_or_else(|| {
            format!(
                "_meta.flemma.chat {chat} is not where an asked agent's chat is kept (an absolute `<folder>/.flemma/<chat>.chat/agents/<name>.chat`)"
            )
        })?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(
        kind: &str,
        text: Option<&str>,
        title: Option<&str>,
        status: Option<&str>,
    ) -> Progress {
        Progress {
            tool_id: "toolu_1".into(),
            agent: "reviewer".into(),
            kind: kind.into(),
            text: text.map(Into::into),
            title: title.map(Into::into),
            status: status.map(Into::into),
            child_tool_id: Some("c1".into()),
        }
    }

    fn content(update: Option<SessionUpdate>) -> String {
        let Some(SessionUpdate::ToolCallUpdate(update)) = update else {
            panic!("an update: {update:?}");
        };
        let value = serde_json::to_value(&update).unwrap_or_default();
        value["content"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn the_agents_work_becomes_the_calls_content() {
        let mut work = Delegations::default();
        assert_eq!(
            content(work.update(&progress("text", Some("Reading"), None, None))),
            "Reading"
        );
        // Text again at once: held (sent at most every 200 ms).
        assert!(
            work.update(&progress("text", Some(" it."), None, None))
                .is_none()
        );
        assert_eq!(
            content(work.update(&progress(
                "tool_call",
                None,
                Some("Read x.rs"),
                Some("pending")
            ))),
            "Reading it.\nreviewer · Read x.rs — pending\n"
        );
        assert_eq!(
            content(work.update(&progress("tool_call_update", None, None, Some("completed")))),
            "Reading it.\nreviewer · Read x.rs — pending\nreviewer · Read x.rs — completed\n"
        );
    }

    #[test]
    fn only_an_agents_chat_may_be_asked_for() {
        let meta = |chat: &str| {
            serde_json::json!({"flemma": {"chat": chat}})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(asked_by(None), Ok(None));
        assert_eq!(
            asked_by(Some(&meta("/p/.flemma/t.chat/agents/r-1.chat"))),
            Ok(Some("/p/.flemma/t.chat/agents/r-1.chat".into()))
        );
        assert!(asked_by(Some(&meta("/home/me/.bashrc.chat"))).is_err());
    }
}
