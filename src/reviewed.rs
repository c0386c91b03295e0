//! What a pending `write` or `edit` was reviewed against (issue 35): when a call stops to wait
//! for approval, the file it would change is recorded as it is then (its SHA-256, or that it
//! does not exist). When the approved call runs, the file is compared with that record first:
//! a file changed in between (by you, another program, another call) means the diff that was
//! reviewed is not what the call would do, and the call writes nothing and says so.
//!
//! One record per chat, `$XDG_STATE_HOME/flemma/reviewed/<chat key>.json` (where no tool of
//! the chat can write), so a daemon restarted between the proposal and the approval still
//! checks. A call's entry is the first state seen (recorded once, while the call is pending)
//! and is removed when the call runs. The file is read from disk (as the diffs of `status
//! --diff` and the hover are computed).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::user_dirs::UserDirs;

/// The tools whose pending calls are checked: the ones whose change is reviewed as a diff
/// (`flemma_tools::review::proposed_change`).
const CHECKED: [&str; 2] = [
    flemma_tools::builtin::write::NAME,
    flemma_tools::builtin::edit::NAME,
];

/// The file a call was reviewed against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Base {
    /// The file, resolved as the tool resolves it.
    path: PathBuf,
    /// Its SHA-256 (hex) then; `None`: it did not exist.
    sha256: Option<String>,
    /// Some hunks only were approved (`flemma/approveHunks`): what the call runs instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partial: Option<Partial>,
}

/// A call approved in part: the input that applies the approved hunks only, and what its
/// result tells the model about the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Partial {
    input: Value,
    note: String,
}

/// What an approved call runs, once its file is checked ([`check`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// Its input, as the chat says.
    AsWritten,
    /// Some hunks only were approved: this input instead (it applies those), and this note
    /// after the tool's result (which hunks were rejected, and why).
    Narrowed { input: Value, note: String },
}

/// One change of the records at a time in this process (the calls of one answer are checked
/// on threads of their own; one driver per chat, so no other process writes its record).
fn guard() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn record_file(dirs: &UserDirs, chat: &Path) -> Option<PathBuf> {
    let dir = dirs.flemma_state()?.join("reviewed");
    Some(dir.join(format!("{}.json", crate::user_dirs::chat_key(chat))))
}

fn read(dirs: &UserDirs, chat: &Path) -> BTreeMap<String, Base> {
    record_file(dirs, chat)
        .and_then(|file| std::fs::read(file).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn save(dirs: &UserDirs, chat: &Path, bases: &BTreeMap<String, Base>) -> anyhow::Result<()> {
    let Some(file) = record_file(dirs, chat) else {
        anyhow::bail!("no state folder (set HOME or XDG_STATE_HOME)");
    };
    if bases.is_empty() {
        return match std::fs::remove_file(&file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error.into()),
            _ => Ok(()),
        };
    }
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    crate::fsutil::write_atomic(&file, &serde_json::to_string(bases)?)
}

/// The file a `write` or `edit` call names, resolved as the tool resolves it; `None` for
/// other tools and inputs without a path.
fn target(name: &str, input: &Value, ctx: &flemma_tools::RunContext) -> Option<PathBuf> {
    if !CHECKED.contains(&name) {
        return None;
    }
    ctx.resolve(input.get("path")?.as_str()?).ok()
}

/// The file's SHA-256 (hex), `None` when it does not exist; an error when it cannot be read.
fn digest(path: &Path) -> std::io::Result<Option<String>> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        context.update(&buffer[..read]);
    }
    Ok(Some(
        context
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    ))
}

/// The calls of `chat` now waiting for approval: each `write` and `edit` not recorded yet gets
/// its file's state recorded (what its diff is computed against until it is approved).
pub fn pending(
    dirs: &UserDirs,
    chat: &Path,
    calls: &[flemma_engine::PendingCall],
    ctx: &flemma_tools::RunContext,
) {
    let _guard = guard();
    let mut bases = read(dirs, chat);
    let mut added = false;
    for call in calls {
        if bases.contains_key(&call.tool_id) {
            continue;
        }
        let Some(path) = target(&call.tool_name, &call.input, ctx) else {
            continue;
        };
        // A file that cannot be read is not checked (the tool says why when it runs).
        let Ok(sha256) = digest(&path) else {
            continue;
        };
        bases.insert(
            call.tool_id.clone(),
            Base {
                path,
                sha256,
                partial: None,
            },
        );
        added = true;
    }
    if added && let Err(error) = save(dirs, chat, &bases) {
        tracing::warn!(chat = %chat.display(), "cannot record what the pending calls were reviewed against ({error:#}); they will run unchecked");
    }
}

