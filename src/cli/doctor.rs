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
use crate::provider_setup::{client, provider_setup, runtime};

/// How long `--online` waits for the provider.
const ONLINE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Args)]
#[command(after_long_help = "\
Checks, in order: config (the configuration file and its validity), credentials (found for \
the configured provider, and by which resolver; the value is never printed), provider (with \
--online: the provider lists its models), daemon (the sockets in $XDG_RUNTIME_DIR/flemma: \
directory 0700, sockets 0600, owned by you), sandbox (bwrap), search tools (rg, fd or \
fdfind), and each editor set-up found here (helix, neovim, vscode, systemd).

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

/// What the checks look at: the environment of this process, read once.
#[derive(Debug)]
struct Machine {
    environment: CredentialEnvironment,
    home: Option<PathBuf>,
    config_home: Option<PathBuf>,
    uid: u32,
}

impl Machine {
    fn from_process() -> Self {
        let environment = CredentialEnvironment::from_process();
        let home = environment
            .var("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from);
        let config_home = environment
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .or_else(|| home.as_ref().map(|home| home.join(".config")));
        Self {
            environment,
            home,
            config_home,
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

pub fn run(args: DoctorArgs, config_path: Option<&Path>) -> Result<ExitCode, CliError> {
    let machine = Machine::from_process();
    let mut findings = Vec::new();
    let config = check_config(config_path, &machine, &mut findings);
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
    check_sandbox(config.as_ref(), &mut findings);
    check_search_tools(&machine, &mut findings);
    check_helix(&machine, &mut findings);
    check_neovim(&machine, &mut findings);
    check_vscode(&machine, &mut findings);
    check_systemd(&machine, &mut findings);

    let failed = findings.iter().any(|f| f.status == Status::Fail);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", render(&findings));
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

/// The configuration file: which one, and whether it is valid. Returns the resolved
/// configuration when it is.
fn check_config(
    explicit: Option<&Path>,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) -> Option<Config> {
    const CHECK: &str = "config";
    let input = crate::chat::config_input(explicit);
    let problems = input.diagnostics();
    if !problems.is_empty() {
        let place = input.user_file.clone().unwrap_or_default();
        let rendered = crate::chat::render_all(&place, None, &problems);
        findings.push(
            Finding::new(
                CHECK,
                Status::Fail,
                format!("{} has problems:\n{}", place.display(), rendered.trim_end()),
            )
            .hint(format!(
                "fix {} as the lines above say (docs/configuration.md lists every option)",
                place.display()
            )),
        );
        return None;
    }
    match &input.user_file {
        Some(file) => findings.push(Finding::new(
            CHECK,
            Status::Ok,
            format!("{} is valid", file.display()),
        )),
        None => {
            let expected =
                flemma_config::default_config_path(&|key| machine.var(key).map(str::to_owned));
            let message = match expected {
                Some(path) => format!(
                    "no configuration file ({} does not exist); the defaults apply",
                    path.display()
                ),
                None => "no configuration file (HOME is not set); the defaults apply".to_owned(),
            };
            findings.push(Finding::new(CHECK, Status::Info, message));
        }
    }
    match flemma_config::resolve(&input.layers) {
        Ok(resolved) => Some(resolved.config),
        Err(errors) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("the configuration does not resolve: {errors}"),
                )
                .hint("fix the configuration file as the message says"),
            );
            None
        }
    }
}

/// The credential of the configured provider: found, and by which resolver (never the value).
fn check_credentials(
    config: &Config,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) -> Result<(), CliError> {
    const CHECK: &str = "credentials";
    let kind = ProviderKind::from(config.provider);
    let (service, credential_kind) = credential_for(kind);
    let resolver = CredentialResolver::new(
        machine.environment.clone(),
        ResolverOptions {
            gcloud_path: Some(config.secrets.gcloud.path.clone()),
            ..ResolverOptions::default()
        },
    );
    let found = runtime()?.block_on(resolver.resolve_with_source(service, credential_kind));
    findings.push(match found {
        Ok((_secret, source)) => Finding::new(
            CHECK,
            Status::Ok,
            format!(
                "the {credential_kind} for {} (the configured provider) comes from {source}",
                kind.name()
            ),
        ),
        Err(error) if kind == ProviderKind::OpenAiCompatible => Finding::new(
            CHECK,
            Status::Info,
            format!(
                "no {credential_kind} for {} (fine for a local server that needs none)",
                kind.name()
            ),
        )
        .hint(format!(
            "if your server needs a key, set {}",
            error.env_var
        )),
        Err(error) => {
            let hint = format!(
                "set {} (or store it: secret-tool store --label={service} service {service} key {credential_kind})",
                error.env_var
            );
            Finding::new(
                CHECK,
                Status::Fail,
                format!(
                    "no {credential_kind} for {} (the configured provider): {}",
                    kind.name(),
                    error.attempts.join("; ")
                ),
            )
            .hint(hint)
        }
    });
    Ok(())
}

/// `--online`: the provider answers a model listing within [`ONLINE_TIMEOUT`].
fn check_provider(
    config: &Config,
    machine: &Machine,
    findings: &mut Vec<Finding>,
) -> Result<(), CliError> {
    const CHECK: &str = "provider";
    let mut setup = provider_setup(config, None, &machine.environment)?;
    setup.client.connect_timeout = setup.client.connect_timeout.min(ONLINE_TIMEOUT);
    setup.client.timeout = setup.client.timeout.min(ONLINE_TIMEOUT);
    let client = client(config, &setup, machine.environment.clone())?;
    let cancel = CancellationToken::new();
    let listed = runtime()?.block_on(async {
        tokio::time::timeout(
            ONLINE_TIMEOUT,
            client.list_models(setup.kind, &setup.options, &setup.endpoint, cancel.clone()),
        )
        .await
    });
    let base = &setup.endpoint.base_url;
    findings.push(match listed {
        Ok(Ok(models)) => {
            let has_model = models.iter().any(|m| m.id == config.model);
            let finding = Finding::new(
                CHECK,
                if has_model { Status::Ok } else { Status::Warn },
                format!(
                    "{} at {base} answers: {} models{}",
                    setup.kind.name(),
                    models.len(),
                    if has_model {
                        format!(", including {}", config.model)
                    } else {
                        format!(", but not the configured model {}", config.model)
                    }
                ),
            );
            if has_model {
                finding
            } else {
                finding.hint(format!(
                    "pick one `flemmad models {}` lists (set `model` in the configuration)",
                    setup.kind.name()
                ))
            }
        }
        Ok(Err(error)) => Finding::new(CHECK, Status::Fail, format!("{base}: {error}"))
            .hint("fix what the message says, then run `flemmad doctor --online` again"),
        Err(_) => Finding::new(
            CHECK,
            Status::Fail,
            format!(
                "{} at {base} did not answer within {} s",
                setup.kind.name(),
                ONLINE_TIMEOUT.as_secs()
            ),
        )
        .hint(format!(
            "check the network and the base URL ({} or `providers.{}.base_url`)",
            flemma_provider::http::base_url_env_var(setup.kind),
            setup.kind.name()
        )),
    });
    Ok(())
}

/// The daemon's sockets in `$XDG_RUNTIME_DIR/flemma/`: right owner and mode, and whether a
/// daemon answers on them.
fn check_daemon(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "daemon";
    let Some(runtime_dir) = machine.var("XDG_RUNTIME_DIR") else {
        findings.push(
            Finding::new(
                CHECK,
                Status::Info,
                "XDG_RUNTIME_DIR is not set, so there is no place for the daemon's sockets; editors run `flemmad lsp` on their own",
            )
            .hint("log in through a session that sets XDG_RUNTIME_DIR (systemd-logind does) to use the daemon"),
        );
        return;
    };
    let dir = Path::new(runtime_dir).join("flemma");
    let meta = match std::fs::symlink_metadata(&dir) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Info,
                    format!("not running ({} does not exist)", dir.display()),
                )
                .hint("start it with `flemmad serve`, or as a service (docs/daemon.md)"),
            );
            return;
        }
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("cannot read {}: {error}", dir.display()),
                )
                .hint(format!("check the permissions of {runtime_dir}")),
            );
            return;
        }
    };
    let mut healthy = true;
    if !meta.is_dir() {
        findings.push(
            Finding::new(
                CHECK,
                Status::Fail,
                format!("{} is not a directory", dir.display()),
            )
            .hint(format!(
                "remove it (`rm {}`); the daemon creates the directory",
                dir.display()
            )),
        );
        return;
    }
    if let Some(problem) = ownership_problem(&dir, &meta, machine.uid, 0o700) {
        healthy = false;
        findings.push(problem);
    }
    let mut answering = Vec::new();
    let mut present = 0;
    for name in ["lsp.sock", "rpc.sock"] {
        let socket = dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&socket) else {
            continue;
        };
        present += 1;
        if !meta.file_type().is_socket() {
            healthy = false;
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("{} is not a socket", socket.display()),
                )
                .hint(format!(
                    "stop the daemon, remove {} and start it again",
                    socket.display()
                )),
            );
            continue;
        }
        if let Some(problem) = ownership_problem(&socket, &meta, machine.uid, 0o600) {
            healthy = false;
            findings.push(problem);
        }
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            answering.push(name);
        }
    }
    let finding = match (present, answering.len()) {
        (0, _) => Finding::new(
            CHECK,
            Status::Info,
            format!("not running (no sockets in {})", dir.display()),
        )
        .hint("start it with `flemmad serve`, or as a service (docs/daemon.md)"),
        (_, 0) => Finding::new(
            CHECK,
            Status::Warn,
            format!(
                "not running: nothing answers on the sockets in {} (left by a daemon that stopped)",
                dir.display()
            ),
        )
        .hint("start `flemmad serve` (it replaces stale sockets)"),
        (_, _) if healthy => Finding::new(
            CHECK,
            Status::Ok,
            format!(
                "running: answers on {} in {}",
                answering.join(" and "),
                dir.display()
            ),
        ),
        (_, _) => Finding::new(
            CHECK,
            Status::Info,
            format!(
                "running: answers on {} in {}",
                answering.join(" and "),
                dir.display()
            ),
        ),
    };
    findings.push(finding);
}

