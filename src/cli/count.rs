//! `flemmad count FILE`: count the input tokens of a chat with the provider's counting endpoint.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use flemma_provider::credentials::CredentialEnvironment;
use tokio_util::sync::CancellationToken;

use crate::chat::{self, LoadError};
use crate::provider_setup::{client, provider_setup, runtime};

#[derive(Debug, Args)]
pub struct CountArgs {
    /// The .chat file to count.
    pub file: PathBuf,
}

pub fn run(args: CountArgs, config_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let loaded = match chat::load(&args.file, config_path) {
        Ok(loaded) => loaded,
        Err(LoadError::Unreadable(error)) => {
            eprintln!("flemmad count: {error:#}");
            return Ok(ExitCode::from(2));
        }
        Err(LoadError::Blocked(report)) => {
            eprint!("{report}");
            return Ok(ExitCode::from(1));
        }
    };
    eprint!("{}", loaded.warnings);
    let environment = CredentialEnvironment::from_process();
    let setup = provider_setup(&loaded.config, Some(&args.file), &environment)?;
    let client = client(&loaded.config, &setup, environment)?;
    let counted = runtime()?.block_on(client.count_tokens(
        setup.kind,
        &loaded.conversation,
        &setup.options,
        &setup.endpoint,
        CancellationToken::new(),
    ));
    match counted {
        Ok(tokens) => {
            let window = setup.model.as_ref().map(|m| m.context_window);
            match window {
                Some(window) if window > 0 => println!(
                    "{tokens} input tokens ({:.1}% of {}'s {window}-token context window)",
                    tokens as f64 * 100.0 / window as f64,
                    setup.options.model
                ),
                _ => println!("{tokens} input tokens"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("flemmad count: {error}");
            Ok(ExitCode::from(1))
        }
    }
}
