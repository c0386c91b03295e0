//! `flemmad tools`: list the tools enabled for a chat, or run one as the engine would.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use flemma_tools::Verdict;
use flemma_tools::registry::Registered;
use serde_json::{Value, json};

use crate::chat;
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
fn setup(chat: Option<&Path>, config_path: Option<&Path>) -> Result<Setup, String> {
    match chat {
        Some(path) => {
            let loaded = chat::load("tools", path, config_path)
                .map_err(|e| crate::cli::CliError::from(e).report)?;
            let report = loaded.report(false);
            if loaded.analysis.has_blocking_diagnostics() {
                return Err(report.trim_end().to_string());
            }
            eprint!("{report}");
            ToolSetup::for_chat(&loaded.analysis, path)
        }
        None => {
            let input = chat::config_input(config_path);
            let errors = input.diagnostics();
            if !errors.is_empty() {
                let path = config_path.unwrap_or(Path::new("config.toml"));
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
            ToolSetup::new(resolved.config, None, auto_approve)
        }
    }
}

pub fn run(args: ToolsArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let setup = match setup(args.chat.as_deref(), config_path) {
        Ok(setup) => setup,
        Err(message) => {
            eprintln!("flemmad tools: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    match args.action {
        None => list(&setup, args.json),
        Some(ToolsAction::Run { name, input }) => run_one(&setup, &name, &input),
    }
}

fn list(setup: &Setup, as_json: bool) -> anyhow::Result<ExitCode> {
    let chain = &setup.chain;
    let enabled: Vec<&Registered> = setup.registry.enabled(&setup.config);
    let missing: Vec<&String> = setup
        .config
        .tools
        .enabled
        .iter()
        .filter(|name| setup.registry.get(name).is_none())
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
    let mut out = std::io::stdout().lock();
    if as_json {
        let tools: Vec<Value> = enabled
            .iter()
            .map(|tool| {
                let decision = chain.decide(&tool.spec, &json!({}));
                json!({
                    "name": tool.spec.name,
                    "description": tool.spec.description,
                    "strict": tool.spec.strict,
                    "async": tool.spec.is_async,
                    "capabilities": tool.spec.capability_tags(),
                    "input_schema": tool.spec.input_schema,
                    "wire_schema": flemma_provider::tools::inject_harness_parameters(&to_definition(&tool.spec)),
                    "approval": {"verdict": decision.verdict.as_str(), "resolver": decision.resolver, "note": decision.note},
                })
            })
            .collect();
        let report = json!({
            "cwd": setup.ctx.cwd,
            "store": setup.store.dir(),
            "sandbox": sandbox,
            "tools": tools,
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
            "{}  [{verdict} by {}]{}",
            tool.spec.name,
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

fn run_one(setup: &Setup, name: &str, input: &str) -> anyhow::Result<ExitCode> {
    let input: Value = match serde_json::from_str(input) {
        Ok(value @ Value::Object(_)) => value,
        Ok(other) => {
            eprintln!(
                "flemmad tools run: the input must be a JSON object, got {}",
                other
            );
            return Ok(ExitCode::from(2));
        }
        Err(error) => {
            eprintln!(
                "flemmad tools run: the input is not valid JSON ({error}); quote it for the shell, e.g. '{{\"label\": \"x\", \"command\": \"ls\", \"timeout\": null}}'"
            );
            return Ok(ExitCode::from(2));
        }
    };
    if !setup.config.tools.enabled.iter().any(|n| n == name) && setup.registry.get(name).is_some() {
        eprintln!(
            "flemmad tools run: note: `{name}` is not enabled for this chat; running it anyway"
        );
    }
    let call_id = format!("cli_{}", std::process::id());
    match setup
        .registry
        .execute(name, input, &setup.ctx, &setup.store, &call_id)
    {
        Ok(outcome) => {
            let mut out = std::io::stdout().lock();
            out.write_all(outcome.text.as_bytes())?;
            if !outcome.text.ends_with('\n') {
                out.write_all(b"\n")?;
            }
            out.flush()?;
            Ok(if outcome.is_error {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Err(error) => {
            eprintln!("flemmad tools run: {error}");
            Ok(ExitCode::from(2))
        }
    }
}