/// A `fail` when `path` is not owned by `uid` or its mode is not exactly `mode`.
fn ownership_problem(
    path: &Path,
    meta: &std::fs::Metadata,
    uid: u32,
    mode: u32,
) -> Option<Finding> {
    if meta.uid() != uid {
        return Some(
            Finding::new(
                "daemon",
                Status::Fail,
                format!(
                    "{} belongs to uid {}, not to you (uid {uid}): another user could read your conversations",
                    path.display(),
                    meta.uid()
                ),
            )
            .hint(format!(
                "stop the daemon, remove {} and start the daemon as yourself",
                path.display()
            )),
        );
    }
    let actual = meta.permissions().mode() & 0o7777;
    (actual != mode).then(|| {
        Finding::new(
            "daemon",
            Status::Fail,
            format!(
                "{} has mode {actual:04o}; it must be {mode:04o} so that only you can reach the daemon",
                path.display()
            ),
        )
        .hint(format!("chmod {mode:o} {}", path.display()))
    })
}

/// The process sandbox for tools.
fn check_sandbox(config: Option<&Config>, findings: &mut Vec<Finding>) {
    const CHECK: &str = "sandbox";
    let (enabled, backend) = config.map_or((true, SandboxBackend::Auto), |c| {
        (c.sandbox.enabled, c.sandbox.backend)
    });
    if !enabled || backend == SandboxBackend::None {
        findings.push(
            Finding::new(
                CHECK,
                Status::Info,
                "disabled in the configuration: tools run without a process sandbox",
            )
            .hint("set `sandbox.enabled = true` and `sandbox.backend = \"auto\"` to sandbox bash"),
        );
        return;
    }
    findings.push(match flemma_tools::sandbox::bwrap_availability() {
        Ok(program) => Finding::new(
            CHECK,
            Status::Ok,
            format!("bwrap works ({})", program.display()),
        ),
        Err(reason) => {
            let status = if backend == SandboxBackend::Bwrap {
                Status::Fail
            } else {
                Status::Warn
            };
            Finding::new(
                CHECK,
                status,
                format!("no sandbox backend: {reason}; tools run unsandboxed and bash is never auto-approved as sandboxed"),
            )
            .hint("install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces")
        }
    });
}

