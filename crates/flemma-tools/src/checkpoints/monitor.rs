//! What changed in a project since the last checkpoint, known without walking it: inotify
//! watches on every folder the shadow repository records, read at each checkpoint.
//!
//! A checkpoint that finds nothing changed is the common case (a `write` whose "after" is the
//! next call's "before", a `bash` that only reads), and finding that out by asking git walks
//! the whole tree twice (hundreds of milliseconds on 50,000 files). The monitor answers it
//! from the kernel's queue instead:
//!
//! * The kernel queues an inotify event while the system call that changes a folder runs, so
//!   once a tool's process has exited, every change it made is in the queue: draining it
//!   without blocking is exact, not a guess (a change made through a shared memory mapping
//!   raises no event; no tool we run writes that way).
//! * The folders watched are the project's, minus what the repository leaves out: `.git`,
//!   `.flemma`, nested repositories, and the folders git says are ignored (asked one level at
//!   a time with `git check-ignore`, so that an ignored `target/` is never walked).
//! * A change is one only if git would record it: names of chats and of flemmad's atomic-write
//!   temporaries are dropped at once, the rest are asked to `git check-ignore` (one process for
//!   the batch).
//! * A folder created (or moved in) is watched before the scan that records it, a changed
//!   `.gitignore` or a lost event (queue overflow) makes the monitor start over, and a project
//!   with more folders than [`MAX_FOLDERS`] is not monitored at all: every checkpoint scans.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

/// Above this many folders a project is not monitored (each watch costs kernel memory, and
/// the per-user limit is shared with every other program).
pub const MAX_FOLDERS: usize = 20_000;

/// What happened in the project since the monitor was last asked.
#[derive(Debug, PartialEq, Eq)]
pub enum Since {
    /// Nothing git would record.
    Nothing,
    /// These paths (relative to the project; files or folders, present or gone) changed, and
    /// git does not ignore them: record them.
    Changes(Vec<PathBuf>),
    /// The monitor lost track (its queue overflowed, a watch could not be added, the ignore
    /// rules changed): scan, and start a new monitor.
    Lost,
}

/// The inotify watches on a project's recorded folders.
pub struct Monitor {
    inotify: Inotify,
    project: PathBuf,
    /// Each watch's folder, relative to the project.
    folders: HashMap<WatchDescriptor, PathBuf>,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("project", &self.project)
            .field("folders", &self.folders.len())
            .finish()
    }
}

const EVENTS: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::MODIFY)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR)
    .union(WatchMask::DONT_FOLLOW)
    .union(WatchMask::EXCL_UNLINK);

impl Monitor {
    /// Watches the recorded folders of `project`; `git` runs a git command for the project's
    /// shadow repository (its ignore rules). `None` when the project cannot be monitored.
    pub fn start(project: &Path, git: &dyn Fn() -> Command) -> Option<Self> {
        let inotify = Inotify::init()
            .map_err(|error| tracing::info!(%error, "no inotify: checkpoints scan"))
            .ok()?;
        let mut monitor = Self {
            inotify,
            project: project.to_path_buf(),
            folders: HashMap::new(),
            buffer: vec![0; 64 * 1024],
        };
        monitor.watch_tree(PathBuf::new(), git)?;
        tracing::debug!(
            project = %project.display(),
            folders = monitor.folders.len(),
            "checkpoints: monitoring the project's folders"
        );
        Some(monitor)
    }