/// Some hunks of the pending call `tool_id` are approved: when it runs, it runs `input` (which
/// applies those hunks to `path`, computed against the file as it is now) and its result ends
/// with `note`. The file is recorded as it is now: the hunks were reviewed against it.
pub fn approve_in_part(
    dirs: &UserDirs,
    chat: &Path,
    tool_id: &str,
    path: &Path,
    input: Value,
    note: String,
) -> Result<(), String> {
    let sha256 = digest(path).map_err(|error| {
        format!(
            "{} cannot be read to record what its hunks were approved against ({error})",
            path.display()
        )
    })?;
    let _guard = guard();
    let mut bases = read(dirs, chat);
    bases.insert(
        tool_id.to_owned(),
        Base {
            path: path.to_owned(),
            sha256,
            partial: Some(Partial { input, note }),
        },
    );
    save(dirs, chat, &bases).map_err(|error| {
        format!("cannot record which hunks were approved ({error:#}); nothing was approved")
    })
}

/// Forgets that some hunks of `tool_id` were approved (the approval was refused).
pub fn forget_partial(dirs: &UserDirs, chat: &Path, tool_id: &str) {
    let _guard = guard();
    let mut bases = read(dirs, chat);
    if let Some(base) = bases.get_mut(tool_id)
        && base.partial.take().is_some()
        && let Err(error) = save(dirs, chat, &bases)
    {
        tracing::warn!(chat = %chat.display(), "cannot update what the pending calls were reviewed against ({error:#})");
    }
}

/// Before the approved call `tool_id` runs: `Err` (the tool's error text; nothing may be
/// written) when the file it changes is no longer what it was while the call waited for
/// approval; else what it runs ([`Checked`]). The call's record is removed either way.
pub fn check(
    dirs: &UserDirs,
    chat: &Path,
    tool_id: &str,
    name: &str,
    input: &Value,
    ctx: &flemma_tools::RunContext,
) -> Result<Checked, String> {
    let base = {
        let _guard = guard();
        let mut bases = read(dirs, chat);
        let Some(base) = bases.remove(tool_id) else {
            return Ok(Checked::AsWritten);
        };
        if let Err(error) = save(dirs, chat, &bases) {
            tracing::warn!(chat = %chat.display(), "cannot update what the pending calls were reviewed against ({error:#})");
        }
        base
    };
    // A call whose path was edited before approval was reviewed in its new form (and hunks
    // approved of its old form mean nothing for it).
    let Some(path) = target(name, input, ctx).filter(|path| *path == base.path) else {
        return Ok(Checked::AsWritten);
    };
    let now = digest(&path).map_err(|error| {
        format!(
            "nothing was written: {} cannot be read to check it is still the file whose change was approved ({error})",
            path.display()
        )
    })?;
    if now == base.sha256 {
        return Ok(match base.partial {
            Some(Partial { input, note }) => Checked::Narrowed { input, note },
            None => Checked::AsWritten,
        });
    }
    let shown = input
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let what = match (&base.sha256, &now) {
        (None, Some(_)) => "was created",
        (Some(_), None) => "was removed",
        _ => "was changed",
    };
    Err(format!(
        "nothing was written: {shown} {what} after this call was proposed, so the change that was approved (its diff was computed against the earlier file) is not what it would do now. Review the change again against the file as it is now and approve it again: read the file and propose the change anew."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_has_no_digest_and_a_file_its_sha256() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("a.txt");
        assert_eq!(digest(&file).ok(), Some(None));
        std::fs::write(&file, "abc").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            digest(&file).ok().flatten().as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
    }
}
