//! `flemmad status FILE [--json]`: the resolved configuration and the layer of each value, the
//! enabled tools, every unresolved tool call with what the approval chain decides for it, and
//! the jobs the file mentions (protocol/status.md).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use flemma_protocol::engine::JobState;
use flemma_protocol::status::{
    Approval, ChatStatus, JobStatus, McpServerStatus, ToolStatus, UnresolvedCall,
};
use flemma_syntax::{Document, SuffixValue};
use serde_json::{Map, Value};

use super::CliError;
use super::proposed::{input_of, proposed_diff, unresolved_ids};
use crate::chat;
use crate::driver_lock::DriverLock;
use crate::process_context::ProcessContext;
use crate::tool_setup::ToolSetup;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The .chat file.
    pub file: PathBuf,
    /// Print the stable JSON form (protocol/status.md).
    #[arg(long)]
    pub json: bool,
    /// Do not ask a running daemon: only what the file and the configuration say (no
    /// `daemon:` line, no live job states, no usage of the daemon).
    #[arg(long)]
    pub no_daemon: bool,
    /// Show what each unresolved `write` and `edit` would change, as a diff against the file
    /// as it is now (the JSON form always has it).
    #[arg(long)]
    pub diff: bool,
}

pub fn run(args: StatusArgs, context: &ProcessContext) -> Result<(), CliError> {
    let loaded = chat::load("status", flemma_ide::Purpose::Inspect, &args.file, context)?;
    // The chat by its absolute path for every part below (a bare `c.chat` has the folder "",
    // which once became MCP servers' working directory); `args.file` only in messages.
    let chat = context.absolute(&args.file);
    let Some(resolved) = &loaded.analysis.config else {
        return Err(CliError::blocked(
            "status",
            loaded.report(false),
            "the configuration does not resolve; fix the errors above",
        ));
    };
    let mut tools = ToolSetup::for_chat(context, &loaded.analysis, &chat)
        .map_err(|message| CliError::failed("status", message))?;
    // The chat's MCP servers are started to show their state and tools.
    let runtime = crate::runtime::get().map_err(|e| CliError::failed("status", e.to_string()))?;
    let hub = crate::mcp_setup::new_hub(context);
    let agents = crate::agent_setup::AskedAgents::default();
    let mcp = runtime.block_on(crate::mcp_setup::McpTools::discover(
        &hub,
        resolved,
        context,
        Some(&chat),
        &[],
        tools.sandbox_wrap(),
    ));
    runtime.block_on(hub.shutdown());
    runtime.block_on(agents.shutdown());
    tools.add_mcp(&mcp);
    let _ = tools.add_agents(resolved, false, &agents);
    let doc = &*loaded.analysis.document;
    let send_pid = running_send(&context.dirs, &chat);
    // A running daemon knows what its engine does with the chat (jobs, usage).
    let engine = if args.no_daemon {
        None
    } else {
        super::via_daemon::engine_status(context, &chat)
    };
    let mut jobs = jobs(doc, send_pid.is_some());
    if let Some(engine) = &engine {
        for job in &mut jobs {
            if let Some(live) = engine.jobs.iter().find(|j| j.job_id == job.job_id)
                && job.state != JobState::Delivered
            {
                job.state = live.state;
            }
        }
    }
    let status = ChatStatus {
        file: args.file.display().to_string(),
        config: serde_json::to_value(&resolved.config).ok(),
        config_sources: resolved
            .provenance()
            .into_iter()
            .filter(|(_, layer)| *layer != flemma_config::LayerKind::Defaults)
            .map(|(path, layer)| (path, Value::String(layer.as_str().to_owned())))
            .collect::<Map<_, _>>(),
        sandbox: match &tools.sandbox {
            Ok(()) => format!(
                "bwrap (network {})",
                if resolved.config.sandbox.policy.network {
                    "on"
                } else {
                    "off"
                }
            ),
            Err(reason) => format!("none: {reason}"),
        },
        mode: resolved.config.mode.as_str().to_owned(),
        tools: tools
            .enabled()
            .into_iter()
            .map(|tool| ToolStatus {
                name: tool.spec.name.clone(),
                approval: approval(tools.chain.decide(&tool.spec, &Value::Object(Map::new()))),
            })
            .collect(),
        unresolved: unresolved(doc, &tools),
        jobs,
        send_pid,
        daemon: engine.clone(),
        usage: engine
            .as_ref()
            .and_then(|engine| serde_json::to_value(&engine.usage).ok()),
        mcp_servers: mcp.servers.iter().map(mcp_server_status).collect(),
        agents: tools
            .agents
            .iter()
            .map(|agent| flemma_protocol::status::AgentStatus {
                name: agent.name.clone(),
                command: agent.describe(),
                description: agent.description.clone(),
                permissions: agent.permissions.as_str().to_owned(),
            })
            .collect(),
        rate_limits: rate_limits(&context.dirs, resolved.config.provider, engine.as_ref()),
        // Estimated: `status` makes no request (`flemmad count` asks the provider).
        context: crate::context::estimate(
            &mut flemma_provider::Meter::new(),
            &loaded.analysis,
            &chat,
            &tools.definitions(),
            context,
        ),
    };
    let mut out = super::Ui::new("status").stdout();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
        return Ok(());
    }
    writeln!(out, "file:    {}", status.file)?;
    let trust = &loaded.analysis.trust;
    writeln!(
        out,
        "trust:   {} ({})",
        if trust.trusted {
            "trusted"
        } else {
            "untrusted"
        },
        trust.reason
    )?;
    writeln!(out, "sandbox: {}", status.sandbox)?;
    writeln!(
        out,
        "mode:    {} ({})",
        resolved.config.mode.as_str(),
        resolved.config.mode.description()
    )?;
    if let Some(mode) = engine.as_ref().and_then(|engine| engine.mode.as_deref()) {
        writeln!(
            out,
            "         the daemon runs its next send in {mode} mode (flemma.mode); the frontmatter may make it stricter"
        )?;
    }
    if let Some(context) = &status.context {
        writeln!(out, "context: {}", crate::context::line(context))?;
        if let Some(advice) = crate::context::advice(context) {
            writeln!(out, "         {advice}")?;
        }
    }
    match send_pid {
        Some(pid) => writeln!(out, "send:    running (pid {pid})")?,
        None => writeln!(out, "send:    none running")?,
    }
    if let Some(engine) = &engine {
        let mut line = format!("daemon:  {}", engine.state);
        if !engine.running_tools.is_empty() {
            line.push_str(&format!(", running {}", engine.running_tools.join(", ")));
        }
        if let Some(last) = &engine.last_stop {
            line.push_str(&format!(" (last cycle: {last})"));
        }
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "\nconfiguration (values not at their default, and their layer):"
    )?;
    let config = status.config.clone().unwrap_or(Value::Null);
    for (path, layer) in &status.config_sources {
        let value = path
            .split('.')
            .try_fold(&config, |v, key| v.get(key))
            .map_or_else(|| "?".to_owned(), Value::to_string);
        writeln!(
            out,
            "  {path} = {value}  [{}]",
            layer.as_str().unwrap_or("?")
        )?;
    }
    writeln!(out, "\ntools:")?;
    for tool in &status.tools {
        writeln!(
            out,
            "  {}  [{} by {}]",
            tool.name, tool.approval.verdict, tool.approval.resolver
        )?;
    }
    for server in &mcp.servers {
        writeln!(out, "  {}", super::tools::server_line(server))?;
    }
    for note in &mcp.notes {
        writeln!(out, "  {note}")?;
    }
    for agent in &status.agents {
        writeln!(out, "  agent {}: {}", agent.name, agent.command)?;
    }
    writeln!(out, "\nunresolved tool calls: {}", status.unresolved.len())?;
    for call in &status.unresolved {
        let decision = call.approval.as_ref().map_or_else(
            || "not an enabled tool".to_owned(),
            |a| match &a.message {
                Some(message) => format!("{} by {}: {message}", a.verdict, a.resolver),
                None => format!("{} by {}", a.verdict, a.resolver),
            },
        );
        writeln!(
            out,
            "  `{}` ({}): {}  [{decision}]",
            call.tool_name, call.tool_id, call.status
        )?;
        if args.diff {
            let change = match (&call.diff, &call.diff_error) {
                (Some(diff), _) => Some(Ok(diff.clone())),
                (None, Some(error)) => Some(Err(error.clone())),
                (None, None) => None,
            };
            if let Some(change) = change {
                write!(out, "{}", super::progress::indented_diff(&change))?;
            }
        }
    }
    writeln!(out, "\njobs: {}", status.jobs.len())?;
    for job in &status.jobs {
        writeln!(
            out,
            "  {} ({}): {}",
            job.job_id,
            job.tool_id,
            job.state.as_str()
        )?;
    }
    let now = crate::usage_report::unix_now();
    match &engine {
        Some(engine) => writeln!(
            out,
            "\nusage (this daemon): {}",
            crate::usage_report::line(
                &flemma_protocol::engine::UsageTotals {
                    // Said below, with when they were reported.
                    rate_limits: None,
                    ..engine.usage.clone()
                },
                now
            )
        )?,
        None => writeln!(out, "\nusage: not recorded in the file")?,
    }
    if let Some(limits) = &status.rate_limits {
        let when = limits.observed_at.map_or_else(
            || "now".to_owned(),
            |at| {
                format!(
                    "as of {} ago",
                    flemma_provider::codex::span((now - at) / 60)
                )
            },
        );
        writeln!(
            out,
            "rate limits ({}, {when}): {}",
            limits.provider,
            crate::usage_report::windows(
                &flemma_protocol::engine::RateLimits {
                    windows: limits.windows.clone()
                },
                now
            )
        )?;
    }
    Ok(())
}

