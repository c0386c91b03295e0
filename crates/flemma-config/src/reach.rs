//! What flemmad reads for a chat (`docs/security.md`, invariant II): an untrusted chat reads
//! only inside its project ([`chat_project`]), and no chat reads the places of
//! [`never_read`] — the kernel's and devices' files and the credentials in the home directory.
//!
//! Pure: the file system is asked through the caller's closure (whether a folder is a git work
//! tree), and paths are judged as given (the caller resolves links first, and judges the path
//! as written too).

use std::fmt;
use std::path::{Path, PathBuf};

use flemma_protocol::document::normalize;

/// Where credentials live in a home directory (SSH and GnuPG keys, cloud and registry tokens,
/// password stores): never read for a chat (references, `include()`, template modules), hidden
/// from sandboxed commands, and never approved for the reading tools by a preset.
pub const HOME_CREDENTIALS: [&str; 16] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".kube",
    ".docker",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".pypirc",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
];

/// The kernel's and devices' file systems: `/proc/self/environ` is flemmad's own environment
/// (every API key), `/dev/fd/N` its open files. Never read for a chat, nor by the reading tools
/// (which run in flemmad's process).
pub const SYSTEM_FOLDERS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Why a path is never read for a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeverRead {
    /// It lies in one of [`SYSTEM_FOLDERS`] (the folder).
    System(&'static str),
    /// It is or lies in one of the [`HOME_CREDENTIALS`] (that place, as a path).
    Credential(PathBuf),
}

impl fmt::Display for NeverRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NeverRead::System(folder) => write!(
                f,
                "it is in {folder}, which flemmad never reads ({})",
                match *folder {
                    "/proc" =>
                        "the state of running processes: flemmad's own environment holds your API keys",
                    "/sys" => "the kernel's state",
                    _ => "devices, and flemmad's own open files",
                }
            ),
            NeverRead::Credential(place) => write!(
                f,
                "it is in {}, where credentials are kept, which flemmad never reads for a chat (paste what the model needs into the chat instead)",
                place.display()
            ),
        }
    }
}

/// Whether `path` (absolute) must never be read for a chat, and why: it lies in `/proc`,
/// `/sys` or `/dev`, or in a credential place of one of `homes` (give the home directory as
/// written and its real path, when they differ). `.` and `..` are removed first; links are
/// not followed (judge the real path too).
pub fn never_read(path: &Path, homes: &[&Path]) -> Option<NeverRead> {
    let path = normalize(path);
    if let Some(folder) = SYSTEM_FOLDERS
        .iter()
        .find(|folder| path.starts_with(folder))
    {
        return Some(NeverRead::System(folder));
    }
    homes
        .iter()
        .filter(|home| home.is_absolute() && home.parent().is_some())
        .flat_map(|home| HOME_CREDENTIALS.iter().map(|place| home.join(place)))
        .find(|place| path.starts_with(place))
        .map(NeverRead::Credential)
}

/// Where the search for the project of the chat at `chat` (an absolute path) starts, and its
/// project when no work tree holds it: the chat's folder, or `DIR` for a chat in an ACP
/// session folder (`DIR/.flemma/sessions/`).
pub fn project_start(chat: &Path) -> PathBuf {
    let chat = normalize(chat);
    let folder = chat.parent().unwrap_or(&chat);
    if folder.ends_with(".flemma/sessions") {
        folder.parent().and_then(Path::parent).unwrap_or(folder)
    } else {
        folder
    }
    .to_path_buf()
}

