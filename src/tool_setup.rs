//! Everything a tool call needs in this process, resolved for one chat: the registry, the run
//! context (working directory, sandbox policy and backend, timeout), the result store and the
//! approval chain. Shared by `flemmad tools` and the engine driver of `flemmad send`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_config::{AutoApprove, Config, SandboxBackend};
use flemma_engine::{Decision, JOBS_STATUS_TOOL, ToolInfo, ToolPolicy, Verdict};
use flemma_ide::Analysis;
use flemma_provider::ToolDefinition;
use flemma_template::{AutoApproveAnswer, AutoApproveFunction, Limits};
use flemma_tools::approval::{ApprovalFunction, EditScope, ModePolicy, ReadScope};
use flemma_tools::registry::{Registered, Registry};
use flemma_tools::sandbox::{Bwrap, CallLimits, PathPolicy, PolicyPlaces, PrivatePlaces};
use flemma_tools::spec::Capability;
use flemma_tools::{ApprovalChain, ResultStore, RunContext, ToolSpec};
use serde_json::Value;

use crate::process_context::ProcessContext;
use crate::user_dirs::UserDirs;

/// The tool setup of one chat.
#[derive(Debug)]
pub struct ToolSetup {
    pub config: Config,
    pub registry: Registry,
    /// The context every call starts from (each call gets its own `cancel`).
    pub ctx: RunContext,
    pub store: ResultStore,
    /// `Ok` when the process sandbox is active, else why not.
    pub sandbox: Result<(), String>,
    pub chain: ApprovalChain,
    /// The MCP tools registered (`crate::mcp_setup`), and those offered to the model.
    pub mcp: crate::mcp_setup::McpNames,
    /// The agents `ask_agent` may ask (`crate::agent_setup`).
    pub agents: Vec<crate::agent_setup::AgentDef>,
    /// The chat's checkpoints, set up at its first call that can change files and kept for
    /// the next ones (their monitor knows what changed since: `crate::checkpoints`).
    checkpoints: std::sync::OnceLock<Option<crate::checkpoints::Checkpoints>>,
    /// The process's context (the user's folders hold the checkpoints' repositories).
    context: ProcessContext,
}

impl ToolSetup {
    /// The setup of an analysed chat: its resolved configuration and, when its frontmatter
    /// assigned a Rhai function to `flemma.opt.tools.auto_approve`, that function deciding
    /// approvals (sandboxed with the template limits). `Err` when the configuration does not
    /// resolve or the paths cannot be set up.
    pub fn for_chat(
        context: &ProcessContext,
        analysis: &Analysis,
        chat: &Path,
    ) -> Result<Self, String> {
        let resolved = analysis
            .config
            .as_ref()
            .ok_or_else(|| "the configuration does not resolve".to_string())?;
        let auto_approve = resolved.auto_approve();
        let function = match &auto_approve {
            AutoApprove::Function(reference) => Some(
                analysis
                    .evaluation
                    .auto_approve_functions
                    .get(&reference.id)
                    .cloned()
                    .ok_or_else(|| {
                        format!(
                            "tools.auto_approve is a function ({}) that this chat's frontmatter does not define; set it in the frontmatter (`flemma.opt.tools.auto_approve = |tool, input, ctx| …`) or use a list",
                            reference.description
                        )
                    })?,
            ),
            AutoApprove::Tools { .. } => None,
        };
        let mut setup = Self::new(
            context,
            resolved.config.clone(),
            Some(chat),
            auto_approve,
            analysis.trust.trusted,
        )?;
        if let Some(function) = function {
            let context = serde_json::json!({
                "cwd": setup.ctx.cwd.display().to_string(),
                "chat": setup.ctx.chat_path.as_ref().map(|p| p.display().to_string()),
            });
            setup.chain.set_function(Box::new(RhaiApproval {
                function,
                context,
                limits: Limits::default(),
            }));
        }
        Ok(setup)
    }

