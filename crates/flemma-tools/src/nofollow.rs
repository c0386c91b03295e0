//! Opening paths without following symlinks where someone else could have put one: a model's
//! sandboxed command (which may write in the project and the store), or a repository that ships
//! a link. Every directory is walked one component at a time from a descriptor
//! (`openat(…, O_NOFOLLOW)`), so a link swapped in after a path was checked is refused instead
//! of followed; files are opened relative to their directory's descriptor, refused unless
//! regular, and read with a cap.
//!
//! The paths given here are absolute and free of `..` (the sandbox policy resolves them first):
//! a symlink met on the way is either the race this module exists for, or a link the caller
//! must not follow (a store folder, a lock file), and it is refused with the path named.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A directory opened without following symlinks, with the path it was opened by (for
/// messages).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// The flags a directory on the way is opened with: only searched, never read, so a directory
/// the user may enter but not list (`0711`) can still be walked through.
fn dir_flags() -> OFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let read = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let read = OFlags::RDONLY;
    read | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// The error for a path flemmad refuses to open, naming what it found there.
fn refused(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is {what}; flemmad does not follow it here (remove it, or point at the real place)",
            path.display()
        ),
    )
}

/// What sits at `name` in `dir`, without following it (for the message of a refusal).
fn describe(dir: impl AsFd, name: &OsStr) -> &'static str {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => describe_type(FileType::from_raw_mode(stat.st_mode)),
        Err(_) => "not a directory",
    }
}

fn describe_type(kind: FileType) -> &'static str {
    match kind {
        FileType::Symlink => "a symbolic link",
        FileType::Directory => "a directory",
        FileType::RegularFile => "a regular file",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Unknown => "not a regular file",
    }
}

