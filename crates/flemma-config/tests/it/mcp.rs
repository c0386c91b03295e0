//! `[tools.mcp]`: the schema, the server-name rules, and tool lists naming MCP tools before
//! their server has listed them.

use flemma_config::{ConfigErrors, ConfigLayer, LayerKind, ResolvedConfig, resolve};
use serde_json::json;

fn user(toml: &str) -> ConfigLayer {
    ConfigLayer::from_toml_str(toml, LayerKind::UserFile).expect("a valid user file")
}

fn front(value: serde_json::Value) -> ConfigLayer {
    ConfigLayer::from_json(&value, LayerKind::Frontmatter).expect("a valid frontmatter layer")
}

fn resolved(layers: Vec<ConfigLayer>) -> ResolvedConfig {
    let mut all = vec![ConfigLayer::defaults()];
    all.extend(layers);
    resolve(&all).expect("the configuration resolves")
}

fn errors(layers: Vec<ConfigLayer>) -> String {
    let mut all = vec![ConfigLayer::defaults()];
    all.extend(layers);
    let ConfigErrors(errors) = resolve(&all).expect_err("a configuration error");
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

const SERVERS: &str = r#"
[tools.mcp]
include = ["github.*"]
exclude = ["github.delete_*"]
timeout = 12

[tools.mcp.servers.github]
command = "github-mcp"
args = ["--stdio"]
env = { TOKEN = "${GITHUB_TOKEN}" }

[tools.mcp.servers."docs.internal"]
url = "http://127.0.0.1:8000/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
"#;

#[test]
fn servers_parse_with_their_defaults() {
    let config = resolved(vec![user(SERVERS)]).config;
    let mcp = &config.tools.mcp;
    assert!(mcp.is_enabled());
    assert_eq!(mcp.include, ["github.*"]);
    assert_eq!(mcp.exclude, ["github.delete_*"]);
    assert_eq!(mcp.timeout, Some(12));
    assert_eq!(mcp.startup_timeout, 30);
    assert!(!mcp.trust_chat_servers);
    let github = &mcp.servers["github"];
    assert_eq!(github.command.as_deref(), Some("github-mcp"));
    assert_eq!(github.args, ["--stdio"]);
    assert_eq!(github.env["TOKEN"], "${GITHUB_TOKEN}");
    assert!(github.enabled && !github.sandbox);
    let docs = &mcp.servers["docs.internal"];
    assert_eq!(docs.url.as_deref(), Some("http://127.0.0.1:8000/mcp"));
    assert_eq!(docs.headers["Authorization"], "Bearer ${DOCS_TOKEN}");
}

#[test]
fn mcp_is_off_without_servers() {
    assert!(!resolved(Vec::new()).config.tools.mcp.is_enabled());
    let off = user(&format!("{SERVERS}\n"));
    let mut config = resolved(vec![off]).config;
    config.tools.mcp.enabled = Some(false);
    assert!(!config.tools.mcp.is_enabled());
}

#[test]
fn a_typo_in_a_server_gets_a_suggestion() {
    let ConfigErrors(errors) = ConfigLayer::from_toml_str(
        "[tools.mcp.servers.github]\ncomand = \"x\"\n",
        LayerKind::UserFile,
    )
    .expect_err("an unknown option");
    let text = errors[0].to_string();
    assert!(
        text.contains("comand") && text.contains("command"),
        "{text}"
    );
    let ConfigErrors(errors) =
        ConfigLayer::from_toml_str("[tools.mcp]\nstartup_timout = 3\n", LayerKind::UserFile)
            .expect_err("an unknown option");
    assert!(
        errors[0].to_string().contains("startup_timeout"),
        "{}",
        errors[0]
    );
}

#[test]
fn the_name_flemma_is_reserved() {
    let text = errors(vec![user("[tools.mcp.servers.flemma]\ncommand = \"x\"\n")]);
    assert!(
        text.contains("reserved") && text.contains("$standard"),
        "{text}"
    );
}

#[test]
fn names_that_normalize_alike_are_an_error_naming_both() {
    let text = errors(vec![user(
        "[tools.mcp.servers.\"my.docs\"]\ncommand = \"a\"\n[tools.mcp.servers.my-docs]\ncommand = \"b\"\n",
    )]);
    assert!(
        text.contains("'my-docs'") && text.contains("'my.docs'") && text.contains("my-docs."),
        "{text}"
    );
}

#[test]
fn a_server_needs_exactly_one_of_command_and_url() {
    let text = errors(vec![user(
        "[tools.mcp.servers.both]\ncommand = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )]);
    assert!(text.contains("both `command` and `url`"), "{text}");
    let text = errors(vec![user("[tools.mcp.servers.none]\nenabled = true\n")]);
    assert!(text.contains("neither `command` nor `url`"), "{text}");
}

#[test]
fn tool_lists_may_name_mcp_tools_before_discovery() {
    let layers = vec![
        user(SERVERS),
        front(json!({"tools": {
            "enabled": ["+github.search_issues", "+docs-internal.*", "!github.noisy"],
            "auto_approve": ["$standard", "+github.get_*"],
        }})),
    ];
    let config = resolved(layers.clone());
    let enabled = config.enabled_tools();
    assert!(
        enabled.contains(&"github.search_issues".to_string()),
        "{enabled:?}"
    );
    assert!(
        enabled.contains(&"docs-internal.*".to_string()),
        "{enabled:?}"
    );
    assert!(
        enabled.contains(&"!github.noisy".to_string()),
        "{enabled:?}"
    );
    assert_eq!(
        config.auto_approve().approves("github.get_issue"),
        Some(true)
    );
    // `$standard` approves the harness tools only.
    assert_eq!(
        config.auto_approve().approves("github.search_issues"),
        Some(false)
    );

    // A name that belongs to no configured server is still an error with a suggestion.
    let text = errors(vec![
        user(SERVERS),
        front(json!({"tools": {"enabled": ["+gitlab.search"]}})),
    ]);
    assert!(text.contains("gitlab.search"), "{text}");
}

#[test]
fn adding_back_an_excluded_mcp_tool_takes_the_exclusion_back() {
    let config = resolved(vec![
        user(SERVERS),
        front(json!({"tools": {"enabled": ["!github.search", "+github.search"]}})),
    ]);
    let enabled = config.enabled_tools();
    assert!(
        enabled.contains(&"github.search".to_string()),
        "{enabled:?}"
    );
    assert!(
        !enabled.contains(&"!github.search".to_string()),
        "{enabled:?}"
    );
}
