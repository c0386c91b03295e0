//! No server outlives flemmad: stdio servers are started through flemmad itself
//! (`flemmad __mcp-stdio-shim PID -- COMMAND ARGS…`), which asks the kernel to send it SIGTERM
//! when its parent dies and then becomes the server (`exec`). An orderly exit closes the
//! servers itself; this covers a flemmad that is killed.
//!
//! The kernel's "parent" is the thread that started the child, so servers are started on the
//! runtime's threads, which live as long as the process's runtime (never on a pool thread
//! that may end while idle).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

/// The hidden first argument that makes `flemmad` run as the shim.
pub const SHIM_ARG: &str = "__mcp-stdio-shim";

/// The argument vector that starts `command` through the shim at `flemmad`.
pub fn wrap(flemmad: &std::path::Path, command: &[String]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        flemmad.as_os_str().to_owned(),
        SHIM_ARG.into(),
        std::process::id().to_string().into(),
        "--".into(),
    ];
    argv.extend(command.iter().map(OsString::from));
    argv
}

/// Runs the shim with the arguments after [`SHIM_ARG`] (`PID -- COMMAND ARGS…`): returns only
/// when it cannot become the server, with the reason.
pub fn run(args: &[OsString]) -> String {
    let (Some(parent), Some(separator)) = (args.first(), args.get(1)) else {
        return "usage: flemmad __mcp-stdio-shim PID -- COMMAND [ARGS…]".into();
    };
    let Some(command) = args.get(2) else {
        return "usage: flemmad __mcp-stdio-shim PID -- COMMAND [ARGS…]".into();
    };
    if separator != "--" {
        return "usage: flemmad __mcp-stdio-shim PID -- COMMAND [ARGS…]".into();
    }
    if let Err(error) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
    {
        return format!("cannot ask for the parent-death signal: {error}");
    }
    // The parent may have died before the request above: then nobody is left to wait for us.
    let parent_now = rustix::process::getppid().map(|pid| pid.as_raw_nonzero().get().to_string());
    if parent_now.as_deref() != parent.to_str() {
        return "flemmad ended before the MCP server started".into();
    }
    let error = std::process::Command::new(command).args(&args[3..]).exec();
    format!("cannot run {}: {error}", command.to_string_lossy())
}
