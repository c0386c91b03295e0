//! `flemmad install-service`: writes the systemd user units (`flemmad.socket`, activating
//! `flemmad.service`) that start the daemon on the first connection.

use std::path::{Path, PathBuf};

use super::CliError;
use crate::process_context::ProcessContext;

#[derive(Debug, clap::Args)]
pub struct InstallServiceArgs {
    /// Print the units on stdout instead of writing them.
    #[arg(long)]
    pub print: bool,
}

/// What to run after the units are written.
pub const NEXT_COMMAND: &str =
    "systemctl --user daemon-reload && systemctl --user enable --now flemmad.socket";

/// The units as shipped in `clients/systemd/` (one source for both the files and this
/// command).
const SERVICE_TEMPLATE: &str = include_str!("../../clients/systemd/flemmad.service");
const SOCKET_UNIT: &str = include_str!("../../clients/systemd/flemmad.socket");

/// `flemmad.service`, its `ExecStart=` running `binary serve`.
pub fn service_unit(binary: &Path) -> String {
    let exec_start = format!("ExecStart={} serve", systemd_quote(binary));
    let mut unit = String::with_capacity(SERVICE_TEMPLATE.len() + exec_start.len());
    for line in SERVICE_TEMPLATE.lines() {
        if line.starts_with("ExecStart=") {
            unit.push_str(&exec_start);
        } else {
            unit.push_str(line);
        }
        unit.push('\n');
    }
    unit
}

/// `flemmad.socket`: the three sockets under `%t/flemma/` (the daemon tells them apart by path).
pub fn socket_unit() -> String {
    SOCKET_UNIT.to_owned()
}

/// A path for `ExecStart=`: quoted when it has spaces, `%` escaped.
fn systemd_quote(path: &Path) -> String {
    let text = path.display().to_string().replace('%', "%%");
    if text.contains(char::is_whitespace) || text.contains('"') {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        text
    }
}

fn units_dir(context: &ProcessContext) -> Option<PathBuf> {
    let config = context.dirs.config.clone()?;
    Some(config.join("systemd").join("user"))
}

pub fn run(args: InstallServiceArgs, context: &ProcessContext) -> Result<(), CliError> {
    let ui = super::Ui::new("install-service");
    let binary = context
        .executable()
        .map_err(str::to_owned)
        .and_then(|binary| std::fs::canonicalize(binary).map_err(|error| error.to_string()))
        .map_err(|error| {
            CliError::failed(
                "install-service",
                format!("cannot find the path of the running flemmad binary: {error}"),
            )
        })?;
    let service = service_unit(&binary);
    let socket = socket_unit();
    if args.print {
        ui.write(&format!(
            "# flemmad.service\n{service}\n# flemmad.socket\n{socket}"
        ))?;
        return Ok(());
    }
    let dir = units_dir(context).ok_or_else(|| {
        CliError::failed(
            "install-service",
            "neither XDG_CONFIG_HOME nor HOME is set; set one, or use --print and install the units yourself",
        )
    })?;
    std::fs::create_dir_all(&dir).map_err(|error| {
        CliError::failed(
            "install-service",
            format!("cannot create {}: {error}", dir.display()),
        )
    })?;
    for (name, text) in [("flemmad.service", &service), ("flemmad.socket", &socket)] {
        let path = dir.join(name);
        crate::fsutil::write_atomic(&path, text).map_err(|error| {
            CliError::failed(
                "install-service",
                format!("cannot write {}: {error:#}", path.display()),
            )
        })?;
        ui.line(&format!("wrote {}", path.display()))?;
    }
    ui.line(&format!("now run: {NEXT_COMMAND}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_template_has_exactly_one_exec_start() {
        assert_eq!(
            SERVICE_TEMPLATE
                .lines()
                .filter(|line| line.starts_with("ExecStart="))
                .count(),
            1
        );
        assert!(SOCKET_UNIT.contains("ListenStream=%t/flemma/lsp.sock"));
        assert!(SOCKET_UNIT.contains("ListenStream=%t/flemma/rpc.sock"));
        assert!(SOCKET_UNIT.contains("ListenStream=%t/flemma/acp.sock"));
    }

    #[test]
    fn exec_start_quotes_paths_with_spaces_and_escapes_percent() {
        let plain = service_unit(Path::new("/usr/bin/flemmad"));
        assert!(
            plain.contains("ExecStart=/usr/bin/flemmad serve\n"),
            "{plain}"
        );
        let odd = service_unit(Path::new("/home/a b/100%/flemmad"));
        assert!(
            odd.contains("ExecStart=\"/home/a b/100%%/flemmad\" serve\n"),
            "{odd}"
        );
    }
}
