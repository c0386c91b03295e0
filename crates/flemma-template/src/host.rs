//! Everything the evaluator needs from the outside world goes through [`Host`].

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

/// The ambient state a personality describes (`urn:flemma:personality:…`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PersonalityContext {
    /// The working directory the tools run in.
    pub cwd: Option<PathBuf>,
    /// The current git branch of the working directory, when it is a repository.
    pub git_branch: Option<String>,
    /// The tools the model may call in this conversation.
    pub enabled_tools: Vec<String>,
}

/// What is at a path (links followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A file (or anything that is not a directory).
    File,
    /// A directory.
    Directory,
    /// Nothing there, or nothing that can be reached.
    Missing,
}

impl FileKind {
    /// `file`, `directory` or `missing`, as hovers say it.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Directory => "directory",
            FileKind::Missing => "missing",
        }
    }
}

/// All IO of an evaluation, and of the editor features that look at the disk: file reads
/// (`include`, `@./file` references, project context), what a path is and what a directory
/// holds (hover and completion of references), the home directory, the clock and the
/// environment described by personalities. Tests use a temp dir through [`FsHost`] or their
/// own implementation; the daemon uses [`FsHost`] or a wrapper that adds the enabled tools.
pub trait Host: Send + Sync + std::fmt::Debug {
    /// Reads a whole regular file of at most `limit` bytes. A directory, FIFO, socket or device
    /// is refused without blocking (a chat must not be able to make the reader wait on
    /// `/dev/stdin` or read `/dev/zero` forever), a longer file too (error kind
    /// `FileTooLarge`).
    fn read_file(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>>;
    /// Reads like [`Host::read_file`], only if `allow` accepts the real path of the file (every
    /// link resolved) — judged on the file the host opened, where it can tell, so that a link
    /// swapped in after a check is not followed. When `allow` refuses, fails with its reason
    /// (error kind `PermissionDenied`) and reads nothing. The default resolves the path with
    /// [`Host::real_path`] (or takes it as it is) before reading.
    fn read_file_checked(
        &self,
        path: &Path,
        limit: u64,
        allow: &dyn Fn(&Path) -> Result<(), String>,
    ) -> std::io::Result<Vec<u8>> {
        let real = self.real_path(path).unwrap_or_else(|| path.to_path_buf());
        allow(&real).map_err(refused)?;
        self.read_file(path, limit)
    }
    /// The user's home directory (for `@~/…`).
    fn home_dir(&self) -> Option<PathBuf>;
    /// The current time (for `now()`, `date()` and personalities).
    fn now(&self) -> SystemTime;
    /// The working directory, git branch and enabled tools, for personalities.
    fn environment(&self) -> PersonalityContext;
    /// Whether `path` is a file that can be read (`file_readable()` in templates). The default
    /// reads the whole file; hosts with a cheaper check override it.
    fn is_readable(&self, path: &Path) -> bool {
        self.read_file(path, u64::MAX).is_ok()
    }
    /// What is at `path`. The default knows only the files it can read.
    fn file_kind(&self, path: &Path) -> FileKind {
        if self.is_readable(path) {
            FileKind::File
        } else {
            FileKind::Missing
        }
    }
    /// `path` with every symbolic link resolved, or `None` when it does not exist or the host
    /// cannot tell (the default: callers that need it then do without).
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        let _ = path;
        None
    }
    /// The entries of directory `dir`: names, with whether each is a directory, sorted; empty
    /// when it cannot be read. The default lists nothing.
    fn list_dir(&self, dir: &Path) -> Vec<(String, bool)> {
        let _ = dir;
        Vec::new()
    }
    /// Runs a frontmatter parser: `argv[0]` with the arguments `argv[1..]`, `input` on its
    /// stdin; returns its stdout. Fails when the program cannot start, exits unsuccessfully
    /// (the error includes its stderr) or runs longer than `timeout` (it is killed; the error
    /// kind is [`std::io::ErrorKind::TimedOut`]). It never runs in the chat's folder: that
    /// folder may be someone else's repository, and a working directory there lets it choose
    /// the code (`python3 -m yaml2json` imports `./yaml2json.py`); [`FsHost`] runs it in
    /// [`NEUTRAL_DIR`].
    fn run_filter(
        &self,
        argv: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> std::io::Result<Vec<u8>>;
}

/// The real filesystem and the real clock, with the home directory, working directory and
/// `PATH` its creator hands it (the library reads no environment: the binary gives its
/// process context's, a test its own).
///
/// `environment()` reports [`FsHost::cwd`] and its git branch (read from `.git/HEAD`, walking
/// up); it knows no enabled tools; wrap it to add them. The default knows no home (`@~/…`
/// names nothing), no working directory and an empty `PATH` (no frontmatter parser is found).
#[derive(Debug, Clone, Default)]
pub struct FsHost {
    /// The user's home directory, for `@~/…`.
    pub home: Option<PathBuf>,
    /// The working directory personalities describe.
    pub cwd: Option<PathBuf>,
    /// `PATH`, where frontmatter parsers are looked up (its absolute entries only).
    pub search_path: Option<OsString>,
}

impl Host for FsHost {
    fn read_file(&self, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
        read_regular_file(path, limit)
    }

