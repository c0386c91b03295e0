//! `flemmad doctor`: checks this machine's set-up and says, one finding per line, what is fine
//! and what to do about what is not.
//!
//! Every check reads the machine through [`Machine`] (the environment snapshot taken once) and
//! returns [`Finding`]s; nothing here changes a file. A `fail` is something that stops flemmad
//! from working as configured (exit 1); `warn` works with less; `info` is how things are (the
//! daemon not running, an editor not set up).

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use flemma_config::{Config, SandboxBackend};
use flemma_provider::ProviderKind;
use flemma_provider::credentials::{CredentialEnvironment, CredentialResolver, ResolverOptions};
use flemma_provider::http::credential_for;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::process_context::ProcessContext;
use crate::provider_setup::{client, provider_setup};

/// How long `--online` waits for the provider.
mod agents;
mod checkpoints;
mod config;
mod daemon;
mod editors;
mod mcp;
mod tools;

use agents::check_agents;
use checkpoints::check_checkpoints;
use config::{check_config, check_credentials, check_provider};
use daemon::{check_daemon, check_systemd};
use editors::{check_helix, check_neovim, check_vscode, check_zed};
use mcp::check_mcp;
use tools::{check_sandbox, check_search_tools};

const ONLINE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Args)]
#[command(after_long_help = "\
Checks, in order: config (the configuration file and its validity), credentials (found for \
the configured provider, and by which resolver; the value is never printed), provider (with \
--online: the provider lists its models), daemon (the sockets in $XDG_RUNTIME_DIR/flemma: \
directory 0700, sockets 0600, owned by you), sandbox (bwrap), search tools (rg, fd or \
fdfind), mcp (each configured MCP server starts and lists its tools), agents (each \
configured ACP agent's command resolves and it answers `initialize`), and each editor set-up found here (helix, neovim, vscode, zed: an `agent_servers` entry that runs `flemmad acp`, systemd).

Each finding is one line `STATUS CHECK: MESSAGE`, with `  fix: …` under it when there is \
something to do. STATUS is ok, warn (works, with less), fail (needs attention) or info (how \
things are: a daemon that is not running or an editor that is not set up is not a problem).

Exit status: 0 when nothing failed, 1 when a check failed.")]
pub struct DoctorArgs {
    /// Also ask the configured provider to list its models (network; at most 15 s).
    #[arg(long)]
    pub online: bool,
    /// Print a JSON array of {check, status, message, hint} instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
    Info,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Info => "info",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub status: Status,
    pub message: String,
    /// What to do (none when nothing needs doing).
    pub hint: Option<String>,
}

impl Finding {
    fn new(check: &'static str, status: Status, message: impl Into<String>) -> Self {
        Self {
            check,
            status,
            message: message.into(),
            hint: None,
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// What the checks look at: the variables of the process context (read once, in `main`).
#[derive(Debug)]
struct Machine {
    environment: CredentialEnvironment,
    home: Option<PathBuf>,
    config_home: Option<PathBuf>,
    uid: u32,
}

impl Machine {
    fn from_context(context: &ProcessContext) -> Self {
        let environment = context.credentials();
        let dirs = crate::user_dirs::UserDirs::from_vars(|name| {
            environment.var(name).map(std::ffi::OsString::from)
        });
        Self {
            environment,
            home: dirs.home,
            config_home: dirs.config,
            uid: rustix::process::getuid().as_raw(),
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.environment.var(name).filter(|value| !value.is_empty())
    }

    fn program(&self, name: &str) -> Option<PathBuf> {
        self.environment.find_executable(name)
    }
}

pub fn run(args: DoctorArgs, context: &ProcessContext) -> Result<ExitCode, CliError> {
    let ui = super::Ui::new("doctor");
    let machine = Machine::from_context(context);
    let mut findings = Vec::new();
    let config = check_config(context, &machine, &mut findings);
    if let Some(config) = &config {
        check_credentials(config, &machine, &mut findings)?;
        if args.online {
            check_provider(config, &machine, &mut findings)?;
        }
    } else {
        findings.push(Finding::new(
            "credentials",
            Status::Info,
            "not checked: the configuration above names the provider, and it has problems",
        ));
    }
    check_daemon(&machine, &mut findings);
    check_sandbox(context, config.as_ref(), &mut findings);
    check_search_tools(&machine, &mut findings);
    check_mcp(context, &mut findings);
    check_agents(context, &mut findings);
    check_checkpoints(context, &machine, &mut findings);
    check_helix(&machine, &mut findings);
    check_neovim(&machine, &mut findings);
    check_vscode(&machine, &mut findings);
    check_zed(&machine, &mut findings);
    check_systemd(&machine, &mut findings);

    let failed = findings.iter().any(|f| f.status == Status::Fail);
    if args.json {
        ui.json_pretty(&findings)?;
    } else {
        ui.write(&render(&findings))?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `STATUS CHECK: MESSAGE` per finding (continuation lines indented), `  fix: HINT` under it.
fn render(findings: &[Finding]) -> String {
    let mut out = String::new();
    for finding in findings {
        let mut lines = finding.message.lines();
        let first = lines.next().unwrap_or_default();
        out.push_str(&format!(
            "{:<4} {}: {first}\n",
            finding.status.as_str(),
            finding.check
        ));
        for line in lines {
            out.push_str(&format!("       {line}\n"));
        }
        if let Some(hint) = &finding.hint {
            out.push_str(&format!("       fix: {hint}\n"));
        }
    }
    let failed = findings.iter().filter(|f| f.status == Status::Fail).count();
    if failed == 0 {
        out.push_str("\nAll is well.\n");
    } else {
        let checks = if failed == 1 {
            "check needs"
        } else {
            "checks need"
        };
        out.push_str(&format!("\n{failed} {checks} attention.\n"));
    }
    out
}
