//! `flemmad serve`: runs the daemon (see `crate::daemon`).

use crate::daemon::{self, ServeOptions};
use crate::runtime_dir::RuntimePaths;

use super::CliError;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs, config: Option<&std::path::Path>) -> Result<(), CliError> {
    let options = ServeOptions {
        paths: RuntimePaths::from_env(),
        config_path: config.map(std::path::Path::to_owned),
    };
    daemon::serve(&options).map_err(|error| {
        tracing::error!(%error, "the daemon cannot go on");
        CliError::failed("serve", error)
    })
}
