//! `flemmad doctor`: the editor set-ups found here (Helix, Neovim, VS Code, Zed).

use super::*;

/// Helix: `languages.toml` with the flemma server and the `chat` language, and the queries.
pub(super) fn check_helix(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "helix";
    let Some(helix_dir) = machine.config_home.as_ref().map(|dir| dir.join("helix")) else {
        return;
    };
    let languages = helix_dir.join("languages.toml");
    let program = machine.program("hx").or_else(|| machine.program("helix"));
    let text = match std::fs::read_to_string(&languages) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if let Some(program) = program {
                findings.push(
                    Finding::new(
                        CHECK,
                        Status::Info,
                        format!(
                            "Helix is installed ({}) but not set up for .chat files ({} does not exist)",
                            program.display(),
                            languages.display()
                        ),
                    )
                    .hint("see docs/editors/helix.md (copy clients/helix/languages.toml)"),
                );
            }
            return;
        }
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("cannot read {}: {error}", languages.display()),
                )
                .hint("check the file's permissions"),
            );
            return;
        }
    };
    let table: toml::Table = match toml::from_str(&text) {
        Ok(table) => table,
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!(
                        "{} is not valid TOML: {}",
                        languages.display(),
                        error.message()
                    ),
                )
                .hint(format!(
                    "fix {} (Helix ignores it as it is)",
                    languages.display()
                )),
            );
            return;
        }
    };
    let server = table
        .get("language-server")
        .and_then(|servers| servers.get("flemma"));
    let chat_language = table
        .get("language")
        .and_then(toml::Value::as_array)
        .and_then(|languages| {
            languages
                .iter()
                .find(|l| l.get("name").and_then(toml::Value::as_str) == Some("chat"))
        });
    if server.is_none() && chat_language.is_none() {
        findings.push(
            Finding::new(
                CHECK,
                Status::Info,
                format!(
                    "not set up for .chat files ({} has no flemma server and no chat language)",
                    languages.display()
                ),
            )
            .hint("see docs/editors/helix.md (append clients/helix/languages.toml)"),
        );
        return;
    }
    let mut problems = Vec::new();
    match server {
        None => problems.push((
            "has no [language-server.flemma]".to_owned(),
            "add the [language-server.flemma] table of clients/helix/languages.toml".to_owned(),
        )),
        Some(server) => match server.get("command").and_then(toml::Value::as_str) {
            None => problems.push((
                "[language-server.flemma] has no `command`".to_owned(),
                "set `command = \"flemmad\"` and `args = [\"lsp\"]`".to_owned(),
            )),
            Some(command) => {
                let expanded = match (command.strip_prefix("~/"), &machine.home) {
                    (Some(rest), Some(home)) => home.join(rest).display().to_string(),
                    _ => command.to_owned(),
                };
                if machine.program(&expanded).is_none() {
                    problems.push((
                        format!("the flemma server's command `{command}` is not an executable on PATH"),
                        "install flemmad (`cargo install --path .`) or give its full path in `command`".to_owned(),
                    ));
                }
            }
        },
    }
    match chat_language {
        None => problems.push((
            "has no [[language]] named `chat`".to_owned(),
            "add the [[language]] table of clients/helix/languages.toml".to_owned(),
        )),
        Some(language) => {
            let servers = language
                .get("language-servers")
                .and_then(toml::Value::as_array)
                .map(|servers| {
                    servers.iter().any(|s| {
                        s.as_str()
                            .or_else(|| s.get("name").and_then(toml::Value::as_str))
                            == Some("flemma")
                    })
                })
                .unwrap_or(false);
            if !servers {
                problems.push((
                    "the `chat` language does not list the flemma server".to_owned(),
                    "set `language-servers = [\"flemma\"]` in the chat [[language]]".to_owned(),
                ));
            }
        }
    }
    for (problem, fix) in &problems {
        findings.push(
            Finding::new(
                CHECK,
                Status::Fail,
                format!("{} {problem}", languages.display()),
            )
            .hint(fix.clone()),
        );
    }
    let queries = helix_dir.join("runtime/queries/chat");
    let highlights = queries.join("highlights.scm");
    if !highlights.is_file() {
        findings.push(
            Finding::new(
                CHECK,
                Status::Warn,
                format!(
                    "no {}: .chat files open without role and tool-header highlighting",
                    highlights.display()
                ),
            )
            .hint(format!(
                "mkdir -p {} && cp clients/helix/runtime/queries/chat/*.scm {}",
                queries.display(),
                queries.display()
            )),
        );
    }
    if problems.is_empty() {
        findings.push(Finding::new(
            CHECK,
            Status::Ok,
            format!(
                "{} has the flemma server and the chat language (check with `hx --health chat`)",
                languages.display()
            ),
        ));
    }
}