impl Dir {
    /// Opens the directory `path` (absolute, without `..`) following no symlink in any of its
    /// components. With `create`, missing directories are created with that mode (less the
    /// umask).
    pub fn open(path: &Path, create: Option<u32>) -> io::Result<Self> {
        if !path.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not an absolute path", path.display()),
            ));
        }
        let root = rustix::fs::open("/", dir_flags(), Mode::empty())?;
        let start = Self {
            fd: root,
            path: PathBuf::from("/"),
        };
        start.descend(path, create)
    }

    /// Opens `base` (following symlinks: it is the place the caller trusts, such as the chat's
    /// directory) and then `relative` beneath it following none, creating missing components
    /// with `create`'s mode when given.
    pub fn open_beneath(base: &Path, relative: &Path, create: Option<u32>) -> io::Result<Self> {
        let fd = rustix::fs::open(base, dir_flags() & !OFlags::NOFOLLOW, Mode::empty())?;
        let start = Self {
            fd,
            path: base.to_path_buf(),
        };
        start.descend(relative, create)
    }

    /// Walks `path`'s normal components from this directory.
    fn descend(mut self, path: &Path, create: Option<u32>) -> io::Result<Self> {
        for component in path.components() {
            let name = match component {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
                Component::ParentDir => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} contains `..`; give the resolved path", path.display()),
                    ));
                }
                Component::Normal(name) => name,
            };
            self = self.child(name, create)?;
        }
        Ok(self)
    }

    /// The directory `name` in this one (created when missing and `create` is given).
    pub fn child(&self, name: &OsStr, create: Option<u32>) -> io::Result<Self> {
        let path = self.path.join(name);
        let open = || rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty());
        let fd = match open() {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) if create.is_some() => {
                let mode = Mode::from_raw_mode(create.unwrap_or(0o700));
                match rustix::fs::mkdirat(&self.fd, name, mode) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(errno) => return Err(with_path(errno.into(), &path)),
                }
                open().map_err(|errno| self.explain(errno, name))?
            }
            Err(errno) => return Err(self.explain(errno, name)),
        };
        Ok(Self { fd, path })
    }

    /// The error for opening `name` failing with `errno`: a link or a non-directory is named as
    /// such, anything else keeps the system's reason.
    fn explain(&self, errno: rustix::io::Errno, name: &OsStr) -> io::Error {
        let path = self.path.join(name);
        match errno {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
                refused(&path, describe(&self.fd, name))
            }
            other => with_path(other.into(), &path),
        }
    }

    /// The path this directory was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the regular file `name` here for reading, following no symlink; a FIFO, socket or
    /// device is refused without blocking. `Ok(None)` when there is nothing at `name`.
    pub fn open_regular(&self, name: &OsStr) -> io::Result<Option<File>> {
        let path = self.path.join(name);
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => return Err(refused(&path, "a symbolic link")),
            Err(errno) => return Err(with_path(errno.into(), &path)),
        };
        let stat = rustix::fs::fstat(&fd)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind != FileType::RegularFile {
            return Err(refused(&path, describe_type(kind)));
        }
        // A regular file ignores O_NONBLOCK; clear it anyway for whoever reads on.
        rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
        Ok(Some(File::from(fd)))
    }

    /// Reads the regular file `name` here (see [`Self::open_regular`]), at most `cap` bytes:
    /// a longer file is an error of kind `FileTooLarge`. `Ok(None)` when it does not exist.
    pub fn read(&self, name: &OsStr, cap: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(file) = self.open_regular(name)? else {
            return Ok(None);
        };
        read_capped(file, cap, &self.path.join(name)).map(Some)
    }

    /// Opens (creating with `mode`) the regular file `name` for writing, following no symlink,
    /// and refusing anything but a regular file with a single link (a hard link would write a
    /// file elsewhere). With `truncate` its old content is dropped once it is known to be safe.
    pub fn open_for_write(&self, name: &OsStr, mode: u32, truncate: bool) -> io::Result<File> {
        let path = self.path.join(name);
        let flags = OFlags::RDWR
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::NOCTTY
            | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(mode)).map_err(
            |errno| match errno {
                rustix::io::Errno::LOOP => refused(&path, "a symbolic link"),
                // A FIFO without a reader answers ENXIO to a non-blocking open.
                rustix::io::Errno::NXIO => refused(&path, "a FIFO"),
                other => with_path(other.into(), &path),
            },
        )?;
        let stat = rustix::fs::fstat(&fd)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind != FileType::RegularFile {
            return Err(refused(&path, describe_type(kind)));
        }
        if stat.st_nlink > 1 {
            return Err(refused(&path, "a file with several hard links"));
        }
        rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
        if truncate {
            rustix::fs::ftruncate(&fd, 0)?;
        }
        Ok(File::from(fd))
    }

    /// Replaces `name` with `bytes` atomically: a temporary file in this directory, synced, given
    /// the permissions of the file it replaces (new files get `mode` less the umask), renamed
    /// over `name`. A symlink at `name` is replaced, never followed.
    pub fn replace(&self, name: &OsStr, bytes: &[u8], mode: u32) -> io::Result<()> {
        let existing = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let kind = FileType::from_raw_mode(stat.st_mode);
                if kind != FileType::RegularFile {
                    return Err(refused(&self.path.join(name), describe_type(kind)));
                }
                Some(stat.st_mode & 0o7777)
            }
            Err(rustix::io::Errno::NOENT) => None,
            Err(errno) => return Err(with_path(errno.into(), &self.path.join(name))),
        };
        let (temp_name, mut temp) = self.temporary(name, mode)?;
        let written = (|| {
            temp.write_all(bytes)?;
            if let Some(mode) = existing {
                rustix::fs::fchmod(&temp, Mode::from_raw_mode(mode))?;
            }
            temp.sync_all()?;
            rustix::fs::renameat(&self.fd, &temp_name, &self.fd, name)?;
            Ok(())
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &temp_name, AtFlags::empty());
        }
        written.map_err(|error: io::Error| with_path(error, &self.path.join(name)))
    }

    /// A new file beside `name` (`.<name>.flemma-<pid>-<n>`), created exclusively.
    fn temporary(&self, name: &OsStr, mode: u32) -> io::Result<(PathBuf, File)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let temp = PathBuf::from(format!(
                ".{}.flemma-{}-{n}",
                name.to_string_lossy(),
                std::process::id()
            ));
            match rustix::fs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(mode)) {
                Ok(fd) => return Ok((temp, File::from(fd))),
                Err(rustix::io::Errno::EXIST) if n < 1_000_000 => continue,
                Err(errno) => return Err(with_path(errno.into(), &self.path.join(&temp))),
            }
        }
    }

    /// Renames `from` to `to`, both in this directory (links are moved, not followed).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to)
            .map_err(|errno| with_path(errno.into(), &self.path.join(from)))
    }

    /// Whether anything (a link included) is at `name`.
    pub fn contains(&self, name: &OsStr) -> bool {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }
}