    fn read_file_checked(
        &self,
        path: &Path,
        limit: u64,
        allow: &dyn Fn(&Path) -> Result<(), String>,
    ) -> std::io::Result<Vec<u8>> {
        read_regular_file_within(path, limit, allow)
    }

    fn home_dir(&self) -> Option<PathBuf> {
        self.home.clone()
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn environment(&self) -> PersonalityContext {
        let cwd = self.cwd.clone();
        let git_branch = cwd.as_deref().and_then(git_branch_of);
        PersonalityContext {
            cwd,
            git_branch,
            enabled_tools: Vec::new(),
        }
    }

    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn is_readable(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file())
            && std::fs::File::open(path).is_ok()
    }

    fn file_kind(&self, path: &Path) -> FileKind {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => FileKind::Directory,
            Ok(_) => FileKind::File,
            Err(_) => FileKind::Missing,
        }
    }

    fn list_dir(&self, dir: &Path) -> Vec<(String, bool)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, bool)> = entries
            .filter_map(Result::ok)
            .map(|e| {
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                (e.file_name().to_string_lossy().into_owned(), is_dir)
            })
            .collect();
        out.sort();
        out
    }

    fn run_filter(
        &self,
        argv: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> std::io::Result<Vec<u8>> {
        run_process(argv, input, timeout, self.search_path.as_deref())
    }
}

/// Reads the regular file at `path` (links followed), at most `limit` bytes: opened without
/// blocking (a FIFO never waits for a writer), refused unless regular, read with a cap.
pub fn read_regular_file(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_regular_file_within(path, limit, &|_| Ok(()))
}

/// [`read_regular_file`], only if `allow` accepts the file's real path: judged before opening
/// (the path with every link resolved, so that no device is even opened) and again on the file
/// opened (`/proc/self/fd`), so that a link swapped in between is not read through. When
/// `allow` refuses, fails with its reason (error kind `PermissionDenied`).
pub fn read_regular_file_within(
    path: &Path,
    limit: u64,
    allow: &dyn Fn(&Path) -> Result<(), String>,
) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let real = std::fs::canonicalize(path)?;
    allow(&real).map_err(refused)?;
    let flags =
        rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::NOFOLLOW;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(&real)?;
    if let Some(opened) = opened_path(&file) {
        allow(&opened).map_err(refused)?;
    }
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        let what = if metadata.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {what}; only regular files are read"),
        ));
    }
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is larger than {}", human_bytes(limit)),
        )
    };
    if metadata.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The error of a read `allow` refused.
fn refused(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, why)
}

