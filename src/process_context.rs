//! What this process was started with, read once in `main` and handed down (issue 28, "one
//! process context"): the user's folders ([`UserDirs`], one rule for XDG and `HOME`), the
//! current directory, the configuration file chosen by `--config` or `$FLEMMA_CONFIG`, the
//! daemon's runtime folder, the command it runs (the role its driver locks name), the
//! running binary, and the variables a configuration's `${VAR}` may name. Nothing of the binary below `main` reads
//! these from the environment again, and the libraries are handed what they need (the
//! template library's file host gets its home, working directory and `PATH` from
//! [`ProcessContext::file_host`]; docs/architecture.md names the few reads left); a
//! path from the command line is made absolute against [`ProcessContext::cwd`] at the edge
//! ([`ProcessContext::absolute`]), so a bare `c.chat` names the chat in its folder for every
//! part that takes it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::runtime_dir::RuntimePaths;
use crate::user_dirs::UserDirs;

/// The process's environment as flemmad uses it.
#[derive(Debug, Clone)]
pub struct ProcessContext {
    /// The user's folders.
    pub dirs: UserDirs,
    /// The working directory the process started in (`/` when it cannot be read: a folder
    /// removed under the process).
    pub cwd: PathBuf,
    /// `$FLEMMA_CONFIG` when set and not empty: the configuration file instead of
    /// `$XDG_CONFIG_HOME/flemma/config.toml`, also protected from the tools.
    pub flemma_config: Option<PathBuf>,
    /// `--config`: the configuration file to use instead of either (which must exist;
    /// `crate::chat::config_input` reads the choice).
    pub explicit_config: Option<PathBuf>,
    /// The daemon's runtime folder and sockets.
    pub runtime: RuntimePaths,
    /// `FLEMMAD_WATCH=poll`: chat files are polled, not watched, and checkpoints scan the
    /// project each time (no inotify).
    pub poll_files: bool,
    /// The command this process runs (`send`, `lsp`, `serve`…): the role its driver locks
    /// name (`flemmad cancel` interrupts a `send` that holds one, and says where else to cancel).
    pub role: String,
    /// The environment's variables, for `${VAR}` in the configuration ([`ProcessContext::var`]).
    vars: Variables,
    /// The running binary (`std::env::current_exe`), or why it cannot be told
    /// ([`ProcessContext::executable`]).
    executable: Result<PathBuf, String>,
}

/// The environment's variables (UTF-8 names and values), shared by the context's clones; its
/// `Debug` names none (values may be secrets).
#[derive(Clone, Default)]
struct Variables(Arc<HashMap<String, String>>);

impl std::fmt::Debug for Variables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} variables", self.0.len())
    }
}