/// Neovim: only whether `nvim` is here (its set-up lives in the user's own Lua config).
pub(super) fn check_neovim(machine: &Machine, findings: &mut Vec<Finding>) {
    if let Some(nvim) = machine.program("nvim") {
        findings.push(
            Finding::new(
                "neovim",
                Status::Info,
                format!(
                    "nvim found ({}); its set-up is in your own config",
                    nvim.display()
                ),
            )
            .hint(r#"see docs/editors/neovim.md (`require("flemmad").setup({})` in init.lua)"#),
        );
    }
}

/// VS Code: an installed flemma extension with a readable manifest.
pub(super) fn check_vscode(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "vscode";
    let Some(extensions) = machine.home.as_ref().map(|h| h.join(".vscode/extensions")) else {
        return;
    };
    let installed: Vec<PathBuf> = std::fs::read_dir(&extensions)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains("flemma"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    if installed.is_empty() {
        if let Some(code) = machine.program("code") {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Info,
                    format!(
                        "VS Code is installed ({}) without the flemma extension",
                        code.display()
                    ),
                )
                .hint("see docs/editors/vscode.md (code --install-extension flemma-*.vsix)"),
            );
        }
        return;
    }
    for dir in installed {
        let manifest = dir.join("package.json");
        let parsed = std::fs::read_to_string(&manifest)
            .map_err(|error| error.to_string())
            .and_then(|text| {
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
            });
        findings.push(match parsed {
            Ok(manifest) => {
                let version = manifest
                    .get("version")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("unknown version");
                Finding::new(
                    CHECK,
                    Status::Ok,
                    format!("extension installed: {} ({version})", dir.display()),
                )
            }
            Err(error) => Finding::new(
                CHECK,
                Status::Fail,
                format!(
                    "the extension in {} is broken: {}: {error}",
                    dir.display(),
                    manifest.display()
                ),
            )
            .hint("reinstall it (code --install-extension flemma-*.vsix --force)"),
        });
    }
}

