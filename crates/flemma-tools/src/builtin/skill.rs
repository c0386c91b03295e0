//! The `read_skill` tool: the Markdown of one skill from `tools.skills_dir` (`<name>.md`, or
//! `<name>/SKILL.md` when there is no flat file). Declared only when the directory holds at
//! least one skill; its description lists the catalogue.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::context::{Outcome, RunContext};
use crate::spec::{ToolSpec, strict_object_schema};

pub const NAME: &str = "read_skill";
/// Longest description shown in the catalogue.
const MAX_DESCRIPTION_CHARS: usize = 160;

/// One skill of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
}

/// Every skill in `dir`, sorted by name. A missing or unreadable directory has none.
pub fn catalogue(dir: &Path) -> Vec<Skill> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut skills: Vec<Skill> = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let name = if path.is_dir() {
            file_name.clone()
        } else if let Some(stem) = file_name.strip_suffix(".md") {
            stem.to_string()
        } else {
            continue;
        };
        if skills.iter().any(|s| s.name == name) {
            continue;
        }
        if let Some(path) = skill_file(dir, &name) {
            let description = std::fs::read_to_string(&path)
                .map(|t| describe(&t))
                .unwrap_or_else(|_| "(unreadable)".into());
            skills.push(Skill {
                name,
                description,
                path,
            });
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// `<dir>/<name>.md`, else `<dir>/<name>/SKILL.md`, when it is a file.
fn skill_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let flat = dir.join(format!("{name}.md"));
    if flat.is_file() {
        return Some(flat);
    }
    let nested = dir.join(name).join("SKILL.md");
    nested.is_file().then_some(nested)
}

/// The `description:` of a leading `---` frontmatter block, else the first line of prose.
fn describe(markdown: &str) -> String {
    let mut body = markdown;
    if let Some(rest) = markdown.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---")
    {
        let front = &rest[..end];
        if let Some(d) = front
            .lines()
            .find_map(|l| l.strip_prefix("description:"))
            .map(|d| d.trim().trim_matches(['"', '\'']))
            .filter(|d| !d.is_empty())
        {
            return clip(d);
        }
        body = &rest[end + 4..];
    }
    body.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .map(clip)
        .unwrap_or_else(|| "(no description)".into())
}

fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_DESCRIPTION_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(MAX_DESCRIPTION_CHARS).collect();
    format!("{cut}…")
}

/// The tool's definition for the skills in `dir`, or `None` when there are none (the tool is
/// then not declared).
pub fn spec(dir: &Path) -> Option<ToolSpec> {
    let skills = catalogue(dir);
    if skills.is_empty() {
        return None;
    }
    let mut description = String::from(
        "Read the full instructions of a skill before doing a task it covers. Skills:\n",
    );
    for s in &skills {
        description.push_str(&format!("  {} — {}\n", s.name, s.description));
    }
    Some(ToolSpec {
        name: NAME.into(),
        description: description.trim_end().to_string(),
        input_schema: strict_object_schema(vec![(
            "name",
            json!({"type": "string", "description": "Skill name, exactly as listed in the description"}),
        )]),
        strict: true,
        is_async: false,
        capabilities: vec![],
    })
}

/// Reads a skill from `skills_dir` (the resolved `tools.skills_dir`).
pub fn run(_ctx: &RunContext, input: &Value, skills_dir: &Path) -> Outcome {
    let Some(name) = input.get("name").and_then(Value::as_str) else {
        return Outcome::error(
            "read_skill needs `name`: one of the skills listed in its description",
        );
    };
    let skills = catalogue(skills_dir);
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    let available = if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    };
    let name = name.trim();
    if name.is_empty() || name.contains(['/', '\\']) || name.contains("..") || name.starts_with('.')
    {
        return Outcome::error(format!(
            "\"{name}\" is not a skill name — give a name exactly as listed, without a path. Available skills: {available}"
        ));
    }
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        return Outcome::error(format!(
            "No skill named \"{name}\". Available skills: {available}"
        ));
    };
    match std::fs::read(&skill.path) {
        Ok(bytes) => Outcome::ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) => Outcome::error(format!(
            "the skill \"{name}\" ({}) cannot be read: {e}",
            skill.path.display()
        )),
    }
}