/// `rg` and `fd` for the grep and find tools, or the fallback they use.
fn check_search_tools(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "search-tools";
    findings.push(match machine.program("rg") {
        Some(rg) => Finding::new(CHECK, Status::Ok, format!("rg found ({})", rg.display())),
        None => Finding::new(
            CHECK,
            Status::Warn,
            "rg is not on PATH: the grep tool falls back to `grep -P` (or `grep -E`), slower and without .gitignore",
        )
        .hint("install ripgrep (apt-get install ripgrep)"),
    });
    let fd = machine.program("fd").or_else(|| machine.program("fdfind"));
    findings.push(match fd {
        Some(fd) => Finding::new(CHECK, Status::Ok, format!("fd found ({})", fd.display())),
        None => Finding::new(
            CHECK,
            Status::Warn,
            "neither fd nor fdfind is on PATH: the find tool falls back to `git ls-files` in a work tree, else `find`",
        )
        .hint("install fd (apt-get install fd-find)"),
    });
}

/// Helix: `languages.toml` with the flemma server and the `chat` language, and the queries.
fn check_helix(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "helix";
    let Some(helix_dir) = machine.config_home.as_ref().map(|dir| dir.join("helix")) else {
        return;
    };
    let languages = helix_dir.join("languages.toml");
    let program = machine.program("hx").or_else(|| machine.program("helix"));
    let text = match std::fs::read_to_string(&languages) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if let Some(program) = program {
                findings.push(
                    Finding::new(
                        CHECK,
                        Status::Info,
                        format!(
                            "Helix is installed ({}) but not set up for .chat files ({} does not exist)",
                            program.display(),
                            languages.display()
                        ),
                    )
                    .hint("see docs/editors/helix.md (copy clients/helix/languages.toml)"),
                );
            }
            return;
        }
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("cannot read {}: {error}", languages.display()),
                )
                .hint("check the file's permissions"),
            );
            return;
        }
    };
    let table: toml::Table = match toml::from_str(&text) {
        Ok(table) => table,
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!(
                        "{} is not valid TOML: {}",
                        languages.display(),
                        error.message()
                    ),
                )
                .hint(format!(
                    "fix {} (Helix ignores it as it is)",
                    languages.display()
                )),
            );
            return;
        }
    };
    let server = table
        .get("language-server")
        .and_then(|servers| servers.get("flemma"));
    let chat_language = table
        .get("language")
        .and_then(toml::Value::as_array)
        .and_then(|languages| {
            languages
                .iter()
                .find(|l| l.get("name").and_then(toml::Value::as_str) == Some("chat"))
        });
    if server.is_none() && chat_language.is_none() {
        findings.push(
            Finding::new(
                CHECK,
                Status::Info,
                format!(
                    "not set up for .chat files ({} has no flemma server and no chat language)",
                    languages.display()
                ),
            )
            .hint("see docs/editors/helix.md (append clients/helix/languages.toml)"),
        );
        return;
    }
    let mut problems = Vec::new();
    match server {
        None => problems.push((
            "has no [language-server.flemma]".to_owned(),
            "add the [language-server.flemma] table of clients/helix/languages.toml".to_owned(),
        )),
        Some(server) => match server.get("command").and_then(toml::Value::as_str) {
            None => problems.push((
                "[language-server.flemma] has no `command`".to_owned(),
                "set `command = \"flemmad\"` and `args = [\"lsp\"]`".to_owned(),
            )),
            Some(command) => {
                let expanded = match (command.strip_prefix("~/"), &machine.home) {
                    (Some(rest), Some(home)) => home.join(rest).display().to_string(),
                    _ => command.to_owned(),
                };
                if machine.program(&expanded).is_none() {
                    problems.push((
                        format!("the flemma server's command `{command}` is not an executable on PATH"),
                        "install flemmad (`cargo install --path .`) or give its full path in `command`".to_owned(),
                    ));
                }
            }
        },
    }
    match chat_language {
        None => problems.push((
            "has no [[language]] named `chat`".to_owned(),
            "add the [[language]] table of clients/helix/languages.toml".to_owned(),
        )),
        Some(language) => {
            let servers = language
                .get("language-servers")
                .and_then(toml::Value::as_array)
                .map(|servers| {
                    servers.iter().any(|s| {
                        s.as_str()
                            .or_else(|| s.get("name").and_then(toml::Value::as_str))
                            == Some("flemma")
                    })
                })
                .unwrap_or(false);
            if !servers {
                problems.push((
                    "the `chat` language does not list the flemma server".to_owned(),
                    "set `language-servers = [\"flemma\"]` in the chat [[language]]".to_owned(),
                ));
            }
        }
    }
    for (problem, fix) in &problems {
        findings.push(
            Finding::new(
                CHECK,
                Status::Fail,
                format!("{} {problem}", languages.display()),
            )
            .hint(fix.clone()),
        );
    }
    let queries = helix_dir.join("runtime/queries/chat");
    let highlights = queries.join("highlights.scm");
    if !highlights.is_file() {
        findings.push(
            Finding::new(
                CHECK,
                Status::Warn,
                format!(
                    "no {}: .chat files open without role and tool-header highlighting",
                    highlights.display()
                ),
            )
            .hint(format!(
                "mkdir -p {} && cp clients/helix/runtime/queries/chat/*.scm {}",
                queries.display(),
                queries.display()
            )),
        );
    }
    if problems.is_empty() {
        findings.push(Finding::new(
            CHECK,
            Status::Ok,
            format!(
                "{} has the flemma server and the chat language (check with `hx --health chat`)",
                languages.display()
            ),
        ));
    }
}