/// The rate limits of the chat's subscription: what a daemon running it last saw, else what
/// any send of this user kept ([`crate::usage_report::remember`]).
fn rate_limits(
    dirs: &crate::user_dirs::UserDirs,
    provider: flemma_config::Provider,
    engine: Option<&flemma_protocol::engine::EngineStatus>,
) -> Option<flemma_protocol::status::ObservedRateLimits> {
    let name = provider.as_str();
    if let Some(limits) = engine.and_then(|e| e.usage.rate_limits.as_ref()) {
        return Some(flemma_protocol::status::ObservedRateLimits {
            provider: name.to_owned(),
            observed_at: None,
            windows: limits.windows.clone(),
        });
    }
    let kept = crate::usage_report::last(dirs, name)?;
    Some(flemma_protocol::status::ObservedRateLimits {
        provider: kept.provider,
        observed_at: Some(kept.observed_at),
        windows: kept.rate_limits.windows,
    })
}

fn mcp_server_status(server: &flemma_mcp::ServerStatus) -> McpServerStatus {
    let (state, reason, pid) = match &server.state {
        flemma_mcp::ServerState::Ready { pid, .. } => ("running", None, *pid),
        flemma_mcp::ServerState::Failed { reason } => ("failed", Some(reason.clone()), None),
    };
    McpServerStatus {
        name: server.name.clone(),
        transport: server.describe.clone(),
        state: state.to_owned(),
        reason,
        pid,
        tools: server.tools.iter().map(|t| t.full_name.clone()).collect(),
    }
}

