//! `flemmad doctor`: the daemon's runtime directory and sockets, and the systemd units.

use super::*;

/// The daemon's sockets in `$XDG_RUNTIME_DIR/flemma/` (`/tmp/flemma-$UID/` without it, as
/// the daemon itself decides): right owner and mode, and whether a daemon answers on them.
pub(super) fn check_daemon(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "daemon";
    let dir = crate::runtime_dir::RuntimePaths::dir_for(
        machine.var("XDG_RUNTIME_DIR").map(Path::new),
        machine.uid,
    );
    let parent = dir
        .parent()
        .map_or_else(|| dir.display().to_string(), |p| p.display().to_string());
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
                .hint(format!("check the permissions of {parent}")),
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
    for name in ["lsp.sock", "rpc.sock", "acp.sock"] {
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
                answering.join(", "),
                dir.display()
            ),
        ),
        (_, _) => Finding::new(
            CHECK,
            Status::Info,
            format!(
                "running: answers on {} in {}",
                answering.join(", "),
                dir.display()
            ),
        ),
    };
    findings.push(finding);
}

/// A `fail` when `path` is not owned by `uid` or its mode is not exactly `mode`.
pub(super) fn ownership_problem(
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

/// systemd user units: both present, and the service's `ExecStart` names an executable.
pub(super) fn check_systemd(machine: &Machine, findings: &mut Vec<Finding>) {
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
