//! Built-in personalities: `include("urn:flemma:personality:<name>")`.

use std::path::Path;

use crate::engine::format_date;
use crate::environment::{Ambient, Environment};
use crate::origin::Origin;

/// The URN prefix `include()` recognises.
pub(crate) const URN_PREFIX: &str = "urn:flemma:personality:";

/// The built-in personality names.
pub const PERSONALITIES: [&str; 1] = ["coding-assistant"];

/// Renders the personality `name`, or says which names exist.
pub(crate) fn render(
    name: &str,
    environment: &Environment,
    origin: &Origin,
) -> Result<String, String> {
    if !PERSONALITIES.contains(&name) {
        let suggestion = PERSONALITIES
            .iter()
            .map(|candidate| (strsim::jaro_winkler(name, candidate), candidate))
            .filter(|(score, _)| *score > 0.7)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, candidate)| format!(" Did you mean '{candidate}'?"))
            .unwrap_or_default();
        return Err(format!(
            "unknown personality '{name}'.{suggestion} Built in: {}",
            PERSONALITIES.join(", ")
        ));
    }
    let ambient = {
        let mut cache = environment
            .personality_cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.get_or_insert_with(|| gather(environment)).clone()
    };
    Ok(coding_assistant(&ambient, environment, origin))
}

fn gather(environment: &Environment) -> Ambient {
    let mut context = environment.host.environment();
    if context.enabled_tools.is_empty() {
        // A host that does not know the resolved tools: resolve them from the layers below the
        // frontmatter and this frontmatter.
        let layer = environment
            .opt
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .layer
            .clone();
        let mut layers = environment.config_layers.as_ref().clone();
        layers.push(layer);
        if let Ok(resolved) = flemma_config::resolve(&layers) {
            context.enabled_tools = resolved.enabled_tools();
        }
    }
    let mut directories: Vec<&Path> = Vec::new();
    if let Some(dir) = environment.chat_path.as_deref().and_then(Path::parent) {
        directories.push(dir);
    }
    if let Some(cwd) = context.cwd.as_deref() {
        if !directories.contains(&cwd) {
            directories.push(cwd);
        }
    }
    let mut project_files = Vec::new();
    for dir in directories {
        for name in ["AGENTS.md", "CLAUDE.md"] {
            let path = dir.join(name);
            if let Ok(bytes) = environment.reader.read(&*environment.host, &path) {
                if let Ok(text) = String::from_utf8(bytes) {
                    project_files.push((path, text));
                }
            }
        }
    }
    Ambient {
        context,
        project_files,
    }
}

fn coding_assistant(ambient: &Ambient, environment: &Environment, origin: &Origin) -> String {
    let seconds = environment
        .now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let mut out = String::from(
        "You are a coding assistant working in the user's project through tools. Read before you \
         edit, make small verifiable changes, run the tests, and say plainly what you did and what \
         you could not do.\n",
    );
    out.push_str("\n# Tools\n\n");
    if ambient.context.enabled_tools.is_empty() {
        out.push_str("No tools are enabled in this conversation.\n");
    } else {
        for tool in &ambient.context.enabled_tools {
            out.push_str(&format!("- {tool}\n"));
        }
    }
    out.push_str("\n# Environment\n\n");
    if let Some(cwd) = &ambient.context.cwd {
        out.push_str(&format!("- Working directory: {}\n", cwd.display()));
    }
    let file = if origin.filename.is_empty() {
        environment
            .chat_path
            .as_ref()
            .map_or_else(|| "(unsaved)".to_string(), |p| p.display().to_string())
    } else {
        origin.filename.clone()
    };
    out.push_str(&format!("- Conversation file: {file}\n"));
    if let Some(branch) = &ambient.context.git_branch {
        out.push_str(&format!("- Git branch: {branch}\n"));
    }
    out.push_str(&format!(
        "- Date: {}\n",
        format_date(seconds, "%A %d %B %Y")
    ));
    for (path, text) in &ambient.project_files {
        out.push_str(&format!("\n# Project context ({})\n\n", path.display()));
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}
