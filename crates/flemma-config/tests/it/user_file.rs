//! Loads a realistic `config.toml` from a temporary file and resolves it with client, runtime and
//! frontmatter layers, as the daemon does.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::io::Write;

use flemma_config::*;
use serde_json::json;

const CONFIG: &str = r#"
# ~/.config/flemma/config.toml
provider = "anthropic"
model = "claude-opus-4-1"

[parameters]
thinking = "medium"
max_tokens = "75%"
timeout = 300
cache_retention = "long"

[parameters.anthropic]
thinking_budget = 16384
beta = ["context-1m-2025-08-07"]

[parameters.vertex]
project_id = "my-project"
location = "europe-west4"

[providers.openai-compatible]
base_url = "http://localhost:11434"

[models."claude-opus-4-1"]
input = 15.0
output = 75.0
cache_read = 1.5
cache_write = 18.75
context_window = 200000
max_output_tokens = 32000
thinking = true

[tools]
auto_approve = ["$standard", "!write", "+bash"]
max_concurrent = 4
default_timeout = 60
autopilot = { max_turns = 50, resume_delay = 500 }

[tools.store]
path_format = "$state"
backup = false

[tools.grep]
exclude = ["+.direnv"]

[[tools.custom]]
name = "weather"
description = "Current weather for a city"
command = "weather-cli --json"
input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
capabilities = ["disables_background"]
timeout = 10

[[tools.sources]]
command = "mcporter list --json"
timeout = 15

[presets."$review"]
auto_approve = ["$readonly", "weather"]

[sandbox]
backend = "bwrap"

[sandbox.policy]
rw_paths = ["+~/scratch"]
network = false

[editing]
coalesce_ms = 50

[secrets.gcloud]
path = "/opt/google-cloud-sdk/bin/gcloud"

[log]
level = "debug"
file = "/tmp/flemmad.log"
"#;

#[test]
fn realistic_config_file_resolves_with_all_layers() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(CONFIG.as_bytes()).unwrap();
    let user = ConfigLayer::from_toml_file(file.path(), LayerKind::UserFile).unwrap();

    let client = ConfigLayer::from_json(
        &json!({"editing": {"compact_headers": false}, "tools": {"fetch_content": true}}),
        LayerKind::Client,
    )
    .unwrap();
    let mut runtime = ConfigLayer::new(LayerKind::Runtime);
    runtime.set("parameters.thinking", json!("high")).unwrap();
    let mut frontmatter = ConfigLayer::new(LayerKind::Frontmatter);
    frontmatter
        .set(
            &opt_path("tools.auto_approve").unwrap(),
            json!(["$review", "+bash"]),
        )
        .unwrap();
    frontmatter
        .set(&opt_path("tools.autopilot").unwrap(), json!(false))
        .unwrap();

    let resolved = resolve(&[ConfigLayer::defaults(), user, client, runtime, frontmatter]).unwrap();
    let config = &resolved.config;

    assert_eq!(config.model, "claude-opus-4-1");
    assert_eq!(
        config.parameters.thinking,
        Thinking::Level(ThinkingLevel::High)
    );
    assert_eq!(config.parameters.max_tokens, MaxTokens::Percent(75));
    assert_eq!(config.parameters.cache_retention, CacheRetention::Long);
    assert_eq!(config.parameters.anthropic.thinking_budget, Some(16384));
    assert_eq!(config.parameters.anthropic.beta, ["context-1m-2025-08-07"]);
    assert_eq!(config.parameters.vertex.location, "europe-west4");
    assert_eq!(
        config
            .providers
            .get(Provider::OpenaiCompatible)
            .base_url
            .as_deref(),
        Some("http://localhost:11434")
    );
    let opus = &config.models["claude-opus-4-1"];
    assert_eq!(
        (opus.input, opus.max_output_tokens, opus.thinking),
        (Some(15.0), Some(32000), Some(true))
    );

    assert_eq!(config.tools.max_concurrent, 4);
    assert_eq!(config.tools.default_timeout, 60);
    assert!(!config.tools.autopilot.enabled);
    assert_eq!(config.tools.autopilot.max_turns, 50);
    assert_eq!(config.tools.autopilot.resume_delay, 500);
    assert_eq!(config.tools.store.path_format, "$state");
    assert_eq!(config.tools.store.backup, Backup::Off);
    assert_eq!(
        config.tools.grep.exclude.last().map(String::as_str),
        Some(".direnv")
    );
    assert_eq!(config.tools.find.exclude.len(), 8);
    assert_eq!(config.tools.custom[0].name, "weather");
    assert_eq!(config.tools.custom[0].timeout, Some(10));
    assert_eq!(config.tools.sources[0].timeout, Some(15));
    assert_eq!(config.sandbox.backend, SandboxBackend::Bwrap);
    assert!(!config.sandbox.policy.network);
    assert_eq!(
        config.sandbox.policy.rw_paths.last().map(String::as_str),
        Some("~/scratch")
    );
    assert!(!config.editing.compact_headers);
    assert_eq!(config.editing.coalesce_ms, 50);
    assert_eq!(
        config.secrets.gcloud.path,
        "/opt/google-cloud-sdk/bin/gcloud"
    );
    assert_eq!(config.log.file.as_deref(), Some("/tmp/flemmad.log"));

    match resolved.auto_approve() {
        AutoApprove::Tools { tools, .. } => {
            assert_eq!(tools, ["read", "find", "grep", "ls", "weather", "bash"]);
        }
        AutoApprove::Function(_) => panic!("expected a list"),
    }
    let enabled = resolved.enabled_tools();
    assert!(enabled.contains(&"weather".to_string()));
    assert!(enabled.contains(&"fetch_content".to_string()));

    assert_eq!(
        resolved.source_of("parameters.thinking"),
        Some(LayerKind::Runtime)
    );
    assert_eq!(
        resolved.source_of("parameters.timeout"),
        Some(LayerKind::UserFile)
    );
    assert_eq!(
        resolved.source_of("editing.compact_headers"),
        Some(LayerKind::Client)
    );
    assert_eq!(
        resolved.source_of("tools.auto_approve"),
        Some(LayerKind::Frontmatter)
    );
    assert_eq!(
        resolved.source_of("tools.autopilot.enabled"),
        Some(LayerKind::Frontmatter)
    );
    assert_eq!(
        resolved.source_of("tools.require_approval"),
        Some(LayerKind::Defaults)
    );
}

#[test]
fn errors_in_a_config_file_name_the_file_line_and_fix() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"[tools]\nmax_concurrent = 2\nauto_aprove = [\"bash\"]\n")
        .unwrap();
    let error = ConfigLayer::from_toml_file(file.path(), LayerKind::UserFile).unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:3:1: unknown option 'tools.auto_aprove'",
            file.path().display()
        )),
        "{text}"
    );
    assert!(
        text.ends_with("Did you mean 'tools.auto_approve'?"),
        "{text}"
    );
}

#[test]
fn a_missing_config_file_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let error = ConfigLayer::from_toml_file(&path, LayerKind::UserFile).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("cannot read config file"), "{text}");
    assert!(text.contains("absent.toml"), "{text}");
}