    /// The setup for `config` and the chat at `chat` (its directory is the working directory
    /// unless `tools.bash.cwd` says otherwise; without a chat, the current directory).
    /// `auto_approve` is the resolved approval policy (`ResolvedConfig::auto_approve`); an
    /// untrusted chat's working directory stays inside its project ([`working_directory`]).
    pub fn new(
        context: &ProcessContext,
        config: Config,
        chat: Option<&Path>,
        auto_approve: AutoApprove,
        trusted: bool,
    ) -> Result<Self, String> {
        let dirs = &context.dirs;
        let chat = chat.map(|path| context.absolute(path));
        let env = |name: &str| context.var(name);
        let here = context.cwd.clone();
        let chat_dir = chat
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        let cwd = working_directory(
            &config.tools.bash.cwd,
            chat_dir.as_deref().unwrap_or(&here),
            trusted || chat.is_none(),
            &env,
        )?;
        let store = ResultStore::new(&config.tools.store, chat.as_deref(), 0, &env)
            .verified(chat.as_deref())
            .map_err(|error| error.to_string())?;
        let places = PolicyPlaces {
            cwd: cwd.clone(),
            chat_path: chat.clone(),
            store_dir: Some(store.dir().to_path_buf()),
        };
        let mut policy = PathPolicy::from_config(&config.sandbox.policy, &places, &env)
            .protect(authority_paths(context, chat.as_deref()));
        let mode = config.mode;
        if mode == flemma_config::Mode::Ask {
            policy = policy.read_only(
                "the chat is in ask mode (read-only); switch the mode to `default` or `auto-edit` to let tools write",
            );
        }
        let sandboxed = config.sandbox.enabled && config.sandbox.backend != SandboxBackend::None;
        let private = if sandboxed {
            private_places(dirs, chat.as_deref())
        } else {
            None
        };
        if let Some(private) = &private {
            policy = policy.with_private(private.clone());
        }
        let bwrap = if !sandboxed {
            Err("sandbox disabled in config".to_string())
        } else {
            Bwrap::for_policy(&policy, config.sandbox.policy.network).map(|bwrap| {
                bwrap
                    .with_hidden(hidden_from_sandbox(context))
                    .with_limits(call_limits(&config.sandbox.limits))
            })
        };
        let read_roots = [Some(cwd.clone()), chat_dir, Some(store.dir().to_path_buf())];
        let project = cwd.clone();
        let mut ctx = RunContext::new(cwd, Arc::new(policy));
        // `~/` in the tools' paths: the home directory, for the runners and the approval policy.
        ctx.home = dirs.home.clone();
        ctx.chat_path = chat;
        ctx.fetch_private_addresses = config.tools.fetch_private_addresses;
        ctx.timeout = std::time::Duration::from_secs(config.tools.default_timeout);
        ctx.runtime = crate::runtime::handle().ok();
        ctx.env.push((
            "FLEMMA_TOOLS_STORE_PATH".into(),
            store.dir().display().to_string(),
        ));
        let read_scope = ReadScope::new(ctx.paths(), read_roots.into_iter().flatten());
        let sandbox = match bwrap {
            Ok(bwrap) => {
                if let Some(private) = bwrap.private() {
                    // Inside, the temporary folder is the private `/tmp` and the cache the
                    // private one, wherever the user's variables point outside.
                    ctx.env.push(("TMPDIR".into(), "/tmp".into()));
                    if let Some(cache) = private.cache_targets.first() {
                        ctx.env
                            .push(("XDG_CACHE_HOME".into(), cache.display().to_string()));
                    }
                }
                ctx.sandbox = Some(Arc::new(bwrap));
                Ok(())
            }
            Err(reason) => Err(reason),
        };
        // A sandbox that has the network does not approve a command by itself.
        let mut chain = ApprovalChain::from_parts(
            auto_approve,
            &config.tools,
            None,
            Vec::new(),
            sandbox.is_ok() && !config.sandbox.policy.network,
        );
        chain.set_read_scope(read_scope);
        chain.set_mode(ModePolicy {
            mode,
            read_only_sandbox: mode == flemma_config::Mode::Ask && sandbox.is_ok(),
            edits: Some(EditScope::new(ctx.paths(), &project)),
        });
        Ok(Self {
            registry: Registry::for_config(&config),
            config,
            ctx,
            store,
            sandbox,
            chain,
            mcp: Default::default(),
            agents: Vec::new(),
            checkpoints: std::sync::OnceLock::new(),
            context: context.clone(),
        })
    }

