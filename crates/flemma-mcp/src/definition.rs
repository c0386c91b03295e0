//! Which servers a chat uses, from its resolved configuration: who may define a server (the
//! user config file; a chat's frontmatter or client settings only when the user file sets
//! `tools.mcp.trust_chat_servers = true`), the working directory (the configuration's, else
//! [`flemma_tools::launch::NEUTRAL_DIR`], never the chat's folder by itself), and `${VAR}`
//! expansion into values that never print.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flemma_config::{LayerKind, McpServer, ResolvedConfig, mcp_server_name};

/// A value taken from the environment (an expanded `env` or header value): compared and hashed
/// like a string, printed as `[redacted]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hidden(String);

impl Hidden {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value itself, for the process environment or the HTTP request only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// How flemmad reaches a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transport {
    /// A child process speaking JSON-RPC on its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to flemmad's environment.
        env: Vec<(String, Hidden)>,
        cwd: PathBuf,
        /// Run inside the tool sandbox.
        sandbox: bool,
    },
    /// A streamable-HTTP endpoint.
    Http {
        url: String,
        headers: Vec<(String, Hidden)>,
    },
}

/// Where a server definition comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// `[tools.mcp.servers.NAME]` of the configuration.
    Config,
    /// Passed by a session at run time (an ACP editor's `mcpServers`), named by the session.
    Session(String),
}

/// One server as it runs: the hub shares a running server between every chat whose
/// definition is equal (same command, arguments, environment and directory; or same URL and
/// headers).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerDef {
    /// The tool-name form of the server's name (`docs-internal`).
    pub name: String,
    pub transport: Transport,
    pub origin: Origin,
}

impl ServerDef {
    /// What runs, for `status` and `doctor` (no environment or header values).
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                cwd,
                sandbox,
                ..
            } => {
                let mut line = std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" ");
                line = format!("stdio: {line} (in {})", cwd.display());
                if *sandbox {
                    line.push_str(", sandboxed");
                }
                line
            }
            Transport::Http { url, .. } => format!("http: {url}"),
        }
    }
}

/// The servers of one configuration, and what was ignored (one line each, for stderr,
/// `status` and `doctor`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defined {
    pub servers: Vec<ServerDef>,
    pub notes: Vec<String>,
}

/// The options of a server that say what runs: only the user file may set them, unless it
/// trusts chats.
const DEFINING: [&str; 7] = ["command", "args", "env", "cwd", "url", "headers", "sandbox"];

