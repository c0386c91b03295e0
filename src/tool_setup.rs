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
use flemma_tools::approval::{ApprovalFunction, ReadScope};
use flemma_tools::registry::{Registered, Registry};
use flemma_tools::sandbox::{Bwrap, PathPolicy, PolicyPlaces};
use flemma_tools::spec::Capability;
use flemma_tools::{ApprovalChain, ResultStore, RunContext, ToolSpec};
use serde_json::Value;

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
}

impl ToolSetup {
    /// The setup of an analysed chat: its resolved configuration and, when its frontmatter
    /// assigned a Rhai function to `flemma.opt.tools.auto_approve`, that function deciding
    /// approvals (sandboxed with the template limits). `Err` when the configuration does not
    /// resolve or the paths cannot be set up.
    pub fn for_chat(analysis: &Analysis, chat: &Path) -> Result<Self, String> {
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
        let mut setup = Self::new(resolved.config.clone(), Some(chat), auto_approve)?;
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
    /// `auto_approve` is the resolved approval policy (`ResolvedConfig::auto_approve`).
    pub fn new(
        config: Config,
        chat: Option<&Path>,
        auto_approve: AutoApprove,
    ) -> Result<Self, String> {
        let chat = match chat {
            Some(path) => Some(
                std::path::absolute(path)
                    .map_err(|e| format!("cannot make {} an absolute path: {e}", path.display()))?,
            ),
            None => None,
        };
        let env = |name: &str| std::env::var(name).ok();
        let here = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
        let chat_dir = chat
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        let cwd = match config.tools.bash.cwd.as_str() {
            "urn:flemma:buffer:path" => chat_dir.clone().unwrap_or_else(|| here.clone()),
            other => {
                let expanded = PathBuf::from(flemma_tools::sandbox::expand_env(other, &env));
                chat_dir.as_deref().unwrap_or(&here).join(expanded)
            }
        };
        let store = ResultStore::new(&config.tools.store, chat.as_deref(), 0, &env)
            .verified(chat.as_deref())
            .map_err(|error| error.to_string())?;
        let places = PolicyPlaces {
            cwd: cwd.clone(),
            chat_path: chat.clone(),
            store_dir: Some(store.dir().to_path_buf()),
        };
        let policy = PathPolicy::from_config(&config.sandbox.policy, &places, &env);
        let bwrap = if !config.sandbox.enabled || config.sandbox.backend == SandboxBackend::None {
            Err("sandbox disabled in config".to_string())
        } else {
            Bwrap::for_policy(&policy, config.sandbox.policy.network)
                .map(|bwrap| bwrap.with_hidden(hidden_from_sandbox()))
        };
        let read_roots = [Some(cwd.clone()), chat_dir, Some(store.dir().to_path_buf())];
        let mut ctx = RunContext::new(cwd, Arc::new(policy));
        // `~/` in the tools' paths: the home directory, for the runners and the approval policy.
        ctx.home = std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from);
        ctx.editor = chat
            .as_deref()
            .and_then(crate::editor_sessions::editor_files);
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
        Ok(Self {
            registry: Registry::for_config(&config),
            config,
            ctx,
            store,
            sandbox,
            chain,
            mcp: Default::default(),
        })
    }

    /// Registers the MCP tools discovered for this chat (offered as its configuration says).
    pub fn add_mcp(&mut self, tools: &crate::mcp_setup::McpTools) {
        self.mcp = tools.register(&mut self.registry, &self.config);
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

/// What sandboxed commands must not see: the daemon's runtime directory (its sockets reach
/// the daemon, which runs outside the sandbox) — the whole `$XDG_RUNTIME_DIR` when set, which
/// also holds the session bus, `systemd --user` and the agents' sockets —, the X11 sockets, and
/// the credentials in the home directory (`flemma_tools::sandbox::HOME_CREDENTIALS`).
/// The daemon's directory is created (`0700`, as the daemon does) when missing, so that a
/// daemon started later is hidden too.
fn hidden_from_sandbox() -> Vec<PathBuf> {
    let daemon = crate::daemon::socket::RuntimePaths::from_env().dir;
    if let Err(error) = crate::daemon::socket::ensure_dir(&daemon) {
        tracing::debug!(%error, "the daemon's runtime directory cannot be prepared for hiding");
    }
    let mut hidden = Vec::new();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        hidden.push(PathBuf::from(runtime));
    }
    hidden.push(daemon);
    hidden.push(PathBuf::from("/tmp/.X11-unix"));
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        let home = PathBuf::from(home);
        hidden.extend(
            flemma_tools::sandbox::HOME_CREDENTIALS
                .iter()
                .map(|path| home.join(path)),
        );
    }
    hidden
}

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
            Some(decision) => Decision {
                verdict: match decision.verdict {
                    flemma_tools::Verdict::Approve => Verdict::Approve,
                    flemma_tools::Verdict::RequireApproval => Verdict::RequireApproval,
                    flemma_tools::Verdict::Deny { message } => Verdict::Deny { message },
                },
                resolver: match decision.note {
                    Some(note) => {
                        tracing::warn!(tool = name, %note, "the approval chain could not approve as configured");
                        format!("{} ({note})", decision.resolver)
                    }
                    None => decision.resolver,
                },
            },
            None => Decision {
                verdict: Verdict::Deny {
                    message: format!("the tool `{name}` is not enabled for this chat"),
                },
                resolver: "urn:flemma:approval:registry".to_owned(),
            },
        }
    }

    fn capabilities(&self, name: &str) -> Option<ToolInfo> {
        self.0.enabled_tool(name).map(|tool| ToolInfo {
            is_async: tool.spec.is_async,
            disables_background: tool.spec.has(Capability::DisablesBackground),
        })
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