/// Zed: an `agent_servers` entry of `$XDG_CONFIG_HOME/zed/settings.json` that runs
/// `flemmad acp` (docs/editors/zed.md). Nothing is said when Zed has no settings file.
pub(super) fn check_zed(machine: &Machine, findings: &mut Vec<Finding>) {
    const CHECK: &str = "zed";
    let Some(settings) = machine
        .config_home
        .as_ref()
        .map(|dir| dir.join("zed/settings.json"))
    else {
        return;
    };
    let text = match std::fs::read_to_string(&settings) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("cannot read {}: {error}", settings.display()),
                )
                .hint("check the file's permissions"),
            );
            return;
        }
    };
    let value: serde_json::Value = match serde_json::from_str(&without_comments(&text)) {
        Ok(value) => value,
        Err(error) => {
            findings.push(
                Finding::new(
                    CHECK,
                    Status::Fail,
                    format!("{} is not valid JSON: {error}", settings.display()),
                )
                .hint(format!(
                    "fix {} (Zed does not apply it as it is)",
                    settings.display()
                )),
            );
            return;
        }
    };
    let runs_flemmad = |server: &serde_json::Value| {
        server
            .get("command")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|command| Path::new(command).file_name() == Some("flemmad".as_ref()))
    };
    let Some((name, server)) = value
        .get("agent_servers")
        .and_then(serde_json::Value::as_object)
        .and_then(|servers| servers.iter().find(|(_, server)| runs_flemmad(server)))
    else {
        findings.push(
            Finding::new(
                CHECK,
                Status::Info,
                format!(
                    "Zed is set up without flemmad ({} has no `agent_servers` entry that runs flemmad)",
                    settings.display()
                ),
            )
            .hint(r#"see docs/editors/zed.md: "agent_servers": {"flemmad": {"type": "custom", "command": "flemmad", "args": ["acp"]}}"#),
        );
        return;
    };
    let command = server
        .get("command")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let mut problems = Vec::new();
    let first_arg = server
        .get("args")
        .and_then(serde_json::Value::as_array)
        .and_then(|args| args.first())
        .and_then(serde_json::Value::as_str);
    if first_arg != Some("acp") {
        problems.push((
            format!("`agent_servers.{name}` runs flemmad without `acp` as its first argument"),
            r#"set "args": ["acp"]"#.to_owned(),
        ));
    }
    let expanded = match (command.strip_prefix("~/"), &machine.home) {
        (Some(rest), Some(home)) => home.join(rest).display().to_string(),
        _ => command.to_owned(),
    };
    if machine.program(&expanded).is_none() {
        problems.push((
            format!("`agent_servers.{name}.command` `{command}` is not an executable on PATH"),
            "install flemmad (`cargo install --path .`) or give its full path in `command` (Zed does not read your shell's PATH when started from a desktop launcher)".to_owned(),
        ));
    }
    if problems.is_empty() {
        findings.push(Finding::new(
            CHECK,
            Status::Ok,
            format!(
                "{} has `agent_servers.{name}` running `{command} acp`",
                settings.display()
            ),
        ));
    }
    for (problem, fix) in problems {
        findings.push(
            Finding::new(
                CHECK,
                Status::Fail,
                format!("{}: {problem}", settings.display()),
            )
            .hint(fix),
        );
    }
}

/// JSON with comments and trailing commas (Zed's settings) as plain JSON: `//` and `/* */`
/// comments outside strings become spaces (line breaks kept, so error positions stay true),
/// and a comma followed only by white space before `}` or `]` is dropped.
fn without_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let byte = bytes[i];
        if in_string {
            out.push(byte);
            if byte == b'\\' && i + 1 < bytes.len() {
                out.push(bytes[i + 1]);
                i += 2;
                continue;
            }
            in_string = byte != b'"';
            i += 1;
            continue;
        }
        match (byte, bytes.get(i + 1)) {
            (b'"', _) => {
                in_string = true;
                out.push(byte);
                i += 1;
            }
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                out.extend_from_slice(b"  ");
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    out.push(if bytes[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
                if i < bytes.len() {
                    out.extend_from_slice(b"  ");
                    i += 2;
                }
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    // Trailing commas: outside strings, a comma whose next non-blank byte closes a container.
    let mut cleaned = Vec::with_capacity(out.len());
    let mut in_string = false;
    let mut escaped = false;
    for (index, &byte) in out.iter().enumerate() {
        if in_string {
            in_string = escaped || byte != b'"';
            escaped = !escaped && byte == b'\\';
        } else if byte == b'"' {
            in_string = true;
        } else if byte == b',' {
            let next = out[index + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                cleaned.push(b' ');
                continue;
            }
        }
        cleaned.push(byte);
    }
    String::from_utf8_lossy(&cleaned).into_owned()
}

#[cfg(test)]
mod tests {
    use super::without_comments;

    #[test]
    fn zed_settings_with_comments_and_trailing_commas_read_as_json() {
        let text = "// Zed settings\n{\n  /* agents */ \"agent_servers\": {\n    \"flemmad\": {\"command\": \"flemmad\", \"args\": [\"acp\",],}, // mine\n  },\n  \"url\": \"http://x//y\", \"q\": \"a\\\",/*b*/\",\n}\n";
        let value: serde_json::Value =
            serde_json::from_str(&without_comments(text)).expect("plain JSON");
        assert_eq!(value["agent_servers"]["flemmad"]["args"][0], "acp");
        assert_eq!(value["url"], "http://x//y");
        assert_eq!(value["q"], "a\",/*b*/");
        assert_eq!(without_comments(text).lines().count(), text.lines().count());
    }
}
