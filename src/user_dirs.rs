//! The user's folders, by one rule for every part of the binary (issue 28, "one process
//! context"): the XDG base directories when set to an absolute path (an unset, empty or
//! relative value is ignored, as the XDG Base Directory specification says), else their
//! defaults under `$HOME` (itself only when absolute). The daemon's runtime folder has its own
//! fallback (`/tmp/flemma-$UID`, `runtime_dir::RuntimePaths::dir_for`).
//!
//! [`UserDirs::from_vars`] is the rule, pure, for whoever reads the environment another way
//! (`flemmad doctor` reads the environment a test gives it); [`UserDirs::from_process`] reads
//! this process's once, in `main`, into the `ProcessContext` handed down from there.

use std::ffi::OsString;
use std::path::PathBuf;

/// The user's folders as the environment names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserDirs {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config: Option<PathBuf>,
    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    pub state: Option<PathBuf>,
    /// `$XDG_CACHE_HOME`, else `~/.cache`.
    pub cache: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR` (no default under `$HOME`).
    pub runtime: Option<PathBuf>,
}

impl UserDirs {
    /// The rule, given how to read a variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let absolute = |name: &str| {
            var(name)
                .map(PathBuf::from)
                .filter(|path| path.is_absolute())
        };
        let home = absolute("HOME");
        let base = |name: &str, fallback: &str| {
            absolute(name).or_else(|| home.as_ref().map(|home| home.join(fallback)))
        };
        Self {
            config: base("XDG_CONFIG_HOME", ".config"),
            state: base("XDG_STATE_HOME", ".local/state"),
            cache: base("XDG_CACHE_HOME", ".cache"),
            runtime: absolute("XDG_RUNTIME_DIR"),
            home,
        }
    }

    /// This process's: read once, by `main` (`ProcessContext::from_process`).
    pub fn from_process() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    /// flemmad's folder in the user's configuration: `$XDG_CONFIG_HOME/flemma`.
    pub fn flemma_config(&self) -> Option<PathBuf> {
        self.config.as_ref().map(|dir| dir.join("flemma"))
    }

    /// flemmad's folder of state (records, journal, locks, log): `$XDG_STATE_HOME/flemma`.
    pub fn flemma_state(&self) -> Option<PathBuf> {
        self.state.as_ref().map(|dir| dir.join("flemma"))
    }
}

/// A chat's name in flemmad's own folders (records, journal, locks, archives, checkpoints): the
/// SHA-256 of its path (made absolute and lexical), in hex.
pub fn chat_key(chat: &std::path::Path) -> String {
    let chat = flemma_protocol::document::normalize(chat);
    let digest = ring::digest::digest(&ring::digest::SHA256, chat.as_os_str().as_encoded_bytes());
    hex(digest.as_ref())
}

/// Bytes in lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(vars: &[(&str, &str)]) -> UserDirs {
        UserDirs::from_vars(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        })
    }

    #[test]
    fn xdg_values_win_when_absolute_and_home_gives_the_defaults() {
        let d = dirs(&[("HOME", "/home/me"), ("XDG_STATE_HOME", "/s")]);
        assert_eq!(d.state, Some(PathBuf::from("/s")));
        assert_eq!(d.config, Some(PathBuf::from("/home/me/.config")));
        assert_eq!(d.cache, Some(PathBuf::from("/home/me/.cache")));
        assert_eq!(d.runtime, None);
    }

    #[test]
    fn empty_or_relative_values_are_ignored() {
        let d = dirs(&[
            ("HOME", "/home/me"),
            ("XDG_CONFIG_HOME", "rel"),
            ("XDG_STATE_HOME", ""),
            ("XDG_RUNTIME_DIR", "run"),
        ]);
        assert_eq!(d.config, Some(PathBuf::from("/home/me/.config")));
        assert_eq!(d.state, Some(PathBuf::from("/home/me/.local/state")));
        assert_eq!(d.runtime, None);
        let d = dirs(&[("HOME", "")]);
        assert_eq!(d, UserDirs::default());
        let d = dirs(&[("HOME", "relative/home")]);
        assert_eq!(d, UserDirs::default());
    }
}