    /// The user's folders this setup was made for.
    pub fn dirs(&self) -> &UserDirs {
        &self.context.dirs
    }

    /// The checkpoints recorded around this chat's calls (`None` when its project is not
    /// recorded: see `Checkpoints::recording`).
    pub fn checkpoints(&self, chat: &Path) -> Option<&crate::checkpoints::Checkpoints> {
        self.checkpoints
            .get_or_init(|| {
                crate::checkpoints::recording(
                    &self.context,
                    chat,
                    (&self.config.checkpoints).into(),
                )
            })
            .as_ref()
    }

    /// Registers the MCP tools discovered for this chat (offered as its configuration says).
    pub fn add_mcp(&mut self, tools: &crate::mcp_setup::McpTools) {
        self.mcp = tools.register(&mut self.registry, &self.config);
    }

    /// Registers `ask_agent` when the configuration defines agents (only the user file may);
    /// `for_send`: the chat is being sent (its conversations folder is made now). Returns what
    /// was ignored.
    pub fn add_agents(
        &mut self,
        resolved: &flemma_config::ResolvedConfig,
        for_send: bool,
        owner: &crate::agent_setup::AskedAgents,
    ) -> Vec<String> {
        let (agents, notes) = crate::agent_setup::register(
            &mut self.registry,
            self.ctx.chat_path.as_deref(),
            resolved,
            &self.context,
            for_send,
            owner,
        );
        self.agents = agents;
        notes
    }

    /// What wraps an MCP server that runs in the sandbox (`sandbox = true`): this chat's
    /// `bwrap`, when one is active.
    pub fn sandbox_wrap(&self) -> Option<flemma_mcp::connection::SandboxWrap> {
        let bwrap = self.ctx.sandbox.clone()?;
        Some(flemma_mcp::connection::SandboxWrap(Arc::new(
            move |argv: &[String], cwd: &Path| bwrap.wrap(argv, cwd),
        )))
    }

    /// The tools enabled for this chat (what the model is offered).
    pub fn enabled(&self) -> Vec<&Registered> {
        let mut tools: Vec<&Registered> = self
            .registry
            .enabled(&self.config)
            .into_iter()
            .filter(|tool| !self.mcp.all.contains(&tool.spec.name))
            .collect();
        tools.extend(self.mcp.offered.iter().filter_map(|n| self.registry.get(n)));
        tools
    }

    /// The enabled tool `name` (`flemma.jobs.status` is always there: the engine answers it).
    pub fn enabled_tool(&self, name: &str) -> Option<&Registered> {
        if name == JOBS_STATUS_TOOL {
            return self.registry.get(name);
        }
        self.enabled()
            .into_iter()
            .find(|tool| tool.spec.name == name)
    }

    /// The provider-side definitions of the enabled tools.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.enabled()
            .into_iter()
            .map(|tool| to_definition(&tool.spec))
            .collect()
    }

    /// What the approval chain decides for a call (`None`: no such enabled tool).
    pub fn decide(&self, name: &str, input: &Value) -> Option<flemma_tools::approval::Decision> {
        self.enabled_tool(name)
            .map(|tool| self.chain.decide(&tool.spec, input))
    }
}