impl ProcessContext {
    /// This process's, with the command line's `--config`.
    pub fn from_process(explicit_config: Option<&Path>) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let dirs = UserDirs::from_process();
        let flemma_config = std::env::var_os("FLEMMA_CONFIG")
            .filter(|value| !value.is_empty())
            .map(PathBuf::from);
        let mut context = Self::new(
            dirs,
            cwd,
            flemma_config,
            explicit_config.map(Path::to_owned),
        );
        context.vars = Variables(Arc::new(
            std::env::vars_os()
                .filter_map(|(name, value)| {
                    Some((name.into_string().ok()?, value.into_string().ok()?))
                })
                .collect(),
        ));
        context.poll_files = context.var(crate::watcher::WATCH_ENV).as_deref() == Some("poll");
        context.executable = std::env::current_exe().map_err(|error| error.to_string());
        context
    }

    /// A context from its parts.
    pub fn new(
        dirs: UserDirs,
        cwd: PathBuf,
        flemma_config: Option<PathBuf>,
        explicit_config: Option<PathBuf>,
    ) -> Self {
        Self {
            runtime: RuntimePaths::for_dirs(&dirs),
            dirs,
            cwd,
            flemma_config,
            explicit_config,
            poll_files: false,
            role: "flemmad".to_owned(),
            vars: Variables::default(),
            executable: Err("a context made from its parts knows no executable".to_owned()),
        }
    }

    /// The environment variable `name` as the process started with it (`None` when unset or
    /// not UTF-8): what `${VAR}` in the configuration expands to.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.0.get(name).cloned()
    }

    /// The running flemmad binary, read once in `main`: the parent-death shim MCP servers and
    /// asked agents start through, the `ExecStart=` of `flemmad install-service`. The error
    /// says why it cannot be told.
    pub fn executable(&self) -> Result<&Path, &str> {
        self.executable.as_deref().map_err(String::as_str)
    }

    /// The same context with this binary as its executable (tests).
    #[cfg(test)]
    pub fn with_executable(mut self, executable: &Path) -> Self {
        self.executable = Ok(executable.to_owned());
        self
    }

    /// The same context with these environment variables instead (tests).
    #[cfg(test)]
    pub fn with_vars(mut self, vars: &[(&str, &str)]) -> Self {
        self.vars = Variables(Arc::new(
            vars.iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
        ));
        self
    }

    /// The variables the credential resolvers see (`api_key` commands, `gcloud`, the
    /// ChatGPT login): the context's, not read again from the environment.
    pub fn credentials(&self) -> flemma_provider::credentials::CredentialEnvironment {
        flemma_provider::credentials::CredentialEnvironment::from_vars(
            self.vars
                .0
                .iter()
                .map(|(name, value)| (name.clone(), value.clone())),
        )
    }

    /// The template library's file host with this process's home, working directory and
    /// `PATH` (`flemma_template::FsHost` reads no environment of its own).
    pub fn file_host(&self) -> flemma_template::FsHost {
        flemma_template::FsHost {
            home: self.dirs.home.clone(),
            cwd: Some(self.cwd.clone()),
            search_path: self.var("PATH").map(std::ffi::OsString::from),
        }
    }

    /// `path` made absolute against the process's working directory (`.` components and
    /// doubled separators removed, `..` kept, as `std::path::absolute` does).
    pub fn absolute(&self, path: &Path) -> PathBuf {
        let joined = self.cwd.join(path);
        std::path::absolute(&joined).unwrap_or(joined)
    }

    /// The folder a chat's relative settings are taken against: the chat's own, made absolute
    /// before anything joins onto it (the folder of a bare `c.chat` is ""), else the working
    /// directory.
    pub fn chat_folder(&self, chat: Option<&Path>) -> PathBuf {
        chat.map(|chat| self.absolute(chat))
            .as_deref()
            .and_then(Path::parent)
            .map_or_else(|| self.cwd.clone(), Path::to_path_buf)
    }

    /// The configuration file without `--config`: `$FLEMMA_CONFIG`, else
    /// `$XDG_CONFIG_HOME/flemma/config.toml`.
    pub fn default_config_file(&self) -> Option<PathBuf> {
        self.flemma_config
            .clone()
            .or_else(|| self.dirs.flemma_config().map(|dir| dir.join("config.toml")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(cwd: &str) -> ProcessContext {
        let dirs = UserDirs {
            home: Some(PathBuf::from("/home/me")),
            config: Some(PathBuf::from("/home/me/.config")),
            ..UserDirs::default()
        };
        ProcessContext::new(
            dirs,
            PathBuf::from(cwd),
            Some(PathBuf::from("flemma.toml")),
            None,
        )
    }

    #[test]
    fn paths_are_made_absolute_against_the_starting_folder() {
        let context = context("/work/project");
        assert_eq!(
            context.absolute(Path::new("c.chat")),
            PathBuf::from("/work/project/c.chat")
        );
        assert_eq!(
            context.absolute(Path::new("./sub//c.chat")),
            PathBuf::from("/work/project/sub/c.chat")
        );
        assert_eq!(
            context.absolute(Path::new("/elsewhere/c.chat")),
            PathBuf::from("/elsewhere/c.chat")
        );
        assert_eq!(
            context.chat_folder(Some(Path::new("c.chat"))),
            PathBuf::from("/work/project")
        );
        assert_eq!(context.chat_folder(None), PathBuf::from("/work/project"));
        assert_eq!(
            context.default_config_file(),
            Some(PathBuf::from("flemma.toml"))
        );
    }

    #[test]
    fn variables_are_read_and_never_shown() {
        let context = context("/").with_vars(&[("TOKEN", "s3cret")]);
        assert_eq!(context.var("TOKEN").as_deref(), Some("s3cret"));
        assert_eq!(context.var("OTHER"), None);
        let shown = format!("{context:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    /// The template library's file host is handed the context's home, working directory and
    /// `PATH`, whatever this test process's own are.
    #[test]
    fn the_file_host_has_the_context_s_home_cwd_and_path() {
        use flemma_template::Host as _;
        let context = context("/work/project").with_vars(&[("PATH", "/opt/tools/bin")]);
        let host = context.file_host();
        assert_eq!(host.home_dir(), Some(PathBuf::from("/home/me")));
        assert_eq!(host.environment().cwd, Some(PathBuf::from("/work/project")));
        assert_eq!(
            host.search_path,
            Some(std::ffi::OsString::from("/opt/tools/bin"))
        );
    }

    /// The credential resolvers see the context's variables, not this test process's.
    #[test]
    fn credentials_see_the_context_s_variables() {
        let context = context("/").with_vars(&[("FLEMMA_TEST_KEY", "k")]);
        let credentials = context.credentials();
        assert_eq!(credentials.var("FLEMMA_TEST_KEY"), Some("k"));
        assert_eq!(credentials.var("PATH"), None);
    }

    #[test]
    fn the_default_configuration_follows_the_user_folders() {
        let mut context = context("/");
        context.flemma_config = None;
        assert_eq!(
            context.default_config_file(),
            Some(PathBuf::from("/home/me/.config/flemma/config.toml"))
        );
        context.dirs = UserDirs::default();
        assert_eq!(context.default_config_file(), None);
    }
}
