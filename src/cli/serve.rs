//! `flemmad serve`: runs the daemon (see `crate::daemon`).

use crate::daemon::{self, ServeOptions};
use crate::process_context::ProcessContext;

use super::CliError;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs, context: &ProcessContext) -> Result<(), CliError> {
    let options = ServeOptions {
        paths: context.runtime.clone(),
        context: std::sync::Arc::new(context.clone()),
    };
    daemon::serve(&options).map_err(|error| {
        tracing::error!(%error, "the daemon cannot go on");
        CliError::failed("serve", error)
    })
}
