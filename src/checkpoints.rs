//! Where a chat's checkpoints are kept and what they record: the shadow repository under
//! `$XDG_STATE_HOME/flemma/checkpoints/`, the project a chat's calls change, the limits of its
//! configuration. The checkpoints themselves (recording, the monitor that spares a scan,
//! `changes`, `rewind`, pruning) are `flemma_tools::checkpoints`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use flemma_tools::checkpoints::{CheckpointError, Checkpoints, Limits, Phase, changes_files};

use crate::process_context::ProcessContext;
use crate::user_dirs::UserDirs;

/// The limits the chat at `chat` is recorded under (its resolved configuration's
/// `[checkpoints]`), for the commands that work on its checkpoints outside a driver (a
/// rewind's own snapshot must leave out the same large files); [`Limits::FALLBACK`] when
/// the configuration cannot be read.
pub fn limits_of_chat(context: &ProcessContext, chat: &Path) -> Limits {
    crate::chat::load("rewind", flemma_ide::Purpose::Inspect, chat, context)
        .ok()
        .and_then(|loaded| {
            let resolved = loaded.analysis.config.as_ref()?;
            Some((&resolved.config.checkpoints).into())
        })
        .unwrap_or(Limits::FALLBACK)
}

/// The checkpoints of the chat at `chat` (absolute), whose project is `project`.
pub fn for_chat(
    context: &ProcessContext,
    chat: &Path,
    project: &Path,
) -> Result<Checkpoints, CheckpointError> {
    let dirs = &context.dirs;
    let state = dirs.flemma_state().ok_or(CheckpointError::NoHome)?;
    let project_key = crate::user_dirs::chat_key(project);
    // flemmad's own folders when they lie in the project (its state holds the repository).
    let excluded = [&dirs.state, &dirs.cache]
        .into_iter()
        .flatten()
        .filter_map(|dir| {
            let inside = dir.join("flemma");
            let inside = inside.strip_prefix(project).ok()?;
            Some(format!("/{}/", inside.display()))
        })
        .collect();
    let checkpoints = Checkpoints::new(
        state
            .join("checkpoints")
            .join(format!("{}.git", &project_key[..32])),
        project.to_path_buf(),
        crate::user_dirs::chat_key(chat)[..32].to_owned(),
    )
    .excluding(excluded);
    // `FLEMMAD_WATCH=poll` turns inotify off for checkpoints too: each one scans.
    if context.poll_files {
        return Ok(checkpoints.without_monitor());
    }
    Ok(checkpoints)
}

/// The checkpoints of `chat` in its project (its git work tree, else its folder).
pub fn of(context: &ProcessContext, chat: &Path) -> Result<Checkpoints, CheckpointError> {
    let chat = context.absolute(chat);
    let home = context.dirs.home.as_deref();
    let project = flemma_config::reach::chat_project(&chat, home, |dir| dir.join(".git").exists());
    for_chat(context, &chat, &own_tree(&chat, project))
}

/// The checkpoints to record for calls of `chat`, unless its project is too broad to
/// record: the home directory or `/` (a chat kept directly in either).
pub fn recording(context: &ProcessContext, chat: &Path, limits: Limits) -> Option<Checkpoints> {
    let checkpoints = of(context, chat)
        .map(|checkpoints| checkpoints.with_limits(limits))
        .map_err(|error| tracing::info!(%error, "no checkpoints"))
        .ok()?;
    (!too_broad(checkpoints.project(), context.dirs.home.as_deref())).then_some(checkpoints)
}

/// A project too broad to record: `/` or the home directory itself.
fn too_broad(project: &Path, home: Option<&Path>) -> bool {
    project.parent().is_none()
        || home.is_some_and(|home| flemma_protocol::document::normalize(home) == project)
}

/// The tree recorded for the chat at `chat` whose project is `project`: the project, unless
/// the chat's folder lies in a folder the project's repository ignores (a scratch project
/// under a repository's ignored `target/` or `build/`): that repository's files are not the
/// chat's, and its view would see none of the chat's, so the chat's folder is recorded
/// (with its own `.gitignore` files, and whatever repositories enclose it).
fn own_tree(chat: &Path, project: PathBuf) -> PathBuf {
    let start = flemma_config::reach::project_start(chat);
    if start == project || !start.starts_with(&project) {
        return project;
    }
    let ignored = Command::new("git")
        .arg("-C")
        .arg(&project)
        .args([
            "-c",
            "core.fsmonitor=false",
            "check-ignore",
            "--quiet",
            "--",
        ])
        .arg(&start)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if ignored { start } else { project }
}