/// The servers `resolved` defines for a chat in `chat_dir` (a configured relative `cwd` is
/// taken against it; without one a server starts in the neutral directory). `env` reads
/// flemmad's environment for `${VAR}`.
pub fn defined(
    resolved: &ResolvedConfig,
    chat_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Defined {
    let mcp = &resolved.config.tools.mcp;
    let mut out = Defined::default();
    if !mcp.is_enabled() {
        return out;
    }
    let trusted_chats = mcp.trust_chat_servers
        && resolved.source_of("tools.mcp.trust_chat_servers") == Some(LayerKind::UserFile);
    for (configured, server) in &mcp.servers {
        let name = mcp_server_name(configured);
        let quoted = format!("tools.mcp.servers.\"{configured}\"");
        let from_chat = DEFINING.iter().find_map(|option| {
            resolved
                .source_of(&format!("{quoted}.{option}"))
                .filter(|layer| *layer > LayerKind::UserFile)
                .map(|layer| (*option, layer))
        });
        if let Some((option, layer)) = from_chat
            && !trusted_chats
        {
            out.notes.push(format!(
                "MCP server `{name}`: `{option}` is set by the {}, which may not define what runs; the server is ignored (define it in your config file, or set tools.mcp.trust_chat_servers = true there)",
                layer.as_str()
            ));
            continue;
        }
        if !server.enabled {
            continue;
        }
        match transport(server, chat_dir, env) {
            Ok((transport, missing)) => {
                for variable in missing {
                    out.notes.push(format!(
                        "MCP server `{name}`: ${{{variable}}} is not set in flemmad's environment; it expands to nothing"
                    ));
                }
                out.servers.push(ServerDef {
                    name,
                    transport,
                    origin: Origin::Config,
                });
            }
            Err(reason) => out.notes.push(format!("MCP server `{name}`: {reason}")),
        }
    }
    out
}

/// `defs` without the servers whose name is refused (`flemma`, which would make their tools
/// `flemma.*`, the harness's own; a name that is no tool-name prefix), one line in `notes`
/// for each: whatever the source (the configuration, an ACP editor), such a server never
/// starts.
pub fn allowed_names(defs: Vec<ServerDef>, notes: &mut Vec<String>) -> Vec<ServerDef> {
    defs.into_iter()
        .filter(
            |def| match flemma_config::check_mcp_server_name(&def.name) {
                Ok(_) => true,
                Err(reason) => {
                    notes.push(format!("MCP server `{}` is not used: {reason}", def.name));
                    false
                }
            },
        )
        .collect()
}

fn transport(
    server: &McpServer,
    chat_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Transport, Vec<String>), String> {
    let mut missing = Vec::new();
    let mut expand = |map: &BTreeMap<String, String>| -> Vec<(String, Hidden)> {
        map.iter()
            .map(|(key, value)| (key.clone(), Hidden(expand_vars(value, env, &mut missing))))
            .collect()
    };
    let transport = match (&server.command, &server.url) {
        (Some(command), None) => Transport::Stdio {
            command: command.clone(),
            args: server.args.clone(),
            env: expand(&server.env),
            // The configuration's directory (a relative one taken against the chat's), else
            // the neutral one: a chat's folder never chooses the code a server runs
            // (`python3 -m x` imports `./x.py`).
            cwd: match &server.cwd {
                Some(dir) => chat_dir.join(dir),
                None => PathBuf::from(flemma_tools::launch::NEUTRAL_DIR),
            },
            sandbox: server.sandbox,
        },
        (None, Some(url)) => Transport::Http {
            url: url.clone(),
            headers: expand(&server.headers),
        },
        _ => return Err("needs exactly one of `command` and `url`".into()),
    };
    Ok((transport, missing))
}

/// Expands `${VAR}` (and `${VAR:-default}`) from `env`; names that are unset (and have no
/// default) go to `missing`.
pub fn expand_vars(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    missing: &mut Vec<String>,
) -> String {
    let unset = std::cell::RefCell::new(Vec::<String>::new());
    let recording = |name: &str| {
        let value = env(name);
        if value.as_deref().is_none_or(str::is_empty) && !text.contains(&format!("${{{name}:-")) {
            unset.borrow_mut().push(name.to_string());
        }
        value
    };
    let out = flemma_tools::sandbox::expand_env(text, &recording);
    for name in unset.into_inner() {
        if !missing.contains(&name) {
            missing.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_config::{ConfigLayer, resolve};

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    fn resolved(user: &str, chat: Option<serde_json::Value>) -> ResolvedConfig {
        let mut layers = vec![
            ConfigLayer::defaults(),
            ConfigLayer::from_toml_str(user, LayerKind::UserFile).expect("user file"),
        ];
        if let Some(chat) = chat {
            layers.push(ConfigLayer::from_json(&chat, LayerKind::Frontmatter).expect("chat"));
        }
        resolve(&layers).expect("resolves")
    }

    const USER: &str = r#"
[tools.mcp.servers."docs.internal"]
command = "docs-mcp"
args = ["--stdio"]
env = { API_TOKEN = "${TOKEN}", OTHER = "${NOT_SET}" }
cwd = "tools"

[tools.mcp.servers.web]
url = "http://127.0.0.1:9/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
"#;

    #[test]
    fn servers_of_the_user_file_are_defined_with_expanded_values() {
        let defined = defined(&resolved(USER, None), Path::new("/chats"), &env);
        assert_eq!(defined.servers.len(), 2);
        let docs = &defined.servers[0];
        assert_eq!(docs.name, "docs-internal");
        let Transport::Stdio { env, cwd, .. } = &docs.transport else {
            panic!("a stdio server")
        };
        assert_eq!(cwd, Path::new("/chats/tools"));
        // Without a configured `cwd`, the neutral directory, never the chat's folder.
        let user = "[tools.mcp.servers.plain]\ncommand = \"plain-mcp\"\n";
        let plain = super::defined(
            &resolved(user, None),
            Path::new("/chats"),
            &super::tests::env,
        );
        let Transport::Stdio { cwd, .. } = &plain.servers[0].transport else {
            panic!("a stdio server")
        };
        assert_eq!(cwd, Path::new(flemma_tools::launch::NEUTRAL_DIR));
        assert_eq!(env[0].1.expose(), "s3cret");
        let Transport::Http { headers, .. } = &defined.servers[1].transport else {
            panic!("an http server")
        };
        assert_eq!(headers[0].1.expose(), "Bearer s3cret");
        // Values never print; the unset variable is named, not its value.
        let printed = format!("{defined:?}");
        assert!(!printed.contains("s3cret"), "{printed}");
        assert_eq!(defined.notes.len(), 1, "{:?}", defined.notes);
        assert!(
            defined.notes[0].contains("${NOT_SET}"),
            "{:?}",
            defined.notes
        );
    }

    #[test]
    fn a_chat_may_disable_but_not_define_a_server() {
        let chat = serde_json::json!({"tools": {"mcp": {"servers": {
            "web": {"enabled": false},
            "evil": {"command": "rm", "args": ["-rf", "/"]},
        }}}});
        let defined = defined(&resolved(USER, Some(chat)), Path::new("/chats"), &env);
        let names: Vec<&str> = defined.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["docs-internal"]);
        assert!(
            defined.notes.iter().any(|n| n.contains("`evil`")
                && n.contains("frontmatter")
                && n.contains("trust_chat_servers")),
            "{:?}",
            defined.notes
        );
    }

    #[test]
    fn trust_must_come_from_the_user_file() {
        let chat = serde_json::json!({"tools": {"mcp": {
            "trust_chat_servers": true,
            "servers": {"mine": {"command": "my-mcp"}},
        }}});
        let defined_untrusted = defined(&resolved(USER, Some(chat.clone())), Path::new("/c"), &env);
        assert!(!defined_untrusted.servers.iter().any(|s| s.name == "mine"));
        let trusting = format!("[tools.mcp]\ntrust_chat_servers = true\n{USER}");
        let chat =
            serde_json::json!({"tools": {"mcp": {"servers": {"mine": {"command": "my-mcp"}}}}});
        let defined_trusted = defined(&resolved(&trusting, Some(chat)), Path::new("/c"), &env);
        assert!(defined_trusted.servers.iter().any(|s| s.name == "mine"));
    }

    #[test]
    fn mcp_off_defines_nothing() {
        let user = format!("[tools.mcp]\nenabled = false\n{USER}");
        assert!(
            defined(&resolved(&user, None), Path::new("/c"), &env)
                .servers
                .is_empty()
        );
    }
}
