//! What the credential resolvers (and the ChatGPT login, and a service-account key) share:
//! [`Secret`], a credential value that never prints, and [`CredentialEnvironment`], the
//! variables and operating system they see (injected, so tests point them at fake programs).
//! Its own module so that `credentials`, `chatgpt` and `service_account` import it and not
//! each other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A credential value. It prints as `[redacted]`; call [`Secret::expose`] only to put it in
/// an HTTP header.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The raw value, for an authentication header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The environment the resolvers see: variables (including `PATH`) and the operating system.
#[derive(Debug, Clone)]
pub struct CredentialEnvironment {
    pub(crate) vars: HashMap<String, String>,
    pub(crate) is_macos: bool,
    pub(crate) is_linux: bool,
}

impl CredentialEnvironment {
    /// These variables (the binary's process context's; a test's own), for the current
    /// operating system. The library reads no environment itself.
    pub fn from_vars<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        CredentialEnvironment {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            is_macos: cfg!(target_os = "macos"),
            is_linux: cfg!(target_os = "linux"),
        }
    }

    /// The value of a variable.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Finds an executable by name on the absolute entries of this environment's `PATH` (`.`,
    /// empty and relative entries would name folders of whatever the working directory is: a
    /// project's `./gcloud`); a name with a `/` is taken as a path (made absolute: the program
    /// runs in `/`).
    pub fn find_executable(&self, name: &str) -> Option<PathBuf> {
        if name.contains('/') {
            let path = std::path::absolute(name).ok()?;
            return is_executable(&path).then_some(path);
        }
        let path_var = self.var("PATH")?;
        std::env::split_paths(path_var)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
