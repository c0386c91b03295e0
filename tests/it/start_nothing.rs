//! Invariant III (docs/security.md): opening or sending a chat starts nothing from its folder.
//!
//! A chat nobody trusted arrives in a folder (a cloned repository) that also ships what the
//! user's own configuration would pick up from it if flemmad started programs there:
//! `yaml2json.py` and `mcp_server_fetch.py` (which `python3 -m yaml2json` and `python3 -m
//! mcp_server_fetch`, as those tools document themselves, import from the working directory
//! first) and `node_modules/.bin/` and `./` shims (which a relative `PATH` entry — `.`, an
//! empty one, `node_modules/.bin` — finds). Each writes a marker when run. Opening the chat
//! (`flemmad parse --eval`, the language server) and sending it run none of them, while the
//! real frontmatter parser, MCP server and language server the configuration names still
//! work. The MCP servers an ACP editor gives a session are tested in `acp.rs`.
//!
//! Chats and markers live outside `/tmp` ([`common::outside_tmp`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use flemma_mock_provider::{MockProvider, Turn};
use serde_json::json;

use crate::common::{self, Chat};
use crate::lsp::lsp_client::{Client, Flavor};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The frontmatter the real parser turns into `{"title": "Hello from YAML"}`.
const CHAT: &str =
    "```yaml\ntitle: Hello from YAML\n```\n@You:\n{{ title }}: ask the fetch server.\n";

/// The hostile repository: the chat, the programs it ships, and where they leave markers.
struct Repo {
    chat: Chat,
    /// The markers the shipped programs write when they run.
    markers: tempfile::TempDir,
    /// The real programs, outside the repository.
    real: tempfile::TempDir,
}

fn executable(path: &Path, script: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn demo_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/flemma-mcp/tests/servers/demo_server.py")
}

impl Repo {
    fn new(mcp_python: &Path) -> Self {
        let chat = common::chat_outside_tmp(CHAT);
        let markers = common::outside_tmp("flemmad-markers-");
        let real = common::outside_tmp("flemmad-real-");
        let dir = chat.path.parent().unwrap().to_owned();
        let mark = |name: &str| markers.path().join(name).display().to_string();
        // What `python3 -m NAME` imports from a working directory in the repository.
        for module in ["yaml2json", "mcp_server_fetch"] {
            std::fs::write(
                dir.join(format!("{module}.py")),
                format!(
                    "open({:?}, 'w').write('ran')\nprint('{{\"title\": \"from the repository\"}}')\n",
                    mark(&format!("{module}.py"))
                ),
            )
            .unwrap();
        }
        // What a relative PATH entry finds: `node_modules/.bin`, `.` and an empty entry.
        for program in ["yaml2json", "fetch-mcp", "clangd"] {
            let shim = format!(
                "#!/bin/sh\necho ran > '{}'\necho '{{\"title\": \"from the repository\"}}'\n",
                mark(&format!("{program}-shim"))
            );
            executable(&dir.join("node_modules/.bin").join(program), &shim);
            executable(&dir.join(program), &shim);
        }
        std::fs::write(dir.join(".python-version"), "3.0.0-from-the-repository\n").unwrap();
        // The real ones.
        std::fs::write(
            real.path().join("yaml2json.py"),
            "import json, sys\nout = {}\nfor line in sys.stdin:\n    if ':' in line:\n        key, value = line.split(':', 1)\n        out[key.strip()] = value.strip()\nprint(json.dumps(out))\n",
        )
        .unwrap();
        std::fs::write(
            real.path().join("mcp_server_fetch.py"),
            format!(
                "import runpy\nrunpy.run_path({:?}, run_name='__main__')\n",
                demo_server().display().to_string()
            ),
        )
        .unwrap();
        executable(
            &real.path().join("bin/yaml2json"),
            &format!(
                "#!/bin/sh\nexec python3 '{}'\n",
                real.path().join("yaml2json.py").display()
            ),
        );
        executable(
            &real.path().join("bin/fetch-mcp"),
            &format!(
                "#!/bin/sh\nexec '{}' '{}'\n",
                mcp_python.display(),
                demo_server().display()
            ),
        );
        Self {
            chat,
            markers,
            real,
        }
    }

    fn dir(&self) -> &Path {
        self.chat.path.parent().unwrap()
    }