fn approval(decision: flemma_tools::approval::Decision) -> Approval {
    let message = match &decision.verdict {
        flemma_tools::Verdict::Deny { message } => Some(message.clone()),
        _ => None,
    };
    Approval {
        verdict: decision.verdict.as_str().to_owned(),
        resolver: decision.resolver,
        message: message.or(decision.note),
    }
}

fn unresolved(doc: &Document, tools: &ToolSetup) -> Vec<UnresolvedCall> {
    unresolved_ids(doc)
        .into_iter()
        .map(|(tool_id, tool_name, status)| {
            let input = input_of(doc, &tool_id);
            let (diff, diff_error) = match proposed_diff(tools, &tool_name, &input) {
                Some(Ok(diff)) => (Some(diff), None),
                Some(Err(error)) => (None, Some(error)),
                None => (None, None),
            };
            UnresolvedCall {
                approval: tools.decide(&tool_name, &input).map(approval),
                tool_id,
                tool_name,
                status,
                input,
                diff,
                diff_error,
            }
        })
        .collect()
}

fn jobs(doc: &Document, send_running: bool) -> Vec<JobStatus> {
    let mut jobs = Vec::new();
    for message in doc.messages() {
        for (_, result) in message.tool_results() {
            let Some(SuffixValue::String(job_id)) =
                result.suffix.as_ref().and_then(|s| s.get("job"))
            else {
                continue;
            };
            let state = if doc.job_result(job_id).is_some() {
                JobState::Delivered
            } else if send_running {
                JobState::Running
            } else {
                JobState::Orphaned
            };
            jobs.push(JobStatus {
                job_id: job_id.clone(),
                tool_id: result.tool_use_id.clone(),
                state,
            });
        }
    }
    jobs
}

/// The pid of the `flemmad send` that holds the chat's lock (its lock file names it while it
/// runs and is emptied when it ends; a pid whose process is gone is ignored).
fn running_send(dirs: &crate::user_dirs::UserDirs, chat: &Path) -> Option<u32> {
    DriverLock::owner(dirs, chat).map(|owner| owner.pid)
}