/// Neovim: only whether `nvim` is here (its set-up lives in the user's own Lua config).
fn check_neovim(machine: &Machine, findings: &mut Vec<Finding>) {
    if let Some(nvim) = machine.program("nvim") {
        findings.push(
            Finding::new(
                "neovim",
                Status::Info,
                format!(
                    "nvim found ({}); its set-up is in your own config",
                    nvim.display()
                ),
            )
            .hint(r#"see docs/editors/neovim.md (`require("flemmad").setup({})` in init.lua)"#),
        );
    }
}

/// VS Code: an installed flemma extension with a readable manifest.
fn check_vscode(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "vscode";
    let Some(extensions) = machine.home.as_ref().map(|h| h.join(".vscode/extensions")) else {
        return;
    };
    let installed: Vec<PathBuf> = std::fs::read_dir(&extensions)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains("flemma"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    if installed.is_empty() {
        if let Some(code) = machine.program("code") {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Info,
                    format!(
                        "VS Code is installed ({}) without the flemma extension",
                        code.display()
                    ),
                )
                .hint("see docs/editors/vscode.md (code --install-extension flemma-*.vsix)"),
            );
        }
        return;
    }
    for dir in installed {
        let manifest = dir.join("package.json");
        let parsed = std::fs::read_to_string(&manifest)
            .map_err(|error| error.to_string())
            .and_then(|text| {
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
            });
        findings.push(match parsed {
            Ok(manifest) => {
                let version = manifest
                    .get("version")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("unknown version");
                Finding::new(
                    CHECK,
                    Status::Ok,
                    format!("extension installed: {} ({version})", dir.display()),
                )
            }
            Err(error) => Finding::new(
                CHECK,
                Status::Fail,
                format!(
                    "the extension in {} is broken: {}: {error}",
                    dir.display(),
                    manifest.display()
                ),
            )
            .hint("reinstall it (code --install-extension flemma-*.vsix --force)"),
        });
    }
}

