//! `flemmad tools`: list the tools enabled for a chat, or run one as the engine would.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use flemma_tools::Verdict;
use flemma_tools::registry::Registered;
use serde_json::{Value, json};

use super::Ui;
use crate::chat;
use crate::mcp_setup::{Excluded, McpTools};
use crate::process_context::ProcessContext;
use crate::tool_setup::{ToolSetup, to_definition};

type Setup = ToolSetup;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = false)]
pub struct ToolsArgs {
    /// The chat whose configuration (user file + frontmatter) and directory apply; without it,
    /// the user configuration and the current directory.
    #[arg(long, global = true, value_name = "FILE")]
    pub chat: Option<PathBuf>,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(subcommand)]
    pub action: Option<ToolsAction>,
}

#[derive(Debug, Subcommand)]
pub enum ToolsAction {
    /// Run one tool and print exactly the text of its result.
    Run {
        /// The tool name (`bash`, `read`, `flemma.jobs.status`, …).
        name: String,
        /// The input, a JSON object (harness parameters such as `flemma.save_to` included).
        input: String,
    },
}

/// The tool setup: a chat's (its configuration, frontmatter approval function and directory)
/// or, without one, the user configuration's in the current directory. The one place this
/// command loads a chat.
fn setup(
    ui: &Ui,
    chat: Option<&Path>,
    context: &ProcessContext,
) -> Result<(Setup, flemma_config::ResolvedConfig), String> {
    match chat {
        Some(path) => {
            let loaded = chat::load("tools", flemma_ide::Purpose::Send, path, context)
                .map_err(|e| crate::cli::CliError::from(e).report)?;
            let report = loaded.report(false);
            if loaded.analysis.has_blocking_diagnostics() {
                return Err(report.trim_end().to_string());
            }
            ui.stderr(&report);
            let setup = ToolSetup::for_chat(context, &loaded.analysis, &context.absolute(path))?;
            let resolved = loaded
                .analysis
                .config
                .clone()
                .ok_or_else(|| "the configuration does not resolve".to_string())?;
            Ok((setup, resolved))
        }
        None => {
            let input = chat::config_input(context);
            let errors = input.diagnostics();
            if !errors.is_empty() {
                let path = context
                    .explicit_config
                    .as_deref()
                    .unwrap_or(Path::new("config.toml"));
                return Err(chat::render_all(path, None, &errors).trim_end().to_string());
            }
            let resolved = flemma_config::resolve(&input.layers).map_err(|errors| {
                errors
                    .errors()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            })?;
            let auto_approve = resolved.auto_approve();
            let setup = ToolSetup::new(context, resolved.config.clone(), None, auto_approve, true)?;
            Ok((setup, resolved))
        }
    }
}

pub fn run(args: ToolsArgs, context: &ProcessContext) -> anyhow::Result<ExitCode> {
    let ui = Ui::new("tools");
    let (mut setup, resolved) = match setup(&ui, args.chat.as_deref(), context) {
        Ok(setup) => setup,
        Err(message) => {
            ui.note(message);
            return Ok(ExitCode::from(2));
        }
    };
    // MCP servers start here (and end with the command); their calls run on this runtime.
    let runtime = crate::runtime::get()?;
    let hub = crate::mcp_setup::new_hub(context);
    let agents = crate::agent_setup::AskedAgents::default();
    // The chat's path as every part below takes it: absolute, resolved once here (a bare
    // `c.chat` has the folder "", which once became MCP servers' working directory).
    let chat = args.chat.as_deref().map(|chat| context.absolute(chat));
    let mcp = runtime.block_on(McpTools::discover(
        &hub,
        &resolved,
        context,
        chat.as_deref(),
        &[],
        setup.sandbox_wrap(),
    ));
    for warning in mcp.warnings() {
        ui.warn(warning);
    }
    setup.add_mcp(&mcp);
    for note in setup.add_agents(&resolved, false, &agents) {
        ui.warn(note);
    }
    let setup = std::sync::Arc::new(setup);
    let outcome = match args.action {
        None => list(&ui, &setup, &mcp, args.json),
        Some(ToolsAction::Run { name, input }) => {
            let setup = setup.clone();
            let excluded = mcp.exclusion(&name).cloned();
            let ui = ui.sub("run");
            runtime.block_on(async move {
                tokio::task::spawn_blocking(move || {
                    run_one(&ui, &setup, excluded.as_ref(), &name, &input)
                })
                .await
                .map_err(|error| anyhow::anyhow!("the tool thread failed: {error}"))?
            })
        }
    };
    runtime.block_on(hub.shutdown());
    runtime.block_on(agents.shutdown());
    outcome
}