    /// Watches `top` (relative to the project) and every folder under it that git does not
    /// ignore, one level at a time. `None` when a watch cannot be added or there are too many.
    fn watch_tree(&mut self, top: PathBuf, git: &dyn Fn() -> Command) -> Option<()> {
        let mut level = vec![top];
        while !level.is_empty() {
            let mut children = Vec::new();
            for folder in &level {
                self.watch(folder)?;
                let Ok(entries) = std::fs::read_dir(self.project.join(folder)) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    if entry.file_type().is_ok_and(|kind| kind.is_dir())
                        && !left_out(&name)
                        && !entry.path().join(".git").exists()
                    {
                        children.push(folder.join(name));
                    }
                }
            }
            if self.folders.len() + children.len() > MAX_FOLDERS {
                tracing::info!(
                    project = %self.project.display(),
                    "too many folders to monitor: checkpoints scan"
                );
                return None;
            }
            let ignored = ignored(&children, git);
            level = children
                .into_iter()
                .filter(|child| !ignored.contains(child))
                .collect();
        }
        Some(())
    }

    fn watch(&mut self, folder: &Path) -> Option<()> {
        match self
            .inotify
            .watches()
            .add(self.project.join(folder), EVENTS)
        {
            Ok(descriptor) => {
                self.folders.insert(descriptor, folder.to_path_buf());
                Some(())
            }
            // Gone meanwhile: nothing to watch, and its removal is an event of its parent.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Some(()),
            Err(error) => {
                tracing::info!(%error, "cannot watch a folder: checkpoints scan");
                None
            }
        }
    }

    /// What happened since the last call: the queue drained, new folders watched (before
    /// anything records them, so that what changes in them from now on is seen).
    pub fn since(&mut self, git: &dyn Fn() -> Command) -> Since {
        let mut touched: Vec<PathBuf> = Vec::new();
        let mut new_folders: Vec<PathBuf> = Vec::new();
        let mut lost = false;
        loop {
            let events = match self.inotify.read_events(&mut self.buffer) {
                Ok(events) => events,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(error) => {
                    tracing::info!(%error, "cannot read inotify events: checkpoints scan");
                    return Since::Lost;
                }
            };
            let mut read = 0;
            for event in events {
                read += 1;
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    lost = true;
                    continue;
                }
                if event.mask.contains(EventMask::IGNORED) {
                    self.folders.remove(&event.wd);
                    continue;
                }
                let Some(folder) = self.folders.get(&event.wd) else {
                    continue;
                };
                let Some(name) = event.name else {
                    // The folder itself was deleted or moved: the project changed shape.
                    if folder.as_os_str().is_empty() {
                        lost = true;
                    }
                    continue;
                };
                if left_out(name) || transient(name) {
                    continue;
                }
                if name == ".gitignore" {
                    lost = true;
                }
                let path = folder.join(name);
                if event.mask.contains(EventMask::ISDIR)
                    && event
                        .mask
                        .intersects(EventMask::CREATE | EventMask::MOVED_TO)
                {
                    new_folders.push(path.clone());
                }
                touched.push(path);
            }
            if read == 0 {
                break;
            }
        }
        if lost {
            return Since::Lost;
        }
        if touched.is_empty() {
            return Since::Nothing;
        }
        let ignored = ignored(&touched, git);
        for folder in new_folders {
            if !ignored.contains(&folder)
                && !self.project.join(&folder).join(".git").exists()
                && self.watch_tree(folder, git).is_none()
            {
                return Since::Lost;
            }
        }
        touched.retain(|path| !ignored.contains(path));
        touched.sort();
        touched.dedup();
        if touched.is_empty() {
            Since::Nothing
        } else {
            Since::Changes(touched)
        }
    }
}

/// Names the shadow repository never records (its `info/exclude` and git's own).
fn left_out(name: &OsStr) -> bool {
    name == ".git" || name == ".flemma" || Path::new(name).extension() == Some(OsStr::new("chat"))
}

/// flemmad's atomic-write temporaries: renamed over their file (which is an event of its own)
/// or removed at once.
fn transient(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|name| name.starts_with(crate::SCRATCH_PREFIX) && name.ends_with(".tmp"))
}

/// Which of `paths` (relative to the project) git ignores, asked in one `git check-ignore`.
/// A path it cannot answer for counts as not ignored (it is then scanned).
fn ignored(paths: &[PathBuf], git: &dyn Fn() -> Command) -> std::collections::HashSet<PathBuf> {
    let mut ignored = std::collections::HashSet::new();
    if paths.is_empty() {
        return ignored;
    }
    let child = git()
        .args(["check-ignore", "--stdin", "-z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return ignored;
    };
    let mut input = Vec::new();
    for path in paths {
        input.extend_from_slice(path.as_os_str().as_encoded_bytes());
        input.push(0);
    }
    // Written from another thread: git answers as it reads, and both pipes could fill.
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&input);
        }
    });
    let output = child.wait_with_output();
    let _ = writer.join();
    let Ok(output) = output else {
        return ignored;
    };
    // Exit 1 means "none ignored"; anything else but 0 is a failure (nothing counted ignored).
    if output.status.code() == Some(0) {
        for path in output.stdout.split(|byte| *byte == 0) {
            if !path.is_empty() {
                ignored.insert(PathBuf::from(std::ffi::OsStr::from_bytes(path)));
            }
        }
    }
    ignored
}