/// systemd user units: both present, and the service's `ExecStart` names an executable.
fn check_systemd(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "systemd";
    let Some(units) = machine.config_home.as_ref().map(|d| d.join("systemd/user")) else {
        return;
    };
    let service = units.join("flemmad.service");
    let socket = units.join("flemmad.socket");
    match (service.is_file(), socket.is_file()) {
        (false, false) => findings.push(
            Finding::new(
                CHECK,
                Status::Info,
                format!("no flemmad user units in {}", units.display()),
            )
            .hint("`flemmad install-service` or docs/daemon.md, to start the daemon at login"),
        ),
        (true, true) => {
            let exec = std::fs::read_to_string(&service)
                .ok()
                .and_then(|text| {
                    text.lines()
                        .find_map(|line| line.trim().strip_prefix("ExecStart=").map(str::to_owned))
                })
                .and_then(|line| line.split_whitespace().next().map(str::to_owned));
            findings.push(match exec {
                Some(program) if machine.program(&program).is_some() => Finding::new(
                    CHECK,
                    Status::Ok,
                    format!(
                        "{} and flemmad.socket are installed (ExecStart {program})",
                        service.display()
                    ),
                ),
                Some(program) => Finding::new(
                    CHECK,
                    Status::Fail,
                    format!(
                        "{}: ExecStart names {program}, which is not an executable",
                        service.display()
                    ),
                )
                .hint("run `flemmad install-service` again (it writes the path of this flemmad), then `systemctl --user daemon-reload`"),
                None => Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("{} has no ExecStart= line", service.display()),
                )
                .hint("run `flemmad install-service` again"),
            });
        }
        (has_service, _) => {
            let missing = if has_service { &socket } else { &service };
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("incomplete: {} is missing", missing.display()),
                )
                .hint("run `flemmad install-service` (it writes both units)"),
            );
        }
    }
}
