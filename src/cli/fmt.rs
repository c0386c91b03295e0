//! `flemmad fmt FILE [--check] [--convert-lua]`.

use std::process::ExitCode;

use clap::Args;

use super::ChatPath;
use crate::fsutil;
use crate::process_context::ProcessContext;

#[derive(Debug, Args)]
pub struct FmtArgs {
    /// The .chat file to normalise.
    pub file: ChatPath,
    /// Write nothing; exit 1 and list the changes when the file is not normalised.
    #[arg(long)]
    pub check: bool,
    /// Also convert Lua frontmatter (Flemma's legacy form) to Rhai. Only the declarative
    /// subset converts (`name = "value"`, `flemma.opt.x = value`, `flemma.opt.tools:append(…)`);
    /// anything else is refused and the file is left as it is.
    #[arg(long)]
    pub convert_lua: bool,
}

/// The Lua frontmatter of `text` converted to Rhai: `Ok(None)` when there is no Lua
/// frontmatter, an error when it is more than the declarative subset.
fn convert_lua(text: &str) -> anyhow::Result<Option<String>> {
    let doc = flemma_syntax::parse(text);
    let Some(frontmatter) = doc
        .frontmatter()
        .filter(|f| f.language == flemma_syntax::FrontmatterLanguage::Lua)
    else {
        return Ok(None);
    };
    let Some(rhai) = flemma_template::lua_frontmatter_to_rhai(doc.slice(frontmatter.code)) else {
        anyhow::bail!(
            "the Lua frontmatter uses more than the declarative subset that converts (`name = \"value\"`, `flemma.opt.x = value`, `flemma.opt.tools:append(\"…\")`); rewrite it in Rhai by hand (see docs/templates.md); the file was not changed"
        );
    };
    let (language, code) = (frontmatter.language_range, frontmatter.code);
    let mut out = String::with_capacity(text.len() + rhai.len());
    out.push_str(&text[..language.start]);
    out.push_str("rhai");
    out.push_str(&text[language.end..code.start]);
    out.push_str(&rhai);
    out.push_str(&text[code.end..]);
    Ok(Some(out))
}

pub fn run(args: FmtArgs, context: &ProcessContext) -> anyhow::Result<ExitCode> {
    let ui = super::Ui::new("fmt");
    let text = match fsutil::read_chat(&context.dirs, &args.file) {
        Ok(text) => text,
        Err(error) => {
            ui.note(format!("{error:#}"));
            return Ok(ExitCode::from(2));
        }
    };
    let original = text.as_str();
    let converted = if args.convert_lua {
        match convert_lua(original) {
            Ok(converted) => converted,
            Err(error) => {
                ui.stderr(&format!("{}:1: error: {error:#}\n", args.file.display()));
                return Ok(ExitCode::from(1));
            }
        }
    } else {
        None
    };
    let text = converted.as_deref().unwrap_or(original);
    let doc = flemma_syntax::parse(text);
    if !args.convert_lua
        && doc
            .frontmatter()
            .is_some_and(|f| f.language == flemma_syntax::FrontmatterLanguage::Lua)
    {
        ui.stderr(&format!(
            "{}:1: note: the frontmatter is Lua, which flemmad does not run; `flemmad fmt --convert-lua {}` converts it to Rhai\n",
            args.file.display(),
            args.file.display()
        ));
    }
    let changes = doc.format_edits();
    let change_count = changes.len() + usize::from(converted.is_some());
    if change_count == 0 {
        if args.check {
            ui.stderr(&format!("{}: already formatted\n", args.file.display()));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let index = doc.line_index();
    if args.check {
        if converted.is_some() {
            ui.line(&format!(
                "{}:1: would convert the Lua frontmatter to Rhai",
                args.file.display()
            ))?;
        }
        for (edit, description) in &changes {
            let line = index.line_of(edit.range.start) + 1;
            ui.line(&format!(
                "{}:{line}: would {description}",
                args.file.display()
            ))?;
        }
        return Ok(ExitCode::from(1));
    }
    let edits: Vec<_> = changes.iter().map(|(e, _)| e.clone()).collect();
    let formatted = flemma_syntax::apply_edits(text, &edits)?;
    fsutil::write_chat(&context.dirs, &args.file, &formatted)?;
    ui.stderr(&format!(
        "{}: {change_count} change(s) written\n",
        args.file.display()
    ));
    Ok(ExitCode::SUCCESS)
}