fn list(ui: &Ui, setup: &Setup, mcp: &McpTools, as_json: bool) -> anyhow::Result<ExitCode> {
    let chain = &setup.chain;
    let enabled: Vec<&Registered> = setup.enabled();
    let available: Vec<&Registered> = setup
        .mcp
        .all
        .iter()
        .filter(|name| !setup.mcp.offered.contains(name))
        .filter_map(|name| setup.registry.get(name))
        .collect();
    let missing: Vec<&String> = setup
        .config
        .tools
        .enabled
        .iter()
        .filter(|name| setup.registry.get(name).is_none() && !is_mcp_item(mcp, name))
        .collect();
    let sandbox = match &setup.sandbox {
        Ok(()) => format!(
            "bwrap (network {})",
            if setup.config.sandbox.policy.network {
                "on"
            } else {
                "off"
            }
        ),
        Err(reason) => format!("none: {reason}"),
    };
    let mut out = ui.stdout();
    if as_json {
        let describe = |tool: &&Registered, offered: bool| {
            let decision = chain.decide(&tool.spec, &json!({}));
            json!({
                "name": tool.spec.name,
                "source": source(mcp, &tool.spec.name),
                "offered": offered,
                "description": tool.spec.description,
                "strict": tool.spec.strict,
                "async": tool.spec.is_async,
                "capabilities": tool.spec.capability_tags(),
                "input_schema": tool.spec.input_schema,
                "wire_name": flemma_provider::encode_tool_name(&tool.spec.name),
                "wire_schema": flemma_provider::tools::inject_harness_parameters(&to_definition(&tool.spec)),
                "approval": {"verdict": decision.verdict.as_str(), "resolver": decision.resolver, "note": decision.note},
            })
        };
        let tools: Vec<Value> = enabled
            .iter()
            .map(|tool| describe(tool, true))
            .chain(available.iter().map(|tool| describe(tool, false)))
            .collect();
        let servers: Vec<Value> = mcp.servers.iter().map(server_json).collect();
        let report = json!({
            "cwd": setup.ctx.cwd,
            "store": setup.store.dir(),
            "sandbox": sandbox,
            "tools": tools,
            "mcp_servers": servers,
            "mcp_notes": mcp.notes,
            "agents": setup.agents.iter().map(|agent| json!({
                "name": agent.name,
                "command": agent.describe(),
                "description": agent.description,
                "permissions": agent.permissions.as_str(),
            })).collect::<Vec<_>>(),
            "enabled_without_runner": missing,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "cwd:     {}", setup.ctx.cwd.display())?;
    writeln!(out, "store:   {}", setup.store.dir().display())?;
    writeln!(out, "sandbox: {sandbox}")?;
    for tool in enabled {
        let decision = chain.decide(&tool.spec, &json!({}));
        let verdict = match (&decision.verdict, &decision.note) {
            (Verdict::Deny { message }, _) => format!("deny ({message})"),
            (other, Some(note)) => format!("{} ({note})", other.as_str()),
            (other, None) => other.as_str().to_string(),
        };
        writeln!(out)?;
        writeln!(
            out,
            "{}{}  [{verdict} by {}]{}",
            tool.spec.name,
            source(mcp, &tool.spec.name)
                .map(|s| format!("  ({s})"))
                .unwrap_or_default(),
            decision.resolver,
            if tool.spec.capabilities.is_empty() {
                String::new()
            } else {
                format!("  capabilities: {}", tool.spec.capability_tags().join(", "))
            }
        )?;
        writeln!(out, "  {}", tool.spec.description)?;
        writeln!(out, "  input: {}", describe_inputs(&tool.spec.input_schema))?;
    }
    for server in &mcp.servers {
        writeln!(out)?;
        writeln!(out, "{}", server_line(server))?;
    }
    for agent in &setup.agents {
        writeln!(out)?;
        writeln!(out, "agent {}: {}", agent.name, agent.describe())?;
    }
    if !available.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "available, not offered (include them with tools.mcp.include or a chat's tools.enabled): {}",
            available
                .iter()
                .map(|t| t.spec.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if !missing.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "enabled in config but not runnable in this build: {}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `mcp:SERVER` for a tool of an MCP server, `None` for the others.
fn source(mcp: &McpTools, tool: &str) -> Option<String> {
    crate::mcp_setup::server_of(mcp, tool).map(|server| format!("mcp:{}", server.name))
}

/// Whether a `tools.enabled` item is an MCP name or glob (matched after discovery).
fn is_mcp_item(mcp: &McpTools, item: &str) -> bool {
    item.starts_with('!')
        || flemma_config::is_glob(item)
        || mcp
            .servers
            .iter()
            .any(|server| item.starts_with(&format!("{}.", server.name)))
}

/// One server as `flemmad tools`, `status` and `doctor` show it.
pub fn server_line(server: &flemma_mcp::ServerStatus) -> String {
    match &server.state {
        flemma_mcp::ServerState::Ready { tools, pid } => format!(
            "MCP server {}: running{}, {tools} tool{} — {}",
            server.name,
            pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
            if *tools == 1 { "" } else { "s" },
            server.describe
        ),
        flemma_mcp::ServerState::Failed { reason } => format!(
            "MCP server {}: not running — {reason} — {}",
            server.name, server.describe
        ),
    }
}

/// One server as JSON (`tools --json`, `status --json`).
pub fn server_json(server: &flemma_mcp::ServerStatus) -> Value {
    let (state, reason, pid, tools) = match &server.state {
        flemma_mcp::ServerState::Ready { tools, pid } => ("running", None, *pid, *tools),
        flemma_mcp::ServerState::Failed { reason } => ("failed", Some(reason.clone()), None, 0),
    };
    json!({
        "name": server.name,
        "transport": server.describe,
        "state": state,
        "reason": reason,
        "pid": pid,
        "tools": tools,
        "tool_names": server.tools.iter().map(|t| t.full_name.clone()).collect::<Vec<_>>(),
    })
}

/// `command: string, timeout: integer|null` from a schema's properties (label left out).
fn describe_inputs(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "(none)".into();
    };
    properties
        .iter()
        .filter(|(name, _)| name.as_str() != "label")
        .map(|(name, property)| {
            let kind = match property.get("type") {
                Some(Value::String(kind)) => kind.clone(),
                Some(Value::Array(kinds)) => kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".into(),
            };
            format!("{name}: {kind}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn run_one(
    ui: &Ui,
    setup: &Setup,
    excluded: Option<&Excluded>,
    name: &str,
    input: &str,
) -> anyhow::Result<ExitCode> {
    if let Some(excluded) = excluded {
        ui.note(excluded);
        return Ok(ExitCode::from(2));
    }
    let input: Value = match serde_json::from_str(input) {
        Ok(value @ Value::Object(_)) => value,
        Ok(other) => {
            ui.note(format!("the input must be a JSON object, got {other}"));
            return Ok(ExitCode::from(2));
        }
        Err(error) => {
            ui.note(format!(
                "the input is not valid JSON ({error}); quote it for the shell, e.g. '{{\"label\": \"x\", \"command\": \"ls\", \"timeout\": null}}'"
            ));
            return Ok(ExitCode::from(2));
        }
    };
    if setup.enabled_tool(name).is_none() && setup.registry.get(name).is_some() {
        ui.note(format!(
            "note: `{name}` is not enabled for this chat; running it anyway"
        ));
    }
    let call_id = format!("cli_{}", std::process::id());
    match setup
        .registry
        .execute(name, input, &setup.ctx, &setup.store, &call_id)
    {
        Ok(outcome) => {
            ui.write(&outcome.text)?;
            if !outcome.text.ends_with('\n') {
                ui.write("\n")?;
            }
            Ok(if outcome.is_error {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Err(error) => {
            ui.note(error);
            Ok(ExitCode::from(2))
        }
    }
}
