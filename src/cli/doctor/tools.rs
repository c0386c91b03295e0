//! `flemmad doctor`: the sandbox and the search tools.

use super::*;

/// The process sandbox for tools.
pub(super) fn check_sandbox(config: Option<&Config>, findings: &mut Vec<Finding>) {
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
