//! `flemmad doctor`: the sandbox and the search tools.

use super::*;

/// The process sandbox for tools.
pub(super) fn check_sandbox(
    context: &ProcessContext,
    config: Option<&Config>,
    findings: &mut Vec<Finding>,
) {
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
    let program = match flemma_tools::sandbox::bwrap_availability() {
        Ok(program) => program,
        Err(reason) => {
            let status = if backend == SandboxBackend::Bwrap {
                Status::Fail
            } else {
                Status::Warn
            };
            findings.push(
                Finding::new(
                    CHECK,
                    status,
                    format!("no sandbox backend: {reason}; tools run unsandboxed and bash is never auto-approved as sandboxed"),
                )
                .hint("install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces"),
            );
            return;
        }
    };
    let defaults;
    let config = match config {
        Some(config) => config,
        None => match flemma_config::resolve(&[]) {
            Ok(resolved) => {
                defaults = resolved.config;
                &defaults
            }
            Err(_) => return,
        },
    };
    findings.push(match crate::tool_setup::probe_sandbox(context, config) {
        Ok(probe) => {
            let limit = |value: Option<u64>, unit: &str| match value {
                Some(n) => format!("{n}{unit}"),
                None => "no limit".to_owned(),
            };
            let held = [
                (probe.capabilities_dropped, "no capability"),
                (probe.private_tmp, "a private /tmp and cache"),
                (probe.chat_read_only, "chat files read-only"),
            ];
            let failed: Vec<&str> = held.iter().filter(|(ok, _)| !ok).map(|(_, what)| *what).collect();
            let message = format!(
                "bwrap works ({}): no capability, a private /tmp and cache, chat files, .git and flemmad's own files read-only; limits per call: {} processes, {} of memory",
                program.display(),
                limit(probe.limits.processes.map(u64::from), ""),
                limit(probe.limits.memory_bytes.map(|b| b / (1024 * 1024)), " MiB"),
            );
            if failed.is_empty() {
                Finding::new(CHECK, Status::Ok, message)
            } else {
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("bwrap runs ({}) but a trial command did not get: {}", program.display(), failed.join(", ")),
                )
                .hint("report this with the output of `bwrap --version`: the sandbox is weaker than docs/security.md says")
            }
        }
        Err(reason) => Finding::new(
            CHECK,
            Status::Fail,
            format!("bwrap is installed ({}) but a trial command could not run in the sandbox: {reason}", program.display()),
        )
        .hint("check that user namespaces are allowed (`bwrap --ro-bind / / true`)"),
    });
}

/// `rg` and `fd` for the grep and find tools, or the fallback they use.
pub(super) fn check_search_tools(machine: &Machine, findings: &mut Vec<Finding>) {
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
