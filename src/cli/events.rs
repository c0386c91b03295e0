//! `flemmad events`: prints a running daemon's events as JSON lines.

use std::io::{BufRead as _, BufReader, Write as _};

use serde_json::{Value, json};

use crate::process_context::ProcessContext;

use super::CliError;

#[derive(Debug, clap::Args)]
pub struct EventsArgs {}

/// What to print when no daemon answers.
pub const NO_DAEMON: &str =
    "no daemon runs; start it with `flemmad serve` or `systemctl --user start flemmad.socket`";

pub fn run(_args: EventsArgs, context: &ProcessContext) -> Result<(), CliError> {
    let paths = &context.runtime;
    let Some(mut stream) = crate::daemon::socket::connect_running(paths, &paths.rpc_socket) else {
        return Err(CliError::failed("events", NO_DAEMON));
    };
    let subscribe =
        json!({"jsonrpc": "2.0", "id": 1, "method": flemma_protocol::methods::SUBSCRIBE});
    writeln!(stream, "{subscribe}").map_err(|error| {
        CliError::failed("events", format!("cannot talk to the daemon: {error}"))
    })?;
    let reader = stream.try_clone().map_err(|error| {
        CliError::failed("events", format!("cannot read from the daemon: {error}"))
    })?;
    let mut stdout = super::Ui::new("events").stdout();
    for line in BufReader::new(reader).lines() {
        let line = line.map_err(|error| {
            CliError::failed(
                "events",
                format!("the connection to the daemon failed: {error}"),
            )
        })?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            tracing::warn!(%line, "the daemon sent a line that is not JSON");
            continue;
        };
        if let Some(error) = message.get("error") {
            return Err(CliError::failed(
                "events",
                format!("the daemon refused: {error}"),
            ));
        }
        if message.get("method").and_then(Value::as_str)
            == Some(flemma_protocol::methods::EVENT_NOTIFICATION)
        {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            writeln!(stdout, "{params}").and_then(|()| stdout.flush())?;
        }
    }
    // The daemon closed the connection (it stopped).
    Ok(())
}