/// Reads `file` up to `cap` bytes; more is an error of kind `FileTooLarge` naming `path`.
pub fn read_capped(file: File, cap: u64, path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "{} is larger than {} bytes; it is not read",
                path.display(),
                cap
            ),
        ));
    }
    Ok(bytes)
}

/// `error` with the path it is about in front of its message.
fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// The directory and file name of `path`.
fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )),
    }
}

/// Reads the regular file at `path` (absolute, resolved) following no symlink on the way, at
/// most `cap` bytes. `Ok(None)` when it does not exist.
pub fn read_file(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let (dir, name) = split(path)?;
    match Dir::open(dir, None) {
        Ok(dir) => dir.read(name, cap),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Replaces the file at `path` (absolute, resolved) with `bytes` atomically, creating missing
/// parent directories, following no symlink on the way (see [`Dir::replace`]).
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = split(path)?;
    Dir::open(dir, Some(0o777))?.replace(name, bytes, 0o666)
}

/// Creates the directory at `path` (absolute, resolved) and its missing parents, following
/// no symlink on the way.
pub fn create_dirs(path: &Path) -> io::Result<()> {
    Dir::open(path, Some(0o777)).map(drop)
}

/// Opens (creating, truncating) the file at `path` for writing, its missing parents created
/// with `dir_mode` and the file with `file_mode`, following no symlink (see
/// [`Dir::open_for_write`]).
pub fn create_file(path: &Path, dir_mode: u32, file_mode: u32) -> io::Result<File> {
    let (dir, name) = split(path)?;
    Dir::open(dir, Some(dir_mode))?.open_for_write(name, file_mode, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().canonicalize().expect("canonical");
        (dir, path)
    }

    #[test]
    fn a_symlinked_directory_on_the_way_is_refused() {
        let (_keep, root) = root();
        let outside = root.join("outside");
        std::fs::create_dir(&outside).expect("dir");
        symlink(&outside, root.join("link")).expect("symlink");
        let error = replace_file(&root.join("link/canary"), b"x").expect_err("refused");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(!outside.join("canary").exists());
        let error =
            Dir::open_beneath(&root, Path::new("link/deeper"), Some(0o700)).expect_err("refused");
        assert!(error.to_string().contains("link"), "{error}");
        assert!(!outside.join("deeper").exists());
    }

    #[test]
    fn a_symlinked_file_is_replaced_not_followed() {
        let (_keep, root) = root();
        let target = root.join("target");
        std::fs::write(&target, "keep").expect("write");
        symlink(&target, root.join("file")).expect("symlink");
        let error = replace_file(&root.join("file"), b"new").expect_err("refused");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        let error = create_file(&root.join("file"), 0o700, 0o600).expect_err("refused");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        let error = read_file(&root.join("file"), 10).expect_err("refused");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
    }

    #[test]
    fn replace_creates_parents_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_keep, root) = root();
        let path = root.join("a/b/c.txt");
        replace_file(&path, b"one").expect("created");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        replace_file(&path, b"two").expect("replaced");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "two");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(read_file(&path, 3).expect("read"), Some(b"two".to_vec()));
        let error = read_file(&path, 2).expect_err("too large");
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(read_file(&root.join("none"), 2).expect("missing"), None);
    }

    #[test]
    fn devices_and_fifos_are_refused_without_blocking() {
        let error = read_file(Path::new("/dev/zero"), 10).expect_err("a device");
        assert!(error.to_string().contains("a device"), "{error}");
        let (_keep, root) = root();
        let fifo = root.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let error = read_file(&fifo, 10).expect_err("a FIFO");
        assert!(error.to_string().contains("FIFO"), "{error}");
        let error = create_file(&fifo, 0o700, 0o600).expect_err("a FIFO");
        assert!(error.to_string().contains("FIFO"), "{error}");
    }

    #[test]
    fn hard_links_are_not_written_through() {
        let (_keep, root) = root();
        std::fs::write(root.join("original"), "keep").expect("write");
        std::fs::hard_link(root.join("original"), root.join("link")).expect("link");
        let error = create_file(&root.join("link"), 0o700, 0o600).expect_err("refused");
        assert!(error.to_string().contains("hard links"), "{error}");
        assert_eq!(
            std::fs::read_to_string(root.join("original")).expect("read"),
            "keep"
        );
    }
}