    /// The user's configuration: `parser` for YAML frontmatter, the MCP server `fetch`
    /// (`command`, `args`) auto-approved, and `extra` TOML.
    fn configure(&self, parser: &[&str], command: &str, args: &[&str], extra: &str) {
        let config = format!(
            r#"provider = "anthropic"
model = "claude-sonnet-4-5"
{extra}

[templating.frontmatter_parsers]
yaml = {parser}

[tools]
auto_approve = ["$standard", "fetch.*"]

[tools.mcp]
include = ["fetch.*"]
exclude = ["fetch.die", "fetch.hang", "fetch.grow"]

[tools.mcp.servers.fetch]
command = "{command}"
args = {args}
"#,
            parser = json!(parser),
            args = json!(args),
        );
        common::write_user_config(&self.chat, &config);
    }

    /// The markers the repository's programs left (none is the point).
    fn ran(&self) -> Vec<String> {
        let mut ran: Vec<String> = std::fs::read_dir(self.markers.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        ran.sort();
        ran
    }

    /// `flemmad ARGS…` with the providers at `base`, `PATH` as given, `PYTHONPATH` holding
    /// the real modules, started in `cwd`.
    fn command(&self, base: &str, path: &str, cwd: &Path) -> tokio::process::Command {
        let mut command = common::flemmad_command(&self.chat, base);
        command
            .env("PATH", path)
            .env("PYTHONPATH", self.real.path())
            .current_dir(cwd);
        command
    }
}

async fn run(mut command: tokio::process::Command) -> Output {
    tokio::time::timeout(TIMEOUT, command.output())
        .await
        .expect("flemmad finished in time")
        .unwrap()
}

fn mcp_python(test: &str) -> Option<PathBuf> {
    common::sdk_python("FLEMMA_TEST_MCP_PYTHON", "mcp", test)
}

/// The model asks the `fetch` server to echo, then ends.
fn script(mock: &MockProvider) {
    mock.push(Turn::text("Asking it.").tool_call_with_id(
        "fetch__echo",
        "f1",
        json!({"text": "the real fetch server answered"}),
    ));
    mock.push(Turn::text("Done."));
}

/// The send used the real parser (its variable reached the provider) and the real server
/// (its answer is the result).
fn assert_the_real_ones_worked(repo: &Repo, mock: &MockProvider, out: &Output) {
    let err = common::stderr(out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let requests = mock.requests();
    let first = requests[0].body.to_string();
    assert!(
        first.contains("Hello from YAML: ask the fetch server."),
        "{first}"
    );
    assert!(!first.contains("from the repository"), "{first}");
    let text = common::read(&repo.chat.path);
    assert!(text.contains("**Tool Result:** `f1`"), "{text}\n{err}");
    assert!(
        text.contains("the real fetch server answered"),
        "{text}\n{err}"
    );
}

/// `python3 -m yaml2json` and `python3 -m mcp_server_fetch` (as those tools document their
/// use): opening the chat evaluates no frontmatter parser (a warning says it is evaluated when
/// sent), in `parse --eval` and in the language server; sending runs the real parser and the
/// real server, never the repository's modules.
#[tokio::test]
async fn python_dash_m_never_imports_the_chats_folder() {
    let Some(python) = mcp_python("python_dash_m_never_imports_the_chats_folder") else {
        return;
    };
    let repo = Repo::new(&python);
    repo.configure(
        &["python3", "-m", "yaml2json"],
        &python.display().to_string(),
        &["-m", "mcp_server_fetch"],
        "",
    );
    let mock = MockProvider::start().await.unwrap();
    let plain_path = "/usr/bin:/bin";

    // Opening: `parse --eval` from inside the repository.
    let mut parse = repo.command(&mock.base_url(), plain_path, repo.dir());
    parse.args(["parse", "--eval"]).arg(&repo.chat.path);
    let out = run(parse).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        common::stderr(&out)
    );
    assert_eq!(repo.ran(), Vec::<String>::new(), "opening ran: {said}");
    assert!(
        said.contains("evaluated when the chat is sent") && said.contains("flemmad trust"),
        "{said}"
    );

    // Opening in an editor: the language server's analysis.
    let env = vec![
        (
            "XDG_CONFIG_HOME",
            repo.chat.config_home.display().to_string(),
        ),
        ("PATH", plain_path.to_owned()),
        ("PYTHONPATH", repo.real.path().display().to_string()),
    ];
    let mut client = Client::start_with_env(Flavor::VsCode, &["--no-daemon"], &env);
    client.initialize(repo.dir());
    let uri = format!("file://{}", repo.chat.path.display());
    client.open(&uri, CHAT);
    let published =
        client.wait_notification("textDocument/publishDiagnostics", |p| p["uri"] == uri);
    assert_eq!(
        repo.ran(),
        Vec::<String>::new(),
        "the editor ran: {published}"
    );
    let deferred = published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "untrusted-frontmatter-deferred")
        .unwrap_or_else(|| panic!("{published}"));
    assert_eq!(deferred["severity"], 2, "a warning: {deferred}");
    client.shutdown();

