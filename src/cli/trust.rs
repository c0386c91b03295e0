//! `flemmad trust DIR`, `--list`, `--remove DIR`: the folders whose chats flemmad trusts
//! (`docs/security.md`; the store is [`crate::trust`]).

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Ui};
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["dir", "list"])))]
pub struct TrustArgs {
    /// The folder to trust (every chat in it and below it), or with --remove to stop trusting.
    pub dir: Option<PathBuf>,
    /// List the trusted folders, and the `[trust] paths` of the configuration.
    #[arg(long, conflicts_with_all = ["dir", "remove"])]
    pub list: bool,
    /// Stop trusting DIR.
    #[arg(long, requires = "dir")]
    pub remove: bool,
}

pub fn run(args: TrustArgs, context: &ProcessContext) -> Result<(), CliError> {
    let ui = Ui::new("trust");
    if args.list {
        return list(&ui, context);
    }
    let Some(dir) = args.dir else {
        return Err(CliError::failed("trust", "name a folder, or use --list"));
    };
    let file = crate::trust::folders_file(&context.dirs).map_or_else(
        || "the trusted-folders file".to_owned(),
        |f| f.display().to_string(),
    );
    if args.remove {
        let removed = crate::trust::untrust_folder(&context.dirs, &context.absolute(&dir))
            .map_err(|error| CliError::failed("trust", format!("{error:#}")))?;
        if removed.is_empty() {
            return Err(CliError::failed(
                "trust",
                format!(
                    "{} is not a trusted folder (`flemmad trust --list` lists them; a folder trusted by `[trust] paths` is removed from the configuration file)",
                    dir.display()
                ),
            ));
        }
        for folder in removed {
            ui.note(format!(
                "{} is no longer trusted (removed from {file})",
                folder.display()
            ));
        }
        return Ok(());
    }
    let added = crate::trust::trust_folder(&context.dirs, &context.absolute(&dir))
        .map_err(|error| CliError::failed("trust", format!("{error:#}")))?;
    if added.is_empty() {
        ui.note(format!("{} is trusted already", dir.display()));
    }
    for folder in added {
        ui.note(format!(
            "trusted {} and every chat below it (in {file}); undo with `flemmad trust --remove {}`",
            folder.display(),
            super::progress::shell_quote(&folder.display().to_string())
        ));
    }
    Ok(())
}

fn list(ui: &Ui, context: &ProcessContext) -> Result<(), CliError> {
    let (folders, warning) = crate::trust::read_folders(&context.dirs);
    if let Some(warning) = warning {
        ui.warn(warning);
    }
    for folder in &folders {
        ui.line(&folder.display().to_string())?;
    }
    let input = crate::chat::config_input(context);
    let settings = flemma_config::resolve(&input.layers)
        .map(|resolved| resolved.config.trust)
        .ok();
    if let Some(settings) = &settings {
        for pattern in &settings.paths {
            ui.line(&format!("{pattern}\t(trust.paths in the configuration)"))?;
        }
        if settings.restricted {
            ui.note("trust.restricted is set in the configuration: no chat is trusted");
        }
    }
    let none = folders.is_empty() && settings.as_ref().is_none_or(|s| s.paths.is_empty());
    if none {
        ui.note(
            "no folder is trusted: every chat's frontmatter is untrusted (see `flemmad trust --help`)",
        );
    }
    Ok(())
}