/// The tools' working directory for `setting` (`tools.bash.cwd`) of a chat in `chat_dir`:
/// the chat's folder for `urn:flemma:buffer:path`, else `setting` (variables expanded) from the
/// chat's folder as written — `..` is applied to the path, never after following a link. An
/// untrusted chat's working directory stays inside its project: its own folder, or the folder
/// above `.flemma/sessions/` for a chat `flemmad acp` keeps there (`../..`), when `.flemma` and
/// `sessions` are real folders.
pub fn working_directory(
    setting: &str,
    chat_dir: &Path,
    trusted: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    if setting == "urn:flemma:buffer:path" {
        return Ok(chat_dir.to_path_buf());
    }
    let expanded = flemma_tools::sandbox::expand_env(setting, env);
    let cwd = flemma_protocol::document::normalize(&chat_dir.join(&expanded));
    if trusted || cwd == flemma_protocol::document::normalize(chat_dir) {
        return Ok(cwd);
    }
    let sessions = chat_dir.ends_with(".flemma/sessions")
        && [chat_dir, chat_dir.parent().unwrap_or(chat_dir)]
            .iter()
            .all(|dir| dir.symlink_metadata().is_ok_and(|m| m.is_dir()));
    if sessions && expanded.trim_end_matches('/') == "../.." {
        return Ok(cwd);
    }
    Err(format!(
        "this untrusted chat's `tools.bash.cwd = \"{setting}\"` names {}, outside its own folder {}: an untrusted chat's tools work inside its project; remove the setting, or trust the chat's folder with `flemmad trust {}`",
        cwd.display(),
        chat_dir.display(),
        chat_dir.display()
    ))
}

/// What a trial run in the sandbox of `config` showed (`flemmad doctor`).
#[derive(Debug)]
pub struct SandboxProbe {
    /// The command had no capability (`CapEff` 0), as root too.
    pub capabilities_dropped: bool,
    /// Its `/tmp` was the chat's private one, not the host's.
    pub private_tmp: bool,
    /// The chat file could not be written.
    pub chat_read_only: bool,
    /// The limits of each call.
    pub limits: CallLimits,
}

/// Runs a trial command in the sandbox `config` gives a chat in a temporary folder, and says
/// what held; `Err` when there is no sandbox (and why). Leaves nothing behind.
pub fn probe_sandbox(context: &ProcessContext, config: &Config) -> Result<SandboxProbe, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
    let chat = dir.path().join("doctor.chat");
    std::fs::write(&chat, "@You:\n").map_err(|e| format!("cannot write a trial chat: {e}"))?;
    let auto_approve = AutoApprove::Tools {
        tools: Vec::new(),
        exclusions: Vec::new(),
        direct: Vec::new(),
    };
    let setup = ToolSetup::new(context, config.clone(), Some(&chat), auto_approve, true)?;
    setup.sandbox.clone()?;
    let Some(bwrap) = setup.ctx.sandbox.clone() else {
        return Err("no sandbox backend".into());
    };
    let marker = format!("flemma-doctor-{}", std::process::id());
    let command = format!(
        "grep '^CapEff' /proc/self/status; echo probe > /tmp/{marker}; (echo x >> {}) 2>/dev/null && echo chat-writable; true",
        chat.display()
    );
    let outcome = flemma_tools::builtin::bash::run(
        &setup.ctx,
        &serde_json::json!({"label": "doctor", "command": command, "timeout": 20}),
    );
    let private = bwrap.private().cloned();
    let private_tmp = private
        .as_ref()
        .is_some_and(|p| p.tmp.join(&marker).exists())
        && !Path::new("/tmp").join(&marker).exists();
    let _ = std::fs::remove_file(Path::new("/tmp").join(&marker));
    if let Some(base) = private.as_ref().and_then(|p| p.tmp.parent()) {
        let _ = std::fs::remove_dir_all(base);
    }
    if outcome.is_error {
        return Err(format!(
            "a trial command failed in it: {}",
            outcome.text.trim()
        ));
    }
    Ok(SandboxProbe {
        capabilities_dropped: outcome.text.lines().any(|line| {
            line.strip_prefix("CapEff:")
                .is_some_and(|mask| mask.trim().bytes().all(|b| b == b'0'))
        }),
        private_tmp,
        chat_read_only: !outcome.text.contains("chat-writable"),
        limits: bwrap.limits(),
    })
}

