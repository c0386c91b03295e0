//! The agents `ask_agent` asks (`[agents.NAME]` of the user's configuration): their owner's
//! [`AskedAgents`] (an [`AgentHub`] of their processes, started through flemmad's
//! parent-death shim, and the permission questions they wait for; owned by the engine host or
//! the command that runs them, stopped with it — no process-wide global), which agents a chat may ask (only the user file defines one),
//! and the tool itself: registered beside the built-ins with the agents in its description,
//! and its runner — the depth limit, the task (with the conversation when asked), the run on
//! the hub with its progress told as `tool:progress` events and its permission requests
//! decided by the entry's policy (`ask` goes to the user: [`crate::agent_permissions`]), and
//! the result (the answer, or the seed's errors) naming the conversation's `.chat` file.
//! Shared by `send`, the engine host, `tools`, `status` and `doctor`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma_acp::ask;
use flemma_acp::client::{
    AgentCommand, AgentHub, AgentUpdate, AskEnd, AskEvents, AskOutcome, AskRequest,
    PermissionAnswer, PermissionQuestion,
};
use flemma_config::{AgentPermissions, ResolvedConfig};
use flemma_protocol::event::{AgentProgress, CallNews, ProgressUpdate};
use flemma_tools::truncate::Keep;
use flemma_tools::{Outcome, RunContext, ToolReporter};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The agents one owner (the engine host, a command) asks: their processes, the permission
/// questions they wait for and the conversation files its calls took. Clones share them.
#[derive(Debug, Clone, Default)]
pub struct AskedAgents {
    pub hub: Arc<AgentHub>,
    pub questions: crate::agent_permissions::Questions,
    /// The conversation files this owner's calls chose ([`next_conversation`]): two calls
    /// running at once never take the same number before either file exists.
    taken: Arc<std::sync::Mutex<Vec<PathBuf>>>,
}

impl AskedAgents {
    /// Stops every agent of this owner (at the end of a command, or of the host).
    pub async fn shutdown(&self) {
        self.hub.shutdown().await;
    }
}

/// One agent a chat may ask, as the configuration defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Added to flemmad's environment (`${VAR}` expanded).
    pub env: Vec<(String, String)>,
    /// The process's working directory.
    pub cwd: PathBuf,
    pub description: Option<String>,
    pub permissions: AgentPermissions,
}

impl AgentDef {
    /// What runs, for `status` and `doctor` (no environment values).
    pub fn describe(&self) -> String {
        let line = std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "{line} (in {}; its permission requests: {})",
            self.cwd.display(),
            self.permissions.as_str()
        )
    }

    /// The command as it runs for a chat `depth` levels below the user's: the program found
    /// on `PATH`'s absolute entries (the entry's own `env.PATH` when it has one, else the
    /// process `context`'s), started through the shim of the context's executable (flemmad),
    /// with the depth its own `ask_agent` starts from.
    pub fn command(
        &self,
        depth: u32,
        context: &crate::process_context::ProcessContext,
    ) -> Result<AgentCommand, String> {
        let search_path = self
            .env
            .iter()
            .rev()
            .find(|(key, _)| key == "PATH")
            .map(|(_, value)| value.clone())
            .or_else(|| context.var("PATH"))
            .map(std::ffi::OsString::from)
            .unwrap_or_default();
        let program =
            flemma_tools::launch::find_program(&self.command, Some(&search_path), &self.cwd)
                .ok_or_else(|| {
                    format!(
                        "cannot start `{}`: {}",
                        self.command,
                        flemma_tools::launch::not_found(&self.command, &self.cwd)
                    )
                })?;
        let argv: Vec<String> = std::iter::once(program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect();
        let argv = match context.executable() {
            Ok(flemmad) => flemma_mcp::shim::wrap(flemmad, &argv)
                .into_iter()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect(),
            Err(_) => argv,
        };
        let mut env = self.env.clone();
        env.push((
            "PATH".into(),
            flemma_tools::launch::absolute_entries(&search_path)
                .to_string_lossy()
                .into_owned(),
        ));
        env.push((ask::DEPTH_VARIABLE.into(), (depth + 1).to_string()));
        Ok(AgentCommand {
            name: self.name.clone(),
            argv,
            env,
            cwd: self.cwd.clone(),
        })
    }
}

