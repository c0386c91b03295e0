//! `read`, `write` and `edit` through the editor's view of files (`EditorFiles`, an ACP
//! client's `fs/*`): a buffer the editor holds unsaved is what is read and edited, writes go to
//! the editor and not the disk, the sandbox still decides first, and an editor that only
//! reads leaves writing to the disk. (The real client, over ACP, is `tests/it/acp.rs` of the
//! binary.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flemma_tools::builtin::{edit, read, write};
use flemma_tools::sandbox::PathPolicy;
use flemma_tools::{Cancel, EditorFiles, RunContext};
use serde_json::json;

/// An editor holding buffers in memory; a path it has no buffer for reads from the disk.
#[derive(Debug, Default)]
struct Buffers {
    texts: Mutex<HashMap<PathBuf, String>>,
    writes: Mutex<Vec<PathBuf>>,
    can_write: bool,
}

impl EditorFiles for Buffers {
    fn reads(&self) -> bool {
        true
    }
    fn writes(&self) -> bool {
        self.can_write
    }
    fn read_text(&self, path: &Path, _cancel: &Cancel) -> Result<String, String> {
        if let Some(text) = self
            .texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
        {
            return Ok(text.clone());
        }
        std::fs::read_to_string(path).map_err(|e| e.to_string())
    }
    fn write_text(&self, path: &Path, text: &str, _cancel: &Cancel) -> Result<(), String> {
        self.writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path.to_path_buf());
        self.texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), text.to_owned());
        Ok(())
    }
}

fn setup(can_write: bool) -> (tempfile::TempDir, PathBuf, Arc<Buffers>, RunContext) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::write(root.join("a.txt"), "on disk\n").expect("write");
    let buffers = Arc::new(Buffers {
        can_write,
        ..Buffers::default()
    });
    buffers
        .texts
        .lock()
        .expect("lock")
        .insert(root.join("a.txt"), "unsaved in the editor\n".into());
    let mut ctx = RunContext::new(&root, Arc::new(PathPolicy::new([root.join("ok")])));
    ctx.editor = Some(buffers.clone());
    (dir, root, buffers, ctx)
}

#[test]
fn read_gives_the_editors_unsaved_buffer() {
    let (_dir, _root, _buffers, ctx) = setup(true);
    let out = read::run(
        &ctx,
        &json!({"path": "a.txt", "offset": null, "limit": null}),
    );
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("unsaved in the editor"), "{}", out.text);
}

#[test]
fn edit_changes_the_buffer_through_the_editor_and_leaves_the_disk() {
    let (_dir, root, buffers, mut ctx) = setup(true);
    ctx.guard = Arc::new(PathPolicy::new([root.clone()]));
    let out = edit::run(
        &ctx,
        &json!({"path": "a.txt", "edits": [{"old": "unsaved", "new": "edited"}]}),
    );
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        buffers.texts.lock().expect("lock")[&root.join("a.txt")],
        "edited in the editor\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("read"),
        "on disk\n"
    );
}

#[test]
fn write_goes_to_the_editor_and_diffs_against_its_buffer() {
    let (_dir, root, buffers, mut ctx) = setup(true);
    ctx.guard = Arc::new(PathPolicy::new([root.clone()]));
    let out = write::run(&ctx, &json!({"path": "a.txt", "content": "new\n"}));
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("-unsaved in the editor"), "{}", out.text);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("read"),
        "on disk\n"
    );
    let out = write::run(&ctx, &json!({"path": "sub/b.txt", "content": "b\n"}));
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.starts_with("Created sub/b.txt"), "{}", out.text);
    assert!(
        root.join("sub").is_dir(),
        "its folder is made for the editor"
    );
    assert_eq!(buffers.writes.lock().expect("lock").len(), 2);
}

#[test]
fn the_sandbox_decides_before_the_editor_is_asked() {
    let (_dir, root, buffers, ctx) = setup(true);
    let out = write::run(&ctx, &json!({"path": "a.txt", "content": "x"}));
    assert!(out.is_error, "{}", out.text);
    assert!(out.text.starts_with("Refused to write"), "{}", out.text);
    let out = edit::run(
        &ctx,
        &json!({"path": "a.txt", "edits": [{"old": "unsaved", "new": "x"}]}),
    );
    assert!(out.is_error, "{}", out.text);
    assert!(buffers.writes.lock().expect("lock").is_empty());
    assert!(!root.join("x").exists());
}

#[test]
fn an_editor_that_only_reads_leaves_writing_to_the_disk() {
    let (_dir, root, buffers, mut ctx) = setup(false);
    ctx.guard = Arc::new(PathPolicy::new([root.clone()]));
    let out = write::run(&ctx, &json!({"path": "a.txt", "content": "written\n"}));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("read"),
        "written\n"
    );
    assert!(buffers.writes.lock().expect("lock").is_empty());
}