/// The sandbox's limits per call from the configuration (`0`: none).
fn call_limits(limits: &flemma_config::SandboxLimits) -> CallLimits {
    CallLimits {
        processes: (limits.processes > 0).then_some(limits.processes),
        memory_bytes: (limits.memory > 0).then(|| limits.memory.saturating_mul(1024 * 1024)),
    }
}

/// What holds a chat's authority or runs later outside the sandbox, which no tool writes even
/// where a writable root holds it (a chat kept in the home folder, a root the user's config
/// names): flemmad's configuration (with the trusted folders) and records, the chat itself
/// (chat files are refused by name too), and the shell's and git's start-up files.
fn authority_paths(context: &ProcessContext, chat: Option<&Path>) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = chat.into_iter().map(Path::to_path_buf).collect();
    paths.extend(context.dirs.flemma_config());
    paths.extend(context.dirs.flemma_state());
    paths.extend(context.flemma_config.clone());
    if let Some(home) = &context.dirs.home {
        paths.extend(HOME_START_UP.iter().map(|name| home.join(name)));
    }
    paths
}

/// Files in the home folder that run code later, outside the sandbox: shell, login and
/// session start-up files, git's configuration, user services and autostart entries, and the
/// folders on `PATH` by convention.
const HOME_START_UP: [&str; 22] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".config/fish",
    ".inputrc",
    ".pam_environment",
    ".xprofile",
    ".xinitrc",
    ".gitconfig",
    ".config/git",
    ".config/systemd",
    ".config/autostart",
    ".config/environment.d",
    ".local/bin",
    ".config/nvim",
    ".vimrc",
];

/// The chat's private `/tmp` and cache for its sandbox, under
/// `$XDG_CACHE_HOME/flemma/sandbox/<chat key>`, made by the first sandboxed call (the folders
/// of chats unused for a month are removed, once per process).
fn private_places(dirs: &UserDirs, chat: Option<&Path>) -> Option<PrivatePlaces> {
    let cache = dirs.cache.clone()?;
    let sandboxes = cache.join("flemma").join("sandbox");
    let key = chat.map_or_else(|| "no-chat".to_owned(), crate::user_dirs::chat_key);
    let mut targets = Vec::new();
    if let Some(home) = &dirs.home {
        targets.push(home.join(".cache"));
    }
    if !targets.contains(&cache) {
        targets.push(cache.clone());
    }
    static PRUNED: std::sync::Once = std::sync::Once::new();
    PRUNED.call_once(|| prune_sandboxes(&sandboxes, &key));
    Some(PrivatePlaces::at(&sandboxes.join(&key), targets))
}

/// Removes the private folders of chats whose sandbox was not used for 30 days.
fn prune_sandboxes(sandboxes: &Path, keep: &str) {
    const UNUSED: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);
    let Ok(entries) = std::fs::read_dir(sandboxes) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name() == keep {
            continue;
        }
        let old = entry
            .path()
            .join("last-used")
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > UNUSED);
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// What sandboxed commands must not see: the daemon's runtime directory (its sockets reach
/// the daemon, which runs outside the sandbox) — the whole `$XDG_RUNTIME_DIR` when set, which
/// also holds the session bus, `systemd --user` and the agents' sockets —, the X11 sockets, and
/// the credentials in the home directory (`flemma_tools::sandbox::HOME_CREDENTIALS`).
/// The daemon's directory is created (`0700`, as the daemon does) when missing, so that a
/// daemon started later is hidden too.
fn hidden_from_sandbox(context: &ProcessContext) -> Vec<PathBuf> {
    let daemon = context.runtime.dir.clone();
    if let Err(error) = crate::runtime_dir::ensure_dir(&daemon) {
        tracing::debug!(%error, "the daemon's runtime directory cannot be prepared for hiding");
    }
    let mut hidden = Vec::new();
    hidden.extend(context.dirs.runtime.clone());
    hidden.push(daemon);
    hidden.extend(SYSTEM_SOCKETS.iter().map(PathBuf::from));
    if let Some(home) = &context.dirs.home {
        hidden.extend(
            flemma_tools::sandbox::HOME_CREDENTIALS
                .iter()
                .map(|path| home.join(path)),
        );
    }
    hidden
}

