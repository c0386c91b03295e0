//! `flemmad install-service`: writes the systemd user units (`flemmad.socket`, activating
//! `flemmad.service`) that start the daemon on the first connection.

use std::path::{Path, PathBuf};

use super::CliError;

#[derive(Debug, clap::Args)]
pub struct InstallServiceArgs {
    /// Print the units on stdout instead of writing them.
    #[arg(long)]
    pub print: bool,
}

/// What to run after the units are written.
pub const NEXT_COMMAND: &str =
    "systemctl --user daemon-reload && systemctl --user enable --now flemmad.socket";

/// `flemmad.service`, running `binary serve`.
pub fn service_unit(binary: &Path) -> String {
    format!(
        "[Unit]
Description=flemmad, the daemon that makes .chat files live LLM conversations
Requires=flemmad.socket
After=flemmad.socket

[Service]
Type=notify
ExecStart={binary} serve
Restart=on-failure

[Install]
WantedBy=default.target
",
        binary = systemd_quote(binary)
    )
}

/// `flemmad.socket`: the two sockets, named as `flemmad serve` expects them.
pub fn socket_unit() -> String {
    "[Unit]
Description=flemmad sockets (LSP and RPC)

[Socket]
ListenStream=%t/flemma/lsp.sock
FileDescriptorName=lsp
ListenStream=%t/flemma/rpc.sock
FileDescriptorName=rpc
SocketMode=0600
DirectoryMode=0700
Service=flemmad.service

[Install]
WantedBy=sockets.target
"
    .to_owned()
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

fn units_dir() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("systemd").join("user"))
}

pub fn run(args: InstallServiceArgs) -> Result<(), CliError> {
    let binary = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|error| {
            CliError::failed(
                "install-service",
                format!("cannot find the path of the running flemmad binary: {error}"),
            )
        })?;
    let service = service_unit(&binary);
    let socket = socket_unit();
    if args.print {
        print!("# flemmad.service\n{service}\n# flemmad.socket\n{socket}");
        return Ok(());
    }
    let dir = units_dir().ok_or_else(|| {
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
        println!("wrote {}", path.display());
    }
    println!("now run: {NEXT_COMMAND}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