    // Sending.
    script(&mock);
    let mut send = repo.command(&mock.base_url(), plain_path, repo.dir());
    send.arg("send").arg(&repo.chat.path);
    let out = run(send).await;
    assert_eq!(repo.ran(), Vec::<String>::new(), "{}", common::stderr(&out));
    assert_the_real_ones_worked(&repo, &mock, &out);
}

/// With `.`, an empty entry and `node_modules/.bin` on `PATH`, and flemmad started inside the
/// repository (as one does: `cd repo && flemmad send x.chat`), the parser, the MCP server and
/// the `lsp` tool's language server named by their bare names are found on `PATH`'s absolute
/// entries only: the real ones run, the repository's shims never.
#[tokio::test]
async fn relative_path_entries_find_no_program() {
    let Some(python) = mcp_python("relative_path_entries_find_no_program") else {
        return;
    };
    let repo = Repo::new(&python);
    let clangd = std::process::Command::new("clangd")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    repo.configure(
        &["yaml2json"],
        "fetch-mcp",
        &[],
        if clangd {
            "[tools.lsp]\nservers = [\"clangd\"]\n"
        } else {
            ""
        },
    );
    let path = format!(
        "node_modules/.bin::.:{}:/usr/bin:/bin",
        repo.real.path().join("bin").display()
    );
    let mock = MockProvider::start().await.unwrap();
    script(&mock);
    let mut send = repo.command(&mock.base_url(), &path, repo.dir());
    send.arg("send").arg(&repo.chat.path);
    let out = run(send).await;
    assert_eq!(repo.ran(), Vec::<String>::new(), "{}", common::stderr(&out));
    assert_the_real_ones_worked(&repo, &mock, &out);

    if !clangd {
        eprintln!("clangd is not on PATH; the language server part is skipped");
        return;
    }
    std::fs::write(
        repo.dir().join("main.c"),
        "int answer(void) { return 42; }\n",
    )
    .unwrap();
    let input = json!({"label": "symbols", "action": "symbols", "path": "main.c", "symbol": null, "line": null, "column": null, "new_name": null});
    let mut tools = repo.command(&mock.base_url(), &path, repo.dir());
    tools
        .args(["tools", "--chat"])
        .arg(&repo.chat.path)
        .args(["run", "lsp", &input.to_string()]);
    let out = run(tools).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(repo.ran(), Vec::<String>::new(), "{}", common::stderr(&out));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        common::stderr(&out)
    );
    assert!(
        stdout.contains("answer"),
        "the real clangd answered: {stdout}"
    );
}

/// The name `flemma` is reserved for MCP servers (their tools would be `flemma.*`, the
/// harness's own, which `$standard` approves): the user's configuration and a chat that may
/// define servers are refused with a message saying so, and nothing is sent. (An ACP editor's
/// `mcpServers`: `acp.rs`.)
#[tokio::test]
async fn an_mcp_server_named_flemma_is_refused_from_the_configuration_and_a_chat() {
    let mock = MockProvider::start().await.unwrap();
    // The user's configuration.
    let chat = common::chat("@You:\nhi\n");
    common::write_user_config(
        &chat,
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n[tools.mcp.servers.flemma]\ncommand = \"true\"\n",
    );
    let out = common::send(&chat, &mock.base_url()).await;
    let err = common::stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("'flemma' is reserved") && err.contains("flemma.*"),
        "{err}"
    );
    // A trusted chat, in a configuration that lets chats define servers.
    let chat = common::trusted_chat(
        "```json\n{\"flemma\": {\"tools\": {\"mcp\": {\"servers\": {\"flemma\": {\"command\": \"true\"}}}}}}\n```\n@You:\nhi\n",
    );
    common::write_user_config(
        &chat,
        "provider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n[tools.mcp]\ntrust_chat_servers = true\n",
    );
    let out = common::send(&chat, &mock.base_url()).await;
    let err = common::stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("'flemma' is reserved"), "{err}");
    assert!(mock.requests().is_empty(), "nothing was sent");
}