/// Other programs' sockets outside `/tmp` (which is private inside): a socket can be connected
/// to on a read-only filesystem, and these reach programs that run outside the sandbox (the
/// container engines, `screen`, the system bus, other users' runtime folders).
const SYSTEM_SOCKETS: [&str; 10] = [
    "/run/user",
    "/run/screen",
    "/var/run/screen",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/dbus",
    "/var/run/dbus",
    "/tmp/.X11-unix",
];

/// The provider-side definition of a tool.
pub fn to_definition(spec: &ToolSpec) -> ToolDefinition {
    ToolDefinition {
        name: spec.name.clone(),
        description: spec.description.clone(),
        input_schema: spec.input_schema.clone(),
        strict: spec.strict,
        capabilities: spec.capability_tags(),
        is_async: spec.is_async,
    }
}

/// The engine's [`ToolPolicy`] over the approval chain and the registry's capabilities.
#[derive(Debug, Clone)]
pub struct SetupPolicy(pub Arc<ToolSetup>);

impl ToolPolicy for SetupPolicy {
    fn decide(&self, name: &str, input: &Value) -> Decision {
        match self.0.decide(name, input) {
            // The engine names the resolver of a pending call: the note goes with it.
            Some(decision) => Decision::new(
                decision.verdict,
                match decision.note {
                    Some(note) => {
                        // The note reaches the user with the decision (the pending list of
                        // `send`, status, hover); the log only records it.
                        tracing::debug!(tool = name, %note, "the approval chain could not approve as configured");
                        format!("{} ({note})", decision.resolver)
                    }
                    None => decision.resolver,
                },
            ),
            None => Decision::new(
                Verdict::Deny {
                    message: format!("the tool `{name}` is not enabled for this chat"),
                },
                "urn:flemma:approval:registry",
            ),
        }
    }

    fn capabilities(&self, name: &str) -> Option<ToolInfo> {
        self.0.enabled_tool(name).map(|tool| ToolInfo {
            is_async: tool.spec.is_async,
            disables_background: tool.spec.has(Capability::DisablesBackground),
        })
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), String> {
        self.0
            .registry
            .check_input(name, input)
            .map_err(|error| error.to_string())
    }
}

/// The frontmatter's Rhai `auto_approve` function as a link of the approval chain.
#[derive(Debug)]
struct RhaiApproval {
    function: AutoApproveFunction,
    /// The function's third argument: `#{cwd, chat}`.
    context: Value,
    limits: Limits,
}

impl ApprovalFunction for RhaiApproval {
    fn decide(&self, tool: &str, input: &Value) -> Result<Option<flemma_tools::Verdict>, String> {
        let answer = self
            .function
            .decide(tool, input, &self.context, &self.limits)
            .map_err(|error| error.to_string())?;
        Ok(match answer {
            AutoApproveAnswer::Approve => Some(flemma_tools::Verdict::Approve),
            AutoApproveAnswer::RequireApproval => Some(flemma_tools::Verdict::RequireApproval),
            AutoApproveAnswer::Deny { reason } => Some(flemma_tools::Verdict::Deny {
                message: reason.unwrap_or_else(|| {
                    format!("the chat's auto_approve function denies this `{tool}` call")
                }),
            }),
            AutoApproveAnswer::Pass => None,
        })
    }
}