/// The agents of one configuration, and what was ignored (one line each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defined {
    pub agents: Vec<AgentDef>,
    pub notes: Vec<String>,
}

/// The enabled agents `resolved` defines for a chat in `chat_dir` (a configured relative `cwd`
/// is taken against it; without one an agent starts in the neutral directory): those of
/// [`ResolvedConfig::agents`], with `${VAR}` expanded.
pub fn defined(
    resolved: &ResolvedConfig,
    chat_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Defined {
    let (agents, notes) = resolved.agents();
    let mut out = Defined {
        agents: Vec::new(),
        notes,
    };
    for (name, agent) in agents {
        let Some(command) = agent.command.clone() else {
            continue;
        };
        let expand = |text: &str| flemma_tools::sandbox::expand_env(text, env);
        let cwd = match agent.cwd.as_deref().map(expand) {
            Some(dir) => flemma_protocol::document::normalize(&chat_dir.join(dir)),
            None => PathBuf::from(flemma_tools::launch::NEUTRAL_DIR),
        };
        out.agents.push(AgentDef {
            name: name.to_owned(),
            command,
            args: agent.args.iter().map(|arg| expand(arg)).collect(),
            env: agent
                .env
                .iter()
                .map(|(key, value)| (key.clone(), expand(value)))
                .collect(),
            cwd,
            description: agent.description.clone(),
            permissions: agent.permissions,
        });
    }
    out
}

/// How deep the chat at `chat` is (0: the chat the user talks to): its path, or what the
/// process that asked it says (`FLEMMA_ASK_DEPTH` in its `context`), whichever is deeper.
pub fn depth(chat: Option<&Path>, context: &crate::process_context::ProcessContext) -> u32 {
    let by_path = chat.map_or(0, ask::depth_of);
    let by_process = context
        .var(ask::DEPTH_VARIABLE)
        .and_then(|value| value.trim().parse::<u32>().ok())
        .unwrap_or(0);
    by_path.max(by_process)
}

/// The folder where the chat at `chat` keeps its agents' conversations
/// (`<folder>/.flemma/<chat>/agents/`).
pub fn conversations_dir(chat: &Path) -> Option<PathBuf> {
    let dir = chat.parent()?;
    Some(dir.join(".flemma").join(chat.file_name()?).join("agents"))
}

/// Makes the conversations folder of `chat` (following no link), so that every sandbox of
/// the chat's tools finds it and keeps it read-only.
fn make_conversations_dir(chat: &Path) -> Result<PathBuf, String> {
    let dir = conversations_dir(chat).ok_or("the chat has no folder")?;
    let base = chat.parent().ok_or("the chat has no folder")?;
    let below = dir.strip_prefix(base).map_err(|e| e.to_string())?;
    flemma_tools::nofollow::Dir::open_beneath(base, below, Some(0o755)).map_err(|e| {
        format!(
            "cannot make {} ({e}; a `.flemma` or an `agents` that is a symbolic link is refused)",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// Registers `ask_agent` in the `registry` of the chat at `chat` when it may ask agents: its
/// description lists them (with the title an agent gave when it has no description and ran
/// before); relative settings are taken against the chat's folder and `${VAR}` expands from
/// the process's `context`. A chat that is being sent (`for_send`) gets its conversations
/// folder now, before
/// any of its tools runs, so that every sandbox keeps it read-only. Returns the agents it may
/// ask and what was ignored.
pub fn register(
    registry: &mut flemma_tools::registry::Registry,
    chat: Option<&Path>,
    resolved: &ResolvedConfig,
    context: &crate::process_context::ProcessContext,
    for_send: bool,
    owner: &AskedAgents,
) -> (Vec<AgentDef>, Vec<String>) {
    let env = |name: &str| context.var(name);
    let defined = defined(resolved, &context.chat_folder(chat), &env);
    let mut notes = defined.notes;
    if defined.agents.is_empty() {
        return (Vec::new(), notes);
    }
    if let Some(chat) = chat.filter(|_| for_send)
        && let Err(error) = make_conversations_dir(chat)
    {
        notes.push(format!("ask_agent: {error}"));
    }
    let listed: Vec<ask::Listed> = defined
        .agents
        .iter()
        .map(|agent| ask::Listed {
            name: agent.name.clone(),
            purpose: agent
                .description
                .clone()
                .or_else(|| owner.hub.info(&agent.name).and_then(|info| info.title)),
        })
        .collect();
    let registered = defined.agents.clone();
    let agents = Arc::new(Agents {
        context: context.clone(),
        owner: owner.clone(),
        defs: defined.agents,
        idle: Duration::from_secs(resolved.config.parameters.idle_timeout.max(1)),
    });
    registry.register(
        ask::spec(&listed),
        move |ctx, input| run(ctx, input, &agents),
        Keep::Head,
    );
    (registered, notes)
}

/// The least time an agent is given to start and answer `initialize`.
const MIN_STARTUP: Duration = Duration::from_secs(30);

/// What the runner knows of a chat's agents.
#[derive(Debug)]
struct Agents {
    /// The process's (its `PATH`, the depth it was asked at, its executable).
    context: crate::process_context::ProcessContext,
    owner: AskedAgents,
    defs: Vec<AgentDef>,
    /// The watchdog (`parameters.idle_timeout`), also the time an agent may take to start.
    idle: Duration,
}

/// The runner of `ask_agent`.
fn run(ctx: &RunContext, input: &Value, agents: &Agents) -> Outcome {
    let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
    let name = text("agent");
    let depth = depth(ctx.chat_path.as_deref(), &agents.context);
    if depth >= ask::MAX_DEPTH {
        return Outcome::error(ask::too_deep(depth));
    }
    let Some(agent) = agents.defs.iter().find(|agent| agent.name == name) else {
        let names: Vec<String> = agents.defs.iter().map(|a| a.name.clone()).collect();
        return Outcome::error(ask::unknown_agent(name, &names));
    };
    let prompt = text("prompt");
    if prompt.trim().is_empty() {
        return Outcome::error(ask::empty_prompt(name));
    }
    let with_context = input.get("with_context").and_then(Value::as_bool) == Some(true);
    let context = with_context
        .then(|| {
            ctx.conversation
                .as_deref()
                .map(|chat| ask::context(chat, ask::CONTEXT_LIMIT))
        })
        .flatten();
    let command = match agent.command(depth, &agents.context) {
        Ok(command) => command,
        Err(reason) => return Outcome::error(ask::failed(name, &reason)),
    };
    let Some(runtime) = ctx
        .runtime
        .clone()
        .or_else(|| crate::runtime::handle().ok())
    else {
        return Outcome::error(ask::failed(name, "flemmad has no runtime to run it on"));
    };
    let conversation = ctx.chat_path.as_deref().and_then(|chat| {
        let dir = make_conversations_dir(chat).ok()?;
        Some(next_conversation(&agents.owner, &dir, name))
    });
    let request = AskRequest {
        cwd: ctx.cwd.clone(),
        prompt: ask::task(prompt, context.as_deref()),
        chat: conversation.clone(),
        idle_timeout: agents.idle,
        // Starting (a Python or Node agent importing its SDK) may take longer than a short
        // watchdog; a start that never answers is still stopped.
        startup_timeout: agents.idle.max(MIN_STARTUP),
    };
    let events = Events {
        agent: agent.name.clone(),
        policy: agent.permissions,
        chat: ctx.chat_path.clone(),
        reporter: ctx.reporter.clone(),
        questions: agents.owner.questions.clone(),
    };
    let cancel = CancellationToken::new();
    let watched = ctx.cancel.clone();
    // On one of the runtime's threads: the agent's process is started there, and the
    // parent-death signal of flemmad's shim follows the thread that started it (a tool's
    // thread ends with the call).
    let hub = agents.owner.hub.clone();
    let run = runtime.spawn(async move {
        let stop = cancel.clone();
        let poll = tokio::spawn(async move {
            while !watched.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            stop.cancel();
        });
        let outcome = hub.ask(&command, request, &events, cancel).await;
        poll.abort();
        outcome
    });
    let outcome = match runtime.block_on(run) {
        Ok(outcome) => outcome,
        Err(error) => {
            return Outcome::error(ask::failed(name, &format!("its run failed: {error}")));
        }
    };
    result(ctx, agent, conversation.as_deref(), outcome)
}

/// The next free `NAME-N.chat` in `dir` (a number no other call of `owner` took).
fn next_conversation(owner: &AskedAgents, dir: &Path, agent: &str) -> PathBuf {
    let mut taken = owner
        .taken
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = (1..)
        .map(|n| dir.join(format!("{agent}-{n}.chat")))
        .find(|path| !taken.contains(path) && path.symlink_metadata().is_err())
        .unwrap_or_else(|| dir.join(format!("{agent}.chat")));
    taken.push(path.clone());
    path
}

/// The tool's result: the line naming the conversation's file (when there is one), then the
/// answer, or what went wrong (the seed's texts). A foreign agent's conversation is written
/// here as a `.chat` (flemmad, asked, keeps its own).
fn result(
    ctx: &RunContext,
    agent: &AgentDef,
    conversation: Option<&Path>,
    outcome: AskOutcome,
) -> Outcome {
    let name = &agent.name;
    let ending = match &outcome.end {
        AskEnd::Finished(stop) if stop == "end_turn" => None,
        AskEnd::Finished(stop) => Some(format!("it stopped: {stop}")),
        AskEnd::Broken(reason) => Some(reason.clone()),
        AskEnd::Failed(reason) => Some(reason.clone()),
    };
    let written = match (conversation, &outcome.end) {
        (_, AskEnd::Failed(_)) if outcome.session_id.is_none() => None,
        (Some(path), _) if outcome.session_id.as_deref() == Some(&*path.to_string_lossy()) => {
            Some(path)
        }
        (Some(path), _) => {
            let frontmatter = flemma_acp::new_chat_text(path, &ctx.cwd);
            let frontmatter = frontmatter.trim_end_matches("@You:\n");
            let text = flemma_acp::client::transcript::chat(
                frontmatter,
                name,
                &outcome.events,
                ending
                    .as_deref()
                    .map(|why| format!("[stopped: {why}]"))
                    .as_deref(),
            );
            match write_new_chat(path, &text) {
                Ok(()) => Some(path),
                Err(error) => {
                    tracing::warn!(%error, "the asked agent's conversation could not be kept");
                    None
                }
            }
        }
        (None, _) => None,
    };
    let note = written.map(|path| {
        let base = ctx
            .chat_path
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        let shown = path.strip_prefix(base).unwrap_or(path);
        flemma_syntax::write::agent_conversation(name, &shown.display().to_string())
    });
    let (text, is_error) = match &outcome.end {
        AskEnd::Failed(reason) => (ask::failed(name, reason), true),
        AskEnd::Finished(stop) if outcome.answer.trim().is_empty() => {
            let _ = stop;
            (ask::no_answer(name), true)
        }
        AskEnd::Finished(stop) if stop == "end_turn" => (outcome.answer.clone(), false),
        AskEnd::Finished(stop) => (ask::stopped(name, &outcome.answer, stop), false),
        AskEnd::Broken(reason) => (
            ask::stopped(name, &outcome.answer, reason),
            outcome.answer.trim().is_empty(),
        ),
    };
    let text = match note {
        Some(note) => format!("{note}\n{text}"),
        None => text,
    };
    if is_error {
        Outcome::error(text)
    } else {
        Outcome::ok(text)
    }
}

/// Creates `path` (which must not exist) holding `text`, following no link.
fn write_new_chat(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write as _;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!("{} names no file", path.display()));
    };
    let folder = flemma_tools::nofollow::Dir::open(dir, None)
        .map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    let mut file = folder
        .open_for_write(name, 0o644, true)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A run's progress and permissions, as the chat that asked sees them.
struct Events {
    agent: String,
    policy: AgentPermissions,
    chat: Option<PathBuf>,
    reporter: Option<Arc<dyn ToolReporter>>,
    questions: crate::agent_permissions::Questions,
}

impl AskEvents for Events {
    fn update(&self, update: &AgentUpdate) {
        let Some(reporter) = &self.reporter else {
            return;
        };
        let update_of = match update.clone() {
            AgentUpdate::Text(text) => ProgressUpdate::Text { text },
            AgentUpdate::Thought(text) => ProgressUpdate::Thought { text },
            AgentUpdate::ToolCall {
                id,
                title,
                kind,
                status,
            } => ProgressUpdate::ToolCall {
                child_tool_id: id,
                title,
                tool_kind: kind,
                status,
            },
            AgentUpdate::ToolCallUpdate {
                id,
                title,
                status,
                text,
            } => ProgressUpdate::ToolCallUpdate {
                child_tool_id: id,
                title,
                status,
                text,
            },
            AgentUpdate::Plan(text) => ProgressUpdate::Plan { text },
        };
        reporter.event(CallNews::Progress(AgentProgress {
            update: update_of,
            agent: self.agent.clone(),
            message: progress_message(&self.agent, update),
        }));
    }

    fn permission(
        &self,
        question: PermissionQuestion,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PermissionAnswer> + Send>> {
        let decided = match self.policy {
            AgentPermissions::Run => Some(PermissionAnswer::Allow),
            AgentPermissions::Refuse => Some(PermissionAnswer::Reject),
            AgentPermissions::Ask => None,
        };
        if let Some(answer) = decided {
            return Box::pin(std::future::ready(answer));
        }
        match (&self.chat, &self.reporter) {
            (Some(chat), Some(reporter)) => {
                self.questions
                    .ask(chat, &self.agent, question, reporter.clone())
            }
            // Nobody to ask (`flemmad tools run`): refused.
            _ => Box::pin(std::future::ready(PermissionAnswer::Reject)),
        }
    }
}

/// What an asked agent is doing, for progress displays (`$/progress`, the CLI's live line):
/// `<agent> · <title>` of its tool calls, else what it writes.
fn progress_message(agent: &str, update: &AgentUpdate) -> String {
    let what = match update {
        AgentUpdate::Text(_) => "writing its answer",
        AgentUpdate::Thought(_) => "thinking",
        AgentUpdate::Plan(_) => "planning",
        AgentUpdate::ToolCall { title, .. } => title,
        AgentUpdate::ToolCallUpdate {
            title: Some(title), ..
        } => title,
        AgentUpdate::ToolCallUpdate { .. } => "working",
    };
    format!("{agent} · {what}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_config::LayerKind;

    fn resolve(user: &str, chat: Option<&str>) -> ResolvedConfig {
        let mut layers = vec![
            flemma_config::ConfigLayer::defaults(),
            flemma_config::ConfigLayer::from_toml_str(user, LayerKind::UserFile).expect("user"),
        ];
        if let Some(chat) = chat {
            layers.push(
                flemma_config::ConfigLayer::from_toml_str(chat, LayerKind::Frontmatter)
                    .expect("chat"),
            );
        }
        flemma_config::resolve(&layers).expect("resolves")
    }

    const USER: &str = "[agents.reviewer]\ncommand = \"flemmad\"\nargs = [\"acp\", \"--config\", \"${HOME}/r.toml\"]\ndescription = \"Reviews code.\"\n";

    #[test]
    fn only_the_user_file_defines_an_agent() {
        let env = |name: &str| (name == "HOME").then(|| "/home/me".to_owned());
        let defined = defined(&resolve(USER, None), Path::new("/p"), &env);
        assert_eq!(defined.agents.len(), 1);
        let agent = &defined.agents[0];
        assert_eq!(agent.args, ["acp", "--config", "/home/me/r.toml"]);
        assert_eq!(agent.cwd, PathBuf::from("/"));
        assert_eq!(agent.permissions, AgentPermissions::Ask);
        // A chat that says what runs is ignored, and said so.
        let chat = resolve(USER, Some("[agents.reviewer]\ncommand = \"sh\"\n"));
        let defined = defined_env(&chat);
        assert!(defined.agents.is_empty());
        assert!(
            defined.notes[0].contains("`command` is set by the"),
            "{:?}",
            defined.notes
        );
        // It may turn one off, or make it stricter.
        assert!(
            defined_env(&resolve(USER, Some("[agents.reviewer]\nenabled = false\n")))
                .agents
                .is_empty()
        );
        let stricter = defined_env(&resolve(
            USER,
            Some("[agents.reviewer]\npermissions = \"refuse\"\n"),
        ));
        assert_eq!(stricter.agents[0].permissions, AgentPermissions::Refuse);
    }

    fn defined_env(resolved: &ResolvedConfig) -> Defined {
        defined(resolved, Path::new("/p"), &|_| None)
    }

    #[test]
    fn the_conversations_folder_is_below_the_chats_store() {
        assert_eq!(
            conversations_dir(Path::new("/p/talk.chat")),
            Some(PathBuf::from("/p/.flemma/talk.chat/agents"))
        );
        assert_eq!(
            depth(
                Some(Path::new("/p/.flemma/talk.chat/agents/reviewer-1.chat")),
                &context(&[])
            )
            .max(1),
            1
        );
    }

    fn context(vars: &[(&str, &str)]) -> crate::process_context::ProcessContext {
        crate::process_context::ProcessContext::new(
            crate::user_dirs::UserDirs::default(),
            PathBuf::from("/"),
            None,
            None,
        )
        .with_vars(vars)
    }

    /// The depth an asking process set is the context's variable, not this process's.
    #[test]
    fn the_depth_the_asker_set_is_read_from_the_context() {
        assert_eq!(depth(None, &context(&[])), 0);
        assert_eq!(depth(None, &context(&[(ask::DEPTH_VARIABLE, "2")])), 2);
        let nested = Path::new("/p/.flemma/talk.chat/agents/reviewer-1.chat");
        assert_eq!(
            depth(Some(nested), &context(&[(ask::DEPTH_VARIABLE, "0")])),
            depth(Some(nested), &context(&[]))
        );
    }

    /// An agent's program is found on the context's `PATH` and started through the shim of
    /// the context's executable, with the next depth.
    #[test]
    fn an_agent_starts_through_the_context_s_executable_on_its_path() {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = tempfile::tempdir().expect("temp dir");
        let program = bin.path().join("my-agent");
        std::fs::write(&program, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let agent = AgentDef {
            name: "mine".into(),
            command: "my-agent".into(),
            args: vec!["--acp".into()],
            env: Vec::new(),
            cwd: PathBuf::from("/"),
            description: None,
            permissions: AgentPermissions::Ask,
        };
        let path = bin.path().display().to_string();
        let context = context(&[("PATH", path.as_str())]);
        // Not on the PATH the context has: refused, whatever this process's PATH is.
        assert!(agent.command(0, &context.clone().with_vars(&[])).is_err());
        let flemmad = Path::new("/opt/flemma/bin/flemmad");
        let command = agent
            .command(1, &context.with_executable(flemmad))
            .expect("found on the context's PATH");
        let expected: Vec<String> = flemma_mcp::shim::wrap(
            flemmad,
            &[program.display().to_string(), "--acp".to_owned()],
        )
        .into_iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
        assert_eq!(command.argv, expected);
        assert_eq!(command.argv[0], flemmad.display().to_string());
        assert!(command.env.contains(&("PATH".to_owned(), path.clone())));
        assert!(
            command
                .env
                .contains(&(ask::DEPTH_VARIABLE.to_owned(), "2".to_owned()))
        );
    }

    /// Two calls of one owner never take the same conversation file; another owner's calls
    /// are its own.
    #[test]
    fn an_owner_s_calls_take_distinct_conversations() {
        let dir = tempfile::tempdir().expect("temp dir");
        let owner = AskedAgents::default();
        let first = next_conversation(&owner, dir.path(), "r");
        let second = next_conversation(&owner, dir.path(), "r");
        assert_eq!(first, dir.path().join("r-1.chat"));
        assert_eq!(second, dir.path().join("r-2.chat"));
        let other = AskedAgents::default();
        assert_eq!(next_conversation(&other, dir.path(), "r"), first);
        assert_eq!(
            next_conversation(&owner.clone(), dir.path(), "r"),
            dir.path().join("r-3.chat")
        );
    }
}
