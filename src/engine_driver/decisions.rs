//! What the driver decides besides the session, with no IO: whether the file watcher's news is
//! someone else's change or the driver's own write ([`DiskWatch`]), which request warnings are
//! said ([`Warned`]), and whether a request may be sent ([`blocked`]). The driver gives them
//! what it read (a file's identity, an analysis's diagnostics) and runs what they say.

use std::collections::HashSet;

/// What tells one state of a file from another without reading it: its inode (a rename
/// over it is a new one), size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileIdentity {
    pub inode: u64,
    pub len: u64,
    pub modified: Option<std::time::SystemTime>,
}

impl FileIdentity {
    /// The identity of the file at `path` now (`None`: it cannot be read).
    pub fn of(path: &std::path::Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self {
            inode: metadata.ino(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

/// The file as the driver knows it, to tell its own writes from others' changes: the watcher
/// tells of both.
#[derive(Debug, Default)]
pub(super) struct DiskWatch {
    /// The file as the driver's last read or write of it left it.
    on_disk: Option<FileIdentity>,
    /// A write of the file is under way: what the watcher tells meanwhile waits for its end.
    writing: bool,
    /// The watcher told of a change while the file was being written.
    changed_while_writing: bool,
}

impl DiskWatch {
    /// The driver read or wrote the file, which is now `identity`.
    pub fn seen(&mut self, identity: Option<FileIdentity>) {
        self.on_disk = identity;
    }

    /// A write of the file starts.
    pub fn writing(&mut self) {
        self.writing = true;
    }

    /// The watcher told of a change of the file, which is now `now` (asked only when no write
    /// is under way: `None` then). `true`: someone else changed it (the session is told) —
    /// only while the file is the writer, and only when it is not as the driver left it.
    pub fn changed(
        &mut self,
        file_writes: bool,
        now: impl FnOnce() -> Option<FileIdentity>,
    ) -> bool {
        if self.writing {
            self.changed_while_writing = true;
            return false;
        }
        file_writes && (self.on_disk.is_none() || self.on_disk != now())
    }

    /// The write of the file under way ended. `true`: the watcher told of a change meanwhile,
    /// which the file's identity as the write left it cannot show, so the file is read again
    /// (a read that finds the engine's text changes nothing).
    pub fn written(&mut self, file_writes: bool) -> bool {
        self.writing = false;
        std::mem::take(&mut self.changed_while_writing) && file_writes
    }
}

/// The request warnings already said: each is said once per driver (one send), however many
/// requests of the cycle it concerns.
#[derive(Debug, Default)]
pub(super) struct Warned(HashSet<String>);

impl Warned {
    /// `true` the first time `warning` is seen.
    pub fn first(&mut self, warning: &str) -> bool {
        !self.0.contains(warning) && self.0.insert(warning.to_owned())
    }
}

/// Why a request is not sent, from its analysis's send blockers (`None`: it may be sent).
pub(super) fn blocked(blockers: &[&str]) -> Option<String> {
    (!blockers.is_empty()).then(|| {
        format!(
            "the chat cannot be sent: {}; fix it and send again",
            blockers.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(inode: u64, len: u64) -> Option<FileIdentity> {
        Some(FileIdentity {
            inode,
            len,
            modified: None,
        })
    }

    /// What the driver does to the file, and what the watcher tells.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// Read or written by the driver: the file is now this identity.
        Seen(Option<FileIdentity>),
        Writing,
        /// The watcher tells; the file is now this identity.
        Told(Option<FileIdentity>),
        /// The write ended.
        Written,
    }

    #[test]
    fn the_driver_tells_its_own_writes_from_others_changes() {
        use Step::*;
        let (a, b) = (identity(1, 10), identity(1, 12));
        #[rustfmt::skip]
        let table: Vec<(&str, bool, Vec<Step>, Vec<bool>)> = vec![
            ("the file as the driver left it is no news", true, vec![Seen(a), Told(a)], vec![false]),
            ("another size is", true, vec![Seen(a), Told(b)], vec![true]),
            ("a file never read is", true, vec![Told(a)], vec![true]),
            ("not while an editor writes", false, vec![Seen(a), Told(b)], vec![false]),
            ("news during a write waits for its end", true,
                vec![Seen(a), Writing, Told(b), Written], vec![false, true]),
            ("a write with no news says nothing", true, vec![Seen(a), Writing, Written], vec![false]),
            ("nor when the writer changed meanwhile", false,
                vec![Seen(a), Writing, Told(b), Written], vec![false, false]),
            ("the news is taken once", true,
                vec![Writing, Told(b), Written, Writing, Written], vec![false, true, false]),
        ];
        for (name, file_writes, steps, expected) in table {
            let mut watch = DiskWatch::default();
            let mut said = Vec::new();
            for step in steps {
                match step {
                    Seen(identity) => watch.seen(identity),
                    Writing => watch.writing(),
                    Told(now) => said.push(watch.changed(file_writes, || now)),
                    Written => said.push(watch.written(file_writes)),
                }
            }
            assert_eq!(said, expected, "{name}");
        }
    }

    #[test]
    fn a_warning_is_said_once() {
        let mut warned = Warned::default();
        let said: Vec<bool> = ["a", "b", "a", "b", "c"]
            .into_iter()
            .map(|w| warned.first(w))
            .collect();
        assert_eq!(said, [true, true, false, false, true]);
    }

    #[test]
    fn a_request_with_blockers_is_not_sent() {
        assert_eq!(blocked(&[]), None);
        assert_eq!(
            blocked(&["`x` is undefined", "the include is missing"]).as_deref(),
            Some(
                "the chat cannot be sent: `x` is undefined; the include is missing; fix it and send again"
            )
        );
    }
}