/// The project of the chat at `chat` (an absolute path), which an untrusted chat reads files
/// in: the nearest folder at or above the chat's folder that `is_work_tree` says holds a git
/// work tree (a `.git` folder or file), else the chat's folder. A chat in an ACP session
/// folder (`DIR/.flemma/sessions/`) starts from `DIR`. The home directory and `/` are never a
/// project by their `.git` (a dotfiles repository would make every chat's project the whole
/// home), nor is any folder above the home directory.
///
/// The same chat always has the same project; what lies in it is for the caller to judge by
/// real path (links followed).
pub fn chat_project(
    chat: &Path,
    home: Option<&Path>,
    is_work_tree: impl Fn(&Path) -> bool,
) -> PathBuf {
    let start = project_start(chat);
    let home = home.map(normalize);
    start
        .ancestors()
        .take_while(|dir| dir.parent().is_some())
        .take_while(|dir| home.as_deref().is_none_or(|home| *dir != home))
        .find(|dir| is_work_tree(dir))
        .unwrap_or(&start)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_folders_and_credentials_are_never_read() {
        let home = Path::new("/home/me");
        let never = |path: &str| never_read(Path::new(path), &[home]);
        assert_eq!(
            never("/proc/self/environ"),
            Some(NeverRead::System("/proc"))
        );
        assert_eq!(never("/sys/kernel"), Some(NeverRead::System("/sys")));
        assert_eq!(never("/dev/fd/3"), Some(NeverRead::System("/dev")));
        assert_eq!(
            never("/tmp/../proc/1/environ"),
            Some(NeverRead::System("/proc"))
        );
        assert_eq!(
            never("/home/me/.ssh/id_rsa"),
            Some(NeverRead::Credential(PathBuf::from("/home/me/.ssh")))
        );
        assert_eq!(
            never("/home/me/.netrc"),
            Some(NeverRead::Credential(PathBuf::from("/home/me/.netrc")))
        );
        assert_eq!(
            never("/home/me/x/../.aws/credentials"),
            Some(NeverRead::Credential(PathBuf::from("/home/me/.aws")))
        );
        assert_eq!(never("/home/me/.sshd/x"), None);
        assert_eq!(never("/home/me/notes/.ssh-tips.md"), None);
        assert_eq!(never("/home/me/project/README.md"), None);
        assert_eq!(never("/procfs/x"), None);
        assert_eq!(never("/devel/x"), None);
        // A home directory of `/` (or none) puts no credential place at the root.
        assert_eq!(never_read(Path::new("/.ssh/x"), &[Path::new("/")]), None);
        let message = never("/proc/self/environ").map(|n| n.to_string());
        assert!(
            message.as_deref().is_some_and(|m| m.contains("API keys")),
            "{message:?}"
        );
    }

    #[test]
    fn the_project_is_the_nearest_work_tree_below_home_else_the_folder() {
        let home = Some(Path::new("/home/me"));
        let trees = ["/home/me/repo", "/home/me", "/srv/mono", "/"];
        let is_tree = |dir: &Path| trees.iter().any(|tree| dir == Path::new(tree));
        let project = |chat: &str| chat_project(Path::new(chat), home, is_tree);
        assert_eq!(
            project("/home/me/repo/a/b/x.chat"),
            PathBuf::from("/home/me/repo")
        );
        assert_eq!(
            project("/home/me/repo/x.chat"),
            PathBuf::from("/home/me/repo")
        );
        assert_eq!(
            project("/home/me/Downloads/x.chat"),
            PathBuf::from("/home/me/Downloads"),
            "the home's own .git is no project"
        );
        assert_eq!(project("/home/me/x.chat"), PathBuf::from("/home/me"));
        assert_eq!(project("/srv/mono/team/x.chat"), PathBuf::from("/srv/mono"));
        assert_eq!(
            project("/tmp/a/x.chat"),
            PathBuf::from("/tmp/a"),
            "/ is no project"
        );
        assert_eq!(
            project("/home/me/work/.flemma/sessions/s.chat"),
            PathBuf::from("/home/me/work")
        );
        assert_eq!(
            project("/home/me/repo/sub/.flemma/sessions/s.chat"),
            PathBuf::from("/home/me/repo")
        );
        assert_eq!(
            project("/home/me/repo/sub/../../Downloads/x.chat"),
            PathBuf::from("/home/me/Downloads")
        );
        // Without a home directory, every folder but `/` may be a project.
        assert_eq!(
            chat_project(Path::new("/home/me/Downloads/x.chat"), None, is_tree),
            PathBuf::from("/home/me")
        );
    }
}