/// The path of the file `file` is open on, as the kernel knows it (`None` without `/proc`).
fn opened_path(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// `32 MiB`, `512 KiB`, `100 bytes`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// The working directory of frontmatter parsers: `/`, which always exists, holds no project
/// and cannot be written by you or a sandboxed tool (the MCP and language servers flemmad
/// starts use the same, `flemma_tools::launch::NEUTRAL_DIR`).
pub const NEUTRAL_DIR: &str = "/";

/// Runs `argv` in [`NEUTRAL_DIR`] with `input` on stdin, capturing stdout and stderr, killing
/// it after `timeout`. The program is looked up in the absolute entries of `path` (the
/// host's `PATH`) only (`.`, an empty or a relative entry would name a folder of the working
/// directory's choosing), and the parser gets those as its `PATH`.
fn run_process(
    argv: &[String],
    input: &[u8],
    timeout: Duration,
    path: Option<&OsStr>,
) -> std::io::Result<Vec<u8>> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the command is empty",
        ));
    };
    let search_path: OsString = std::env::join_paths(
        std::env::split_paths(path.unwrap_or_default()).filter(|dir| dir.is_absolute()),
    )
    .unwrap_or_default();
    let is_executable = |path: &Path| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let executable = if program.contains('/') {
        Some(Path::new(NEUTRAL_DIR).join(program))
    } else {
        std::env::split_paths(&search_path)
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
    };
    let Some(executable) = executable.filter(|path| is_executable(path)) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "`{program}` is not on PATH (only its absolute entries are searched) nor an absolute path"
            ),
        ));
    };
    let mut command = Command::new(executable);
    command
        .args(args)
        .current_dir(NEUTRAL_DIR)
        .env("PATH", &search_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn()?;
    // Stdin, stdout and stderr are served by threads so that a large output cannot block a
    // child that has not read all of its input yet.
    let stdin = child.stdin.take();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A parser that exits without reading everything is judged by its exit status.
            let _ = stdin.write_all(&input);
        }
    });
    let stdout = child.stdout.take().map(read_to_end_in_thread);
    let stderr = child.stderr.take().map(read_to_end_in_thread);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            // Kill errors mean it exited meanwhile; either way it is gone after `wait`.
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "`{program}` did not finish within {} ms and was stopped",
                    timeout.as_millis()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let _ = writer.join();
    let collect = |reader: Option<std::thread::JoinHandle<std::io::Result<Vec<u8>>>>| match reader
        .map(std::thread::JoinHandle::join)
    {
        Some(Ok(result)) => result,
        Some(Err(_)) => Err(std::io::Error::other("reading the output failed")),
        None => Ok(Vec::new()),
    };
    let stdout = collect(stdout)?;
    let stderr = collect(stderr).unwrap_or_default();
    if !status.success() {
        let stderr = String::from_utf8_lossy(&stderr);
        let stderr = stderr.trim();
        return Err(std::io::Error::other(if stderr.is_empty() {
            format!("`{program}` exited with {status} and printed nothing on stderr")
        } else {
            format!("`{program}` exited with {status}: {stderr}")
        }));
    }
    Ok(stdout)
}

fn read_to_end_in_thread(
    mut reader: impl Read + Send + 'static,
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    std::thread::spawn(move || {
        let mut buffer = Vec::new();
        reader.read_to_end(&mut buffer)?;
        Ok(buffer)
    })
}

/// The branch named by `.git/HEAD` in `dir` or its nearest ancestor that has one.
pub fn git_branch_of(dir: &Path) -> Option<String> {
    dir.ancestors().find_map(|ancestor| {
        let head = std::fs::read_to_string(ancestor.join(".git").join("HEAD")).ok()?;
        let head = head.trim();
        Some(match head.strip_prefix("ref: refs/heads/") {
            Some(branch) => branch.to_string(),
            None => format!("detached at {}", head.chars().take(12).collect::<String>()),
        })
    })
}