/// The checkpoints of the chat at `chat` under its configuration's limits, for the commands
/// that work on them outside a driver (`flemmad changes`/`rewind`, `flemma/changes`/`rewind`).
pub fn of_chat(context: &ProcessContext, chat: &Path) -> Result<Checkpoints, CheckpointError> {
    let limits = limits_of_chat(context, chat);
    of(context, chat).map(|checkpoints| checkpoints.with_limits(limits))
}

/// `flemma/changes`: what the calls of the chat at `chat` changed (only `tool_id`'s when
/// given), as data.
pub fn changes_result(
    context: &ProcessContext,
    chat: &Path,
    tool_id: Option<&str>,
) -> Result<flemma_protocol::engine::ChangesResult, CheckpointError> {
    use flemma_protocol::engine::{CallChanges, ChangedFile, ChangesResult};
    let calls = tool_id.map(|id| vec![id.to_owned()]);
    let changes = of(context, chat)?.call_changes(calls.as_deref())?;
    Ok(ChangesResult {
        calls: changes
            .into_iter()
            .map(|call| CallChanges {
                tool_id: call.tool_id,
                tool: call.tool_name,
                files: call
                    .files
                    .into_iter()
                    .map(|file| ChangedFile {
                        path: file.path,
                        from: file.from,
                        added: file.added,
                        removed: file.removed,
                    })
                    .collect(),
                diff: call.diff,
            })
            .collect(),
    })
}

/// How many files each call changed, by chat: the code lenses' cache, owned by the language
/// server session that asks ([`ChangedFiles::of`]; no process-wide global).
#[derive(Debug, Default)]
pub struct ChangedFiles {
    known: HashMap<PathBuf, KnownChanges>,
}

/// A chat's counts, with its checkpoints (so its project is found once) and the tip of its
/// branch they were counted at.
#[derive(Debug)]
struct KnownChanges {
    checkpoints: Checkpoints,
    tip: Option<String>,
    counts: HashMap<String, usize>,
}

impl ChangedFiles {
    /// How many files each call of the chat at `chat` changed, by tool use id (the editors'
    /// code lenses). Asked on every `textDocument/codeLens`: kept per chat while its branch's
    /// tip is the same, which costs one small file read; computed again, in one git process,
    /// once a checkpoint was recorded or rewound. `None` when the chat has no checkpoints to
    /// read.
    pub fn of(&mut self, context: &ProcessContext, chat: &Path) -> Option<HashMap<String, usize>> {
        let checkpoints = match self.known.get(chat) {
            Some(entry) => {
                let tip = entry.checkpoints.tip();
                if tip == entry.tip {
                    return Some(entry.counts.clone());
                }
                entry.checkpoints.clone()
            }
            None => of(context, chat).ok()?,
        };
        let tip = checkpoints.tip();
        let counts = checkpoints
            .file_counts()
            .map_err(|error| tracing::debug!(%error, "no changes for the code lenses"))
            .ok()?;
        // A handful of chats are open at once; a long-lived session forgets the others.
        if self.known.len() >= 64 {
            self.known.clear();
        }
        self.known.insert(
            chat.to_owned(),
            KnownChanges {
                checkpoints,
                tip,
                counts: counts.clone(),
            },
        );
        Some(counts)
    }
}

/// What the checkpoints take on disk: the folder of the shadow repositories, their bytes, and
/// how many projects they record (`flemmad doctor`). `None` without a state folder.
pub fn space_used(dirs: &UserDirs) -> Option<(PathBuf, u64, usize)> {
    let dir = dirs.flemma_state()?.join("checkpoints");
    let projects = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "git"))
        .count();
    let bytes = flemma_tools::checkpoints::directory_size(&dir);
    Some((dir, bytes, projects))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_directory_and_the_root_are_never_recorded() {
        let home = Path::new("/home/me");
        assert!(too_broad(Path::new("/"), Some(home)));
        assert!(too_broad(
            Path::new("/home/me"),
            Some(Path::new("/home/me/"))
        ));
        assert!(!too_broad(Path::new("/home/me/project"), Some(home)));
        assert!(!too_broad(Path::new("/srv/x"), None));
    }
}
